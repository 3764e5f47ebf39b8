import DownpourAria2
import Foundation
import Testing

@testable import DownpourQueue

/// The session file's bookkeeping, shared by a manager and a fleet node: where it goes, when a periodic write is due
/// (over an injected clock) and whether the text changed. A table; the one write to disk is a real file.
@Suite("Session writer")
struct SessionWriterTests {
    static func globals(_ pairs: [(String, String)]) -> [QueueOption] {
        pairs.map { QueueOption(name: $0.0, value: $0.1) }
    }

    @Test(
        "the file and the interval come from the global options, the last value of each",
        arguments: [
            ([], nil, nil),
            ([("save-session", "")], nil, nil),
            ([("save-session", "/a")], "/a", nil),
            ([("save-session", "/a"), ("save-session", "/b")], "/b", nil),
            ([("save-session", "/a"), ("save-session-interval", "0")], "/a", nil),
            ([("save-session", "/a"), ("save-session-interval", "-3")], "/a", nil),
            ([("save-session", "/a"), ("save-session-interval", "1.5")], "/a", 1500),
            ([("save-session-interval", "2")], nil, nil),
        ] as [([(String, String)], String?, Int64?)]
    )
    func settings(options: [(String, String)], path: String?, milliseconds: Int64?) {
        let globals = Self.globals(options)
        #expect((try? SessionWriter.path(in: globals)) == path)
        #expect(SessionWriter.interval(in: globals) == milliseconds.map { .milliseconds($0) })
        if path == nil {
            #expect(throws: QueueError(.invalidRequest, message: "Filename is not given.")) {
                try SessionWriter.path(in: globals)
            }
        }
    }

    @Test("a periodic write is due at once, then once an interval has passed; never without an interval")
    func due() {
        let start = ContinuousClock.now
        let every2s = Self.globals([("save-session", "/a"), ("save-session-interval", "2")])
        var writer = SessionWriter()
        let answers = [0.0, 1.0, 1.9, 2.0, 3.0, 4.5].map { writer.isDue(globals: every2s, now: start + .seconds($0)) }
        #expect(answers == [true, false, false, true, false, true])
        var none = SessionWriter()
        let due = none.isDue(globals: Self.globals([("save-session", "/a")]), now: start)
        #expect(!due)
    }

    @Test("an unchanged queue is not written again, unless asked; the file is aria2's format, written whole")
    func changes() async throws {
        let entry = SessionFile.Entry(
            uris: ["http://127.0.0.1:1/a.iso"],
            gid: "0123456789abcdef",
            isPaused: false,
            options: [("split", "4")]
        )
        var writer = SessionWriter()
        let first = try #require(writer.text(of: [entry], onlyIfChanged: true))
        #expect(first.contains("http://127.0.0.1:1/a.iso") && first.contains(" gid=0123456789abcdef"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("session-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("session.txt").path
        try await SessionWriter.write(first, to: path)
        writer.wrote(first)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == first)
        #expect(writer.text(of: [entry], onlyIfChanged: true) == nil)
        #expect(writer.text(of: [entry], onlyIfChanged: false) == first)
        var paused = entry
        paused.isPaused = true
        #expect(writer.text(of: [paused], onlyIfChanged: true) != nil)
        await #expect(throws: QueueError.self) {
            try await SessionWriter.write(first, to: directory.appendingPathComponent("none/session.txt").path)
        }
    }
}
