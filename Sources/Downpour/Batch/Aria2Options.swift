import Foundation

/// Per-download options by aria2's names, as an input file (`aria2c -i`) or aria2's RPC gives them, turned into
/// a ``DownloadRequest``.
///
/// ```swift
/// var options = Aria2Options(directory: "downloads")
/// try options.apply(name: "out", value: "big.iso")
/// try options.apply(name: "split", value: "8")
/// let request = try options.request(uris: ["https://example.com/big.iso"])
/// ```
///
/// Names that aria2 has but Downpour does not are refused with a message naming them, never ignored.
public struct Aria2Options: Sendable, Hashable {
    /// The directory to save into (`dir`).
    public var directory: String
    /// The file name inside ``directory`` (`out`); the server's or the URL's name when `nil`.
    public var output: String?
    /// Everything else.
    public var configuration: DownloadConfiguration

    /// The option names ``apply(name:value:)`` takes.
    public static let supportedNames: [String] = [
        "dir", "out", "header", "split", "max-connection-per-server", "min-split-size", "max-download-limit",
        "user-agent", "max-tries", "retry-wait", "timeout", "connect-timeout", "lowest-speed-limit",
        "allow-overwrite", "continue", "check-certificate", "ca-certificate", "http-user", "http-passwd", "no-netrc",
        "remote-time", "conditional-get", "all-proxy", "http-proxy", "https-proxy",
        "no-proxy", "checksum", "follow-metalink",
    ]

    /// Options of Downpour's own that carry what a Metalink says about a file, for a download queue that stores
    /// options as text: `downpour-piece-checksums` (``PieceChecksums/description``'s form) and `downpour-length`
    /// (bytes). ``apply(name:value:)`` takes them; they are not aria2's, so a queue keeps them out of what it shows.
    public static let internalNames: [String] = ["downpour-piece-checksums", "downpour-length"]

    public init(directory: String = ".", output: String? = nil, configuration: DownloadConfiguration = .init()) {
        self.directory = directory
        self.output = output
        self.configuration = configuration
    }

    /// Applies one option.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for an unknown name or a bad value; the message names
    ///   the option and says what it takes.
    public mutating func apply(name: String, value: String) throws(DownloadError) {
        func bad(_ what: String) -> DownloadError {
            .invalidRequest("The option '\(name)' takes \(what), not '\(value)'.")
        }
        func count(_ range: ClosedRange<Int>) throws(DownloadError) -> Int {
            guard let number = Int(value), range.contains(number) else {
                throw bad("a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        func size() throws(DownloadError) -> Int64 {
            guard let bytes = ByteCount.parse(value) else { throw bad("a size such as 512K, 10M or 1G") }
            return bytes
        }
        func seconds() throws(DownloadError) -> Duration {
            guard let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= 86_400 else {
                throw bad("a number of seconds")
            }
            return .milliseconds(Int64((seconds * 1000).rounded()))
        }
        func flag() throws(DownloadError) -> Bool {
            switch value.lowercased() {
            case "true": return true
            case "false": return false
            default: throw bad("true or false")
            }
        }
        switch name {
        case "dir":
            guard !value.isEmpty else { throw bad("a directory") }
            self.directory = value
        case "out":
            // `out` must stay inside `dir`.
            guard DownloadRequest.Destination.staysInside(value) else {
                throw bad("a file name or a relative path inside the directory")
            }
            self.output = value
        case "header":
            guard let header = HTTPHeaderField(parsing: value) else { throw bad("'Name: value'") }
            try header.validate()
            self.configuration.headers.append(header)
        case "split", "max-connection-per-server":
            self.configuration.connections = try count(1...64)
        case "min-split-size":
            let bytes = try size()
            guard bytes >= 1024 else { throw bad("a size of at least 1K") }
            self.configuration.minimumSplitSize = bytes
        case "max-download-limit":
            let bytes = try size()
            self.configuration.maximumRate = bytes == 0 ? nil : bytes
        case "user-agent":
            self.configuration.userAgent = value
        case "max-tries":
            self.configuration.retry.maximumTries = try count(1...1000)
        case "retry-wait":
            self.configuration.retry.wait = try seconds()
        case "timeout":
            let timeout = try seconds()
            guard timeout > .zero else { throw bad("a number of seconds above zero") }
            self.configuration.timeouts.idleRead = timeout
            self.configuration.timeouts.connect = timeout
        case "connect-timeout":
            let timeout = try seconds()
            guard timeout > .zero else { throw bad("a number of seconds above zero") }
            self.configuration.timeouts.connect = timeout
        case "lowest-speed-limit":
            let bytes = try size()
            self.configuration.slowConnections.lowestSpeed = bytes == 0 ? nil : bytes
        case "allow-overwrite":
            self.configuration.overwrite = try flag()
        case "continue":
            self.configuration.resume = try flag()
        case "check-certificate":
            self.configuration.tls.verifyCertificates = try flag()
        case "ca-certificate":
            self.configuration.tls.trustedCertificatesPath = value
        case "http-user":
            guard !value.contains(":") else { throw bad("a user name without ':'") }
            let password = self.configuration.credentials?.password ?? ""
            self.configuration.credentials = Credentials(user: value, password: password)
        case "http-passwd":
            let user = self.configuration.credentials?.user ?? ""
            self.configuration.credentials = Credentials(user: user, password: value)
        case "no-netrc":
            if try flag() { self.configuration.netrcPath = nil }
        case "remote-time":
            self.configuration.setsRemoteTime = try flag()
        case "conditional-get":
            self.configuration.conditionalGet = try flag()
        case "all-proxy", "http-proxy", "https-proxy":
            let proxy: ProxyURL?
            do {
                proxy = value.isEmpty ? nil : try ProxyURL(parsing: value)
            } catch {
                throw .invalidRequest("The option '\(name)' takes a proxy URL: \(error.message)")
            }
            switch name {
            case "all-proxy": self.configuration.proxy.all = proxy
            case "http-proxy": self.configuration.proxy.http = proxy
            default: self.configuration.proxy.https = proxy
            }
        case "no-proxy":
            self.configuration.proxy.noProxy = ProxySettings.noProxyEntries(value)
            try self.configuration.proxy.validate()
        case "checksum":
            guard let checksum = Checksum(parsing: value) else {
                throw bad("TYPE=DIGEST: sha-256, sha-512, sha-1 or md5, then the digest in hexadecimal")
            }
            self.configuration.checksum = checksum
        case "follow-metalink":
            // aria2's `mem` (read the document without saving it) is what following does here anyway.
            switch value.lowercased() {
            case "true", "mem": self.configuration.followsMetalink = true
            case "false": self.configuration.followsMetalink = false
            default: throw bad("true, mem or false")
            }
        case "downpour-piece-checksums":
            guard let pieces = PieceChecksums(parsing: value) else {
                throw bad("TYPE:LENGTH:DIGEST,DIGEST,... (piece digests)")
            }
            self.configuration.pieceChecksums = pieces
        case "downpour-length":
            guard let length = Int64(value), length >= 0 else { throw bad("a length in bytes") }
            self.configuration.expectedLength = length
        default:
            throw .invalidRequest(
                "The option '\(name)' is not supported; the supported ones are "
                    + Self.supportedNames.joined(separator: ", ") + "."
            )
        }
    }

    /// A request for the file at `uris`: the first is the request's URL, the others its mirrors (as aria2 takes
    /// several URIs of one file).
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for no URL or a bad one.
    public func request(uris: [String]) throws(DownloadError) -> DownloadRequest {
        guard let first = uris.first else { throw .invalidRequest("A download needs a URL.") }
        var mirrors: [URL] = []
        for text in uris.dropFirst() {
            // Parsed and checked as the first one is.
            mirrors.append(try DownloadRequest(url: text).url)
        }
        let destination: DownloadRequest.Destination
        if let output {
            destination = .named(output, in: self.directory)
        } else {
            destination = .directory(self.directory)
        }
        var request = try DownloadRequest(url: first, destination: destination, configuration: self.configuration)
        request.mirrors = mirrors
        return request
    }
}
