import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process for the tests (the `downpour` binary, `umount`), started with `posix_spawn`.
///
/// Not Foundation's `Process`: on Linux, Swift 6.3's `Process.run()` lists `/proc/self/fd` with a `readdir` copy
/// of 256 bytes per entry, which reads past glibc's buffer when an entry sits at its end and the next page is not
/// mapped, and crashes the test process now and then (swift-corelibs-foundation pull request 5472, fixed after
/// 6.3; seen here in a CI run). Standard input is `/dev/null`; standard output and error go to files. The child
/// gets its own process group, the default action for every signal, no blocked signals, and no descriptor of
/// the test process but those three.
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
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, standardError, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let directory {
            guard let addChdir = Self.addChdir else {
                throw ChildProcessError("posix_spawn_file_actions_addchdir_np is not available")
            }
            _ = addChdir(&actions, directory)
        }
        _ = Self.addCloseFrom?(&actions, 3)

        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        )

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw ChildProcessError("posix_spawn \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
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

    // glibc has both (2.29 and 2.34), but its Swift module does not show them: looked up by name.
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addChdir: AddChdir? = ChildProcess.symbol("posix_spawn_file_actions_addchdir_np")
    private static let addCloseFrom: AddCloseFrom? = ChildProcess.symbol("posix_spawn_file_actions_addclosefrom_np")

    private static func symbol<T>(_ name: String) -> T? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
