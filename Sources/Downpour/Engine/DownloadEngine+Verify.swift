import Foundation
import Logging

/// The record and verify stages: the journal that says which bytes are on disk, and the checks of the bytes once
/// they are all in, against the piece digests and the file's digest. What a check leads to (fetching pieces
/// again, starting over, failing) is the ``DownloadStateMachine``'s to say.
extension DownloadEngine {
    /// Syncs the data and records what is on disk (nothing while streaming: a stream has no journal).
    func saveJournal(_ journal: JournalStore, session: TransferSession) async throws(DownloadError) {
        guard session.isSegmented else { return }
        try await self.saveJournal(journal, session: session, done: session.doneRanges())
    }

    /// Syncs the data and records `done` as what is on disk.
    func saveJournal(
        _ journal: JournalStore,
        session: TransferSession,
        done: ByteRangeSet
    ) async throws(DownloadError) {
        try await self.checkWritePermit()
        guard let record = self.journalRecord(session, done: done) else { return }
        let file = session.file
        try await BlockingIO.run { () throws(DownloadError) in
            try journal.save(record, syncing: file)
        }
    }

    /// Records what is written so far without a sync, for a later run of this boot
    /// (``JournalStore/saveUnsynced(_:)``); from within a round only, where nothing takes ranges out of the plan
    /// (a start over, a fall-back to a stream and forgotten pieces come between rounds). Nothing while
    /// streaming, nor for a download verified in pieces: a bad piece taken out of the journal must not come back
    /// from a capture made before. A failure is passed over: the synced journal still holds.
    func saveUnsyncedJournal(_ journal: JournalStore, session: TransferSession) async {
        guard journal.bootID != nil, session.isSegmented, session.pieceChecker == nil else { return }
        // Most ticks of a slow or paused transfer find nothing new: no record is built, no permit asked.
        let done = session.doneRanges()
        guard !journal.records(done), let record = self.journalRecord(session, done: done),
            await self.writePermitted()
        else { return }
        try? await BlockingIO.run { () throws(DownloadError) in
            try journal.saveUnsynced(record)
        }
    }

    /// The journal of `session` with `done` on disk; `nil` while the length is unknown.
    private func journalRecord(_ session: TransferSession, done: ByteRangeSet) -> ResumeJournal? {
        let remote = session.remoteFile
        guard let length = remote.length else { return nil }
        return ResumeJournal(
            sourceURL: self.request.url.absoluteString,
            finalURL: remote.url.absoluteString,
            length: length,
            etag: remote.etag,
            lastModified: remote.lastModified,
            done: done,
            mirrors: self.request.mirrors.isEmpty ? nil : session.mirrors.validatorsToRecord
        )
    }

    /// Checks the length against the piece digests, then hashes every piece that is not verified yet (all its
    /// bytes are on disk once the transfer ended; most were verified while it ran) and compares it with its
    /// digest; a bad one is reported (``pieceFailed(_:range:mismatch:verdict:session:)``).
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read, ``DownloadError/Code/cancelled``.
    func checkPieces(_ session: TransferSession) async throws(DownloadError) -> DownloadStateMachine.PieceCheck {
        let length = session.completedBytes
        do {
            try self.checkLength(length)
        } catch {
            return .fatal(error)
        }
        guard let checksums = self.request.configuration.pieceChecksums else { return .verified }
        // Made with the session when the length was known; else (a stream) now that the transfer gave it.
        let checker = session.pieceChecker ?? PieceChecker(checksums: checksums, length: length, file: session.file)
        var refetch: [Range<Int64>] = []
        let done = session.isSegmented ? session.doneRanges() : ByteRangeSet([0..<checker.length])
        let before = checker.progress.verified
        var bad: Set<Int> = []
        // Until every piece is verified or known bad (a hash that did not count is made again).
        while true {
            let pieces = checker.piecesToHash(done: done, final: true).filter { !bad.contains($0) }
            if pieces.isEmpty { break }
            for index in pieces {
                if Task.isCancelled { throw .cancelled }
                let (verdict, mismatch) = try await checker.check(index, final: true)
                guard let verdict, verdict != .verified, let mismatch else { continue }
                let range = checker.range(ofPiece: index)
                let failure = self.pieceFailed(
                    index,
                    range: range,
                    mismatch: mismatch,
                    verdict: verdict,
                    session: session
                )
                if let failure { return .fatal(failure) }
                bad.insert(index)
                refetch.append(range)
            }
        }
        let progress = checker.progress
        self.logger.info(
            "Verified the pieces",
            metadata: [
                "verified": "\(progress.verified)", "pieces": "\(progress.pieces)",
                "whileTransferring": "\(before)", "refetch": "\(refetch.count)",
            ]
        )
        return refetch.isEmpty ? .verified : .bad(refetch)
    }

    /// A piece did not match its digest: says so, and returns the error that ends the download when the piece
    /// cannot be fetched again (its last try, or a server without ranges); `nil` when it will be fetched again.
    private func pieceFailed(
        _ index: Int,
        range: Range<Int64>,
        mismatch: ChecksumMismatch,
        verdict: PieceVerification.Verdict,
        session: TransferSession
    ) -> DownloadError? {
        // A mirror that sent bytes of a bad piece gets no more work; the piece is fetched again from the others
        // (the last mirror left is never dropped: it gets the piece once more).
        _ = session.dropMirrors(
            thatWrote: range,
            reason: "it sent bytes of piece \(index) that do not match its digest"
        )
        let tries = PieceVerification.maximumTries
        let canRefetch = session.isSegmented
        if case .refetch = verdict, canRefetch {
            let notice = mismatch.summary + "; fetching it again (at most \(tries) fetches in all)."
            self.logger.info("\(notice)", metadata: ["piece": "\(index)", "range": "\(range)"])
            self.hub.emit(.notice(notice))
            return nil
        }
        let reason =
            canRefetch
            ? "after \(tries) fetches" : "and the server does not send ranges, so it cannot be fetched again alone"
        return DownloadError(
            code: .checksumMismatch,
            message: mismatch.summary + " " + reason + "; the file was removed.",
            underlying: mismatch
        )
    }

    /// Hashes what the hasher has not hashed yet and compares it with `expected`.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read, ``DownloadError/Code/cancelled``.
    func checkDigest(
        _ session: TransferSession,
        against expected: ExpectedChecksum?
    ) async throws(DownloadError) -> DownloadStateMachine.DigestCheck {
        guard let expected, let hasher = session.hasher else { return .match }
        let actual = try await hasher.finish(length: session.completedBytes)
        let matches = actual.digest == expected.checksum.digest
        self.logger.info(
            "Verified the digest",
            metadata: [
                "algorithm": "\(actual.algorithm)", "expected": "\(expected.checksum.digest)",
                "actual": "\(actual.digest)", "source": "\(expected.source)", "matches": "\(matches)",
            ]
        )
        guard !matches else { return .match }
        return .mismatch(
            ChecksumMismatch(expected: expected.checksum, source: expected.source, actual: actual.digest),
            fromSeveralResponses: session.snapshot().requests > 1
        )
    }
}
