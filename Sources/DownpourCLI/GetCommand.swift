import ArgumentParser
import Downpour
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download one file, or every file of an input file.",
        discussion: """
            The file is written to NAME.part and renamed to NAME only when every byte is in and the length \
            checks out. An existing NAME is never replaced unless --overwrite is given.

            Several URLs are mirrors of one file, as in aria2: the connections are spread over the ones that \
            work (connection i to URL i mod N at first), faster mirrors end up serving more, and a mirror that \
            fails (an error status after its tries, another length, a changed ETag, no ranges) is dropped with a \
            notice while the others take over its work. The download fails only when every URL has failed.

            With -i FILE, every URL of FILE is downloaded, N at a time (-j): one file a line (TAB-separated URLs \
            on a line are mirrors of that file), '#' starts a \
            comment, and indented NAME=VALUE lines under a URL set that download's options (aria2's names: \
            out, dir, header, split, max-connection-per-server, min-split-size, max-download-limit, \
            user-agent, max-tries, retry-wait, timeout, connect-timeout, lowest-speed-limit, allow-overwrite, \
            continue, check-certificate, ca-certificate, http-user, http-passwd, no-netrc, remote-time, \
            conditional-get, all-proxy, http-proxy, https-proxy, no-proxy, checksum, follow-metalink). The \
            command-line options are every entry's defaults. \
            With -M FILE, every file of a Metalink document (v4, RFC 5854, or v3) is downloaded the same way, \
            each from all its URLs (mirrors, best first), named as the document names it (inside -d) and checked \
            against its digest and the digests of its pieces (a bad piece is fetched again, that piece only; the \
            file gets its name only when every piece and the whole file match). A URL whose path ends in .meta4 or \
            .metalink, or that answers with Content-Type application/metalink4+xml or application/metalink+xml, is \
            such a document too: it is read (at most 4 MiB), not saved, and its files are downloaded as with -M, \
            unless --follow-metalink=false; in a -i FILE its files join the batch (inside the entry's dir) unless \
            the entry says follow-metalink=false. \
            The exit status is 0 only when every download succeeded; otherwise it is the status of the first \
            failed entry, and the summary names each failure.

            Proxies: without --all-proxy, --http-proxy or --https-proxy, the variables curl reads are used \
            (http_proxy, https_proxy or HTTPS_PROXY, all_proxy or ALL_PROXY, no_proxy or NO_PROXY); with any of \
            them, the proxy variables are ignored. A proxy is [http://|socks5://|socks5h://][USER:PASSWORD@]HOST\
            [:PORT] (port 1080 when left out); an HTTP proxy carries http and https alike in CONNECT tunnels.
            """
    )

    @Argument(
        help: ArgumentHelp(
            "The http or https URL to download (none with -i or -M).",
            discussion: "Several URLs are mirrors of one file, as in aria2: the connections are spread over them."
        )
    )
    var urls: [String] = []

    @Option(name: [.customShort("o"), .customLong("output")], help: "Save to this file.")
    var output: String?

    @Option(
        name: [.customShort("d"), .customLong("dir")],
        help: "Save into this directory, under the server's suggested name or the URL's last path component."
    )
    var directory: String?

    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp("Download every URL listed in this file ('-' for standard input).", valueName: "file")
    )
    var inputFile: String?

    @Option(
        name: [.customShort("M"), .customLong("metalink-file")],
        help: ArgumentHelp(
            "Download every file of this Metalink (v4 or v3): each from all its URLs (mirrors, best first), checked "
                + "against its digest.",
            valueName: "file"
        )
    )
    var metalinkFile: String?

    @Option(
        name: .customLong("follow-metalink"),
        help: ArgumentHelp(
            "A URL that is a Metalink (.meta4, .metalink, or its Content-Type): 'true' downloads the files it "
                + "lists, 'false' saves the document itself.",
            valueName: "true|false"
        )
    )
    var followMetalink: Bool = true

    @Option(
        name: .customLong("metalink-location"),
        help: ArgumentHelp(
            "With a Metalink: prefer the URLs of these locations (comma-separated country codes, such as 'de,fr').",
            valueName: "locations"
        )
    )
    var metalinkLocation: String?

    @Option(
        name: [.customShort("j"), .customLong("max-concurrent-downloads")],
        help: ArgumentHelp("With -i: downloads at once (1-1000).", valueName: "downloads")
    )
    var maximumConcurrentDownloads: Int = 5

    @Option(name: [.customShort("x"), .customLong("connections")], help: "Connections to use at once (1-64).")
    var connections: Int = 4

    @Option(
        name: .customLong("min-split-size"),
        help: ArgumentHelp("Never split a range below this size. Suffixes K, M, G.", valueName: "size")
    )
    var minimumSplitSize: ByteSizeArgument = ByteSizeArgument(bytes: 1024 * 1024)

    @Option(
        name: .customLong("lowest-speed"),
        help: ArgumentHelp(
            "Restart a connection that stays below this speed per second for --slow-window seconds; after "
                + "--max-tries restarts in a row, give up. Suffixes K, M, G. Default: no floor.",
            valueName: "size"
        )
    )
    var lowestSpeed: ByteSizeArgument?

    @Option(
        name: .customLong("slow-window"),
        help: ArgumentHelp(
            "Seconds a connection is measured before it counts as slow (below --lowest-speed, or below a tenth "
                + "of the other connections' median speed).",
            valueName: "seconds"
        )
    )
    var slowWindow: Double = 3

    @Flag(
        name: .customLong("no-restart-slow"),
        help: "Never restart a connection for being much slower than the others."
    )
    var noRestartSlow = false

    @Option(
        name: .customLong("max-tries"),
        help: "Attempts in a row without progress before a connection gives up."
    )
    var maximumTries: Int = 5

    @Option(
        name: .customLong("retry-wait"),
        help: ArgumentHelp("Seconds before the first retry; doubles each time, with jitter.", valueName: "seconds")
    )
    var retryWait: Double = 0.5

    @Option(
        name: .customLong("timeout"),
        help: ArgumentHelp("Connect time-out, and the longest a connection may stay silent.", valueName: "seconds")
    )
    var timeout: Double = 30

    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp("Extra request header, 'Name: value'. Repeatable.", valueName: "header")
    )
    var headers: [String] = []

    @Option(name: .customLong("user-agent"), help: "The User-Agent header.")
    var userAgent: String?

    @Flag(name: .customLong("overwrite"), help: "Replace the output file if it exists.")
    var overwrite = false

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .customLong("insecure"), help: "Do not verify TLS certificates (test servers only).")
    var insecure = false

    @Option(
        name: .customLong("ca-certificate"),
        help: ArgumentHelp("Trust the certificates in this PEM file instead of the system's.", valueName: "file")
    )
    var caCertificate: String?

    @Flag(name: .customLong("no-resume"), help: "Start from zero even when an earlier run left a partial file.")
    var noResume = false

    @Option(
        name: .customLong("journal-interval"),
        help: ArgumentHelp(
            "Seconds between saves of the resume journal; a crash re-fetches at most what arrived since.",
            valueName: "seconds"
        )
    )
    var journalInterval: Double = 1

    @Option(
        name: .customLong("max-overall-download-limit"),
        help: ArgumentHelp(
            "The most bytes per second over all downloads. Suffixes K, M, G; 0 for no limit.",
            valueName: "size"
        )
    )
    var overallLimit: ByteSizeArgument?

    @Option(
        name: .customLong("max-download-limit"),
        help: ArgumentHelp(
            "The most bytes per second for each download. Suffixes K, M, G; 0 for no limit.",
            valueName: "size"
        )
    )
    var downloadLimit: ByteSizeArgument?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Log what happens to standard error.")
    var verbose = false

    @Option(
        name: .customLong("http-user"),
        help: ArgumentHelp(
            "User name for HTTP Basic authentication; sent only to the first URL's origin, never to a mirror on "
                + "another or after a redirect to another."
        )
    )
    var httpUser: String?

    @Option(name: .customLong("http-passwd"), help: ArgumentHelp("Password for --http-user.", valueName: "password"))
    var httpPassword: String?

    @Option(
        name: .customLong("netrc-path"),
        help: ArgumentHelp(
            "Take credentials by host from this .netrc file instead of ~/.netrc (which is ignored when others can "
                + "read it).",
            valueName: "file"
        )
    )
    var netrcPath: String?

    @Flag(name: .customLong("no-netrc"), help: "Do not read ~/.netrc.")
    var noNetrc = false

    @Option(
        name: .customLong("load-cookies"),
        help: ArgumentHelp("Send the matching cookies of this Netscape cookies.txt file.", valueName: "file")
    )
    var loadCookies: String?

    @Option(
        name: .customLong("save-cookies"),
        help: ArgumentHelp(
            "At the end, write the cookies (those loaded and those the servers set) to this file.",
            valueName: "file"
        )
    )
    var saveCookies: String?

    @Flag(name: .customLong("remote-time"), help: "Give the file the server's modification time (Last-Modified).")
    var remoteTime = false

    @Flag(
        name: .customLong("conditional-get"),
        help: "Download only when the remote file is newer than the output file, and then replace it."
    )
    var conditionalGet = false

    @Option(
        name: .customLong("all-proxy"),
        help: ArgumentHelp(
            "Proxy for every URL: [http://|socks5://|socks5h://][USER:PASSWORD@]HOST[:PORT]. '' for none.",
            valueName: "url"
        )
    )
    var allProxy: String?

    @Option(
        name: .customLong("http-proxy"),
        help: ArgumentHelp("Proxy for http URLs (before --all-proxy).", valueName: "url")
    )
    var httpProxy: String?

    @Option(
        name: .customLong("https-proxy"),
        help: ArgumentHelp("Proxy for https URLs (before --all-proxy).", valueName: "url")
    )
    var httpsProxy: String?

    @Option(
        name: .customLong("no-proxy"),
        help: ArgumentHelp(
            "Reach these directly: comma-separated hosts (with their subdomains), IP addresses, networks "
                + "(10.0.0.0/8), each with an optional :PORT; '*' for all. Replaces NO_PROXY.",
            valueName: "list"
        )
    )
    var noProxy: String?

    @Option(
        name: .customLong("checksum"),
        help: ArgumentHelp(
            "The file's digest, TYPE=DIGEST: sha-256, sha-512, sha-1 or md5, then hexadecimal. The file gets its "
                + "name only if it matches (exit 10 otherwise).",
            valueName: "type=digest"
        )
    )
    var checksum: String?

    func validate() throws {
        if self.output != nil && self.directory != nil {
            throw ValidationError("Give either -o FILE or -d DIR, not both.")
        }
        if self.inputFile != nil && self.metalinkFile != nil {
            throw ValidationError("Give either -i FILE or -M FILE, not both.")
        }
        if self.metalinkFile != nil {
            guard self.urls.isEmpty else { throw ValidationError("Give either URLs or -M FILE, not both.") }
            guard self.output == nil else {
                throw ValidationError("-o names one file; a Metalink names its files itself (use -d DIR).")
            }
        } else if self.inputFile != nil {
            guard self.urls.isEmpty else { throw ValidationError("Give either URLs or -i FILE, not both.") }
            guard self.output == nil else {
                throw ValidationError("-o names one file; with -i, give each entry an 'out=NAME' line instead.")
            }
        } else {
            guard !self.urls.isEmpty else { throw ValidationError("Give a URL to download, or -i FILE.") }
            if self.output != nil, self.followMetalink,
                let url = URL(string: self.urls[0]), Metalink.isMetalink(path: url.path)
            {
                throw ValidationError(
                    "-o names one file; a Metalink names its files itself (use -d DIR, or --follow-metalink=false "
                        + "to save the document)."
                )
            }
        }
        guard (1...1000).contains(self.maximumConcurrentDownloads) else {
            throw ValidationError("-j must be between 1 and 1000.")
        }
        guard (1...64).contains(self.connections) else {
            throw ValidationError("-x must be between 1 and 64.")
        }
        guard self.maximumTries >= 1 else { throw ValidationError("--max-tries must be at least 1.") }
        guard self.retryWait >= 0, self.retryWait.isFinite else {
            throw ValidationError("--retry-wait must be zero or more seconds.")
        }
        guard self.timeout > 0, self.timeout.isFinite else {
            throw ValidationError("--timeout must be more than zero seconds.")
        }
        guard self.slowWindow >= 0.1, self.slowWindow <= 86_400 else {
            throw ValidationError("--slow-window must be between 0.1 and 86400 seconds.")
        }
        if let lowest = self.lowestSpeed, lowest.bytes < 1 {
            throw ValidationError("--lowest-speed must be at least 1 byte per second.")
        }
        guard self.journalInterval >= 0.01, self.journalInterval.isFinite else {
            throw ValidationError("--journal-interval must be at least 0.01 seconds.")
        }
        if let checksum, Checksum(parsing: checksum) == nil {
            throw ValidationError(
                "--checksum takes TYPE=DIGEST (sha-256, sha-512, sha-1 or md5, then the digest in hexadecimal), not "
                    + "'\(checksum)'."
            )
        }
        for header in self.headers where HTTPHeaderField(parsing: header) == nil {
            throw ValidationError("'\(header)' is not a header; write 'Name: value'.")
        }
        try self.validateCredentialOptions()
        do {
            try self.proxySettings().validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The proxies: the options when any is given (curl's `-x`), else the environment variables curl reads;
    /// `--no-proxy` replaces `NO_PROXY`, which applies to the options' proxies too.
    private func proxySettings() throws(DownloadError) -> ProxySettings {
        let environment = ProcessInfo.processInfo.environment
        guard self.allProxy != nil || self.httpProxy != nil || self.httpsProxy != nil else {
            var settings = try ProxySettings.fromEnvironment(environment)
            if let noProxy { settings.noProxy = ProxySettings.noProxyEntries(noProxy) }
            return settings
        }
        func parse(_ value: String?, option: String) throws(DownloadError) -> ProxyURL? {
            guard let value, !value.isEmpty else { return nil }
            do {
                return try ProxyURL(parsing: value)
            } catch {
                throw DownloadError(code: .invalidRequest, message: "\(option): \(error.message)")
            }
        }
        var settings = try ProxySettings.fromEnvironment(environment.filter { $0.key.lowercased() == "no_proxy" })
        settings.all = try parse(self.allProxy, option: "--all-proxy")
        settings.http = try parse(self.httpProxy, option: "--http-proxy")
        settings.https = try parse(self.httpsProxy, option: "--https-proxy")
        if let noProxy { settings.noProxy = ProxySettings.noProxyEntries(noProxy) }
        return settings
    }

    func run() async throws {
        var logger = Logger(label: "downpour")
        logger.logLevel = self.verbose ? .debug : .warning
        if self.verbose {
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            logger = Logger(label: "downpour")
            logger.logLevel = .debug
        }
        var engine = Downloader.Configuration()
        engine.maximumOverallRate = self.overallLimit.flatMap { $0.bytes > 0 ? $0.bytes : nil }

        let batch: [BatchRunner.Entry]?
        if let metalinkFile {
            batch = try self.metalinkEntries(from: self.readMetalink(at: metalinkFile), source: metalinkFile)
        } else if let inputFile {
            batch = try self.batchEntries(from: inputFile)
        } else {
            batch = nil
        }
        if let entries = batch {
            try await self.runBatch(entries, engine: engine, logger: logger)
            return
        }

        let request: DownloadRequest
        do {
            // Several URLs are mirrors of one file; each is checked as the first is.
            var configuration = self.downloadConfiguration
            configuration.followsMetalink = self.followMetalink
            var built = try Aria2Options(directory: ".", configuration: configuration).request(uris: self.urls)
            built.destination = self.destination
            request = built
            try request.configuration.validate()
        } catch {
            writeError("downpour: \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
        let (status, metalink) = await withDownloader(configuration: engine, logger: logger) { downloader in
            let download = downloader.download(request)
            let (status, result) = await self.runOne(download)
            let saved = self.saveCookies(download.cookies) || status != ExitStatus.success ? status : ExitStatus.localIO
            return (saved, result?.metalink)
        }
        if status != ExitStatus.success { throw ExitCode(status) }
        if let metalink {
            // The URL was a Metalink document: its files now, as with -M.
            guard self.output == nil else {
                writeError(
                    "downpour: \(self.urls[0]) is a Metalink document, which names its files itself; use -d DIR "
                        + "instead of -o, or --follow-metalink=false to save the document."
                )
                throw ExitCode(ExitStatus.usage)
            }
            let entries = try self.metalinkEntries(from: metalink, source: self.urls[0])
            try await self.runBatch(entries, engine: engine, logger: logger)
        }
    }

    /// Runs `entries`, `-j` at a time; throws the exit status unless every one succeeded.
    private func runBatch(
        _ entries: [BatchRunner.Entry],
        engine: Downloader.Configuration,
        logger: Logger
    ) async throws {
        let cookies = CookieCollector(self.downloadConfiguration.cookies)
        var status = await withDownloader(configuration: engine, logger: logger) { downloader in
            var runner = BatchRunner(
                entries: entries,
                concurrency: self.maximumConcurrentDownloads,
                downloader: downloader,
                renderer: BatchRenderer(mode: self.renderMode)
            )
            runner.metalinkLocations = self.metalinkLocations
            runner.cookiesCollected = { cookies.add($0) }
            return await runner.run()
        }
        if !self.saveCookies(cookies.merged), status == ExitStatus.success { status = ExitStatus.localIO }
        if status != ExitStatus.success { throw ExitCode(status) }
    }

    private var renderMode: ProgressRenderer.Mode {
        self.quiet ? .quiet : (isatty(STDOUT_FILENO) != 0 ? .terminal : .lines)
    }

    /// Runs one download with a live progress line; returns the exit status, and the result when it succeeded.
    private func runOne(_ download: Download) async -> (Int32, DownloadResult?) {
        let renderer = ProgressRenderer(mode: self.renderMode)
        let rendering = Task {
            for await event in download.events {
                renderer.render(event)
            }
        }
        let running = Task { () async -> Result<DownloadResult, DownloadError> in
            do throws(DownloadError) {
                return .success(try await download.run())
            } catch {
                return .failure(error)
            }
        }
        // Ctrl-C or SIGTERM: stop gracefully (data written, journal saved). A second one: leave at once; the
        // journal on disk is consistent at every moment.
        let interruptions = InterruptionHandler {
            running.cancel()
        }
        defer { interruptions.stop() }
        let outcome = await running.value
        await rendering.value
        switch outcome {
        case .success(let result):
            return (ExitStatus.success, result)
        case .failure(let error):
            for line in Remedy.lines(for: error) { writeError(line) }
            return (ExitStatus.code(for: error), nil)
        }
    }

    /// The input file's entries as requests, with the command line's options as defaults. A bad entry is a
    /// usage error naming its line; nothing is downloaded then.
    private func batchEntries(from path: String) throws -> [BatchRunner.Entry] {
        let text: String
        do {
            if path == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                text = try String(contentsOfFile: path, encoding: .utf8)
            }
        } catch {
            writeError("downpour: cannot read the input file '\(path)': \(error.localizedDescription)")
            throw ExitCode(ExitStatus.usage)
        }
        let input: InputFile
        do {
            input = try InputFile(parsing: text)
        } catch {
            writeError("downpour: \(path): \(error.description)")
            throw ExitCode(ExitStatus.usage)
        }
        guard !input.entries.isEmpty else {
            writeError("downpour: \(path) lists no URLs.")
            throw ExitCode(ExitStatus.usage)
        }
        var defaults = Aria2Options(directory: self.directory ?? ".", configuration: self.downloadConfiguration)
        // An entry whose URL is a Metalink is followed (its files join the batch) unless `--follow-metalink=false`
        // or the entry's own `follow-metalink=false` says otherwise.
        defaults.configuration.followsMetalink = self.followMetalink
        var entries: [BatchRunner.Entry] = []
        for entry in input.entries {
            var options = defaults
            do throws(DownloadError) {
                for option in entry.options {
                    do throws(DownloadError) {
                        try options.apply(name: option.name, value: option.value)
                    } catch {
                        throw DownloadError(code: error.code, message: "line \(option.line): \(error.message)")
                    }
                }
                let request = try options.request(uris: entry.uris)
                try request.configuration.validate()
                entries.append(BatchRunner.Entry(line: entry.line, request: request))
            } catch {
                let message = error.message.hasPrefix("line ") ? error.message : "line \(entry.line): \(error.message)"
                writeError("downpour: \(path): \(message)")
                throw ExitCode(ExitStatus.usage)
            }
        }
        return entries
    }

    /// The Metalink document in the file at `path`; a usage error when it cannot be read or parsed.
    private func readMetalink(at path: String) throws -> Metalink {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            writeError("downpour: cannot read the Metalink file '\(path)': \(error.localizedDescription)")
            throw ExitCode(ExitStatus.usage)
        }
        do {
            return try Metalink(parsing: data)
        } catch {
            writeError("downpour: \(path): \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
    }

    /// The files of a Metalink document as batch entries (``BatchRunner/Entry/metalinkFiles(of:options:locations:line:origin:)``)
    /// inside `-d`, with `--checksum` over the files' own digests. `source` names the document in messages.
    private func metalinkEntries(from metalink: Metalink, source path: String) throws -> [BatchRunner.Entry] {
        do throws(DownloadError) {
            return try BatchRunner.Entry.metalinkFiles(
                of: metalink,
                options: Aria2Options(directory: self.directory ?? ".", configuration: self.downloadConfiguration),
                locations: self.metalinkLocations,
                line: { $0 + 1 }
            )
        } catch {
            writeError("downpour: \(path): \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
    }

    /// `--metalink-location` as a list of country codes.
    private var metalinkLocations: [String] {
        (self.metalinkLocation ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private var destination: DownloadRequest.Destination {
        if let output { return .file(output) }
        return .directory(self.directory ?? ".")
    }

    private var downloadConfiguration: DownloadConfiguration {
        var configuration = DownloadConfiguration()
        configuration.connections = self.connections
        configuration.minimumSplitSize = self.minimumSplitSize.bytes
        configuration.slowConnections = .init(
            shareOfMedian: self.noRestartSlow ? nil : 0.1,
            lowestSpeed: self.lowestSpeed?.bytes,
            window: .milliseconds(Int64((self.slowWindow * 1000).rounded()))
        )
        configuration.retry.maximumTries = self.maximumTries
        configuration.retry.wait = .milliseconds(Int64(self.retryWait * 1000))
        configuration.timeouts = .init(
            connect: .milliseconds(Int64(self.timeout * 1000)),
            idleRead: .milliseconds(Int64(self.timeout * 1000))
        )
        configuration.headers = self.headers.compactMap(HTTPHeaderField.init(parsing:))
        if let userAgent { configuration.userAgent = userAgent }
        configuration.overwrite = self.overwrite
        configuration.tls = .init(verifyCertificates: !self.insecure, trustedCertificatesPath: self.caCertificate)
        configuration.resume = !self.noResume
        configuration.journalInterval = .milliseconds(Int64(self.journalInterval * 1000))
        configuration.maximumRate = self.downloadLimit.flatMap { $0.bytes > 0 ? $0.bytes : nil }
        self.applyCredentialOptions(to: &configuration)
        // validate() has parsed them already.
        configuration.proxy = (try? self.proxySettings()) ?? ProxySettings()
        configuration.checksum = self.checksum.flatMap(Checksum.init(parsing:))
        return configuration
    }
}

/// A byte count given as `1048576`, `512K`, `1M` or `1G`.
struct ByteSizeArgument: ExpressibleByArgument, Sendable {
    var bytes: Int64

    init(bytes: Int64) {
        self.bytes = bytes
    }

    init?(argument: String) {
        guard let bytes = ByteCount.parse(argument) else { return nil }
        self.bytes = bytes
    }

    var defaultValueDescription: String {
        self.bytes % (1024 * 1024) == 0 ? "\(self.bytes / (1024 * 1024))M" : "\(self.bytes)"
    }
}
