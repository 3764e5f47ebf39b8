import Downpour
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import DownpourQueue

/// How a ``DownloadManager`` is read: on its own event loop at once (``DownloadManager/readIfIsolated(_:)``), from
/// anywhere else through ``DownloadManager/read(_:)``, with the same answers.
@Suite("DownloadManager reads")
struct DownloadManagerReadingTests {
    static let paused = [QueueOption(name: "pause", value: "true")]

    @Test("on the manager's loop a read runs at once, with the answers the async reads give; elsewhere it does not run")
    func readsAtOnceOnItsLoop() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let manager = DownloadManager(
            downloader: downloader,
            store: try QueueStore(directory: directory.stateDirectory),
            defaults: .init(directory: directory.path, options: [QueueOption(name: "split", value: "3")]),
            eventLoop: loop,
            logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        #expect(manager.eventLoop === loop)
        try await manager.start()
        // Paused: nothing runs, so nothing changes between the reads compared below.
        let first = try await manager.add(
            uris: ["http://127.0.0.1:9/a.bin"],
            options: Self.paused + [QueueOption(name: "out", value: "a.bin")],
            position: nil
        )
        let second = try await manager.add(
            uris: ["http://127.0.0.1:9/b.bin"],
            options: Self.paused + [QueueOption(name: "max-download-limit", value: "1M")],
            position: 0
        )

        // Off the loop: `body` is not run, and the caller is told so.
        let ran = NIOLockedValueBox(false)
        let offLoop = manager.readIfIsolated { _ in
            ran.withLockedValue { $0 = true }
            return 1
        }
        #expect(offLoop == nil)
        #expect(!ran.withLockedValue { $0 })

        let onLoop = try await loop.submit {
            try manager.readIfIsolated { queue throws(QueueError) in
                (
                    try queue.status(of: first.description),
                    queue.waitingDownloads(0..<10),
                    queue.activeDownloads(),
                    queue.stoppedDownloads(0..<10),
                    queue.globalStat(),
                    try queue.options(of: second.description),
                    queue.globalOptions()
                )
            }
        }.get()
        let answered = try #require(onLoop)
        #expect(answered.0 == (try await manager.status(of: first.description)))
        #expect(answered.0.status == .paused)
        #expect(answered.1.map(\.gid) == [second, first])
        #expect(answered.1 == (await manager.waitingDownloads(0..<10)))
        #expect(answered.2.isEmpty)
        #expect(answered.3.isEmpty)
        #expect(answered.4 == (await manager.globalStat()))
        #expect(answered.4.numWaiting == 2)
        #expect(answered.5 == (try await manager.options(of: second.description)))
        #expect(answered.5.contains(QueueOption(name: "max-download-limit", value: "1048576")))
        #expect(answered.6 == (await manager.globalOptions()))
        #expect(answered.6.contains(QueueOption(name: "split", value: "3")))

        // A refusal comes out as the error the async read throws.
        let refusal = try await loop.submit { () -> QueueError? in
            do throws(QueueError) {
                _ = try manager.readIfIsolated { queue throws(QueueError) in try queue.status(of: "fedcba9876543210") }
                return nil
            } catch {
                return error
            }
        }.get()
        #expect(refusal?.reason == .notFound)
        await #expect(throws: QueueError.self) { try await manager.status(of: "fedcba9876543210") }

        await manager.shutdown()
        await downloader.shutdown()
    }

    @Test("a manager made without a loop runs on one of NIO's shared loops")
    func defaultLoop() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let manager = try makeManager(in: directory, downloader: downloader)
        #expect(MultiThreadedEventLoopGroup.singleton.makeIterator().contains { $0 === manager.eventLoop })
        await downloader.shutdown()
    }
}
