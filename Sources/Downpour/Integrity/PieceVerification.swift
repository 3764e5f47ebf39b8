/// Which pieces of a download have been verified against their digests, which to hash next, and what to do
/// about a piece that does not match. A value with no I/O: the engine hashes, this decides.
///
/// A piece is hashed once all its bytes are done: while the transfer runs (``startHashing(_:)``, then
/// ``finishHashing(_:matches:final:)`` with `final` false: only a match counts), and after it for every piece not
/// verified by then (`final` true). A good piece stays verified unless its bytes are written again
/// (``noteRewrite(_:)``: a racing connection's copy); a rewrite during its hashing discards that result. A bad
/// piece found at the end is taken out of the done bytes and fetched again, up to ``maximumTries`` fetches in all;
/// then the download fails.
struct PieceVerification: Sendable, Hashable {
    /// What to do after a piece was hashed.
    enum Verdict: Sendable, Hashable {
        /// The digest matches; the piece is verified.
        case verified
        /// It does not: fetch these bytes again.
        case refetch(Range<Int64>)
        /// It did not match on any of its ``PieceVerification/maximumTries`` fetches.
        case failed(Range<Int64>)
    }

    /// How many times one piece may be fetched (the first time included) before the download fails.
    static let maximumTries = 3

    let checksums: PieceChecksums
    /// The file's length.
    let length: Int64
    /// Whether each piece has been verified.
    private(set) var verified: [Bool]
    /// How many fetches of each piece turned out bad.
    private(set) var failures: [Int]
    /// The pieces being hashed now.
    private(set) var hashing: Set<Int> = []
    /// Pieces written again while they were being hashed: their result is discarded.
    private var stale: Set<Int> = []
    /// Pieces that did not match while the transfer ran: not hashed again before the check after it, unless
    /// written again.
    private(set) var suspect: Set<Int> = []

    /// - Precondition: `length` is one of `checksums.possibleLengths` (the caller checks and reports it).
    init(checksums: PieceChecksums, length: Int64) {
        precondition(
            checksums.possibleLengths.contains(length),
            "\(checksums.count) pieces of \(checksums.pieceLength) bytes cannot describe \(length) bytes"
        )
        self.checksums = checksums
        self.length = length
        self.verified = Array(repeating: false, count: checksums.count)
        self.failures = Array(repeating: 0, count: checksums.count)
    }

    var pieceCount: Int { self.checksums.count }

    /// Whether every piece is verified.
    var isComplete: Bool { !self.verified.contains(false) }

    /// How many pieces are verified.
    var verifiedCount: Int { self.verified.lazy.filter { $0 }.count }

    /// The byte range of piece `index`.
    func range(ofPiece index: Int) -> Range<Int64> {
        self.checksums.range(ofPiece: index, length: self.length)
    }

    /// The pieces not verified yet and not being hashed whose bytes are all in `done`, in order: what to hash now.
    /// While the transfer runs (`final` false), pieces that did not match already are left out.
    func piecesToHash(done: ByteRangeSet, final: Bool = true) -> [Int] {
        var pieces: [Int] = []
        if self.length == 0, !self.verified[0] { return [0] }
        for range in done.ranges {
            let pieceLength = self.checksums.pieceLength
            // The first piece that starts at or after the range's start, up to the last that ends inside it.
            var index = Int((range.lowerBound + pieceLength - 1) / pieceLength)
            while index < self.pieceCount {
                let piece = self.range(ofPiece: index)
                guard piece.upperBound <= range.upperBound else { break }
                if !self.verified[index] && !self.hashing.contains(index) && (final || !self.suspect.contains(index)) {
                    pieces.append(index)
                }
                index += 1
            }
        }
        return pieces
    }

    /// Piece `index` is about to be read and hashed.
    mutating func startHashing(_ index: Int) {
        self.hashing.insert(index)
        self.stale.remove(index)
    }

    /// Records the hash of piece `index` that ``startHashing(_:)`` began. `nil` when the result does not count: the
    /// piece was written again meanwhile, or (not `final`, while the transfer runs) it does not match, which the
    /// check after the transfer decides.
    mutating func finishHashing(_ index: Int, matches: Bool, final: Bool) -> Verdict? {
        self.hashing.remove(index)
        if self.stale.remove(index) != nil { return nil }
        guard matches || final else {
            self.suspect.insert(index)
            return nil
        }
        return self.record(piece: index, matches: matches)
    }

    /// Bytes of `range` were written again: pieces they touch are no longer verified, and a hash of one under way
    /// will not count.
    mutating func noteRewrite(_ range: Range<Int64>) {
        guard !range.isEmpty, self.length > 0 else { return }
        let first = Int(range.lowerBound / self.checksums.pieceLength)
        let last = Int((range.upperBound - 1) / self.checksums.pieceLength)
        guard first < self.pieceCount else { return }
        for index in first...min(last, self.pieceCount - 1) {
            self.verified[index] = false
            self.suspect.remove(index)
            if self.hashing.contains(index) { self.stale.insert(index) }
        }
    }

    /// Records the result of hashing piece `index`.
    mutating func record(piece index: Int, matches: Bool) -> Verdict {
        let range = self.range(ofPiece: index)
        self.suspect.remove(index)
        if matches {
            self.verified[index] = true
            return .verified
        }
        self.verified[index] = false
        self.failures[index] += 1
        return self.failures[index] >= Self.maximumTries ? .failed(range) : .refetch(range)
    }

    /// Forgets every verification: the bytes are being fetched again from zero. Failures stay counted.
    mutating func startOver() {
        self.verified = Array(repeating: false, count: self.pieceCount)
        self.suspect = []
        self.stale.formUnion(self.hashing)
    }
}
