import ArgumentParser
import Downpour
import DownpourAria2
import DownpourQueue
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
            on a line are mirrors of that file), '#' starts a comment, and indented NAME=VALUE lines under a URL \
            set that download's options (the download options below, by aria2's names). The command line's options \
            are every entry's defaults. \
            With -M FILE, every file of a Metalink document (v4, RFC 5854, or v3) is downloaded the same way, \
            each from all its URLs (mirrors, best first), named as the document names it (inside -d) and checked \
            against its digest and the digests of its pieces (a bad piece is fetched again, that piece only; the \
            file gets its name only when every piece and the whole file match). A URL whose path ends in .meta4 or \
            .metalink, or that answers with Content-Type application/metalink4+xml or application/metalink+xml, is \
            such a document too: it is read (at most 4 MiB), not saved, and its files are downloaded as with -M, \
            unless --follow-metalink=false; in a -i FILE its files join the batch (inside the entry's dir) unless \
            the entry says follow-metalink=false. \
            A URL that answers with an HLS playlist (a body that starts with #EXTM3U and has an #EXT-X- tag) is \
            fetched as one video: the variant --media-video names (the highest bandwidth by default), its segments -x at a \
            time, decrypted when the playlist uses AES-128, written in order to NAME.ts (or NAME.mp4 for fMP4) \
            through NAME.part; the segments wait in NAME.hls/ until then, so the same command run again fetches only \
            the missing ones. A separate audio rendition goes to NAME.audio.EXT unless --media-audio=none, subtitles to \
            NAME.LANGUAGE.vtt with --media-subtitles=LANGS|all; \
            --media=file (or -o NAME.m3u8) saves the playlist itself. A live playlist (no #EXT-X-ENDLIST) is \
            recorded until it ends, Ctrl-C or --media-record-time seconds, and what is whole is saved. \
            The exit status is 0 only when every download succeeded; otherwise it is the status of the first \
            failed entry, and the summary names each failure.

            Proxies: without --all-proxy, --http-proxy or --https-proxy, the variables curl reads are used \
            (http_proxy, https_proxy or HTTPS_PROXY, all_proxy or ALL_PROXY, no_proxy or NO_PROXY); with any of \
            them, the proxy variables are ignored. A proxy is [http://|socks5://|socks5h://][USER:PASSWORD@]HOST\
            [:PORT] (port 1080 when left out); an HTTP proxy carries http and https alike in CONNECT tunnels.

            aria2's options are taken as aria2c takes them, on the command line (--NAME=VALUE, --NAME VALUE, a \
            flag alone for true, the short names) and from a configuration file in aria2's format: --conf-path \
            FILE, else $XDG_CONFIG_HOME/downpour/downpour.conf when it exists (--no-conf: none). The command line \
            wins over the file; the file's options Downpour does not have are named once and ignored, the daemon's \
            passed over. The on-download-* hooks run a program with a GID of the download, 1 and the file's path, \
            without a shell and without waiting for it.

            Options:
            """ + "\n"
                + Aria2Arguments.help(for: .get, base: (try? GetCommand.base(environment: ["HOME": "~"])) ?? .init())
    )

    @OptionGroup var flags: Aria2Flags

    /// What `get` starts from before its options: the library's defaults, a connect time-out as long as the read
    /// one (30 s, as `--timeout` has always meant both), Metalinks followed, `~/.netrc` read, and the proxy
    /// variables curl reads.
    static func base(environment: [String: String]) throws(DownloadError) -> Aria2DownloadSettings {
        var configuration = DownloadConfiguration()
        configuration.timeouts.connect = configuration.timeouts.idleRead
        configuration.followsMetalink = true
        configuration.followsPlaylists = true
        if let home = environment["HOME"], !home.isEmpty {
            configuration.netrcPath = (home.hasSuffix("/") ? home : home + "/") + ".netrc"
        }
        configuration.proxy = try ProxySettings.fromEnvironment(environment)
        return Aria2DownloadSettings(directory: ".", configuration: configuration)
    }

    /// The options checked before `run`, so that a mistake is a usage error with get's usage line (the notice of
    /// the configuration file's unknown options waits for `run`).
    func validate() throws {
        _ = try self.plan(reportingUnknown: false)
    }

    func plan(reportingUnknown: Bool = true) throws -> GetPlan {
        try GetPlan(
            Aria2Arguments.resolve(self.flags.words, for: .get, reportingUnknown: reportingUnknown),
            environment: ProcessInfo.processInfo.environment
        )
    }

    func run() async throws {
        let plan = try self.plan()
        var logger = Logger(label: "downpour")
        logger.logLevel = .warning
        if plan.verbose {
            LoggingSystem.bootstrap { LineLogHandler.standardError(label: $0) }
            logger = Logger(label: "downpour")
            logger.logLevel = .debug
        }
        var engine = Downloader.Configuration()
        engine.maximumOverallRate = plan.overallLimit

        let batch: [BatchRunner.Entry]?
        if let metalinkFile = plan.metalinkFile {
            batch = try plan.metalinkEntries(from: Self.readMetalink(at: metalinkFile), source: metalinkFile)
        } else if let inputFile = plan.inputFile {
            batch = try plan.batchEntries(from: inputFile)
        } else {
            batch = nil
        }
        if let entries = batch {
            try await plan.runBatch(entries, engine: engine, logger: logger)
            return
        }

        let request: DownloadRequest
        do {
            // Several URLs are mirrors of one file; each is checked as the first is.
            var built = try plan.options.request(uris: plan.urls)
            built.destination = plan.destination
            request = built
            try request.configuration.validate()
        } catch {
            writeError("downpour: \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
        let (status, metalink) = await withDownloader(configuration: engine, logger: logger) { downloader in
            let download = downloader.download(request)
            let (status, result) = await plan.runOne(download, request: request, downloader: downloader, logger: logger)
            let saved = plan.saveCookies(download.cookies) || status != ExitStatus.success ? status : ExitStatus.localIO
            return (saved, result?.metalink)
        }
        if status != ExitStatus.success { throw ExitCode(status) }
        if let metalink {
            // The URL was a Metalink document: its files now, as with -M.
            guard plan.output == nil else {
                writeError(
                    "downpour: \(plan.urls[0]) is a Metalink document, which names its files itself; use -d DIR "
                        + "instead of -o, or --follow-metalink=false to save the document."
                )
                throw ExitCode(ExitStatus.usage)
            }
            let entries = try plan.metalinkEntries(from: metalink, source: plan.urls[0])
            try await plan.runBatch(entries, engine: engine, logger: logger)
        }
    }

    /// The Metalink document in the file at `path`; a usage error when it cannot be read or parsed.
    static func readMetalink(at path: String) throws -> Metalink {
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
}

/// What one run of `get` does, read from its options (``Aria2Arguments``) and checked before anything starts.
struct GetPlan: Sendable {
    /// The URLs of the command line: mirrors of one file.
    var urls: [String]
    /// `-o`: a path, as curl's (inside `-d` when both are given and it is a relative name).
    var output: String?
    var directory: String?
    var inputFile: String?
    var metalinkFile: String?
    /// Every download's options: the configuration file's and the command line's over ``GetCommand/base(environment:)``.
    var options: Aria2DownloadSettings
    var concurrency: Int
    var overallLimit: Int64?
    var quiet: Bool
    var verbose: Bool
    var hooks: Hooks
    var loadCookiesPath: String?
    var saveCookiesPath: String?

    /// - Throws: `ValidationError` for options that do not go together or cannot be used.
    init(_ settings: Aria2Arguments, environment: [String: String]) throws {
        self.urls = settings.operands
        self.output = settings.options.last { $0.name == Aria2Option.out.name }?.value
        self.directory = settings.value(.dir)
        self.inputFile = settings.value(.inputFile)
        self.metalinkFile = settings.value(.metalinkFile)
        self.concurrency = settings.value(.maxConcurrentDownloads).flatMap { Int($0) } ?? 5
        self.overallLimit = settings.value(.maxOverallDownloadLimit).flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil }
        self.quiet = settings.flag(.quiet)
        self.verbose = settings.flag(.verbose)
        self.hooks = Hooks(settings)
        self.loadCookiesPath = settings.value(.loadCookies)
        self.saveCookiesPath = settings.value(.saveCookies)

        // As curl's -x: a proxy given replaces the proxy variables (NO_PROXY still applies), which are then not
        // read at all (a bad one does not matter).
        let givesProxy = settings.gives(.allProxy, .httpProxy, .httpsProxy)
        var base: Aria2DownloadSettings
        do {
            base = try GetCommand.base(
                environment: givesProxy
                    ? environment.filter { $0.key == "HOME" || $0.key.lowercased() == "no_proxy" } : environment
            )
        } catch {
            throw ValidationError(error.message)
        }
        if let path = settings.value(.netrcPath) { base.configuration.netrcPath = path }
        if let path = self.loadCookiesPath {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            base.configuration.cookies = CookieJar(netscapeFormat: text)
        } else if self.saveCookiesPath != nil {
            base.configuration.cookies = CookieJar()
        }
        self.options = try settings.applyingDownloadOptions(to: base, except: [Aria2Option.out.name])
        // -o NAME.m3u8 (or .m3u) names a playlist to save, unless --media says otherwise.
        if let output = self.output, !settings.gives(.media),
            ["m3u8", "m3u"].contains((output as NSString).pathExtension.lowercased())
        {
            self.options.configuration.followsPlaylists = false
        }
        try self.validate(settings)
    }

    private func validate(_ settings: Aria2Arguments) throws {
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
            if self.output != nil, self.options.configuration.followsMetalink,
                let url = URL(string: self.urls[0]), Metalink.isMetalink(path: url.path)
            {
                throw ValidationError(
                    "-o names one file; a Metalink names its files itself (use -d DIR, or --follow-metalink=false "
                        + "to save the document)."
                )
            }
        }
        if let output, output.isEmpty { throw ValidationError("-o takes a file name, not ''.") }
        if let output, settings.givenOnCommandLine.contains(Aria2Option.dir.name),
            !DownloadRequest.Destination.staysInside(output)
        {
            throw ValidationError(
                "-o '\(output)' is not a name inside -d: give -o a name (or a relative path) inside -d, or a path "
                    + "without -d."
            )
        }
        try self.validateCredentials(settings)
    }

    /// Where the one download of the command line goes: `-o` as a path (inside `-d` when it is a relative name and
    /// `-d` is given, as aria2 joins them; an absolute `-o` wins over a configuration file's `dir`), else `-d` under
    /// the server's name.
    var destination: DownloadRequest.Destination {
        guard let output else { return .directory(self.options.directory) }
        if let directory, DownloadRequest.Destination.staysInside(output) { return .named(output, in: directory) }
        return .file(output)
    }

    var renderMode: ProgressRenderer.Mode {
        self.quiet ? .quiet : (isatty(STDOUT_FILENO) != 0 ? .terminal : .lines)
    }

    /// Runs `entries`, `-j` at a time; throws the exit status unless every one succeeded.
    func runBatch(_ entries: [BatchRunner.Entry], engine: Downloader.Configuration, logger: Logger) async throws {
        let cookies = CookieCollector(self.options.configuration.cookies)
        var status = await withDownloader(configuration: engine, logger: logger) { downloader in
            var runner = BatchRunner(
                entries: entries,
                concurrency: self.concurrency,
                downloader: downloader,
                renderer: BatchRenderer(mode: self.renderMode)
            )
            runner.metalinkLocations = self.options.metalinkLocations
            runner.cookiesCollected = { cookies.add($0) }
            runner.hooks = self.hooks.isEmpty ? nil : (self.hooks, logger)
            return await runner.run()
        }
        if !self.saveCookies(cookies.merged), status == ExitStatus.success { status = ExitStatus.localIO }
        if status != ExitStatus.success { throw ExitCode(status) }
    }

    /// Runs one download with a live progress line and its hooks; returns the exit status, and the result when it
    /// succeeded. A URL that is an HLS playlist goes on with its segments (``fetchVideo(_:of:request:downloader:renderer:logger:)``)
    /// before the hooks run, with the video's path.
    func runOne(
        _ download: Download,
        request: DownloadRequest,
        downloader: Downloader,
        logger: Logger
    ) async -> (Int32, DownloadResult?) {
        let renderer = ProgressRenderer(mode: self.renderMode)
        let hooks = self.hooks
        let gid = InputGID.random()
        // Renders the events and runs the start hook; returns the file's path once known.
        let rendering = Task { () -> String? in
            var path: String?
            for await event in download.events {
                if case .started(let start) = event {
                    path = start.destinationPath
                    hooks.run(.start, gid: gid, path: start.destinationPath, logger: logger)
                }
                renderer.render(event)
            }
            return path
        }
        let running = Task { () async -> Result<DownloadResult, DownloadError> in
            do throws(DownloadError) {
                let result = try await download.run()
                guard let playlist = result.playlist else { return .success(result) }
                // The cookies the playlist's answer set go with its segments.
                var request = request
                if let jar = download.cookies { request.configuration.cookies = jar }
                return .success(
                    try await self.fetchVideo(
                        playlist,
                        of: result,
                        request: request,
                        downloader: downloader,
                        renderer: renderer,
                        logger: logger
                    )
                )
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
        let path = await rendering.value
        hooks.run(outcome, gid: gid, path: path, logger: logger)
        switch outcome {
        case .success(let result):
            return (ExitStatus.success, result)
        case .failure(let error):
            for line in Remedy.lines(for: error) { writeError(line) }
            return (ExitStatus.code(for: error), nil)
        }
    }

    /// The input file's entries as requests, with the command's options as defaults. A bad entry is a usage error
    /// naming its line; nothing is downloaded then.
    func batchEntries(from path: String) throws -> [BatchRunner.Entry] {
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
        var entries: [BatchRunner.Entry] = []
        for entry in input.entries {
            var options = self.options
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
                var batchEntry = BatchRunner.Entry(line: entry.line, request: request)
                batchEntry.metalinkLocations = options.metalinkLocations
                batchEntry.playlistOptions = options.playlistOptions
                entries.append(batchEntry)
            } catch {
                let message = error.message.hasPrefix("line ") ? error.message : "line \(entry.line): \(error.message)"
                writeError("downpour: \(path): \(message)")
                throw ExitCode(ExitStatus.usage)
            }
        }
        return entries
    }

    /// The files of a Metalink document as batch entries (``BatchRunner/Entry/metalinkFiles(of:options:line:origin:)``)
    /// inside `-d`, with `--checksum` over the files' own digests. `source` names the document in messages.
    func metalinkEntries(from metalink: Metalink, source path: String) throws -> [BatchRunner.Entry] {
        do throws(DownloadError) {
            return try BatchRunner.Entry.metalinkFiles(of: metalink, options: self.options, line: { $0 + 1 })
        } catch {
            writeError("downpour: \(path): \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
    }
}
