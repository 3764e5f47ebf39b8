import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The `XMLParser` delegate behind ``Metalink/init(parsing:)``: reads Metalink 4 (RFC 5854) and Metalink 3
/// elements into ``Metalink/File`` values. Used by one parse on one thread, then read.
final class MetalinkReader: NSObject, XMLParserDelegate {
    static let metalink4Namespace = "urn:ietf:params:xml:ns:metalink"

    private(set) var files: [Metalink.File] = []
    private(set) var sawRoot = false
    /// The first reason the document is refused (a bad name, a bad digest); parsing stops there.
    private(set) var problem: String?

    /// Every element that was opened was closed (Foundation's parser on Linux accepts a truncated document).
    var isBalanced: Bool { self.path.isEmpty }

    private var isVersion4 = false
    private var path: [String] = []
    private var text = ""
    private var attributes: [String: String] = [:]

    // The file being read.
    private var name: String?
    private var size: Int64?
    private var checksums: [Checksum] = []
    private var sources: [(source: Metalink.Source, order: Int)] = []
    private var pieceAlgorithm: Checksum.Algorithm?
    private var pieceLength: Int64?
    private var pieceDigests: [(index: Int, digest: String)] = []
    private var inPieces = false

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if self.path.isEmpty {
            guard elementName == "metalink" else {
                self.refuse("its root element is <\(elementName)>, not <metalink>.", parser: parser)
                return
            }
            self.sawRoot = true
            self.isVersion4 = namespaceURI == Self.metalink4Namespace
        }
        self.path.append(elementName)
        self.text = ""
        self.attributes = attributes
        switch elementName {
        case "file":
            self.startFile(name: attributes["name"], parser: parser)
        case "pieces" where self.name != nil:
            self.inPieces = true
            self.pieceAlgorithm = attributes["type"].flatMap(Self.algorithm(named:))
            self.pieceLength = attributes["length"].flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil }
            self.pieceDigests = []
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if self.text.utf8.count < 1 << 16 { self.text += string }
    }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?
    ) {
        let value = self.text.trimmingCharacters(in: .whitespacesAndNewlines)
        let attributes = self.attributes
        self.attributes = [:]
        self.text = ""
        defer { self.path.removeLast() }
        guard self.name != nil else { return }
        switch elementName {
        case "size":
            self.size = Int64(value).flatMap { $0 >= 0 ? $0 : nil }
        case "hash" where self.inPieces:
            guard self.pieceAlgorithm != nil else { return }
            guard let digest = self.digest(value, for: self.pieceAlgorithm, parser: parser) else { return }
            let index = attributes["piece"].flatMap { Int($0) } ?? self.pieceDigests.count
            self.pieceDigests.append((index, digest))
        case "hash":
            guard let algorithm = attributes["type"].flatMap(Self.algorithm(named:)) else { return }
            guard let digest = self.digest(value, for: algorithm, parser: parser) else { return }
            self.checksums.append(Checksum(algorithm: algorithm, digest: digest))
        case "pieces":
            self.inPieces = false
        case "url":
            self.addSource(value, attributes: attributes)
        case "file":
            self.finishFile()
        default:
            break
        }
    }

    // MARK: - Files

    private func startFile(name: String?, parser: XMLParser) {
        guard let name, !name.isEmpty else {
            self.refuse("a <file> has no name.", parser: parser)
            return
        }
        guard DownloadRequest.Destination.staysInside(name) else {
            self.refuse("the file name '\(name)' leaves the download directory.", parser: parser)
            return
        }
        self.name = name
        self.size = nil
        self.checksums = []
        self.sources = []
        self.pieceAlgorithm = nil
        self.pieceLength = nil
        self.pieceDigests = []
        self.inPieces = false
    }

    private func finishFile() {
        guard let name = self.name else { return }
        self.name = nil
        let sources = self.sources.sorted { ($0.source.priority, $0.order) < ($1.source.priority, $1.order) }
        guard !sources.isEmpty else { return }
        var pieces: PieceChecksums?
        if let algorithm = self.pieceAlgorithm, let length = self.pieceLength, !self.pieceDigests.isEmpty {
            let ordered = self.pieceDigests.sorted { $0.index < $1.index }
            let contiguous = ordered.enumerated().allSatisfy { $0.offset == $0.element.index }
            let expectedCount = self.size.map { Int(($0 + length - 1) / length) }
            if contiguous && (expectedCount == nil || expectedCount == ordered.count) {
                pieces = PieceChecksums(algorithm: algorithm, pieceLength: length, digests: ordered.map(\.digest))
            }
        }
        let strength: [Checksum.Algorithm] = [.sha512, .sha256, .sha1, .md5]
        let checksums = self.checksums.sorted {
            (strength.firstIndex(of: $0.algorithm) ?? 9) < (strength.firstIndex(of: $1.algorithm) ?? 9)
        }
        self.files.append(
            Metalink.File(
                name: name,
                size: self.size,
                checksums: checksums,
                pieces: pieces,
                sources: sources.map(\.source)
            )
        )
    }

    private func addSource(_ value: String, attributes: [String: String]) {
        guard let url = URL(string: value), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            url.host != nil
        else { return }
        let priority: Int
        if self.isVersion4 {
            priority = attributes["priority"].flatMap { Int($0) }.map { min(max($0, 1), 999_999) } ?? 999_999
        } else {
            let preference = attributes["preference"].flatMap { Int($0) }.map { min(max($0, 0), 100) }
            priority = preference.map { 101 - $0 } ?? 101
        }
        let location = attributes["location"].map { $0.lowercased() }.flatMap { $0.isEmpty ? nil : $0 }
        self.sources.append(
            (Metalink.Source(url: url, priority: priority, location: location), self.sources.count)
        )
    }

    // MARK: - Helpers

    /// Metalink 4 names digests as IANA does (`sha-256`); Metalink 3 as `sha256`.
    static func algorithm(named name: String) -> Checksum.Algorithm? {
        let lower = name.lowercased()
        if let algorithm = Checksum.Algorithm(name: lower) { return algorithm }
        switch lower {
        case "sha1": return .sha1
        case "sha256": return .sha256
        case "sha512": return .sha512
        default: return nil
        }
    }

    private func digest(_ value: String, for algorithm: Checksum.Algorithm?, parser: XMLParser) -> String? {
        guard let algorithm else { return nil }
        let lower = value.lowercased()
        guard lower.utf8.count == algorithm.byteCount * 2, lower.utf8.allSatisfy({ $0.isHexDigit }) else {
            self.refuse(
                "a \(algorithm.name) digest is not \(algorithm.byteCount * 2) hexadecimal digits: '\(value)'.",
                parser: parser
            )
            return nil
        }
        return lower
    }

    private func refuse(_ problem: String, parser: XMLParser) {
        if self.problem == nil { self.problem = problem }
        parser.abortParsing()
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
    }
}
