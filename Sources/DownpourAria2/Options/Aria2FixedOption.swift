#if canImport(Glibc)
import Downpour
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An aria2 option that Downpour answers over RPC (`getOption`, `getGlobalOption`) with the value that tells what it
/// does, though it has no setting for it: `file-allocation` is `falloc` because Downpour reserves a file's space
/// with `fallocate`, `enable-mmap` is `false`, `disk-cache` is `0`. Settings pages then show every key aria2c shows
/// (outside BitTorrent, DHT, FTP and SFTP), with the truth.
///
/// Setting one to the value it has changes nothing and is accepted. Setting another value is refused with
/// ``message(for:)``, which names the key and says why: never silently accepted. These options are not in
/// ``Aria2Option/all``: the command line and configuration files treat them as options Downpour does not have.
///
/// ```swift
/// Aria2FixedOption.named("file-allocation")?.accepts("FALLOC")   // true
/// Aria2FixedOption.named("enable-mmap")?.accepts("true")         // false
/// ```
public struct Aria2FixedOption: Sendable, Hashable {
    /// Where aria2 answers it: a download's options and the global ones, or the global ones only.
    public enum Scope: Sendable, Hashable {
        case download
        case global
    }

    /// How two values are compared.
    public enum Kind: Sendable, Hashable {
        case flag
        case number
        case size
        case word
    }

    public let name: String
    public let scope: Scope
    public let kind: Kind
    /// The value Downpour answers (the text aria2 would write).
    public let value: String
    /// Why another value cannot be honoured: one sentence a person can act on.
    public let reason: String

    init(_ name: String, _ scope: Scope, _ kind: Kind, _ value: String, _ reason: String) {
        self.name = name
        self.scope = scope
        self.kind = kind
        self.value = value
        self.reason = reason
    }

    /// Whether `text` says the same as ``value`` (`TRUE` and `true`, `0` and `0M`), so setting it changes nothing.
    public func accepts(_ text: String) -> Bool {
        let text = String(text.trimmingWhitespaceAndNewlines())
        let value = self.currentValue
        switch self.kind {
        case .flag, .word: return text.lowercased() == value.lowercased()
        case .number: return Int64(text).map { $0 == Int64(value) } ?? false
        case .size: return ByteCount.parse(text).map { $0 == ByteCount.parse(value) } ?? false
        }
    }

    /// The refusal of `text`: names the option and says why.
    public func message(for text: String) -> String {
        Self.messagePrefix + "'\(self.name)' to '\(text)' (it is '\(self.currentValue)'): \(self.reason)"
    }

    /// How every refusal's message begins, so a caller can tell it from a bad value.
    public static let messagePrefix = "Downpour cannot set "

    /// The fixed option `name`, or `nil`.
    public static func named(_ name: String) -> Aria2FixedOption? {
        Self.byName[name]
    }

    private static let byName: [String: Aria2FixedOption] = Dictionary(
        Self.all.map { ($0.name, $0) },
        uniquingKeysWith: { first, _ in first }
    )

    /// The value answered now: ``value``, or for `rlimit-nofile` the process's open-file limit.
    public var currentValue: String {
        guard self.name == "rlimit-nofile" else { return self.value }
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return self.value }
        return "\(limit.rlim_cur)"
    }

    /// Every one, as aria2 1.36 (Debian's `aria2`) names them.
    public static let all: [Aria2FixedOption] = [
        // A download's (aria2 answers them in getOption and getGlobalOption).
        .init(
            "allow-piece-length-change",
            .download,
            .flag,
            "true",
            "the resume journal records byte ranges, not pieces, so a download always keeps its progress."
        ),
        .init(
            "always-resume",
            .download,
            .flag,
            "false",
            "a download that cannot be resumed starts over from zero; it is never failed for that."
        ),
        .init("async-dns", .download, .flag, "true", "host names are always resolved off the event loops."),
        .init(
            "check-integrity",
            .download,
            .flag,
            "true",
            "resumed bytes are always checked against the download's digests; the check cannot be turned off."
        ),
        .init(
            "content-disposition-default-utf8",
            .download,
            .flag,
            "true",
            "a Content-Disposition file name is read as UTF-8; ISO-8859-1 is not available."
        ),
        .init("dry-run", .download, .flag, "false", "there is no dry run; every download writes its file."),
        .init(
            "enable-http-keep-alive",
            .download,
            .flag,
            "true",
            "connections are always kept open for reuse; keep-alive cannot be turned off."
        ),
        .init(
            "enable-http-pipelining",
            .download,
            .flag,
            "false",
            "requests are not pipelined; more connections are opened instead (split)."
        ),
        .init("enable-mmap", .download, .flag, "false", "files are never mapped into memory."),
        .init(
            "file-allocation",
            .download,
            .word,
            "falloc",
            "a file's space is always reserved with fallocate once its length is known; other methods are not "
                + "available."
        ),
        .init(
            "hash-check-only",
            .download,
            .flag,
            "false",
            "digests are checked as part of a download; stopping after the check alone is not available."
        ),
        .init(
            "http-accept-gzip",
            .download,
            .flag,
            "false",
            "files are asked for uncompressed so that they can be split and resumed."
        ),
        .init(
            "http-auth-challenge",
            .download,
            .flag,
            "false",
            "credentials go with the first request to their own origin; waiting for a challenge is not available."
        ),
        .init("max-mmap-limit", .download, .size, "0", "files are never mapped into memory."),
        .init(
            "max-resume-failure-tries",
            .download,
            .number,
            "1",
            "a download starts over as soon as its server cannot resume; trying other URIs first is not available."
        ),
        .init(
            "metalink-enable-unique-protocol",
            .download,
            .flag,
            "false",
            "every http and https URL of a Metalink is used; one protocol per host is not available."
        ),
        .init(
            "metalink-preferred-protocol",
            .download,
            .word,
            "none",
            "a Metalink's URLs are ordered by priority and location only."
        ),
        .init(
            "no-file-allocation-limit",
            .download,
            .size,
            "65537",
            "every file longer than 64 KiB is reserved; a file up to 64 KiB comes whole with the first response."
        ),
        .init(
            "parameterized-uri",
            .download,
            .flag,
            "false",
            "each URI is taken literally; give each URI on its own instead of a pattern."
        ),
        .init(
            "pause-metadata",
            .download,
            .flag,
            "false",
            "a followed Metalink's files start like any download; pause them once they are added."
        ),
        .init(
            "piece-length",
            .download,
            .size,
            "1",
            "ranges are split at any byte; set min-split-size to bound the smallest range."
        ),
        .init(
            "proxy-method",
            .download,
            .word,
            "tunnel",
            "an HTTP proxy is always asked to CONNECT; the get method is not available."
        ),
        .init(
            "realtime-chunk-checksum",
            .download,
            .flag,
            "true",
            "a Metalink's piece digests are always checked as the pieces arrive."
        ),
        .init(
            "remove-control-file",
            .download,
            .flag,
            "false",
            "the resume journal is trusted only when it matches the server; to start over, set continue to false."
        ),
        .init("reuse-uri", .download, .flag, "true", "a working URI is always used for further ranges."),
        .init(
            "rpc-save-upload-metadata",
            .download,
            .flag,
            "true",
            "an uploaded Metalink's downloads are kept in the queue and the session file; the document is not "
                + "saved."
        ),
        .init(
            "save-not-found",
            .download,
            .flag,
            "true",
            "every failed download is kept in the session file."
        ),
        .init(
            "stream-piece-selector",
            .download,
            .word,
            "default",
            "ranges are chosen by the engine (the largest first, from the front while a digest is hashed)."
        ),
        .init(
            "uri-selector",
            .download,
            .word,
            "inorder",
            "connections spread over a download's URIs in their order; speed-based selection is not available."
        ),
        .init(
            "use-head",
            .download,
            .flag,
            "false",
            "the first request is always a ranged GET (HEAD only with conditional-get)."
        ),
        // The process's and the queue's (aria2 answers them in getGlobalOption only).
        .init(
            "console-log-level",
            .global,
            .word,
            "notice",
            "the daemon's log level is set when it starts (verbose for debug); restart it to change it."
        ),
        .init("daemon", .global, .flag, "false", "the daemon runs in the foreground; run it under a service manager."),
        .init(
            "deferred-input",
            .global,
            .flag,
            "false",
            "every entry of the input file is added when the daemon starts."
        ),
        .init(
            "disable-ipv6",
            .global,
            .flag,
            "false",
            "IPv6 is used where a host has it; give IPv4 addresses in the URLs, or turn IPv6 off in the system."
        ),
        .init(
            "disk-cache",
            .global,
            .size,
            "0",
            "each connection's bytes are written straight to the file; there is no disk cache to size."
        ),
        .init("download-result", .global, .word, "hide", "the daemon prints no results; read them with tellStopped."),
        .init("dscp", .global, .number, "0", "traffic is not marked; set a mark with the system's firewall."),
        .init("enable-color", .global, .flag, "false", "the daemon's output has no colours."),
        .init(
            "event-poll",
            .global,
            .word,
            Self.eventPoll,
            "the event loops use the system's own mechanism; it cannot be switched."
        ),
        .init("help", .global, .word, "#basic", "help is a command-line request, not a setting."),
        .init("human-readable", .global, .flag, "true", "the daemon prints no readout."),
        .init(
            "keep-unfinished-download-result",
            .global,
            .flag,
            "false",
            "at most max-download-result results of any kind are kept; raise max-download-result to keep more."
        ),
        .init(
            "log-level",
            .global,
            .word,
            "notice",
            "the daemon logs to standard error at the level set when it starts; there is no log file."
        ),
        .init(
            "min-tls-version",
            .global,
            .word,
            "TLSv1",
            "TLS 1.0 and later are accepted; the minimum version is not a setting."
        ),
        .init(
            "optimize-concurrent-downloads",
            .global,
            .flag,
            "false",
            "a fixed number of downloads runs at once; set max-concurrent-downloads instead."
        ),
        .init(
            "rlimit-nofile",
            .global,
            .number,
            "1024",
            "the open-file limit is the process's; raise it with ulimit or LimitNOFILE= before the daemon starts."
        ),
        .init("rpc-secure", .global, .flag, "false", "the daemon speaks plain HTTP; put a TLS reverse proxy in front."),
        .init(
            "server-stat-timeout",
            .global,
            .number,
            "0",
            "no server performance profiles are kept, so none expire."
        ),
        .init(
            "show-console-readout",
            .global,
            .flag,
            "false",
            "the daemon shows no readout; follow progress with tellActive or the dashboard."
        ),
        .init("show-files", .global, .flag, "false", "add a Metalink and read its files with getFiles."),
        .init(
            "socket-recv-buffer-size",
            .global,
            .size,
            "0",
            "the receive buffer is left to the kernel's autotuning; tune net.ipv4.tcp_rmem instead."
        ),
        .init("stderr", .global, .flag, "false", "the daemon's log goes to standard error; redirect it as you need."),
        .init("stop", .global, .number, "0", "the daemon runs until it is stopped; call aria2.shutdown to end it."),
        .init(
            "summary-interval",
            .global,
            .number,
            "0",
            "the daemon prints no summaries; read progress with tellActive or getGlobalStat."
        ),
        .init("truncate-console-readout", .global, .flag, "true", "the daemon shows no readout."),
    ]

    #if canImport(Darwin)
    static let eventPoll = "kqueue"
    #else
    static let eventPoll = "epoll"
    #endif
}

extension String {
    fileprivate func trimmingWhitespaceAndNewlines() -> Substring {
        let scalars = self.unicodeScalars
        let start = scalars.firstIndex { !$0.properties.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.properties.isWhitespace }.map { scalars.index(after: $0) } ?? start
        return Substring(scalars[start..<max(start, end)])
    }
}
