import NIOConcurrencyHelpers

/// One download's ``PieceVerification`` behind a lock, and the hashing of its pieces: shared by the task that
/// verifies pieces while the transfer runs, the writers that report bytes written again, and the check after the
/// transfer.
final class PieceChecker: Sendable {
    let checksums: PieceChecksums
    let file: OutputFile
    private let state: NIOLockedValueBox<PieceVerification>

    init(checksums: PieceChecksums, length: Int64, file: OutputFile) {
        self.checksums = checksums
        self.file = file
        self.state = NIOLockedValueBox(PieceVerification(checksums: checksums, length: length))
    }

    var length: Int64 { self.state.withLockedValue { $0.length } }

    /// How many pieces are verified, of how many.
    var progress: (verified: Int, pieces: Int) {
        self.state.withLockedValue { ($0.verifiedCount, $0.pieceCount) }
    }

    func range(ofPiece index: Int) -> Range<Int64> {
        self.state.withLockedValue { $0.range(ofPiece: index) }
    }

    /// See ``PieceVerification/piecesToHash(done:final:)``.
    func piecesToHash(done: ByteRangeSet, final: Bool) -> [Int] {
        self.state.withLockedValue { $0.piecesToHash(done: done, final: final) }
    }

    /// Bytes of `range` were written again (from any thread): see ``PieceVerification/noteRewrite(_:)``.
    func noteRewrite(_ range: Range<Int64>) {
        self.state.withLockedValue { $0.noteRewrite(range) }
    }

    /// Everything is fetched again from zero.
    func startOver() {
        self.state.withLockedValue { $0.startOver() }
    }

    /// Hashes piece `index` and records the result (``PieceVerification/finishHashing(_:matches:final:)``);
    /// returns the verdict, if it counts, and the mismatch when the digest is wrong.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read, ``DownloadError/Code/cancelled``.
    func check(
        _ index: Int,
        final: Bool
    ) async throws(DownloadError) -> (verdict: PieceVerification.Verdict?, mismatch: ChecksumMismatch?) {
        let range = self.state.withLockedValue { state in
            state.startHashing(index)
            return state.range(ofPiece: index)
        }
        let expected = self.checksums.checksum(ofPiece: index)
        let actual: Checksum
        do {
            actual = try await PieceHasher.digest(of: range, in: self.file, algorithm: self.checksums.algorithm)
        } catch {
            _ = self.state.withLockedValue { $0.finishHashing(index, matches: false, final: false) }
            throw error
        }
        let matches = actual.digest == expected.digest
        let verdict = self.state.withLockedValue { $0.finishHashing(index, matches: matches, final: final) }
        let mismatch =
            matches
            ? nil
            : ChecksumMismatch(expected: expected, source: .piece(index: index, range: range), actual: actual.digest)
        return (verdict, mismatch)
    }
}
