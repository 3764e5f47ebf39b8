/// How one download behaves. Every field has a sensible default; change the ones you care about.
///
/// `Codable`, so a download manager can store a request with its options. What belongs to the engine that
/// many downloads share (event loops, limits across downloads) is in ``Downloader/Configuration``.
public struct DownloadConfiguration: Sendable, Hashable, Codable {
    /// How many connections fetch ranges in parallel. At least 1.
    public var connections: Int
    /// No range is split into pieces shorter than this many bytes.
    public var minimumSplitSize: Int64
    /// When nothing is left to split, let an idle connection race the slowest one for its remaining bytes
    /// (the first to finish wins), so one slow connection does not decide when the download ends.
    public var racesTail: Bool
    /// Restarting connections that stay far slower than the others.
    public var slowConnections: SlowConnections
    /// Retries of failed requests.
    public var retry: Retry
    /// Connection and read time-outs.
    public var timeouts: Timeouts
    /// Extra request headers, sent on every request to the origin they were given for.
    public var headers: [HTTPHeaderField]
    /// The `User-Agent` header.
    public var userAgent: String
    /// Replace an existing output file instead of failing with ``DownloadError/Code/outputExists``.
    public var overwrite: Bool
    /// When a file of the output's name exists and no partial download of ours belongs to that name, save as
    /// `NAME.1.EXT`, `NAME.2.EXT`, ... instead of failing with ``DownloadError/Code/outputExists`` (aria2's
    /// `auto-file-renaming`). ``DownloadResult/path`` says which name it got. A file is never taken as a partial
    /// download unless its journal is there. `false` by default; ``overwrite`` comes first.
    public var renamesExisting: Bool
    /// Certificate checks for HTTPS.
    public var tls: TLS
    /// The most redirects followed before giving up.
    public var maximumRedirects: Int
    /// Bytes gathered per connection before one positional write to disk.
    public var writeBufferSize: Int
    /// How often progress events are sent.
    public var progressInterval: Duration
    /// Continue from `NAME.part` and its journal when an earlier run left them, after checking that the
    /// remote file is still the same. `false` always starts from zero.
    public var resume: Bool
    /// How often the resume journal is saved (the data is synced to disk first). A crash loses at most what
    /// arrived since the last save.
    public var journalInterval: Duration
    /// The most bytes per second this download may fetch, over all its connections; `nil` for no limit. The
    /// ``Downloader``'s overall limit applies as well. ``Download/setMaximumRate(_:)`` changes it while running.
    public var maximumRate: Int64?
    /// A user name and password for HTTP Basic authentication, sent only to the origin (scheme, host and port)
    /// of the requested URL, never to another one after a redirect. Credentials in the URL itself
    /// (`https://user:password@host/`) take precedence.
    public var credentials: Credentials?
    /// A `.netrc` file to take credentials from, by host, when neither the URL nor ``credentials`` has any;
    /// `nil` (the default) reads none. A missing file is passed over; one that the group or others may read is
    /// ignored with a ``DownloadEvent/notice(_:)``.
    public var netrcPath: String?
    /// The cookies to send, each only where its domain, path, `secure` flag and expiry allow; `nil` (the
    /// default) uses no cookies at all. With a jar, even an empty one, the `Set-Cookie` headers of the servers
    /// are taken in and sent on later requests of the download; ``Download/cookies`` has the jar afterwards.
    public var cookies: CookieJar?
    /// Give the finished file the modification time the server reports (`Last-Modified`), as `curl -R` does.
    public var setsRemoteTime: Bool
    /// Download only when the remote file is newer than the local one: an output file at least as new as the
    /// server's `Last-Modified` is kept and the download ends at once (``DownloadResult/wasSkipped``); an older
    /// one is replaced, even without ``overwrite``. Without a `Last-Modified` the download goes ahead as usual.
    public var conditionalGet: Bool
    /// The proxies requests go through, chosen for each request by its URL; none by default. The environment
    /// is not read: ``ProxySettings/fromEnvironment(_:)`` does that for a program that wants it.
    public var proxy: ProxySettings
    /// The digest the file must have. The bytes are hashed as they arrive, and the file gets its final name only
    /// when the digest matches; otherwise the download fails with ``DownloadError/Code/checksumMismatch``, after
    /// one more try from zero when the bytes came from several responses or an earlier run. `nil` (the default)
    /// still verifies a digest the server sends (`Repr-Digest`, `Digest`).
    public var checksum: Checksum?
    /// The digests of the file's pieces (a Metalink's `<pieces>`). Each piece is hashed once its bytes are in; a
    /// piece that does not match is fetched again, that piece only (up to three fetches), and the file gets its
    /// final name only when every piece matches; else the download fails with
    /// ``DownloadError/Code/checksumMismatch``. `nil` (the default) checks no pieces.
    public var pieceChecksums: PieceChecksums?
    /// The length the file must have (a Metalink's `<size>`); a server that reports another length fails the
    /// download with ``DownloadError/Code/remoteChanged`` before anything is written. `nil` (the default) takes the
    /// server's length.
    public var expectedLength: Int64?
    /// When the URL answers with a Metalink document (`Content-Type: application/metalink4+xml` or
    /// `application/metalink+xml`, or a path ending in `.meta4` or `.metalink`), read the document instead of
    /// saving it: the download ends with ``DownloadResult/metalink`` and no file. A document larger than
    /// ``Metalink/maximumDocumentLength`` fails with ``DownloadError/Code/invalidRequest``. `false` (the default)
    /// saves it as any other file.
    public var followsMetalink: Bool
    /// When the URL answers with an HLS playlist (a media type of ``PlaylistDocument/mediaTypes``, a path ending in
    /// `.m3u8`, or a body starting with `#EXTM3U`), read the document instead of saving it: the download ends with
    /// ``DownloadResult/playlist`` and no file, and the `DownpourHLS` module fetches what it lists. A document larger
    /// than ``PlaylistDocument/maximumDocumentLength`` fails with ``DownloadError/Code/invalidRequest``. `false`
    /// (the default) saves it as any other file.
    public var followsPlaylists: Bool

    public init(
        connections: Int = 4,
        minimumSplitSize: Int64 = 1024 * 1024,
        racesTail: Bool = true,
        slowConnections: SlowConnections = SlowConnections(),
        retry: Retry = Retry(),
        timeouts: Timeouts = Timeouts(),
        headers: [HTTPHeaderField] = [],
        userAgent: String = "downpour/0.1",
        overwrite: Bool = false,
        renamesExisting: Bool = false,
        tls: TLS = TLS(),
        maximumRedirects: Int = 10,
        writeBufferSize: Int = 256 * 1024,
        progressInterval: Duration = .milliseconds(250),
        resume: Bool = true,
        journalInterval: Duration = .seconds(1),
        maximumRate: Int64? = nil,
        credentials: Credentials? = nil,
        netrcPath: String? = nil,
        cookies: CookieJar? = nil,
        setsRemoteTime: Bool = false,
        conditionalGet: Bool = false,
        proxy: ProxySettings = ProxySettings(),
        checksum: Checksum? = nil,
        pieceChecksums: PieceChecksums? = nil,
        expectedLength: Int64? = nil,
        followsMetalink: Bool = false,
        followsPlaylists: Bool = false
    ) {
        self.connections = connections
        self.minimumSplitSize = minimumSplitSize
        self.racesTail = racesTail
        self.slowConnections = slowConnections
        self.retry = retry
        self.timeouts = timeouts
        self.headers = headers
        self.userAgent = userAgent
        self.overwrite = overwrite
        self.renamesExisting = renamesExisting
        self.tls = tls
        self.maximumRedirects = maximumRedirects
        self.writeBufferSize = writeBufferSize
        self.progressInterval = progressInterval
        self.resume = resume
        self.journalInterval = journalInterval
        self.maximumRate = maximumRate
        self.credentials = credentials
        self.netrcPath = netrcPath
        self.cookies = cookies
        self.setsRemoteTime = setsRemoteTime
        self.conditionalGet = conditionalGet
        self.proxy = proxy
        self.checksum = checksum
        self.pieceChecksums = pieceChecksums
        self.expectedLength = expectedLength
        self.followsMetalink = followsMetalink
        self.followsPlaylists = followsPlaylists
    }

    /// The smallest remainder worth a racing request.
    var minimumRaceSize: Int64? {
        self.racesTail ? max(16 * 1024, self.minimumSplitSize / 4) : nil
    }

    /// Checks the values; the error says which one is wrong.
    public func validate() throws(DownloadError) {
        guard (1...64).contains(self.connections) else {
            throw .invalidRequest("The number of connections must be between 1 and 64, not \(self.connections).")
        }
        guard self.minimumSplitSize >= 1024 else {
            throw .invalidRequest("The minimum split size must be at least 1K, not \(self.minimumSplitSize) bytes.")
        }
        guard self.retry.maximumTries >= 1 else {
            throw .invalidRequest("The number of tries must be at least 1, not \(self.retry.maximumTries).")
        }
        guard self.retry.wait >= .zero else {
            throw .invalidRequest("The retry wait must not be negative.")
        }
        guard self.timeouts.connect > .zero, self.timeouts.idleRead > .zero else {
            throw .invalidRequest("Time-outs must be positive.")
        }
        guard self.journalInterval >= .milliseconds(10) else {
            throw .invalidRequest("The journal interval must be at least 0.01 seconds.")
        }
        guard self.writeBufferSize >= 4096 else {
            throw .invalidRequest("The write buffer must be at least 4096 bytes.")
        }
        if let share = self.slowConnections.shareOfMedian, !(share > 0 && share < 1) {
            throw .invalidRequest(
                "The share of the median speed for slow connections must be between 0 and 1, not \(share)."
            )
        }
        if let lowest = self.slowConnections.lowestSpeed, lowest < 1 {
            throw .invalidRequest("The lowest speed must be at least 1 byte per second, not \(lowest).")
        }
        guard self.slowConnections.window >= .milliseconds(100) else {
            throw .invalidRequest("The window for judging slow connections must be at least 0.1 seconds.")
        }
        if let rate = self.maximumRate, rate < 1 {
            throw .invalidRequest("The rate limit must be at least 1 byte per second, not \(rate).")
        }
        for header in self.headers {
            try header.validate()
        }
        if let user = self.credentials?.user, user.contains(":") {
            throw .invalidRequest("A user name for Basic authentication cannot contain ':'.")
        }
        try self.proxy.validate()
        try self.checksum?.validate()
        try self.pieceChecksums?.validate()
        if let length = self.expectedLength {
            guard length >= 0 else {
                throw .invalidRequest("The expected length must not be negative, not \(length).")
            }
            if let pieces = self.pieceChecksums, !pieces.possibleLengths.contains(length) {
                throw .invalidRequest(
                    "\(pieces.count) pieces of \(pieces.pieceLength) bytes cannot make a file of \(length) bytes."
                )
            }
        }
    }
}

extension DownloadConfiguration {
    /// When and how often a failed request is tried again.
    public struct Retry: Sendable, Hashable, Codable {
        /// How many attempts in a row may fail without delivering a single new byte before a connection gives up.
        /// An attempt that delivers bytes before it fails starts the count again.
        public var maximumTries: Int
        /// The wait before the first retry; each further retry waits twice as long, up to ``maximumWait``,
        /// with random jitter.
        public var wait: Duration
        /// The longest wait between two tries, also the cap on a server's `Retry-After`.
        public var maximumWait: Duration
        /// Retry a connection refused by a host the download has not reached yet. Off by default, as in curl,
        /// wget and aria2c: nothing listens there, and a list of dead links ends at once. (A refusal from a host
        /// that answered before, a restart in progress, is always retried.)
        public var retriesRefusedConnections: Bool
        /// How many `404 Not Found` or `410 Gone` answers a download takes before it fails (aria2's
        /// `max-file-not-found`); 0, the default, fails it at the first, as curl, wget and aria2c do.
        public var fileNotFoundTries: Int

        public init(
            maximumTries: Int = 5,
            wait: Duration = .milliseconds(500),
            maximumWait: Duration = .seconds(60),
            retriesRefusedConnections: Bool = false,
            fileNotFoundTries: Int = 0
        ) {
            self.maximumTries = maximumTries
            self.wait = wait
            self.maximumWait = maximumWait
            self.retriesRefusedConnections = retriesRefusedConnections
            self.fileNotFoundTries = fileNotFoundTries
        }
    }

    /// Time-outs of one request.
    public struct Timeouts: Sendable, Hashable, Codable {
        /// Connecting (TCP and TLS) may take this long.
        public var connect: Duration
        /// A response may go this long without any bytes arriving while Downpour waits for them; the time it holds
        /// a response back itself (a bandwidth limit's pause, a slow disk, a response waiting for its connection)
        /// does not count. After the request's end has gone out, the time counts from it.
        public var idleRead: Duration

        public init(connect: Duration = .seconds(10), idleRead: Duration = .seconds(30)) {
            self.connect = connect
            self.idleRead = idleRead
        }
    }

    /// Certificate checks for HTTPS.
    public struct TLS: Sendable, Hashable, Codable {
        /// Check the server's certificate chain and host name. Turn off only for test servers.
        public var verifyCertificates: Bool
        /// A PEM file of certificates to trust instead of the system's trust store.
        public var trustedCertificatesPath: String?

        public init(verifyCertificates: Bool = true, trustedCertificatesPath: String? = nil) {
            self.verifyCertificates = verifyCertificates
            self.trustedCertificatesPath = trustedCertificatesPath
        }
    }
}

/// One request header.
public struct HTTPHeaderField: Sendable, Hashable, Codable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `Name: value` as given on a command line.
    public init?(parsing line: String) {
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let name = Substring(line[..<colon]).trimmingSpaces()
        let value = Substring(line[line.index(after: colon)...]).trimmingSpaces()
        guard !name.isEmpty else { return nil }
        self.init(name: String(name), value: String(value))
    }

    package func validate() throws(DownloadError) {
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !self.name.isEmpty, self.name.allSatisfy({ tokenCharacters.contains($0) }) else {
            throw .invalidRequest("'\(self.name)' is not a valid header name.")
        }
        guard !self.value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw .invalidRequest("The value of header '\(self.name)' contains a line break.")
        }
        let managed = ["range", "if-range", "host", "content-length", "transfer-encoding", "connection"]
        guard !managed.contains(self.name.lowercased()) else {
            throw .invalidRequest("Downpour sets the '\(self.name)' header itself; it cannot be given.")
        }
    }

    /// Headers that carry credentials and are dropped when a redirect leads to another origin.
    var carriesCredentials: Bool {
        ["authorization", "cookie", "proxy-authorization"].contains(self.name.lowercased())
    }
}

extension DownloadConfiguration {
    /// When a connection counts as slow, and what happens then: it is closed, and a new connection continues
    /// its range from the last byte written. A new connection often takes a better path, or reaches a less
    /// busy server behind the same name.
    public struct SlowConnections: Sendable, Hashable, Codable {
        /// Restart a connection whose speed over ``window`` stays below this share of the median speed of the
        /// other connections (0.1: a tenth). `nil` never compares connections with each other.
        public var shareOfMedian: Double?
        /// Restart a connection whose speed over ``window`` stays below this many bytes per second, however
        /// fast the others are. After ``Retry/maximumTries`` such restarts in a row the download fails with
        /// ``DownloadError/Code/network``. `nil` (the default) sets no floor.
        public var lowestSpeed: Int64?
        /// How long a connection is measured before it is judged. Its range must also be long enough that it
        /// would not finish within one window at its speed; shorter tails are raced instead.
        public var window: Duration

        public init(shareOfMedian: Double? = 0.1, lowestSpeed: Int64? = nil, window: Duration = .seconds(3)) {
            self.shareOfMedian = shareOfMedian
            self.lowestSpeed = lowestSpeed
            self.window = window
        }
    }
}

extension DownloadConfiguration {
    enum CodingKeys: String, CodingKey {
        case connections, minimumSplitSize, racesTail, slowConnections, retry, timeouts, headers, userAgent
        case overwrite, tls, maximumRedirects, writeBufferSize, progressInterval, resume, journalInterval
        case maximumRate, credentials, netrcPath, cookies, setsRemoteTime, conditionalGet, proxy, checksum
        case pieceChecksums, expectedLength, followsMetalink, renamesExisting, followsPlaylists
    }

    /// Decodes what was stored; a field that is missing (stored by an older version) keeps its default, so a
    /// stored request outlives new options.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var value = DownloadConfiguration()
        func take<T: Decodable>(_ key: CodingKeys, _ path: WritableKeyPath<DownloadConfiguration, T>) throws {
            if let decoded = try container.decodeIfPresent(T.self, forKey: key) { value[keyPath: path] = decoded }
        }
        func take<T: Decodable>(_ key: CodingKeys, _ path: WritableKeyPath<DownloadConfiguration, T?>) throws {
            if let decoded = try container.decodeIfPresent(T.self, forKey: key) { value[keyPath: path] = decoded }
        }
        try take(.connections, \.connections)
        try take(.minimumSplitSize, \.minimumSplitSize)
        try take(.racesTail, \.racesTail)
        try take(.slowConnections, \.slowConnections)
        try take(.retry, \.retry)
        try take(.timeouts, \.timeouts)
        try take(.headers, \.headers)
        try take(.userAgent, \.userAgent)
        try take(.overwrite, \.overwrite)
        try take(.tls, \.tls)
        try take(.maximumRedirects, \.maximumRedirects)
        try take(.writeBufferSize, \.writeBufferSize)
        try take(.progressInterval, \.progressInterval)
        try take(.resume, \.resume)
        try take(.journalInterval, \.journalInterval)
        try take(.maximumRate, \.maximumRate)
        try take(.credentials, \.credentials)
        try take(.netrcPath, \.netrcPath)
        try take(.cookies, \.cookies)
        try take(.setsRemoteTime, \.setsRemoteTime)
        try take(.conditionalGet, \.conditionalGet)
        try take(.proxy, \.proxy)
        try take(.checksum, \.checksum)
        try take(.pieceChecksums, \.pieceChecksums)
        try take(.expectedLength, \.expectedLength)
        try take(.followsMetalink, \.followsMetalink)
        try take(.renamesExisting, \.renamesExisting)
        try take(.followsPlaylists, \.followsPlaylists)
        self = value
    }
}
