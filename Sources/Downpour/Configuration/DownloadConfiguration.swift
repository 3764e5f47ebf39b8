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
    /// The digest the file must have. The bytes are hashed as they arrive, and the file gets its final name only
    /// when the digest matches; otherwise the download fails with ``DownloadError/Code/checksumMismatch``, after
    /// one more try from zero when the bytes came from several responses or an earlier run. `nil` (the default)
    /// still verifies a digest the server sends (`Repr-Digest`, `Digest`).
    public var checksum: Checksum?

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
        tls: TLS = TLS(),
        maximumRedirects: Int = 10,
        writeBufferSize: Int = 256 * 1024,
        progressInterval: Duration = .milliseconds(250),
        resume: Bool = true,
        journalInterval: Duration = .seconds(1),
        maximumRate: Int64? = nil,
        checksum: Checksum? = nil
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
        self.tls = tls
        self.maximumRedirects = maximumRedirects
        self.writeBufferSize = writeBufferSize
        self.progressInterval = progressInterval
        self.resume = resume
        self.journalInterval = journalInterval
        self.maximumRate = maximumRate
        self.checksum = checksum
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
        try self.checksum?.validate()
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

        public init(maximumTries: Int = 5, wait: Duration = .milliseconds(500), maximumWait: Duration = .seconds(60)) {
            self.maximumTries = maximumTries
            self.wait = wait
            self.maximumWait = maximumWait
        }
    }

    /// Time-outs of one request.
    public struct Timeouts: Sendable, Hashable, Codable {
        /// Connecting (TCP and TLS) may take this long.
        public var connect: Duration
        /// A response may go this long without any bytes arriving.
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

    func validate() throws(DownloadError) {
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
