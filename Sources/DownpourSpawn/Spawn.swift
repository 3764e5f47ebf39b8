#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts programs with `posix_spawn`: the daemon's and `get`'s hooks, and the tests' child processes.
///
/// Not Foundation's `Process`: on Linux, Swift 6.3's `Process.run()` lists `/proc/self/fd` with a `readdir` copy
/// of 256 bytes per entry, which reads past glibc's buffer when an entry sits at its end and the next page is not
/// mapped, and crashes the calling process now and then (swift-corelibs-foundation pull request 5472, fixed after
/// 6.3; seen in a CI run). A daemon left running must not crash because a download finished.
///
/// The program gets standard input from `/dev/null`, standard output and error in the files named (`/dev/null`
/// by default), its own process group (a Ctrl-C meant for the caller does not reach it), the default action for
/// every signal, no blocked signals, and no descriptor of the caller but those three. Its arguments are passed as
/// they are: no shell reads them.
package enum Spawn {
    package struct Failure: Error, CustomStringConvertible, Sendable {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// Starts `executable` with `arguments` (not counting the program name), in `directory` (the caller's when
    /// `nil`), with `environment` (`KEY=VALUE` each); returns its process ID. The caller reaps it (`waitpid`).
    /// With `searchingPath`, a name without `/` is looked for in `PATH`, as a shell (and aria2) would.
    package static func start(
        executable: String,
        arguments: [String],
        environment: [String],
        searchingPath: Bool = false,
        directory: String? = nil,
        standardOutput: String = "/dev/null",
        standardError: String = "/dev/null"
    ) throws(Failure) -> pid_t {
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
                throw Failure("posix_spawn_file_actions_addchdir_np is not available")
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

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var pid = pid_t()
        let result =
            searchingPath
            ? posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
            : posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw Failure("posix_spawn \(executable): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// The calling process's environment, `KEY=VALUE` each.
    package static var currentEnvironment: [String] {
        var variables: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            variables.append(String(cString: pointer))
            entry += 1
        }
        return variables
    }

    // glibc has both (2.29 and 2.34), but its Swift module does not show them: looked up by name.
    private typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addChdir: AddChdir? = Spawn.symbol("posix_spawn_file_actions_addchdir_np")
    private static let addCloseFrom: AddCloseFrom? = Spawn.symbol("posix_spawn_file_actions_addclosefrom_np")

    private static func symbol<T>(_ name: String) -> T? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}
