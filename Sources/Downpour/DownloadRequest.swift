import Foundation

/// What to download and where to put it. `Codable`, so a download manager can store it; decoding checks the
/// URL as ``init(url:destination:configuration:)-(URL,_,_)`` does.
public struct DownloadRequest: Sendable, Hashable, Codable {
    /// Where the downloaded file goes.
    public enum Destination: Sendable, Hashable, Codable {
        /// Exactly this path.
        case file(String)
        /// This directory, under the name the server suggests (`Content-Disposition`), else the last component
        /// of the URL's path, else `index.html`. The directory is created when missing.
        case directory(String)
        /// This name (a relative path: directories in it are created too) inside this directory, which is
        /// created when missing. The name never leaves the directory: an absolute path or a `..` component is an
        /// ``DownloadError/Code/invalidRequest`` error.
        case named(String, in: String)

        /// Whether `name` stays inside the directory it is given with: a relative path without `..` components.
        public static func staysInside(_ name: String) -> Bool {
            let components = name.split(separator: "/", omittingEmptySubsequences: false)
            return !name.isEmpty && !name.hasPrefix("/") && !name.hasSuffix("/") && !name.utf8.contains(0)
                && !components.contains { $0 == ".." }
        }

        /// Checks that a ``named(_:in:)`` name stays inside its directory.
        ///
        /// - Throws: ``DownloadError/Code/invalidRequest`` when it does not.
        func validate() throws(DownloadError) {
            if case .named(let name, _) = self, !Self.staysInside(name) {
                throw .invalidRequest(
                    "The file name '\(name)' must be a name or a relative path inside the directory."
                )
            }
        }

        /// The output path, when it does not depend on the server.
        var fixedPath: String? {
            switch self {
            case .file(let path): path
            case .directory: nil
            case .named(let name, let directory): directory.hasSuffix("/") ? directory + name : directory + "/" + name
            }
        }
    }

    /// An `http` or `https` URL.
    public var url: URL
    /// Other URLs of the same file (mirrors), as aria2 takes several URIs of one file: ranges are fetched from
    /// all that work, a mirror that fails or serves another file is dropped with a notice, and faster mirrors end
    /// up serving more. Each is an `http` or `https` URL, checked as ``url`` is. Empty by default.
    public var mirrors: [URL] = []
    public var destination: Destination
    public var configuration: DownloadConfiguration
    /// A mark the finished file carries (an extended attribute), by which a later request with the same mark
    /// knows a file found complete at its name as its own: finished by an earlier run whose caller was stopped
    /// (a crash, `kill -9`) after the file took its name and before it recorded the completion. Such a request
    /// then ends at once, complete, instead of finding another file in the way. A file without the mark, or with
    /// another one, is in the way as ever. The daemon marks each download with its GID. `nil` (the default): no
    /// mark is set or looked for.
    public var finishMark: String? = nil
    /// Only these bytes of the resource, saved as a file of their own: an HLS segment given as a byte range. The
    /// server must serve ranges (a `200` with more is refused). Not empty. `nil` (the default): the whole resource.
    package var byteRange: Range<Int64>? = nil

    /// - Throws: ``DownloadError/Code/invalidRequest`` when the URL is not an absolute `http` or `https` URL, or a
    ///   ``Destination/named(_:in:)`` name leaves its directory.
    public init(
        url: URL,
        mirrors: [URL] = [],
        destination: Destination = .directory("."),
        configuration: DownloadConfiguration = .init()
    )
        throws(DownloadError)
    {
        try Self.validate(url)
        for mirror in mirrors {
            try Self.validate(mirror)
        }
        try destination.validate()
        self.url = url
        self.mirrors = mirrors
        self.destination = destination
        self.configuration = configuration
    }

    /// Every URL of the file: ``url``, then the ``mirrors`` (repeats left out).
    public var urls: [URL] {
        var seen: Set<String> = []
        return ([self.url] + self.mirrors).filter { seen.insert($0.absoluteString).inserted }
    }

    /// Parses `text` as a URL first; a bad one is an ``DownloadError/Code/invalidRequest`` error.
    public init(
        url text: String,
        destination: Destination = .directory("."),
        configuration: DownloadConfiguration = .init()
    ) throws(DownloadError) {
        guard !text.isEmpty, !Self.containsWhitespace(text), let url = URL(string: text) else {
            throw .invalidRequest("'\(text)' is not a valid URL.")
        }
        try self.init(url: url, destination: destination, configuration: configuration)
    }

    /// Whether `text` has white space in it: a byte scan for ASCII text (a URL nearly always is), else a scan of
    /// its characters.
    private static func containsWhitespace(_ text: String) -> Bool {
        var ascii = true
        for byte in text.utf8 {
            if byte >= 0x80 {
                ascii = false
                break
            }
            if byte == 0x20 || (0x09...0x0D).contains(byte) { return true }
        }
        return ascii ? false : text.contains { $0.isWhitespace }
    }

    private enum CodingKeys: String, CodingKey {
        case url, mirrors, destination, configuration
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.url, forKey: .url)
        try container.encode(self.mirrors, forKey: .mirrors)
        try container.encode(self.destination, forKey: .destination)
        try container.encode(self.configuration, forKey: .configuration)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let url = try container.decode(URL.self, forKey: .url)
        do {
            try Self.validate(url)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .url, in: container, debugDescription: error.message)
        }
        self.url = url
        // Requests stored before mirrors existed have none.
        self.mirrors = try container.decodeIfPresent([URL].self, forKey: .mirrors) ?? []
        for mirror in self.mirrors {
            do {
                try Self.validate(mirror)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: .mirrors, in: container, debugDescription: error.message)
            }
        }
        self.destination = try container.decode(Destination.self, forKey: .destination)
        self.configuration =
            try container.decodeIfPresent(DownloadConfiguration.self, forKey: .configuration) ?? .init()
    }

    static func validate(_ url: URL) throws(DownloadError) {
        guard let scheme = url.scheme?.lowercased() else {
            throw .invalidRequest("'\(url.absoluteString)' has no scheme; write http:// or https:// in front.")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidRequest("The scheme '\(scheme)' is not supported; use http or https.")
        }
        guard let host = url.host, !host.isEmpty else {
            throw .invalidRequest("'\(url.absoluteString)' has no host.")
        }
    }
}

/// Scheme, host and port: what decides whether credentials may travel with a request.
struct Origin: Hashable {
    var scheme: String
    var host: String
    var port: Int

    init(_ url: URL) {
        self.scheme = url.scheme?.lowercased() ?? ""
        self.host = url.host?.lowercased() ?? ""
        self.port = url.port ?? (self.scheme == "https" ? 443 : 80)
    }
}
