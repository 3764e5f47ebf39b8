import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// A Metalink document (RFC 5854, Metalink 4, and its predecessor Metalink 3): for each file, its name, size and
/// digests, the digests of its pieces, and the URLs it can be fetched from, best first.
///
/// ```swift
/// let metalink = try Metalink(parsing: Data(contentsOf: URL(fileURLWithPath: "ubuntu.meta4")))
/// for file in metalink.files {
///     print(file.name, file.size ?? -1, file.sources.map(\.url))
/// }
/// ```
///
/// Only what Downpour can use is kept: `http` and `https` URLs (BitTorrent `metaurl`s and FTP are left out), and
/// the digests of ``Checksum/Algorithm``. A file name is kept only when it stays inside the download directory
/// (no absolute path, no `..`); a file whose name does not is refused.
public struct Metalink: Sendable, Hashable {
    /// One file of the document.
    public struct File: Sendable, Hashable {
        /// The file's path relative to the download directory, as the document gives it (checked to stay inside).
        public var name: String
        /// The length in bytes, when given.
        public var size: Int64?
        /// The whole file's digests, strongest first.
        public var checksums: [Checksum]
        /// The digests of its pieces, when given.
        public var pieces: PieceChecksums?
        /// Where to fetch it, best first (Metalink 4 priority 1 first; Metalink 3 highest preference first), in
        /// document order among equals.
        public var sources: [Source]

        /// ``sources`` with those at one of `locations` (ISO 3166-1 country codes, any case, as aria2's
        /// `--metalink-location` takes them) first, each group in its own order: best first.
        public func sources(preferring locations: [String]) -> [Source] {
            let wanted = Set(locations.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            guard !wanted.isEmpty else { return self.sources }
            let preferred = self.sources.filter { $0.location.map(wanted.contains) ?? false }
            return preferred + self.sources.filter { !($0.location.map(wanted.contains) ?? false) }
        }

        public init(name: String, size: Int64?, checksums: [Checksum], pieces: PieceChecksums?, sources: [Source]) {
            self.name = name
            self.size = size
            self.checksums = checksums
            self.pieces = pieces
            self.sources = sources
        }

        /// The strongest whole-file digest.
        public var strongestChecksum: Checksum? { self.checksums.first }
    }

    /// A URL of a file.
    public struct Source: Sendable, Hashable {
        public var url: URL
        /// Lower is better (Metalink 4's `priority`, 1 to 999999; Metalink 3's `preference` p becomes 101 - p).
        public var priority: Int
        /// An ISO 3166-1 country code, lowercased, when given.
        public var location: String?

        public init(url: URL, priority: Int, location: String?) {
            self.url = url
            self.priority = priority
            self.location = location
        }
    }

    /// The files, in document order.
    public var files: [File]

    public init(files: [File]) {
        self.files = files
    }

    /// Parses a Metalink 4 or Metalink 3 document.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when the data is not well-formed XML, not a Metalink
    ///   document, or describes no file Downpour can fetch; the message says which and where.
    public init(parsing data: Data) throws(DownloadError) {
        guard !data.isEmpty else { throw .invalidRequest("The Metalink document is empty.") }
        let reader = MetalinkReader()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        let parsed = parser.parse()
        if let problem = reader.problem {
            throw .invalidRequest("The Metalink document is not valid: \(problem)")
        }
        guard parsed, reader.isBalanced else {
            let line = parser.lineNumber
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "malformed XML"
            throw .invalidRequest("The Metalink document is not well-formed XML (line \(line)): \(reason).")
        }
        guard reader.sawRoot else {
            throw .invalidRequest("The document is not a Metalink: its root element is not <metalink>.")
        }
        guard !reader.files.isEmpty else {
            throw .invalidRequest("The Metalink document lists no file with an http or https URL.")
        }
        self.files = reader.files
    }
}

/// Media types and file extensions by which a Metalink is recognised.
extension Metalink {
    /// The longest Metalink document a download reads into memory (``DownloadConfiguration/followsMetalink``):
    /// 4 MiB, enough for the piece digests of a file of many gigabytes.
    public static let maximumDocumentLength: Int64 = 4 * 1024 * 1024

    /// `application/metalink4+xml` and `application/metalink+xml`.
    public static func isMetalink(contentType: String) -> Bool {
        // Asked of every download's first response: no Foundation string work (`trimmingCharacters` was 1 % of
        // the CPU of 1,000 small downloads).
        let type = contentType.prefix { $0 != ";" }.trimmingSpaces().lowercased()
        return type == "application/metalink4+xml" || type == "application/metalink+xml"
    }

    /// A path ending in `.meta4` or `.metalink`.
    public static func isMetalink(path: String) -> Bool {
        let lower = path.lowercased()
        return lower.hasSuffix(".meta4") || lower.hasSuffix(".metalink")
    }
}
