import DownpourSpawn
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process for the tests (the `downpour` binary, `umount`), started by ``Spawn`` (`posix_spawn`, not
/// Foundation's `Process`, which crashes now and then on Linux with Swift 6.3). Standard input is `/dev/null`;
/// standard output and error go to files. The child gets its own process group, the default action for every
/// signal, no blocked signals, and no descriptor of the test process but those three.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    /// The raw `waitpid` status once the child has been reaped.
    private let reaped = NIOLockedValueBox<Int32?>(nil)

    /// Starts `executable` with `arguments` (not counting the program name), in `directory` (the test's own
    /// when `nil`), with `environment` (the test's own when `nil`).
    public init(
        executable: String,
        arguments: [String],
        environment: [String: String]? = nil,
        directory: String? = nil,
        standardOutput: String = "/dev/null",
        standardError: String = "/dev/null"
    ) throws(ChildProcessError) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        do {
            self.pid = try Spawn.start(
                executable: executable,
                arguments: arguments,
                environment: environment.map { "\($0.key)=\($0.value)" },
                directory: directory,
                standardOutput: standardOutput,
                standardError: standardError
            )
        } catch {
            throw ChildProcessError(error.description)
        }
    }

    /// Whether the child still runs; reaps it once it has ended.
    public var isRunning: Bool {
        self.reaped.withLockedValue { reaped in
            guard reaped == nil else { return false }
            var status: Int32 = 0
            let result = waitpid(self.pid, &status, WNOHANG)
            if result == self.pid {
                reaped = status
                return false
            }
            // -1 (ECHILD) would mean someone else reaped it: not running either.
            return result == 0
        }
    }

    /// The exit status, or minus the number of the signal that ended the child; `nil` while it runs.
    public var exitStatus: Int32? {
        guard !self.isRunning, let status = self.reaped.withLockedValue({ $0 }) else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : -signal
    }

    public func signal(_ number: Int32) {
        guard self.isRunning else { return }
        kill(self.pid, number)
    }

    /// Waits up to `limit` for the child to end, looking every 5 ms. Returns ``exitStatus``, or `nil` when the
    /// child still runs then (it is left running).
    public func waitForExit(within limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while self.isRunning {
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return self.exitStatus
    }

    /// Waits for the child to end; after `limit` it is killed (`SIGKILL`) and waited for. Returns ``exitStatus``.
    @discardableResult
    public func wait(limit: Duration) async -> Int32 {
        if let status = await self.waitForExit(within: limit) { return status }
        self.signal(SIGKILL)
        while self.isRunning { try? await Task.sleep(for: .milliseconds(5)) }
        return self.exitStatus ?? -SIGKILL
    }

    /// Waits for the child to end, blocking the calling thread (for short commands such as `umount`).
    @discardableResult
    public func waitBlocking() -> Int32 {
        while self.isRunning { usleep(2_000) }
        return self.exitStatus ?? -SIGKILL
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
