import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A PostgreSQL server of the test's own: a cluster made with `initdb` in a fresh temporary directory, listening on
/// a free loopback port and a socket in that directory, with a superuser `downpour` that needs no password. Run as
/// root, it runs as the unprivileged `postgres` user (PostgreSQL refuses root). ``stop()`` stops it at once and
/// removes the directory.
///
/// The server is Debian's (`apt-get install postgresql`: `/usr/lib/postgresql/VERSION/bin`) or any `initdb` on the
/// `PATH`; ``isInstalled`` tells whether there is one.
public struct ThrowAwayPostgres: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The directory that holds the cluster (`data`), its socket and its log.
    public let directory: String
    public let port: Int
    private let binaries: String
    private let user: (uid: uid_t, gid: gid_t, name: String)?

    /// `postgresql://downpour@127.0.0.1:PORT/postgres`, without TLS.
    public var url: String { "postgresql://downpour@127.0.0.1:\(self.port)/postgres?sslmode=disable" }

    /// Whether a PostgreSQL server is installed here.
    public static var isInstalled: Bool { Self.findBinaries() != nil }

    /// Makes and starts a cluster.
    public static func start() async throws -> ThrowAwayPostgres {
        guard let binaries = Self.findBinaries() else {
            throw Failure(description: "no PostgreSQL server here: install Debian's postgresql (initdb, pg_ctl)")
        }
        var user: (uid: uid_t, gid: gid_t, name: String)?
        if getuid() == 0 {
            guard let entry = getpwnam("postgres") else {
                throw Failure(description: "running as root, and there is no user 'postgres' to run PostgreSQL as")
            }
            user = (entry.pointee.pw_uid, entry.pointee.pw_gid, "postgres")
        }
        let directory = try ScratchDirectory().path
        if let user { chown(directory, user.uid, user.gid) }
        let data = directory + "/data"
        do {
            try await ThrowAwayPostgres(directory: directory, port: 0, binaries: binaries, user: user).run(
                "initdb",
                ["-D", data, "-U", "downpour", "-A", "trust", "-E", "UTF8", "--no-sync"]
            )
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        var lastError = ""
        // A free port can be taken between finding it and the server binding it: try a few.
        for _ in 0..<5 {
            let port = try Self.freePort()
            let server = ThrowAwayPostgres(directory: directory, port: port, binaries: binaries, user: user)
            do {
                try await server.startServer()
                return server
            } catch {
                lastError = "\(error)"
                // A server that started after all (pg_ctl gave up waiting) holds the directory: stopped first.
                try? await server.run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw Failure(description: "PostgreSQL did not start: \(lastError)")
    }

    /// Runs `body` with a started cluster, and stops it afterwards whatever happens.
    public static func with<Value>(_ body: (ThrowAwayPostgres) async throws -> Value) async throws -> Value {
        let server = try await Self.start()
        do {
            let value = try await body(server)
            await server.stop()
            return value
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Stops the server (its clients lose their connections) and keeps its cluster, for ``resume()``. A fast stop,
    /// not an immediate one: the server runs with `synchronous_commit=off`, and an immediate stop would lose what
    /// was committed in the last moment before it (a server that does not lose commits is what a fleet stands on).
    public func halt() async throws {
        try await self.run("pg_ctl", ["-D", self.directory + "/data", "-m", "fast", "-w", "stop"])
    }

    /// Starts a server ``halt()`` stopped, on the same port.
    public func resume() async throws {
        try await self.startServer()
    }

    /// Stops the server as ``halt()`` does and starts it again on the same port, as `pg_ctl restart` does: its
    /// clients lose their connections and must make new ones.
    public func restart() async throws {
        try await self.halt()
        try await self.resume()
    }

    /// A relay to this server that a test can cut (``TCPRelay/cut()``): one client's connections dropped, as when
    /// the network between one node and the database fails, while the server and its other clients go on. The
    /// URL reaches the server through the relay.
    public func cuttableRoute() async throws -> (relay: TCPRelay, url: String) {
        let relay = try await TCPRelay.start(to: self.port)
        return (relay, "postgresql://downpour@127.0.0.1:\(relay.port)/postgres?sslmode=disable")
    }

    private func startServer() async throws {
        try await self.run(
            "pg_ctl",
            [
                "-D", self.directory + "/data", "-l", self.directory + "/server.log", "-w", "-t", "120", "-o",
                "-p \(self.port) -k \(self.directory) -c listen_addresses=127.0.0.1 -c fsync=off "
                    + "-c synchronous_commit=off -c full_page_writes=off", "start",
            ]
        )
    }

    /// Stops the server at once (no checkpoint) and removes its directory.
    public func stop() async {
        try? await self.run("pg_ctl", ["-D", self.directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    private func run(_ program: String, _ arguments: [String]) async throws {
        let executable: String
        var all: [String]
        if let user {
            executable = "/usr/sbin/runuser"
            all = ["-u", user.name, "--", self.binaries + "/" + program] + arguments
        } else {
            executable = self.binaries + "/" + program
            all = arguments
        }
        let output = self.directory + "/\(program).out"
        let child = try ChildProcess(
            executable: executable,
            arguments: all,
            directory: self.directory,
            standardOutput: output,
            standardError: output
        )
        // Only a guard against a hang: initdb and a start take seconds.
        guard let status = await child.waitForExit(within: .seconds(300)) else {
            // The child leads a process group of its own; as root it is runuser, with the program under it.
            kill(-child.pid, SIGKILL)
            _ = await child.waitForExit(within: .seconds(30))
            throw Failure(description: "\(program) did not end")
        }
        guard status == 0 else {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            let log = (try? String(contentsOfFile: self.directory + "/server.log", encoding: .utf8)) ?? ""
            throw Failure(description: "\(program) exited with \(status): \(text)\(log.suffix(2000))")
        }
    }

    private static func findBinaries() -> String? {
        let fileManager = FileManager.default
        let debian = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: debian)) ?? []).compactMap { Int($0) }
        for version in versions.sorted(by: >) {
            let directory = "\(debian)/\(version)/bin"
            if fileManager.isExecutableFile(atPath: directory + "/initdb") { return directory }
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            if fileManager.isExecutableFile(atPath: "\(directory)/initdb"),
                fileManager.isExecutableFile(atPath: "\(directory)/pg_ctl")
            {
                return String(directory)
            }
        }
        return nil
    }

    /// A loopback port nothing listens on now.
    private static func freePort() throws -> Int {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
