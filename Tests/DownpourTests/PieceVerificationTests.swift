import Foundation
import Testing

@testable import Downpour

@Suite("Piece verification")
struct PieceVerificationTests {
    /// Ten pieces of 100 bytes over 950 bytes: the last one is 50 bytes long.
    static func verification(length: Int64 = 950) -> PieceVerification {
        let digests = Array(repeating: String(repeating: "0", count: 64), count: 10)
        return PieceVerification(
            checksums: PieceChecksums(algorithm: .sha256, pieceLength: 100, digests: digests),
            length: length
        )
    }

    struct HashCase: Sendable, CustomTestStringConvertible {
        var done: [Range<Int64>]
        var verified: [Int]
        var toHash: [Int]
        var testDescription: String { "done \(self.done), verified \(self.verified)" }
    }

    @Test(
        "which pieces to hash: those not verified yet whose bytes are all done",
        arguments: [
            HashCase(done: [], verified: [], toHash: []),
            HashCase(done: [0..<950], verified: [], toHash: Array(0..<10)),
            HashCase(done: [0..<950], verified: [0, 2, 9], toHash: [1, 3, 4, 5, 6, 7, 8]),
            HashCase(done: [0..<99], verified: [], toHash: []),
            HashCase(done: [0..<100], verified: [], toHash: [0]),
            HashCase(done: [50..<350], verified: [], toHash: [1, 2]),
            HashCase(done: [100..<200, 300..<400], verified: [], toHash: [1, 3]),
            HashCase(done: [100..<200, 300..<400], verified: [3], toHash: [1]),
            HashCase(done: [0..<400, 401..<950], verified: [], toHash: [0, 1, 2, 3, 5, 6, 7, 8, 9]),
            HashCase(done: [900..<950], verified: [], toHash: [9]),
            HashCase(done: [850..<949], verified: [], toHash: []),
        ]
    )
    func piecesToHash(_ row: HashCase) {
        var verification = Self.verification()
        for index in row.verified {
            #expect(verification.record(piece: index, matches: true) == .verified)
        }
        #expect(verification.piecesToHash(done: ByteRangeSet(row.done)) == row.toHash)
    }

    @Test("a bad piece is fetched again until its third fetch is bad too; a good one stays verified")
    func verdicts() {
        var verification = Self.verification()
        #expect(verification.record(piece: 9, matches: false) == .refetch(900..<950))
        #expect(verification.record(piece: 9, matches: false) == .refetch(900..<950))
        #expect(verification.record(piece: 9, matches: false) == .failed(900..<950))
        #expect(verification.record(piece: 4, matches: false) == .refetch(400..<500))
        #expect(verification.record(piece: 4, matches: true) == .verified)
        #expect(verification.piecesToHash(done: ByteRangeSet([0..<950])) == [0, 1, 2, 3, 5, 6, 7, 8, 9])
        #expect(!verification.isComplete)
        for index in [0, 1, 2, 3, 5, 6, 7, 8, 9] {
            _ = verification.record(piece: index, matches: true)
        }
        #expect(verification.isComplete)
        #expect(verification.verifiedCount == 10)
        verification.startOver()
        #expect(verification.verifiedCount == 0)
        #expect(verification.failures[9] == 3, "failures outlive a start from zero")
    }

    @Test("while the transfer runs: only matches count, a bad piece waits for the end, a rewrite undoes a match")
    func whileTransferring() {
        var verification = Self.verification()
        let all = ByteRangeSet([0..<950])
        verification.startHashing(0)
        verification.startHashing(1)
        #expect(verification.piecesToHash(done: all, final: false) == Array(2..<10), "not twice at once")
        #expect(verification.finishHashing(0, matches: true, final: false) == .verified)
        // A bad piece found early is left for the check after the transfer, which counts it.
        #expect(verification.finishHashing(1, matches: false, final: false) == nil)
        #expect(verification.failures[1] == 0)
        #expect(verification.piecesToHash(done: all, final: false) == Array(2..<10))
        #expect(verification.piecesToHash(done: all, final: true) == Array(1..<10))
        // Written again: no longer verified, no longer suspect.
        verification.noteRewrite(50..<120)
        #expect(verification.piecesToHash(done: all, final: false) == Array(0..<10))
        // A rewrite while a piece is hashed: that hash does not count.
        verification.startHashing(3)
        verification.noteRewrite(399..<400)
        #expect(verification.finishHashing(3, matches: true, final: false) == nil)
        #expect(verification.piecesToHash(done: all, final: false).contains(3))
        verification.startHashing(3)
        #expect(verification.finishHashing(3, matches: true, final: false) == .verified)
        // At the end a mismatch counts.
        verification.startHashing(1)
        #expect(verification.finishHashing(1, matches: false, final: true) == .refetch(100..<200))
        #expect(verification.failures[1] == 1)
        // A stream that starts over from byte 0 undoes everything, also past the end.
        verification.noteRewrite(0..<Int64.max)
        #expect(verification.verifiedCount == 0)
    }

    @Test("an empty file with one digest is one empty piece")
    func emptyFile() {
        let checksums = PieceChecksums(algorithm: .md5, pieceLength: 16, digests: ["d41d8cd98f00b204e9800998ecf8427e"])
        #expect(checksums.possibleLengths == 0...16)
        var verification = PieceVerification(checksums: checksums, length: 0)
        #expect(verification.piecesToHash(done: ByteRangeSet()) == [0])
        #expect(verification.range(ofPiece: 0) == 0..<0)
        #expect(verification.record(piece: 0, matches: true) == .verified)
        #expect(verification.piecesToHash(done: ByteRangeSet()) == [])
    }

    @Test("the lengths piece digests can describe, and a configuration that contradicts them")
    func lengths() throws {
        let digest = String(repeating: "a", count: 64)
        let checksums = PieceChecksums(algorithm: .sha256, pieceLength: 100, digests: [digest, digest, digest])
        #expect(checksums.possibleLengths == 201...300)
        #expect(checksums.range(ofPiece: 2, length: 250) == 200..<250)
        var configuration = DownloadConfiguration(pieceChecksums: checksums, expectedLength: 250)
        try configuration.validate()
        configuration.expectedLength = 200
        #expect(throws: DownloadError.self) { try configuration.validate() }
        configuration.expectedLength = nil
        configuration.pieceChecksums?.digests[1] = "xyz"
        let error = try #require(throws: DownloadError.self) { try configuration.validate() }
        #expect(error.message.contains("Piece 1"))
        configuration.pieceChecksums = PieceChecksums(algorithm: .sha256, pieceLength: 0, digests: [digest])
        #expect(throws: DownloadError.self) { try configuration.validate() }
        // Stored and read back.
        configuration.pieceChecksums = checksums
        configuration.expectedLength = 300
        let decoded = try JSONDecoder().decode(
            DownloadConfiguration.self,
            from: try JSONEncoder().encode(configuration)
        )
        #expect(decoded == configuration)
    }

    @Test(
        "removing ranges from a set of done bytes",
        arguments: [
            ([0..<100], 20..<30, [0..<20, 30..<100]),
            ([0..<100], 0..<100, []),
            ([0..<100], 100..<200, [0..<100]),
            ([0..<50, 60..<100], 40..<70, [0..<40, 70..<100]),
            ([0..<50, 60..<100, 200..<300], 0..<250, [250..<300]),
            ([10..<20], 0..<0, [10..<20]),
        ] as [([Range<Int64>], Range<Int64>, [Range<Int64>])]
    )
    func remove(_ ranges: [Range<Int64>], _ removed: Range<Int64>, _ expected: [Range<Int64>]) {
        var set = ByteRangeSet(ranges)
        set.remove(removed)
        #expect(set.ranges == expected)
    }
}
