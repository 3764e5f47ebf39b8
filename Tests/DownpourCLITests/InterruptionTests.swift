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
    let process: Process
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
        _ = FileManager.default.createFile(atPath: self.outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: self.errorURL.path, contents: nil)
        self.process = Process()
        self.process.executableURL = URL(fileURLWithPath: Binary.path)
        self.process.arguments = arguments
        self.process.standardOutput = try FileHandle(forWritingTo: self.outputURL)
        self.process.standardError = try FileHandle(forWritingTo: self.errorURL)
        self.process.standardInput = FileHandle.nullDevice
        try self.process.run()
    }

    func signal(_ number: Int32) {
        kill(self.process.processIdentifier, number)
    }

    /// Waits for the exit (killing the child after `limit`) and returns what it printed.
    func wait(limit: Duration = .seconds(30)) async throws -> CommandResult {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while self.process.isRunning {
            if clock.now > deadline {
                self.signal(SIGKILL)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        self.process.waitUntilExit()
        defer { try? FileManager.default.removeItem(at: self.scratch) }
        return CommandResult(
            status: self.process.terminationReason == .uncaughtSignal
                ? -self.process.terminationStatus : self.process.terminationStatus,
            standardOutput: try String(contentsOf: self.outputURL, encoding: .utf8),
            standardError: try String(contentsOf: self.errorURL, encoding: .utf8)
        )
    }
}

@Suite("Interrupting the downpour command", .timeLimit(.minutes(2)))
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
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        while server.statistics().bodyBytesSent < bytes {
            guard clock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
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
        let first = try RunningCommand(Self.arguments(server.url(), path, journalInterval: journalInterval))
        try await Self.waitUntilSent(server, bytes: Int(Double(Self.content.count) * fraction))
        first.signal(SIGKILL)
        let killed = try await first.wait()
        #expect(killed.status == -SIGKILL)
        let sentBefore = server.statistics().bodyBytesSent

        let second = try await Binary.run(Self.arguments(server.url(), path, journalInterval: journalInterval))
        let sentAfter = server.statistics().bodyBytesSent
        try await server.shutdown()
        #expect(second.status == 0, "\(second.standardError)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        #expect(scratch.contents() == ["k.bin"], "left behind: \(scratch.contents())")
        // What crossed the wire twice: the bytes in flight at the kill, what arrived since the last journal
        // save (0.25 s at 8 MiB/s = 2 MiB), the write buffers (4 x 256 KiB), tails cut by splits.
        let refetched = sentAfter - Self.content.count
        #expect(refetched <= 5 * 1024 * 1024, "re-fetched \(refetched) bytes after a kill at \(fraction)")
        if sentBefore > 4 * 1024 * 1024 {
            #expect(second.standardOutput.contains("Resuming: "), "\(second.standardOutput)")
        }
    }

    @Test(
        "SIGINT and SIGTERM pause: exit 8 within 2 s, journal kept, the rerun completes",
        arguments: [SIGINT, SIGTERM]
    )
    func gracefulStop(signalNumber: Int32) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("s.bin")
        let first = try RunningCommand(Self.arguments(server.url(), path))
        try await Self.waitUntilSent(server, bytes: Self.content.count / 3)
        let clock = ContinuousClock()
        let signalled = clock.now
        first.signal(signalNumber)
        let stopped = try await first.wait()
        #expect(clock.now - signalled < .seconds(2))
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
        // A graceful stop writes everything that arrived: only cut tails are fetched twice.
        #expect(sentAfter - Self.content.count <= 2 * 1024 * 1024, "re-fetched \(sentAfter - Self.content.count)")
        _ = sentBefore
    }

    @Test("a second Ctrl-C leaves at once; the journal on disk is still good for a resume")
    func secondInterrupt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("twice.bin")
        let first = try RunningCommand(Self.arguments(server.url(), path))
        try await Self.waitUntilSent(server, bytes: Self.content.count / 3)
        first.signal(SIGINT)
        first.signal(SIGINT)
        let stopped = try await first.wait()
        // Usually the second signal lands while the first is still saving: exit 130 at once. If the graceful
        // stop was quicker, it is a plain pause (8). Either way the rerun must complete the same file.
        #expect([8, 130].contains(stopped.status), "\(stopped.status): \(stopped.standardError)")
        if stopped.status == 130 {
            #expect(stopped.standardError.contains("stopped at once"))
        }
        let second = try await Binary.run(Self.arguments(server.url(), path))
        try await server.shutdown()
        #expect(second.status == 0, "\(second.standardError)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        #expect(scratch.contents() == ["twice.bin"])
    }

    @Test("a second downpour on the same output refuses at once with exit 9")
    func lockHeld() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await RangeTestServer.start(content: Self.content, faults: Self.faults)
        let path = scratch.file("l.bin")
        let first = try RunningCommand(Self.arguments(server.url(), path))
        try await Self.waitUntilSent(server, bytes: 1024 * 1024)
        let clock = ContinuousClock()
        let started = clock.now
        let second = try await Binary.run(Self.arguments(server.url(), path))
        #expect(clock.now - started < .seconds(5))
        #expect(second.status == 9, "\(second.standardError)")
        #expect(second.standardError.contains("Another download is writing"))
        let firstResult = try await first.wait()
        try await server.shutdown()
        #expect(firstResult.status == 0, "\(firstResult.standardError)")
        #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
    }
}
