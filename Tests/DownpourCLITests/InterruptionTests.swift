import DownpourTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `downpour` child process that the test can signal while it runs.
final class RunningCommand {
    let child: ChildProcess
    private let outputURL: URL
    private let errorURL: URL
    private let scratch: URL

    init(_ arguments: [String]) throws {
        self.scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "downpour-run-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: self.scratch, withIntermediateDirectories: true)
        self.outputURL = self.scratch.appendingPathComponent("stdout")
        self.errorURL = self.scratch.appendingPathComponent("stderr")
        self.child = try ChildProcess(
            executable: Binary.path,
            arguments: arguments,
            standardOutput: self.outputURL.path,
            standardError: self.errorURL.path
        )
    }

    func signal(_ number: Int32) {
        self.child.signal(number)
    }

    /// Waits for the exit (killing the child after `limit`) and returns what it printed; a child ended by a
    /// signal has minus the signal's number as its status.
    func wait(limit: Duration = .seconds(30)) async throws -> CommandResult {
        let status = await self.child.wait(limit: limit)
        defer { try? FileManager.default.removeItem(at: self.scratch) }
        return CommandResult(
            status: status,
            standardOutput: try String(contentsOf: self.outputURL, encoding: .utf8),
            standardError: try String(contentsOf: self.errorURL, encoding: .utf8)
        )
    }
}

@Suite("Interrupting the downpour command", .timeLimit(.minutes(10)))
struct InterruptionTests {
    /// 16 MiB over 4 connections at 2 MiB/s each: about 2 s, long enough to interrupt at chosen points.
    static let content = makeTestContent(count: 16 * 1024 * 1024 + 99, seed: 13)
    static let faults: [RangeTestServer.Fault] = [.throttle(bytesPerSecond: 2 * 1024 * 1024)]

    static func arguments(_ url: String, _ path: String, journalInterval: String = "0.25") -> [String] {
        [
            "get", url, "-o", path, "-x", "4", "--min-split-size", "256K", "--journal-interval", journalInterval,
            "--retry-wait", "0.05",
        ]
    }

    /// Waits until the server has sent `bytes` body bytes.
    static func waitUntilSent(_ server: RangeTestServer, bytes: Int) async throws {
        try await waitUntil("\(bytes) bytes sent") { server.statistics().bodyBytesSent >= bytes }
    }

    /// Waits until the file at `path` exists: the first save of a journal, say.
    static func waitUntilExists(_ path: String) async throws {
        try await waitUntil("\(path) exists") { FileManager.default.fileExists(atPath: path) }
    }

    /// Runs `arguments` again after a kill and shuts `server` down; expects exit 0, a resume and the file at `path`
    /// identical. Returns the body bytes the server sent more than once over both runs.
    static func rerun(_ arguments: [String], _ server: RangeTestServer, _ path: String) async throws -> Int {
        let second = try await Binary.run(arguments)
        let sentAfter = server.statistics().bodyBytesSent
        try await server.shutdown()
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput.contains("Resuming: "), "\(second.standardOutput)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        return sentAfter - Self.content.count
    }

    /// The bytes the journal at `path` records as on disk (its `done` ranges); `nil` when it is not there or cannot
    /// be read now.
    static func recordedBytes(inJournalAt path: String) -> Int? {
        guard let data = FileManager.default.contents(atPath: path), let newline = data.firstIndex(of: 10),
            let body = try? JSONSerialization.jsonObject(with: data[(newline + 1)...]) as? [String: Any],
            let done = body["done"] as? [[Int]]
        else { return nil }
        return done.reduce(0) { $0 + ($1[1] - $1[0]) }
    }

    /// Waits until the file at `path` has been replaced `count` times (see ``fileStamp(atPath:)``).
    static func waitForSaves(of path: String, count: Int) async throws {
        var stamp = fileStamp(atPath: path)
        for _ in 0..<count {
            let previous = stamp
            try await waitUntil("\(path) saved again") {
                stamp = fileStamp(atPath: path)
                return stamp != nil && stamp != previous
            }
        }
    }

    @Test("kill -9 before any synced journal: the rerun of the same boot resumes from what was written")
    func killNineBeforeASync() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("u.bin")
        let holdAt = Self.content.count / 2
        server.holdBodies(afterSending: holdAt)
        // A synced journal ten minutes apart: none is saved before the kill.
        let first = try RunningCommand(Self.arguments(server.url(), path, journalInterval: "600"))
        try await Self.waitUntilSent(server, bytes: holdAt)
        // Everything that came but the write buffers (4 x 256 KiB) is written, and recorded without a sync.
        let least = holdAt - 4 * 256 * 1024
        try await waitUntil("the unsynced journal records \(least) bytes") {
            (Self.recordedBytes(inJournalAt: path + ".part.downpour.unsynced") ?? 0) >= least
        }
        first.signal(SIGKILL)
        let killed = try await first.wait()
        #expect(killed.status == -SIGKILL)
        #expect(!FileManager.default.fileExists(atPath: path + ".part.downpour"))
        server.releaseBodies()

        let refetched = try await Self.rerun(Self.arguments(server.url(), path, journalInterval: "600"), server, path)
        #expect(scratch.contents() == ["u.bin"], "left behind: \(scratch.contents())")
        // Only what was still in a write buffer (4 x 256 KiB) at the last unsynced save came twice; without that
        // journal the rerun starts over and the first half comes twice.
        #expect(refetched <= 2 * 1024 * 1024, "re-fetched \(refetched) bytes")
    }

    @Test(
        "kill -9 at any point: the rerun completes the file and re-fetches little",
        arguments: [
            (0.1, "0.25"), (0.5, "0.25"), (0.9, "0.25"),
            // A tiny interval: the kill very likely lands in the middle of a journal save.
            (0.5, "0.01"),
        ]
    )
    func killNine(fraction: Double, journalInterval: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("k.bin")
        let journal = path + ".part.downpour"
        // The server holds the bodies itself at that point, so a test that looks late on a loaded machine still
        // finds the first run unfinished.
        let holdAt = Int(Double(Self.content.count) * fraction)
        server.holdBodies(afterSending: holdAt)
        let first = try RunningCommand(Self.arguments(server.url(), path, journalInterval: journalInterval))
        try await Self.waitUntilSent(server, bytes: holdAt)
        // From here on the first run cannot finish, however late the kill lands; it goes on saving its journal.
        // Two saves later, one has started after the hold (a slow sync can make the first one old).
        try await Self.waitForSaves(of: journal, count: 2)
        first.signal(SIGKILL)
        let killed = try await first.wait()
        #expect(killed.status == -SIGKILL)
        server.releaseBodies()

        let refetched = try await Self.rerun(
            Self.arguments(server.url(), path, journalInterval: journalInterval),
            server,
            path
        )
        #expect(scratch.contents() == ["k.bin"], "left behind: \(scratch.contents())")
        // What crossed the wire twice: what had arrived but was still in a write buffer (4 x 256 KiB) when the
        // last journal was saved, and tails of requests cut by splits in the rerun.
        #expect(refetched <= 2 * 1024 * 1024, "re-fetched \(refetched) bytes after a kill at \(fraction)")
    }

    @Test(
        "SIGINT and SIGTERM pause: exit 8, what arrived kept with its journal, the rerun fetches only the rest",
        arguments: [SIGINT, SIGTERM]
    )
    func gracefulStop(signalNumber: Int32) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("s.bin")
        // Held by the server itself after 2 MiB, so that it cannot finish before the signal lands, however late
        // the test looks on a loaded machine.
        server.holdBodies(afterSending: 2 * 1024 * 1024)
        let first = try RunningCommand(Self.arguments(server.url(), path))
        // Running, with a journal on disk, and held.
        try await Self.waitUntilExists(path + ".part.downpour")
        try await Self.waitUntilSent(server, bytes: 2 * 1024 * 1024)
        first.signal(signalNumber)
        let stopped = try await first.wait()
        server.releaseBodies()
        #expect(stopped.status == 8, "\(stopped.standardError)")
        #expect(stopped.standardError.contains("run the same command again to resume"))
        #expect(scratch.contents() == ["s.bin.part", "s.bin.part.downpour"])
        let sentBefore = server.statistics().bodyBytesSent

        let second = try await Binary.run(Self.arguments(server.url(), path))
        let sentAfter = server.statistics().bodyBytesSent
        try await server.shutdown()
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput.contains("Resuming: "))
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        #expect(scratch.contents() == ["s.bin"])
        // The rerun fetched only what the first run had not: a graceful stop writes everything that arrived, so
        // beyond the missing bytes only tails cut by splits and bytes in flight at the stop cross the wire twice.
        let rerun = sentAfter - sentBefore
        let refetched = rerun - (Self.content.count - sentBefore)
        #expect(refetched <= 2 * 1024 * 1024, "the rerun fetched \(rerun) bytes after \(sentBefore) were sent")
    }

    @Test("a second interrupt leaves at once with exit 130; the journal on disk is still good for a resume")
    func secondInterrupt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("twice.bin")
        server.holdBodies(afterSending: 2 * 1024 * 1024)
        let first = try RunningCommand(Self.arguments(server.url(), path))
        try await Self.waitUntilExists(path + ".part.downpour")
        try await Self.waitUntilSent(server, bytes: 2 * 1024 * 1024)
        // A journal that records what had arrived at the hold: the process is not going to save another.
        try await Self.waitForSaves(of: path + ".part.downpour", count: 2)
        // Two interrupts that arrive together: sent while the process is stopped, both are pending when it
        // continues, so the second can never come after the graceful stop of the first has ended. (Two SIGINTs
        // would merge into one pending signal; SIGTERM is the same request to stop.)
        first.signal(SIGSTOP)
        first.signal(SIGINT)
        first.signal(SIGTERM)
        first.signal(SIGCONT)
        let stopped = try await first.wait()
        #expect(stopped.status == 130, "\(stopped.status): \(stopped.standardError)")
        #expect(stopped.standardError.contains("stopped at once"), "\(stopped.standardError)")
        #expect(!stopped.standardError.contains("paused;"), "the graceful stop finished first")
        server.releaseBodies()
        let second = try await Binary.run(Self.arguments(server.url(), path))
        try await server.shutdown()
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput.contains("Resuming: "), "\(second.standardOutput)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        #expect(scratch.contents() == ["twice.bin"])
    }

    @Test("a second downpour on the same output refuses at once with exit 9")
    func lockHeld() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("l.bin")
        // Held by the server after 1 MiB, the first cannot finish before it is stopped, however late the test looks.
        server.holdBodies(afterSending: 1024 * 1024)
        let first = try RunningCommand(Self.arguments(server.url(), path))
        try await Self.waitUntilSent(server, bytes: 1024 * 1024)
        // The first stays stopped, holding its lock, until the second has given up. The second's probe needs its
        // body.
        first.signal(SIGSTOP)
        server.releaseBodies()
        let second = try await Binary.run(Self.arguments(server.url(), path) + ["--user-agent", "second-downpour"])
        first.signal(SIGCONT)
        #expect(second.status == 9, "\(second.standardError)")
        #expect(second.standardError.contains("Another download is writing"))
        // Refused before writing a byte: the second sent its probe (the GET of the first bytes) and nothing else.
        let fromSecond = server.statistics().requests.filter { $0.header("User-Agent") == "second-downpour" }
        #expect(fromSecond.map(\.method) == ["GET"])
        let firstResult = try await first.wait()
        try await server.shutdown()
        #expect(firstResult.status == 0, "\(firstResult.standardError)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
    }
}
