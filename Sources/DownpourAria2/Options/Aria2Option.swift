import Downpour
import DownpourHLS
import Foundation

/// One option by aria2's name that Downpour implements: where it applies, what value it takes, how that value is
/// written back, its default and its help line. ``all`` is the one table of them: input files, aria2's RPC
/// (`changeOption`, `getOption`, ...), configuration files, session files and the command line all read it, so an
/// option's name is written once, here.
///
/// ```swift
/// let split = try #require(Aria2Option.named("split"))
/// try split.checked("8")          // "8"
/// try Aria2Option.maxDownloadLimit.checked("1M")   // "1048576", as aria2 writes it back
/// ```
public struct Aria2Option: Sendable, CustomStringConvertible {
    /// Where an option applies.
    public enum Scope: Sendable, Hashable {
        /// A download's own (an input file's entry, `addUri`, `changeOption`); its global value is every download's
        /// default.
        case download
        /// How a download joins the queue (`gid`, `pause`): given when it is added, never changed or shown.
        case placement
        /// The queue's (`changeGlobalOption`).
        case queue
        /// The program's, set when it starts (configuration file, command line): the daemon's server, the hooks,
        /// the files `get` reads.
        case startup
    }

    /// The commands that take an option on their command line and from a configuration file.
    public struct Commands: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// `downpour get`.
        public static let get = Commands(rawValue: 1)
        /// `downpour daemon`.
        public static let daemon = Commands(rawValue: 2)
        public static let both: Commands = [.get, .daemon]
    }

    /// Another spelling of an option on the command line: Downpour's earlier names (`--connections`), and names
    /// that stand for a value (`--insecure` is `--check-certificate=false`).
    public struct Alias: Sendable, Hashable {
        public let name: String
        /// The value the alias gives; `nil` when it takes one as the option does.
        public let value: String?

        public init(_ name: String, value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    /// The values an option takes.
    public enum Value: Sendable, Hashable {
        /// `true` or `false`.
        case flag
        /// A whole number in the range.
        case count(ClosedRange<Int>)
        /// A size in bytes, `K`, `M` and `G` suffixes allowed; written back in bytes, as aria2 does.
        case size(ClosedRange<Int64>)
        /// Seconds; aria2 takes whole ones, Downpour fractions too.
        case seconds(ClosedRange<Double>)
        /// Any text.
        case text
        /// Any text, and the option may be given several times (`header`); written back one value a line.
        case list
        /// One of these words.
        case choice([String])
    }

    /// aria2's name, without the leading `--`.
    public let name: String
    public let scope: Scope
    public let value: Value
    /// One line for `--help`.
    public let help: String
    /// A word for the value in `--help` (`size`, `seconds`, ...).
    public let valueName: String
    /// The default of a queue or daemon option, as written back; `nil` when it has none (a download option's
    /// default is the configuration's own: ``defaultValue(in:)``).
    public let defaultText: String?
    /// Whether aria2 has the option: only those are answered to aria2's RPC (Downpour's own are for its command
    /// line and configuration file).
    public let isAria2s: Bool
    /// The one-letter name on the command line (aria2's, such as `-x`, and Downpour's `-H`).
    public let short: Character?
    /// Other names on the command line.
    public let aliases: [Alias]
    /// The commands that take it.
    public let commands: Commands
    /// The commands that take it from a configuration file: ``commands``, but `get` takes `input-file` only from
    /// its command line (a daemon's file names the daemon's session in it).
    public let fileCommands: Commands
    let apply: (@Sendable (String, inout Aria2DownloadSettings) throws(DownloadError) -> Void)?
    let read: (@Sendable (Aria2DownloadSettings) -> String?)?

    init(
        _ name: String,
        _ scope: Scope,
        _ value: Value,
        valueName: String? = nil,
        default defaultText: String? = nil,
        isAria2s: Bool = true,
        short: Character? = nil,
        aliases: [Alias] = [],
        commands: Commands? = nil,
        fileCommands: Commands? = nil,
        help: String,
        apply: (@Sendable (String, inout Aria2DownloadSettings) throws(DownloadError) -> Void)? = nil,
        read: (@Sendable (Aria2DownloadSettings) -> String?)? = nil
    ) {
        self.name = name
        self.scope = scope
        self.value = value
        self.help = help
        self.defaultText = defaultText
        self.isAria2s = isAria2s
        self.short = short
        self.aliases = aliases
        switch scope {
        case .download: self.commands = commands ?? .both
        case .placement: self.commands = commands ?? []
        case .queue, .startup: self.commands = commands ?? .daemon
        }
        self.fileCommands = fileCommands ?? self.commands
        self.apply = apply
        self.read = read
        switch value {
        case .flag: self.valueName = valueName ?? "true|false"
        case .count: self.valueName = valueName ?? "number"
        case .size: self.valueName = valueName ?? "size"
        case .seconds: self.valueName = valueName ?? "seconds"
        case .text, .list: self.valueName = valueName ?? "text"
        case .choice(let words): self.valueName = valueName ?? words.joined(separator: "|")
        }
    }

    public var description: String { self.name }

    /// The option named `name`, or `nil` when Downpour has none of that name.
    public static func named(_ name: String) -> Aria2Option? {
        Self.byName[name]
    }

    /// Every name of the table on the command line, long ones (with aliases) and short ones: each once, which the
    /// table's tests check.
    public static var commandLineNames: [String] {
        Self.all.flatMap { option in
            [option.name] + option.aliases.map(\.name) + (option.short.map { [String($0)] } ?? [])
        }
    }

    private static let byName: [String: Aria2Option] = Dictionary(
        Self.all.map { ($0.name, $0) },
        uniquingKeysWith: { first, _ in first }
    )

    /// `value` checked and written as aria2 writes it back (`1M` → `1048576`, `TRUE` → `true`).
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` naming the option and what it takes.
    public func checked(_ text: String) throws(DownloadError) -> String {
        func bad(_ what: String) -> DownloadError {
            .invalidRequest("The option '\(self.name)' takes \(what), not '\(text)'.")
        }
        let normalized: String
        switch self.value {
        case .flag:
            switch text.lowercased() {
            case "true": normalized = "true"
            case "false": normalized = "false"
            default: throw bad("true or false")
            }
        case .count(let range):
            guard let number = Int(text), range.contains(number) else {
                throw bad("a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            normalized = "\(number)"
        case .size(let range):
            guard let bytes = ByteCount.parse(text) else { throw bad("a size such as 512K, 10M or 1G") }
            guard range.contains(bytes) else {
                throw bad("a size from \(range.lowerBound) to \(range.upperBound) bytes")
            }
            normalized = "\(bytes)"
        case .seconds(let range):
            guard let seconds = Double(text), seconds.isFinite, range.contains(seconds) else {
                throw bad(
                    "a number of seconds from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))"
                )
            }
            normalized = Self.format(seconds)
        case .text, .list:
            normalized = text
        case .choice(let words):
            guard words.contains(text.lowercased()) else { throw bad(words.joined(separator: ", ")) }
            normalized = text.lowercased()
        }
        if let apply {
            // The value must also make sense to the request (a header's form, a proxy URL, a digest).
            var scratch = Aria2DownloadSettings()
            do {
                try apply(normalized, &scratch)
            } catch {
                guard !error.message.contains("'\(self.name)'") else { throw error }
                throw .invalidRequest("The option '\(self.name)' cannot take '\(text)': \(error.message)")
            }
        }
        return normalized
    }

    /// The value this option has in `options` (a download's or the defaults' request options), written as aria2
    /// writes it; `nil` for one that is not set and has no default.
    public func defaultValue(in options: Aria2DownloadSettings) -> String? {
        self.read?(options) ?? self.defaultText
    }

    /// Applies a value to request options; queue and daemon options change nothing there.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for a bad value, naming the option.
    public func apply(_ text: String, to options: inout Aria2DownloadSettings) throws(DownloadError) {
        guard let apply else { return }
        try apply(try self.checked(text), &options)
    }

    /// Seconds as aria2 writes them: whole ones without a fraction.
    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? "\(Int64(seconds))" : "\(seconds)"
    }

    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return Self.format(Double(seconds) + Double(attoseconds / 1_000_000_000_000) / 1_000_000)
    }

    static func duration(_ text: String) -> Duration {
        .milliseconds(Int64(((Double(text) ?? 0) * 1000).rounded()))
    }
}

extension Aria2Option {
    /// Every option Downpour implements, in the order `--help` and `getGlobalOption` list them.
    public static let all: [Aria2Option] = [
        .dir, .out, .header, .split, .maxConnectionPerServer, .minSplitSize, .maxDownloadLimit, .userAgent, .maxTries,
        .retryOnRefused, .maxFileNotFound,
        .retryWait, .timeout, .connectTimeout, .lowestSpeedLimit, .allowOverwrite, .autoFileRenaming, .continue,
        .checkCertificate, .caCertificate, .httpUser, .httpPasswd, .noNetrc, .remoteTime, .conditionalGet, .allProxy,
        .httpProxy, .httpsProxy, .noProxy, .checksum, .followMetalink, .metalinkLocation, .media, .mediaVideo,
        .mediaAudio, .mediaSubtitles, .mediaRecordTime,
        .forceSave, .slowWindow,
        .noRestartSlow, .journalInterval, .autoSaveInterval, .httpNoCache, .gid, .pause, .maxConcurrentDownloads,
        .maxDownloadResult,
        .maxOverallDownloadLimit, .saveSession, .saveSessionInterval, .enableRPC, .rpcListenPort, .rpcMaxRequestSize,
        .rpcListenAll,
        .rpcSecret, .rpcAllowOriginAll, .queue, .nodeName, .inputFile, .confPath, .noConf, .metalinkFile, .verbose,
        .quiet, .netrcPath,
        .loadCookies,
        .saveCookies, .onDownloadStart, .onDownloadPause, .onDownloadStop, .onDownloadComplete, .onDownloadError,
    ]

    /// Options of Downpour's own that carry what a Metalink says about a file, for a queue that stores options as
    /// text (``PieceChecksums/description``'s form, and the length in bytes). Applied as options, never shown.
    public static let internalOptions: [Aria2Option] = [.pieceChecksums, .expectedLength]
}

// MARK: - One download

extension Aria2Option {
    public static let dir = Aria2Option(
        "dir",
        .download,
        .text,
        valueName: "dir",
        short: "d",
        help: "Save into this directory.",
        apply: { value, options throws(DownloadError) in
            guard !value.isEmpty else { throw .invalidRequest("The option 'dir' takes a directory, not ''.") }
            options.directory = value
        },
        read: { $0.directory }
    )
    public static let out = Aria2Option(
        "out",
        .download,
        .text,
        valueName: "file",
        short: "o",
        aliases: [Alias("output")],
        help: "Save under this file name (inside dir).",
        apply: { value, options throws(DownloadError) in
            guard DownloadRequest.Destination.staysInside(value) else {
                throw .invalidRequest(
                    "The option 'out' takes a file name or a relative path inside the directory, not '\(value)'."
                )
            }
            options.output = value
        },
        read: { $0.output }
    )
    public static let header = Aria2Option(
        "header",
        .download,
        .list,
        valueName: "header",
        short: "H",
        help: "Send this request header, 'Name: value' (repeatable).",
        apply: { value, options throws(DownloadError) in
            guard let header = HTTPHeaderField(parsing: value) else {
                throw .invalidRequest("The option 'header' takes 'Name: value', not '\(value)'.")
            }
            try header.validate()
            options.configuration.headers.append(header)
        },
        read: { options in
            options.configuration.headers.isEmpty
                ? nil : options.configuration.headers.map { "\($0.name): \($0.value)\n" }.joined()
        }
    )
    public static let split = Aria2Option(
        "split",
        .download,
        .count(1...64),
        valueName: "connections",
        short: "s",
        help: "Connections per download (1-64); Downpour splits as it goes, so this is max-connection-per-server too.",
        apply: { value, options in options.configuration.connections = Int(value) ?? 1 },
        read: { "\($0.configuration.connections)" }
    )
    public static let maxConnectionPerServer = Aria2Option(
        "max-connection-per-server",
        .download,
        .count(1...64),
        valueName: "connections",
        short: "x",
        aliases: [Alias("connections")],
        help: "Connections per download (1-64), as split.",
        apply: { value, options in options.configuration.connections = Int(value) ?? 1 },
        read: { "\($0.configuration.connections)" }
    )
    public static let minSplitSize = Aria2Option(
        "min-split-size",
        .download,
        .size(1024...(1 << 40)),
        short: "k",
        help: "Never split a range below this size (K, M, G suffixes).",
        apply: { value, options in options.configuration.minimumSplitSize = Int64(value) ?? 1024 },
        read: { "\($0.configuration.minimumSplitSize)" }
    )
    public static let maxDownloadLimit = Aria2Option(
        "max-download-limit",
        .download,
        .size(0...(1 << 50)),
        help: "The most bytes per second for each download (K, M, G suffixes; 0 for no limit).",
        apply: { value, options in
            let rate = Int64(value) ?? 0
            options.configuration.maximumRate = rate == 0 ? nil : rate
        },
        read: { "\($0.configuration.maximumRate ?? 0)" }
    )
    public static let userAgent = Aria2Option(
        "user-agent",
        .download,
        .text,
        short: "U",
        help: "The User-Agent header.",
        apply: { value, options in options.configuration.userAgent = value },
        read: { $0.configuration.userAgent }
    )
    public static let maxTries = Aria2Option(
        "max-tries",
        .download,
        .count(1...1000),
        short: "m",
        help: "Attempts in a row without progress before a connection gives up.",
        apply: { value, options in options.configuration.retry.maximumTries = Int(value) ?? 1 },
        read: { "\($0.configuration.retry.maximumTries)" }
    )
    public static let maxFileNotFound = Aria2Option(
        "max-file-not-found",
        .download,
        .count(0...1000),
        help: "Try a URL that answers 404 or 410 this many times before failing (0: fail at the first, as curl).",
        apply: { value, options in options.configuration.retry.fileNotFoundTries = Int(value) ?? 0 },
        read: { "\($0.configuration.retry.fileNotFoundTries)" }
    )
    public static let retryOnRefused = Aria2Option(
        "retry-on-refused",
        .download,
        .flag,
        isAria2s: false,
        aliases: [Alias("retry-connrefused", value: "true")],
        help: "Retry a connection refused by a host not reached yet (by default such a link ends at once, as in curl).",
        apply: { value, options in options.configuration.retry.retriesRefusedConnections = value == "true" },
        read: { "\($0.configuration.retry.retriesRefusedConnections)" }
    )
    public static let retryWait = Aria2Option(
        "retry-wait",
        .download,
        .seconds(0...600),
        help: "Seconds before the first retry; doubles each time, with jitter.",
        apply: { value, options in options.configuration.retry.wait = Aria2Option.duration(value) },
        read: { Aria2Option.format($0.configuration.retry.wait) }
    )
    public static let timeout = Aria2Option(
        "timeout",
        .download,
        .seconds(0.001...600),
        short: "t",
        help: "Connect time-out, and the longest a connection may stay silent.",
        apply: { value, options in
            options.configuration.timeouts.idleRead = Aria2Option.duration(value)
            options.configuration.timeouts.connect = Aria2Option.duration(value)
        },
        read: { Aria2Option.format($0.configuration.timeouts.idleRead) }
    )
    public static let connectTimeout = Aria2Option(
        "connect-timeout",
        .download,
        .seconds(0.001...600),
        help: "Connect time-out.",
        apply: { value, options in options.configuration.timeouts.connect = Aria2Option.duration(value) },
        read: { Aria2Option.format($0.configuration.timeouts.connect) }
    )
    public static let lowestSpeedLimit = Aria2Option(
        "lowest-speed-limit",
        .download,
        .size(0...(1 << 50)),
        aliases: [Alias("lowest-speed")],
        help: "Restart a connection slower than this many bytes per second (K, M suffixes; 0 for no floor).",
        apply: { value, options in
            let rate = Int64(value) ?? 0
            options.configuration.slowConnections.lowestSpeed = rate == 0 ? nil : rate
        },
        read: { "\($0.configuration.slowConnections.lowestSpeed ?? 0)" }
    )
    public static let allowOverwrite = Aria2Option.flag(
        "allow-overwrite",
        \.overwrite,
        aliases: [Alias("overwrite")],
        help: "Replace an existing file of the same name."
    )
    public static let autoFileRenaming = Aria2Option.flag(
        "auto-file-renaming",
        \.renamesExisting,
        help: "When a file of the name exists, save as NAME.1.EXT, NAME.2.EXT, ... instead of failing."
    )
    public static let `continue` = Aria2Option.flag(
        "continue",
        \.resume,
        short: "c",
        aliases: [Alias("no-resume", value: "false")],
        help: "Continue a partial download from NAME.part and its journal (never from a file without one)."
    )
    public static let checkCertificate = Aria2Option.flag(
        "check-certificate",
        \.tls.verifyCertificates,
        aliases: [Alias("insecure", value: "false")],
        help: "Verify the server's TLS certificate."
    )
    public static let caCertificate = Aria2Option(
        "ca-certificate",
        .download,
        .text,
        valueName: "file",
        help: "Trust the certificates in this PEM file instead of the system's.",
        apply: { value, options in options.configuration.tls.trustedCertificatesPath = value.isEmpty ? nil : value },
        read: { $0.configuration.tls.trustedCertificatesPath }
    )
    public static let httpUser = Aria2Option(
        "http-user",
        .download,
        .text,
        valueName: "user",
        help: "User name for HTTP Basic authentication (sent only to the URL's own origin).",
        apply: { value, options throws(DownloadError) in
            guard !value.contains(":") else {
                throw .invalidRequest("The option 'http-user' takes a user name without ':', not '\(value)'.")
            }
            options.configuration.credentials = Credentials(
                user: value,
                password: options.configuration.credentials?.password ?? ""
            )
        },
        read: { $0.configuration.credentials.map(\.user) }
    )
    public static let httpPasswd = Aria2Option(
        "http-passwd",
        .download,
        .text,
        valueName: "password",
        help: "Password for http-user.",
        apply: { value, options in
            options.configuration.credentials = Credentials(
                user: options.configuration.credentials?.user ?? "",
                password: value
            )
        },
        read: { $0.configuration.credentials.map(\.password) }
    )
    public static let noNetrc = Aria2Option(
        "no-netrc",
        .download,
        .flag,
        short: "n",
        help: "Do not take credentials from .netrc.",
        apply: { value, options in
            if value == "true" { options.configuration.netrcPath = nil }
        },
        read: { "\($0.configuration.netrcPath == nil)" }
    )
    public static let remoteTime = Aria2Option.flag(
        "remote-time",
        \.setsRemoteTime,
        short: "R",
        help: "Give the file the server's modification time (Last-Modified)."
    )
    public static let conditionalGet = Aria2Option.flag(
        "conditional-get",
        \.conditionalGet,
        help: "Download only when the remote file is newer than the local one, and then replace it."
    )
    public static let allProxy = Aria2Option.proxy(
        "all-proxy",
        \.all,
        help: "Proxy for every URL: [http://|socks5://|socks5h://][USER:PASSWORD@]HOST[:PORT]; '' for none."
    )
    public static let httpProxy = Aria2Option.proxy(
        "http-proxy",
        \.http,
        help: "Proxy for http URLs (before all-proxy)."
    )
    public static let httpsProxy = Aria2Option.proxy(
        "https-proxy",
        \.https,
        help: "Proxy for https URLs (before all-proxy)."
    )
    public static let noProxy = Aria2Option(
        "no-proxy",
        .download,
        .text,
        valueName: "list",
        help: "Reach these directly: comma-separated hosts, addresses and networks (10.0.0.0/8), each with :PORT.",
        apply: { value, options throws(DownloadError) in
            options.configuration.proxy.noProxy = ProxySettings.noProxyEntries(value)
            try options.configuration.proxy.validate()
        },
        read: { $0.configuration.proxy.noProxy.isEmpty ? nil : $0.configuration.proxy.noProxy.joined(separator: ",") }
    )
    public static let checksum = Aria2Option(
        "checksum",
        .download,
        .text,
        valueName: "type=digest",
        help:
            "The file's digest, TYPE=DIGEST (sha-256, sha-512, sha-1, md5); the file gets its name only if it matches.",
        apply: { value, options throws(DownloadError) in
            guard let checksum = Checksum(parsing: value) else {
                throw .invalidRequest(
                    "The option 'checksum' takes TYPE=DIGEST: sha-256, sha-512, sha-1 or md5, then the digest in "
                        + "hexadecimal, not '\(value)'."
                )
            }
            options.configuration.checksum = checksum
        },
        read: { $0.configuration.checksum?.description }
    )
    public static let followMetalink = Aria2Option(
        "follow-metalink",
        .download,
        .choice(["true", "mem", "false"]),
        help: "A URL that is a Metalink: download the files it lists (true, mem) or save the document (false).",
        apply: { value, options in options.configuration.followsMetalink = value != "false" },
        read: { "\($0.configuration.followsMetalink)" }
    )
    public static let media = Aria2Option(
        "media",
        .download,
        .choice(["auto", "hls", "file"]),
        isAria2s: false,
        help: "A URL that is an HLS playlist (.m3u8): fetch its segments into one video file (auto, hls) or save the "
            + "playlist itself (file).",
        apply: { value, options in options.configuration.followsPlaylists = value != "file" },
        read: { $0.configuration.followsPlaylists ? "auto" : "file" }
    )
    public static let mediaVideo = Aria2Option(
        "media-video",
        .download,
        .text,
        valueName: "choice",
        isAria2s: false,
        help: "With an HLS playlist of several variants, the one to fetch: best (the highest bandwidth), worst, a "
            + "height (720p), or the best up to a bandwidth (3000000, 3000k, 3M).",
        apply: { value, options throws(DownloadError) in
            guard let choice = HLSVideoChoice(value) else {
                throw .invalidRequest(
                    "The option 'media-video' takes best, worst, a height such as 720p, or a bandwidth such as 3M, "
                        + "not '\(value)'."
                )
            }
            options.mediaVideo = choice
        },
        read: { $0.mediaVideo.description }
    )
    public static let mediaAudio = Aria2Option(
        "media-audio",
        .download,
        .choice(["best", "none"]),
        isAria2s: false,
        help: "With an HLS variant whose audio is a rendition of its own: fetch it into a file beside the video "
            + "(best) or not (none).",
        apply: { value, options in options.mediaAudio = value != "none" },
        read: { $0.mediaAudio ? "best" : "none" }
    )
    public static let mediaSubtitles = Aria2Option(
        "media-subtitles",
        .download,
        .text,
        valueName: "languages",
        default: "none",
        isAria2s: false,
        help: "With an HLS variant that has subtitles: fetch them, each into a WebVTT file beside the video "
            + "(NAME.LANGUAGE.vtt): none, all, or languages separated by commas (en,de).",
        apply: { value, options throws(DownloadError) in
            guard let choice = HLSSubtitleChoice(value) else {
                throw .invalidRequest(
                    "The option 'media-subtitles' takes none, all, or languages separated by commas (en,de), not "
                        + "'\(value)'."
                )
            }
            options.mediaSubtitles = choice
        },
        read: { $0.mediaSubtitles.description }
    )
    public static let mediaRecordTime = Aria2Option(
        "media-record-time",
        .download,
        .seconds(0...31_536_000),
        isAria2s: false,
        help:
            "With a live HLS playlist (no EXT-X-ENDLIST): record it for at most these seconds (0: until it ends, Ctrl-C "
            + "or a pause); what was recorded is saved either way.",
        apply: { value, options in
            let duration = Aria2Option.duration(value)
            options.mediaRecordTime = duration > .zero ? duration : nil
        },
        read: { $0.mediaRecordTime.map { Aria2Option.format($0) } ?? "0" }
    )
    public static let metalinkLocation = Aria2Option(
        "metalink-location",
        .download,
        .text,
        valueName: "locations",
        help: "With a Metalink: prefer the URLs of these locations (comma-separated country codes, such as 'de,fr').",
        apply: { value, options in
            options.metalinkLocations = Aria2DownloadSettings.locations(value)
        },
        read: { $0.metalinkLocations.isEmpty ? nil : $0.metalinkLocations.joined(separator: ",") }
    )
    public static let forceSave = Aria2Option(
        "force-save",
        .download,
        .flag,
        help: "Keep the download in the saved session even when it completed or was removed.",
        apply: { value, options in options.forceSave = value == "true" },
        read: { "\($0.forceSave)" }
    )
    public static let slowWindow = Aria2Option(
        "slow-window",
        .download,
        .seconds(0.1...86_400),
        isAria2s: false,
        help: "Seconds a connection is measured before it counts as slow (below lowest-speed-limit, or below a tenth "
            + "of the other connections' median speed).",
        apply: { value, options in options.configuration.slowConnections.window = Aria2Option.duration(value) },
        read: { Aria2Option.format($0.configuration.slowConnections.window) }
    )
    public static let noRestartSlow = Aria2Option(
        "no-restart-slow",
        .download,
        .flag,
        isAria2s: false,
        help: "Never restart a connection for being much slower than the others.",
        apply: { value, options in options.configuration.slowConnections.shareOfMedian = value == "true" ? nil : 0.1 },
        read: { "\($0.configuration.slowConnections.shareOfMedian == nil)" }
    )
    public static let journalInterval = Aria2Option(
        "journal-interval",
        .download,
        .seconds(0.01...3600),
        isAria2s: false,
        help: "Seconds between saves of the resume journal; a crash re-fetches at most what arrived since.",
        apply: { value, options in options.configuration.journalInterval = Aria2Option.duration(value) },
        read: { Aria2Option.format($0.configuration.journalInterval) }
    )
    /// aria2's control-file interval: here the resume journal's (`journal-interval` in whole seconds).
    public static let autoSaveInterval = Aria2Option(
        "auto-save-interval",
        .download,
        .seconds(1...600),
        help: "Seconds between saves of the resume journal (aria2's name; 0, never, is not taken: the journal is "
            + "what makes a download resumable).",
        apply: { value, options in options.configuration.journalInterval = Aria2Option.duration(value) },
        // Whole seconds within its own range, as aria2 writes it (journal-interval may be shorter: 1 then).
        read: { options in
            let seconds = Double(options.configuration.journalInterval.components.seconds)
            return Aria2Option.format(min(600, max(1, seconds)))
        }
    )
    public static let httpNoCache = Aria2Option(
        "http-no-cache",
        .download,
        .flag,
        help: "Ask proxies and caches for a fresh copy (Cache-Control: no-cache, Pragma: no-cache).",
        apply: { value, options in options.noCache = value == "true" },
        read: { "\($0.noCache)" }
    )
    public static let pieceChecksums = Aria2Option(
        "downpour-piece-checksums",
        .download,
        .text,
        isAria2s: false,
        help: "A Metalink's piece digests, TYPE:LENGTH:DIGEST,DIGEST,...",
        apply: { value, options throws(DownloadError) in
            guard let pieces = PieceChecksums(parsing: value) else {
                throw .invalidRequest(
                    "The option 'downpour-piece-checksums' takes TYPE:LENGTH:DIGEST,DIGEST,..., not '\(value)'."
                )
            }
            options.configuration.pieceChecksums = pieces
        }
    )
    public static let expectedLength = Aria2Option(
        "downpour-length",
        .download,
        .size(0...Int64.max / 2),
        isAria2s: false,
        help: "A Metalink's length of the file, in bytes.",
        apply: { value, options in options.configuration.expectedLength = Int64(value) }
    )

    /// A download option that is a flag of the configuration.
    static func flag(
        _ name: String,
        _ field: any WritableKeyPath<DownloadConfiguration, Bool> & Sendable,
        short: Character? = nil,
        aliases: [Alias] = [],
        help: String
    ) -> Aria2Option {
        Aria2Option(
            name,
            .download,
            .flag,
            short: short,
            aliases: aliases,
            help: help,
            apply: { value, options in options.configuration[keyPath: field] = value == "true" },
            read: { "\($0.configuration[keyPath: field])" }
        )
    }

    /// A download option that sets one of the configuration's proxies ('' for none).
    static func proxy(
        _ name: String,
        _ field: any WritableKeyPath<ProxySettings, ProxyURL?> & Sendable,
        help: String
    ) -> Aria2Option {
        Aria2Option(
            name,
            .download,
            .text,
            valueName: "url",
            help: help,
            apply: { value, options throws(DownloadError) in
                guard !value.isEmpty else {
                    options.configuration.proxy[keyPath: field] = nil
                    return
                }
                do throws(DownloadError) {
                    options.configuration.proxy[keyPath: field] = try ProxyURL(parsing: value)
                } catch {
                    throw .invalidRequest("The option '\(name)' takes a proxy URL: \(error.message)")
                }
            },
            read: { $0.configuration.proxy[keyPath: field]?.description }
        )
    }

    /// A hook of the daemon: a program run at a moment of a download.
    static func hook(_ name: String, commands: Commands = .both, help: String) -> Aria2Option {
        Aria2Option(name, .startup, .text, valueName: "command", commands: commands, help: help)
    }
}

// MARK: - Adding to the queue

extension Aria2Option {
    public static let gid = Aria2Option(
        "gid",
        .placement,
        .text,
        valueName: "gid",
        help: "The download's GID: 16 hexadecimal digits, not all zero."
    )
    public static let pause = Aria2Option(
        "pause",
        .placement,
        .flag,
        help: "Add the download paused."
    )
}

// MARK: - The queue

extension Aria2Option {
    public static let maxConcurrentDownloads = Aria2Option(
        "max-concurrent-downloads",
        .queue,
        .count(1...1000),
        valueName: "downloads",
        default: "5",
        short: "j",
        commands: .both,
        help: "Downloads to run at once (1-1000)."
    )
    public static let maxDownloadResult = Aria2Option(
        "max-download-result",
        .queue,
        .count(0...100_000),
        valueName: "results",
        default: "1000",
        help: "Results of stopped downloads to keep (0-100000)."
    )
    public static let maxOverallDownloadLimit = Aria2Option(
        "max-overall-download-limit",
        .queue,
        .size(0...(1 << 50)),
        default: "0",
        commands: .both,
        help: "The most bytes per second over all downloads (K, M, G suffixes; 0 for no limit)."
    )
    public static let saveSession = Aria2Option(
        "save-session",
        .queue,
        .text,
        valueName: "file",
        help: "Write the unfinished downloads to this file in aria2's session format at exit and on aria2.saveSession."
    )
    public static let saveSessionInterval = Aria2Option(
        "save-session-interval",
        .queue,
        .seconds(0...86_400),
        default: "0",
        help: "Also write the session file every this many seconds when it changed (0: never)."
    )
}

// MARK: - The daemon

extension Aria2Option {
    public static let enableRPC = Aria2Option(
        "enable-rpc",
        .startup,
        .flag,
        default: "true",
        help: "The daemon always speaks JSON-RPC; accepted for aria2's configuration files."
    )
    public static let rpcListenPort = Aria2Option(
        "rpc-listen-port",
        .startup,
        .count(0...65535),
        valueName: "port",
        default: "6800",
        help: "The port to listen on (0: any free port, printed at start)."
    )
    public static let rpcMaxRequestSize = Aria2Option(
        "rpc-max-request-size",
        .startup,
        .size(1024...(256 * 1024 * 1024)),
        default: "2097152",
        help: "The largest request body or WebSocket message taken; a larger body is answered 413, unread."
    )
    public static let rpcListenAll = Aria2Option(
        "rpc-listen-all",
        .startup,
        .flag,
        default: "false",
        help: "Listen on every network interface, not only 127.0.0.1 (needs a secret)."
    )
    public static let rpcSecret = Aria2Option(
        "rpc-secret",
        .startup,
        .text,
        valueName: "secret",
        help: "The RPC secret token."
    )
    public static let rpcAllowOriginAll = Aria2Option(
        "rpc-allow-origin-all",
        .startup,
        .flag,
        default: "false",
        help: "Let web pages of any origin call the daemon (Access-Control-Allow-Origin: *); needs a secret."
    )
    public static let queue = Aria2Option(
        "queue",
        .startup,
        .text,
        valueName: "url",
        isAria2s: false,
        help: "Keep the queue in PostgreSQL at this URL (postgresql://USER@HOST:PORT/DB), shared by every daemon "
            + "given it: a fleet. Without it the queue is kept in the state directory (SQLite)."
    )
    public static let nodeName = Aria2Option(
        "node-name",
        .startup,
        .text,
        valueName: "name",
        isAria2s: false,
        help: "This daemon's name in a fleet (default: the host name and the RPC port); a daemon restarted with "
            + "its name takes back at once the downloads it ran."
    )
    public static let inputFile = Aria2Option(
        "input-file",
        .startup,
        .text,
        valueName: "file",
        short: "i",
        commands: .both,
        fileCommands: .daemon,
        help: "Download every URL of this file, aria2's input or session format ('-' for standard input with get); "
            + "the daemon adds at start those its queue lacks."
    )
    public static let confPath = Aria2Option(
        "conf-path",
        .startup,
        .text,
        valueName: "file",
        commands: .both,
        help: "Read options from this file (aria2's format: NAME=VALUE lines); the command line wins over it."
    )
    public static let noConf = Aria2Option(
        "no-conf",
        .startup,
        .flag,
        commands: .both,
        help: "Read no configuration file unless conf-path names one."
    )
    public static let metalinkFile = Aria2Option(
        "metalink-file",
        .startup,
        .text,
        valueName: "file",
        short: "M",
        commands: .get,
        help: "Download every file of this Metalink (v4 or v3): each from all its URLs (mirrors, best first), checked "
            + "against its digest."
    )
    public static let verbose = Aria2Option(
        "verbose",
        .startup,
        .flag,
        isAria2s: false,
        short: "v",
        commands: .both,
        help: "Log what happens to standard error (aria2's -v is --version; Downpour's is this)."
    )
    public static let quiet = Aria2Option(
        "quiet",
        .startup,
        .flag,
        default: "false",
        short: "q",
        commands: .get,
        help: "Print nothing but errors."
    )
    public static let netrcPath = Aria2Option(
        "netrc-path",
        .startup,
        .text,
        valueName: "file",
        commands: .get,
        help: "Take credentials by host from this .netrc file instead of ~/.netrc (ignored when others can read it)."
    )
    public static let loadCookies = Aria2Option(
        "load-cookies",
        .startup,
        .text,
        valueName: "file",
        commands: .get,
        help: "Send the matching cookies of this Netscape cookies.txt file."
    )
    public static let saveCookies = Aria2Option(
        "save-cookies",
        .startup,
        .text,
        valueName: "file",
        commands: .get,
        help: "At the end, write the cookies (those loaded and those the servers set) to this file."
    )
    public static let onDownloadStart = Aria2Option.hook(
        "on-download-start",
        help: "Run this program when a download starts, with its GID, number of files and path (no shell)."
    )
    public static let onDownloadPause = Aria2Option.hook(
        "on-download-pause",
        commands: .daemon,
        help: "Run this program when a download is paused (arguments as on-download-start)."
    )
    public static let onDownloadStop = Aria2Option.hook(
        "on-download-stop",
        help: "Run this program when a download stops for any reason (arguments as on-download-start)."
    )
    public static let onDownloadComplete = Aria2Option.hook(
        "on-download-complete",
        help: "Run this program when a download completes (arguments as on-download-start)."
    )
    public static let onDownloadError = Aria2Option.hook(
        "on-download-error",
        help: "Run this program when a download fails (arguments as on-download-start)."
    )
}
