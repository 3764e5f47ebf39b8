import Crypto
import Foundation

/// What is on disk of a download, kept beside the `.part` file as `NAME.part.downpour`, so that a later run
/// (after a pause, a crash or a reboot) fetches only what is missing, and only from the same remote file.
///
/// The file is a header line, `downpour-journal <version> <sha256 of the body in hex>`, then the body: JSON.
/// A journal whose checksum does not match is never trusted. See `docs/resume-journal.md`.
public struct ResumeJournal: Sendable, Hashable, Codable {
    /// The format version this code writes.
    public static let currentVersion = 1

    /// The URL the download was started with.
    public var sourceURL: String
    /// The URL the bytes came from, after redirects.
    public var finalURL: String
    /// The file's length.
    public var length: Int64
    /// The remote file's entity tag, as the server sent it.
    public var etag: String?
    /// The remote file's `Last-Modified`, as the server sent it.
    public var lastModified: String?
    /// Byte ranges on disk (synced before they were recorded), as `[start, end)` pairs.
    public var done: [[Int64]]
    /// The validators of each mirror the bytes may have come from, by the URL as given; `nil` in journals of
    /// downloads from one URL (and of versions before mirrors), which decode as before.
    public var mirrors: [String: MirrorValidators]?
    /// For a journal written without a sync (`NAME.part.downpour.unsynced`): the boot it was written in, the only
    /// one it is trusted in. `nil` in a synced journal, which decodes as before.
    public var bootID: String?
    /// For the unsynced journal: the checksum (from its header) of the synced journal it was written after, `nil`
    /// when there was none. It is trusted only while that synced journal is still the one on disk: a synced save by
    /// any run, of any version, takes its place.
    public var follows: String?

    /// One mirror's validators, as it sent them; both `nil` for a mirror that sends none.
    public struct MirrorValidators: Sendable, Hashable, Codable {
        public var etag: String?
        public var lastModified: String?

        public init(etag: String?, lastModified: String?) {
            self.etag = etag
            self.lastModified = lastModified
        }
    }

    public init(
        sourceURL: String,
        finalURL: String,
        length: Int64,
        etag: String?,
        lastModified: String?,
        done: ByteRangeSet,
        mirrors: [String: MirrorValidators]? = nil,
        bootID: String? = nil
    ) {
        self.sourceURL = sourceURL
        self.finalURL = finalURL
        self.length = length
        self.etag = etag
        self.lastModified = lastModified
        self.done = done.ranges.map { [$0.lowerBound, $0.upperBound] }
        self.mirrors = mirrors
        self.bootID = bootID
    }

    /// The journal as the mirror at `url` would have written it: its own validators in place of the primary's,
    /// when the journal records them (a later run may probe another mirror first).
    public func asSeen(by url: String) -> ResumeJournal {
        guard let own = self.mirrors?[url] else { return self }
        var journal = self
        journal.etag = own.etag
        journal.lastModified = own.lastModified
        return journal
    }

    /// The done ranges as a set; invalid pairs are dropped (``decode(_:)`` rejects them first).
    public var doneRanges: ByteRangeSet {
        ByteRangeSet(self.done.compactMap { $0.count == 2 && $0[0] < $0[1] ? $0[0]..<$0[1] : nil })
    }

    /// Why a journal could not be read.
    public enum DecodingError: Error, Hashable, Sendable, CustomStringConvertible {
        case truncated
        case notAJournal
        case unsupportedVersion(Int)
        case checksumMismatch
        case malformed(String)

        public var description: String {
            switch self {
            case .truncated: "the journal is truncated"
            case .notAJournal: "the file is not a Downpour journal"
            case .unsupportedVersion(let version):
                "the journal has format version \(version), this Downpour reads version \(ResumeJournal.currentVersion)"
            case .checksumMismatch: "the journal's checksum does not match its contents (torn write or corruption)"
            case .malformed(let reason): "the journal is malformed: \(reason)"
            }
        }
    }

    public func encode() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain strings and integers cannot fail.
        let body = Array(try! encoder.encode(self))
        let digest = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        return Array("downpour-journal \(Self.currentVersion) \(digest)\n".utf8) + body + [UInt8(ascii: "\n")]
    }

    /// The checksum an encoded journal's header names (see ``encode()``); `nil` without a header.
    public static func checksum(ofEncoded bytes: [UInt8]) -> String? {
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let header = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        return header.count == 3 ? String(header[2]) : nil
    }

    public static func decode(_ bytes: [UInt8]) throws(DecodingError) -> ResumeJournal {
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
            throw bytes.isEmpty || "downpour-journal".utf8.starts(with: bytes) ? .truncated : .notAJournal
        }
        let header = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        guard header.count == 3, header[0] == "downpour-journal", let version = Int(header[1]) else {
            throw .notAJournal
        }
        guard version == Self.currentVersion else { throw .unsupportedVersion(version) }
        var body = bytes[(newline + 1)...]
        guard body.last == UInt8(ascii: "\n") else { throw .truncated }
        body = body.dropLast()
        let digest = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        guard digest == header[2] else { throw .checksumMismatch }
        let journal: ResumeJournal
        do {
            journal = try JSONDecoder().decode(ResumeJournal.self, from: Data(body))
        } catch {
            throw .malformed("\(error)")
        }
        guard journal.length >= 0 else { throw .malformed("negative length") }
        for pair in journal.done {
            guard pair.count == 2, pair[0] >= 0, pair[0] < pair[1], pair[1] <= journal.length else {
                throw .malformed("bad range \(pair)")
            }
        }
        return journal
    }
}
