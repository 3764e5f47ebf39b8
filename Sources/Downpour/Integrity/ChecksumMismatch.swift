/// The structured cause of a ``DownloadError/Code/checksumMismatch`` error: which digest was expected, where the
/// expectation came from, and what the downloaded bytes gave.
public struct ChecksumMismatch: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where an expected digest came from.
    public enum Source: Sendable, Hashable, CustomStringConvertible {
        /// ``DownloadConfiguration/checksum``.
        case configuration
        /// The server's `Repr-Digest` field (RFC 9530).
        case reprDigest
        /// The server's `Digest` field (RFC 3230).
        case digest
        /// ``DownloadConfiguration/pieceChecksums``: the digest of the piece with this index and byte range.
        case piece(index: Int, range: Range<Int64>)

        public var description: String {
            switch self {
            case .configuration: "the expected checksum"
            case .reprDigest: "the server's Repr-Digest"
            case .digest: "the server's Digest"
            case .piece(let index, let range): "the expected digest of piece \(index) (\(Self.bytes(range)))"
            }
        }

        /// `bytes 100-199`, inclusive as HTTP writes ranges.
        static func bytes(_ range: Range<Int64>) -> String {
            "bytes \(range.lowerBound)-\(range.upperBound - 1)"
        }
    }

    /// The digest the file should have had.
    public var expected: Checksum
    /// Where ``expected`` came from.
    public var source: Source
    /// The digest of the bytes downloaded, in lowercase hexadecimal.
    public var actual: String

    public init(expected: Checksum, source: Source, actual: String) {
        self.expected = expected
        self.source = source
        self.actual = actual
    }

    public var description: String {
        "\(self.expected.algorithm) \(self.actual), expected \(self.expected.digest) (\(self.source))"
    }

    /// One sentence without its full stop: the actual digest, and the expected one with its source.
    var summary: String {
        if case .piece(let index, let range) = self.source {
            return "Piece \(index) (\(Source.bytes(range))) of the downloaded file has the \(self.expected.algorithm) "
                + "digest \(self.actual), but its expected digest is \(self.expected.digest)"
        }
        return "The downloaded file's \(self.expected.algorithm) digest is \(self.actual), but \(self.source) is "
            + self.expected.digest
    }
}

/// A digest the download is verified against, and where it came from.
struct ExpectedChecksum: Sendable, Hashable {
    var checksum: Checksum
    var source: ChecksumMismatch.Source
}
