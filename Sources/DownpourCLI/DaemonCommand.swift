import ArgumentParser
import Downpour
import DownpourAria2
import DownpourQueue
import DownpourRPC
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run a download queue that aria2's clients (AriaNg, aria2p, Motrix, scripts) drive over JSON-RPC.",
        discussion: """
            The daemon speaks aria2's JSON-RPC at http://127.0.0.1:PORT/jsonrpc (POST, GET and WebSocket, with \
            aria2's notifications), so a client made for aria2 works with it unchanged. The queue (every download, \
            its order, paused or not, and the results of finished ones) is stored in STATE-DIR/downpour.sqlite \
            and each change is stored before the reply goes out: after a crash or kill -9 the daemon starts with \
            the same queue, and interrupted downloads continue from the bytes on disk.

            The state directory is --state-dir, else $XDG_STATE_HOME/downpour, else ~/.local/state/downpour. \
            SIGTERM, SIGINT and aria2.shutdown pause the active downloads (their bytes kept), store the queue and \
            exit 0.

            Security: the daemon listens on 127.0.0.1 only, unless --rpc-listen-all, which needs a secret. With a \
            secret, every aria2.* call must carry "token:SECRET" as its first parameter, as aria2 asks. Without one, \
            only processes of the user the daemon runs as are served (Linux). Whatever the mode, a request whose \
            Host does not name the daemon (DNS rebinding) is refused with 421, and one from a web page of another \
            origin (Origin, or Sec-Fetch-Site: cross-site) with 403, before anything of it runs: a page you open \
            cannot add downloads. --rpc-allow-origin lets a page of that origin call it (AriaNg served from \
            elsewhere), --rpc-allow-host adds a name (a reverse proxy). A file name given over RPC (out) stays \
            inside its directory. A request must arrive within --rpc-request-timeout, an idle connection closes \
            after --rpc-idle-timeout, and past --rpc-max-connections the connection stalled longest is closed.

            An aria2 user's setup comes along: --conf-path FILE reads aria2's configuration format (without it, \
            $XDG_CONFIG_HOME/downpour/downpour.conf when it exists; the command line wins over the file, and options \
            Downpour does not have are named once and ignored); input-file loads an aria2 input or session file \
            (GIDs and paused entries kept; entries the queue already has are passed over); save-session writes \
            one in aria2's format at exit, on aria2.saveSession and every save-session-interval seconds; the \
            on-download-* hooks run a program with the GID, the number of files and the path, without a shell. \
            A file of the name that exists is never replaced: the download is saved as NAME.1.EXT \
            (auto-file-renaming=true), or fails (auto-file-renaming=false).

            aria2's options are taken as aria2c takes them: on the command line as --NAME=VALUE, --NAME VALUE, \
            a flag alone for true, or a short name; in the file as NAME=VALUE.

            Options:
            """ + "\n" + Aria2Arguments.help(for: .daemon, base: DaemonCommand.base(directory: "."))
    )

    @Option(
        name: .customLong("rpc-secret-file"),
        help: ArgumentHelp("Read the RPC secret token from this file (safer than the command line).", valueName: "file")
    )
    var secretFile: String?

    @Option(
        name: .customLong("rpc-allow-origin"),
        help: ArgumentHelp(
            "Let web pages of this origin call the daemon, e.g. https://ariang.example (repeatable).",
            valueName: "origin"
        )
    )
    var allowedOrigins: [String] = []

    @Option(
        name: .customLong("rpc-allow-host"),
        help: ArgumentHelp(
            "Also answer requests whose Host is this name (NAME for any port, NAME:PORT), e.g. a reverse proxy's "
                + "(repeatable).",
            valueName: "name"
        )
    )
    var allowedHosts: [String] = []

    @Option(
        name: .customLong("rpc-max-connections"),
        help: ArgumentHelp(
            "Connections open at once; past it the one stalled longest is closed (1-65536).",
            valueName: "connections"
        )
    )
    var maxConnections: Int = 1024

    @Option(
        name: .customLong("rpc-request-timeout"),
        help: ArgumentHelp("Seconds a request (head and body) may take to arrive.", valueName: "seconds")
    )
    var requestTimeout: Int = 30

    @Option(
        name: .customLong("rpc-idle-timeout"),
        help: ArgumentHelp("Seconds a kept-alive connection may wait for its next request.", valueName: "seconds")
    )
    var idleTimeout: Int = 60

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Keep the queue in this directory.", valueName: "dir"))
    var stateDirectory: String?

    @OptionGroup var flags: Aria2Flags

    /// The options in force: the configuration file, then the command line over it (by name).
    func settings(reportingUnknown: Bool = true) throws -> Aria2Arguments {
        let settings = try Aria2Arguments.resolve(self.flags.words, for: .daemon, reportingUnknown: reportingUnknown)
        if let operand = settings.operands.first {
            throw ValidationError(
                "Unexpected argument '\(operand)': the daemon takes its downloads over RPC, or from --input-file."
            )
        }
        return settings
    }

    func validate() throws {
        let settings = try self.settings(reportingUnknown: false)
        let hasSecret = settings.value(.rpcSecret) != nil || self.secretFile != nil
        if settings.value(.rpcSecret) != nil && self.secretFile != nil {
            throw ValidationError("Give --rpc-secret or --rpc-secret-file, not both.")
        }
        if settings.value(.rpcSecret)?.isEmpty == true {
            throw ValidationError("--rpc-secret is empty; give a secret, or leave the option out.")
        }
        if settings.flag(.rpcListenAll) && !hasSecret {
            throw ValidationError(
                "--rpc-listen-all lets any host on the network reach the daemon; it needs a secret "
                    + "(--rpc-secret-file FILE, or --rpc-secret SECRET)."
            )
        }
        if settings.flag(.rpcAllowOriginAll) && !hasSecret {
            throw ValidationError(
                "--rpc-allow-origin-all lets any web page you open call the daemon; it needs a secret "
                    + "(--rpc-secret-file FILE, or --rpc-secret SECRET). To let one page in, give --rpc-allow-origin ORIGIN."
            )
        }
        // The names and origins as the server will read them: a mistake is a usage error before anything starts.
        do {
            try RPCServerConfiguration(
                secret: "checked above",
                allowedHosts: self.allowedHosts,
                allowedOrigins: self.allowedOrigins
            ).validate()
        } catch {
            throw ValidationError(error.description)
        }
        guard (1...65536).contains(self.maxConnections) else {
            throw ValidationError("--rpc-max-connections takes a number from 1 to 65536, not \(self.maxConnections).")
        }
        guard (1...86400).contains(self.requestTimeout), (1...86400).contains(self.idleTimeout) else {
            throw ValidationError("--rpc-request-timeout and --rpc-idle-timeout take seconds from 1 to 86400.")
        }
    }

    /// Raises the soft limit on open files to the hard one: the connection cap (1,024 by default) and the
    /// downloads' own connections and files do not fit in the usual soft limit of 1,024.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }

    /// The secret from `rpc-secret` or the first line of `--rpc-secret-file`.
    func resolvedSecret(_ settings: Aria2Arguments) throws -> String? {
        guard let secretFile else { return settings.value(.rpcSecret) }
        let text: String
        do {
            text = try String(contentsOfFile: secretFile, encoding: .utf8)
        } catch {
            throw ValidationError("Could not read the secret file '\(secretFile)': \(error.localizedDescription)")
        }
        let secret = String(text.split(whereSeparator: \.isNewline).first ?? "").trimmingCharacters(in: .whitespaces)
        guard !secret.isEmpty else { throw ValidationError("The secret file '\(secretFile)' is empty.") }
        return secret
    }

    /// `--state-dir`, else `$XDG_STATE_HOME/downpour`, else `~/.local/state/downpour`.
    func resolvedStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let stateDirectory { return stateDirectory }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/downpour" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/downpour"
    }

    /// The settings the daemon runs with (``Settings``): the options in force, the secret, the state directory
    /// (created, owner only) and the downloads' defaults.
    func daemonSettings() throws -> Settings {
        let settings = try self.settings()
        let port = settings.value(.rpcListenPort).flatMap { Int($0) } ?? 6800
        let maximumRequestSize = settings.value(.rpcMaxRequestSize).flatMap { Int($0) } ?? 2 * 1024 * 1024
        let server = RPCServerConfiguration(
            port: port,
            listenAll: settings.flag(.rpcListenAll),
            secret: try self.resolvedSecret(settings),
            allowOriginAll: settings.flag(.rpcAllowOriginAll),
            allowedHosts: self.allowedHosts,
            allowedOrigins: self.allowedOrigins,
            maximumRequestSize: maximumRequestSize,
            maximumHeldBodies: max(64 * 1024 * 1024, maximumRequestSize),
            maximumConnections: self.maxConnections,
            requestTimeout: .seconds(self.requestTimeout),
            idleTimeout: .seconds(self.idleTimeout)
        )
        do {
            try server.validate()
        } catch {
            throw ValidationError(error.description)
        }
        let stateDirectory = Self.absolute(self.resolvedStateDirectory())
        let directory = Self.absolute(settings.value(.dir) ?? ".")
        // The state directory holds the queue (URLs, options, maybe credentials in headers): owner only.
        do {
            try FileManager.default.createDirectory(
                atPath: stateDirectory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw Failure(
                message: "cannot create the state directory '\(stateDirectory)': \(error.localizedDescription)",
                status: ExitStatus.localIO
            )
        }
        // Every option but the secrets (the RPC's, a password in the fleet's URL) is a global option clients read
        // (`aria2.getGlobalOption`); the downloads' and the queue's are their defaults.
        var options = settings.options.filter {
            $0.name != Aria2Option.rpcSecret.name && $0.name != Aria2Option.dir.name
                && $0.name != Aria2Option.queue.name
        }
        // In a fleet another node may take a download over at any time (a node restarted, cut off): it fetches
        // again what arrived since the last journal, so the journal is saved four times a second unless told
        // otherwise (a node killed midway: 2.43x a node's speed on three with 1 s, 2.61x with 0.25 s; no cost
        // measured on a 1 GiB download; Benchmarks/RESULTS.md).
        if settings.value(.queue) != nil, settings.value(.journalInterval) == nil {
            options.append(QueueOption(name: Aria2Option.journalInterval.name, value: "0.25"))
        }
        let base = Self.base(directory: directory)
        return Settings(
            server: server,
            stateDirectory: stateDirectory,
            directory: directory,
            defaults: DownloadManager.Defaults(
                directory: base.directory,
                configuration: base.configuration,
                options: options
            ),
            queueURL: settings.value(.queue),
            nodeName: settings.value(.nodeName) ?? Self.defaultNodeName(port: port),
            inputFile: settings.value(.inputFile),
            hooks: Hooks(settings),
            verbose: settings.flag(.verbose)
        )
    }

    func run() async throws {
        Self.raiseOpenFileLimit()
        LoggingSystem.bootstrap { LineLogHandler.standardError(label: $0) }
        do {
            let settings = try self.daemonSettings()
            var logger = Logger(label: "downpour.daemon")
            logger.logLevel = settings.verbose ? .debug : .notice
            let group = try Self.buildDaemon(settings, logger: logger)
            do {
                try await group.run()
            } catch {
                throw Self.failure(error, settings: settings)
            }
        } catch let failure as Failure {
            writeError("downpour daemon: \(failure.message)")
            throw ExitCode(failure.status)
        }
    }

    /// Adds the downloads of an input or session file in aria2's format that the queue does not have yet: an entry
    /// with a `gid` the queue knows is passed over (the queue is the record of truth, and a session file saved at
    /// every exit is loaded at every start); one without is given a GID made from the file, its line and its URIs,
    /// so that it is added once, not at every start. A bad entry is named in a notice and passed over.
    static func load(_ path: String, into manager: any DownloadQueueService) async {
        let input: InputFile
        do {
            input = try InputFile(parsing: try String(contentsOfFile: path, encoding: .utf8))
        } catch let error as InputFile.ParseError {
            writeError("downpour daemon: \(path): \(error.description)")
            return
        } catch {
            // aria2 starts without the file when it is missing (the first start of a session file).
            if FileManager.default.fileExists(atPath: path) {
                writeError("downpour daemon: cannot read the input file '\(path)': \(error.localizedDescription)")
            }
            return
        }
        var added = 0
        for entry in input.entries {
            var options = entry.options.map { QueueOption(name: $0.name, value: $0.value) }
            let gid: String
            if let given = entry.value(Aria2Option.gid.name) {
                gid = given
            } else {
                gid = InputGID.make(path: path, line: entry.line, uris: entry.uris)
                options.append(QueueOption(name: Aria2Option.gid.name, value: gid))
            }
            if (try? await manager.status(of: gid)) != nil { continue }
            do {
                _ = try await manager.add(uris: entry.uris, options: options, position: nil)
                added += 1
            } catch {
                writeError("downpour daemon: \(path): line \(entry.line): \(error.message)")
            }
        }
        if added > 0 {
            FileHandle.standardOutput.write(Data("downpour daemon: \(added) downloads added from \(path)\n".utf8))
        }
    }

    /// What every download starts from before the global options: aria2's defaults where Downpour's differ
    /// (Metalinks followed; a file of the name that exists is kept and the download saved as NAME.1.EXT).
    static func base(directory: String) -> Aria2DownloadSettings {
        var configuration = DownloadManager.Defaults.configuration
        configuration.renamesExisting = true
        return Aria2DownloadSettings(directory: directory, configuration: configuration)
    }

    /// A node's name when none is given: the host's name and the RPC port (or the process, for port 0).
    static func defaultNodeName(port: Int) -> String {
        let host = ProcessInfo.processInfo.hostName
        return port == 0 ? "\(host):pid\(getpid())" : "\(host):\(port)"
    }

    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        let current = FileManager.default.currentDirectoryPath
        return path == "." ? current : current + "/" + path
    }
}

/// `aria2.shutdown`: a service that ends (and so shuts the group down gracefully) once triggered.
final class ShutdownTrigger: Service, Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: Void.self)
    }

    func trigger() {
        self.continuation.yield()
    }

    func run() async throws {
        await withTaskCancellationOrGracefulShutdownHandler {
            for await _ in self.stream { return }
        } onCancelOrGracefulShutdown: {
            self.continuation.finish()
        }
    }
}
