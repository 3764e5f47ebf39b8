/// The digests of a file's consecutive pieces of one length (the last piece may be shorter), as a Metalink's
/// `<pieces>` gives them.
///
/// ```swift
/// var configuration = DownloadConfiguration()
/// if let pieces = metalinkFile.pieces {
///     configuration.pieceChecksums = pieces
///     configuration.expectedLength = metalinkFile.size
/// }
/// ```
///
/// Every piece is hashed once its bytes are in; a piece whose digest is wrong is fetched again, that piece only,
/// and the file gets its final name only when every piece matches (else the download fails with
/// ``DownloadError/Code/checksumMismatch``).
public struct PieceChecksums: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How each piece is hashed.
    public var algorithm: Checksum.Algorithm
    /// Bytes per piece (the last one may be shorter).
    public var pieceLength: Int64
    /// One digest per piece, in order, in lowercase hexadecimal.
    public var digests: [String]

    /// Piece digests given in hexadecimal (either case); ``DownloadConfiguration/validate()`` checks them.
    public init(algorithm: Checksum.Algorithm, pieceLength: Int64, digests: [String]) {
        self.algorithm = algorithm
        self.pieceLength = pieceLength
        self.digests = digests.map { $0.lowercased() }
    }

    /// Parses `TYPE:LENGTH:DIGEST,DIGEST,…` (``description``'s form): `sha-256:262144:9f86d0…,60303a…`. `nil` for
    /// an unknown type, a bad length or no digest; ``DownloadConfiguration/validate()`` checks the digests.
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let algorithm = Checksum.Algorithm(name: String(parts[0])),
            let length = Int64(parts[1]), length > 0
        else { return nil }
        let digests = parts[2].split(separator: ",").map(String.init)
        guard !digests.isEmpty else { return nil }
        self.init(algorithm: algorithm, pieceLength: length, digests: digests)
    }

    /// `TYPE:LENGTH:DIGEST,DIGEST,…`, as ``init(parsing:)`` reads it.
    public var description: String {
        "\(self.algorithm.name):\(self.pieceLength):" + self.digests.joined(separator: ",")
    }

    /// How many pieces there are.
    public var count: Int { self.digests.count }

    /// The byte range of piece `index` in a file of `length` bytes.
    public func range(ofPiece index: Int, length: Int64) -> Range<Int64> {
        let start = Int64(index) * self.pieceLength
        return min(start, length)..<min(length, start + self.pieceLength)
    }

    /// The lengths of file these digests can describe: more than `count - 1` whole pieces, at most `count` (one
    /// digest may describe an empty file).
    public var possibleLengths: ClosedRange<Int64> {
        let count = Int64(max(self.digests.count, 1))
        return ((count - 1) * self.pieceLength + (count > 1 ? 1 : 0))...(count * self.pieceLength)
    }

    /// The expected digest of piece `index`.
    func checksum(ofPiece index: Int) -> Checksum {
        Checksum(algorithm: self.algorithm, digest: self.digests[index])
    }

    /// Checks the piece length and that every digest is hexadecimal of the algorithm's length.
    func validate() throws(DownloadError) {
        guard self.pieceLength >= 1 else {
            throw .invalidRequest("The piece length must be at least 1 byte, not \(self.pieceLength).")
        }
        guard !self.digests.isEmpty else {
            throw .invalidRequest("Piece checksums need at least one digest.")
        }
        let (_, overflow) = Int64(self.digests.count).multipliedReportingOverflow(by: self.pieceLength)
        guard !overflow else {
            throw .invalidRequest("\(self.digests.count) pieces of \(self.pieceLength) bytes are too many.")
        }
        for (index, digest) in self.digests.enumerated() {
            do {
                try Checksum(algorithm: self.algorithm, digest: digest).validate()
            } catch {
                throw .invalidRequest("Piece \(index): \(error.message)")
            }
        }
    }
}
