import Foundation
import Logging
import Synchronization
import Testing

@testable import DownpourCLI

/// The daemon's and `get`'s log lines: `StreamLogHandler`'s, with a logger's metadata made into text only for a
/// line that is written.
@Suite("log lines")
struct LineLogHandlerTests {
    /// What a handler wrote, line by line.
    final class Written: TextOutputStream, Sendable {
        private let text = Mutex("")
        func write(_ string: String) { self.text.withLock { $0 += string } }
        var lines: [String] { self.text.withLock { $0.split(separator: "\n").map(String.init) } }
    }

    /// A metadata value that counts how often it was made into text.
    final class Counted: CustomStringConvertible, Sendable {
        private let count = Mutex(0)
        var description: String {
            self.count.withLock { $0 += 1 }
            return "counted"
        }
        var times: Int { self.count.withLock { $0 } }
    }

    /// The part of a line after its time stamp: `LEVEL LABEL: METADATA [SOURCE] MESSAGE`.
    static func untimed(_ lines: [String]) -> [String] {
        lines.map { line in
            let level = line.range(of: " notice ")?.lowerBound ?? line.startIndex
            return String(line[line.index(after: level)...])
        }
    }

    @Test("the same lines as StreamLogHandler: its metadata, the provider's and the line's, later ones winning")
    func sameLines() {
        let provider = Logger.MetadataProvider { ["provided": "p", "both": "from provider"] }
        func write(_ handler: some LogHandler) {
            var logger = Logger(label: "downpour.test", factory: { _ in handler })
            logger.logLevel = .notice
            logger[metadataKey: "gid"] = "2089b05ecca3d829"
            logger[metadataKey: "both"] = "from logger"
            logger.info("not written")
            logger.notice("Download resumed", metadata: ["on disk": "65536"])
            logger[metadataKey: "gid"] = nil
            logger.notice("plain")
        }
        let theirs = Written()
        let ours = Written()
        write(StreamLogHandler(label: "downpour.test", stream: theirs, metadataProvider: provider))
        write(
            LineLogHandler(
                lines: StreamLogHandler(label: "downpour.test", stream: ours, metadataProvider: nil),
                metadataProvider: provider
            )
        )
        #expect(Self.untimed(ours.lines) == Self.untimed(theirs.lines))
        #expect(
            Self.untimed(ours.lines) == [
                "notice downpour.test: both=from provider gid=2089b05ecca3d829 on disk=65536 provided=p"
                    + " [DownpourCLITests] Download resumed",
                "notice downpour.test: both=from provider provided=p [DownpourCLITests] plain",
            ]
        )
    }

    @Test("metadata set on a logger is made into text only for a line written")
    func lazyMetadata() {
        let written = Written()
        let counted = Counted()
        var logger = Logger(
            label: "downpour.test",
            factory: { _ in
                LineLogHandler(
                    lines: StreamLogHandler(label: "downpour.test", stream: written, metadataProvider: nil),
                    metadataProvider: nil
                )
            }
        )
        logger.logLevel = .notice
        logger[metadataKey: "value"] = .stringConvertible(counted)
        logger[metadataKey: "gid"] = "1"
        logger.info("not written")
        #expect(counted.times == 0)
        #expect(written.lines.isEmpty)
        logger.notice("written")
        #expect(counted.times == 1)
        #expect(written.lines.count == 1)
    }
}
