import Logging

/// The plan and fetch stages: the ``TransferSession`` with its first plan, and the ``DownloadStateMachine`` driven
/// to its end: rounds of workers, journal saves, pauses, a fall-back to one stream, and the checks of the bytes
/// once they are all in (`DownloadEngine+Verify.swift`), with what those lead to.
extension DownloadEngine {
    /// The session of the transfer: in ranges when the server allows, planned from the bytes resumed and the
    /// probe's; else one stream. The probe's bytes count as fetched.
    func plan(_ probed: Probed, _ output: PreparedOutput) -> TransferSession {
        let configuration = self.request.configuration
        let remote = probed.remote
        let hasher = output.expected.map { PrefixHasher(algorithm: $0.checksum.algorithm, file: output.file) }
        let mode: TransferState.Mode
        if remote.isSegmentable {
            var done = output.resumed
            if let prefetched = output.prefetched, !prefetched.isEmpty { done.insert(prefetched) }
            mode = .segmented(
                self.planner(
                    for: remote,
                    done: done,
                    inPiecesForHashing: hasher != nil,
                    onItsWay: probed.outcome.running?.range
                )
            )
        } else {
            mode = .stream(received: 0)
        }
        let session = TransferSession(
            transport: probed.transport,
            file: output.file,
            remoteFile: remote,
            mode: mode,
            headers: probed.outcome.headers,
            configuration: configuration,
            logger: self.logger,
            hub: self.hub,
            budget: self.downloader.connectionBudget,
            pacing: self.pacing,
            authorization: probed.authorization,
            hasher: hasher,
            // With the length known now (it matched the digests), pieces are verified as they come in.
            pieceChecker: probed.product == .file
                ? configuration.pieceChecksums.flatMap { checksums in
                    remote.length.map { PieceChecker(checksums: checksums, length: $0, file: output.file) }
                } : nil,
            mirrors: MirrorSet(
                urls: probed.urls,
                primary: probed.index,
                remote: remote,
                failed: probed.failedMirrors,
                recorded: output.recordedMirrors
            ),
            probeResponse: probed.outcome.running,
            resumed: output.resumed
        )
        if let prefetched = output.prefetched { session.prefetched(prefetched) }
        return session
    }

    /// Does what the ``DownloadStateMachine`` answers, one action for each event, until every byte is in and
    /// checked and the file has its name (``finish(_:_:)``), or the download has ended with an error.
    ///
    /// - Throws: what ends the download, after ``abandon(_:_:error:keepPartial:)`` left on disk what is worth
    ///   keeping.
    func fetch(_ session: TransferSession, _ output: PreparedOutput) async throws(DownloadError) -> DownloadResult {
        let configuration = session.configuration
        var machine = DownloadStateMachine(
            connections: configuration.connections,
            checks: DownloadStateMachine.Checks(
                pieces: configuration.pieceChecksums != nil && output.probed.product == .file,
                digest: output.expected != nil
            ),
            resumed: output.resumed.byteCount > 0
        )
        // The bytes resumed and the probe's may be the whole file: then no round runs.
        let allBytesIn = session.isSegmented ? session.isPlanComplete : output.prefetched != nil
        if allBytesIn { ProgressReporter(session: session).report() }
        var action = machine.probeFinished(segmentable: session.isSegmented, allBytesIn: allBytesIn)
        let journal = output.journal
        // A round of its own each time: its progress meters start afresh.
        let round = { [self] in
            TransferRound(
                session: session,
                gate: self.gate,
                writePermit: self.writePermit,
                saveUnsyncedJournal: { [self, session] in await self.saveUnsyncedJournal(journal, session: session) },
                saveJournal: { [self, session] () async throws(DownloadError) in
                    try await self.saveJournal(journal, session: session)
                }
            )
        }
        while true {
            switch action {
            case .startRound(let mode):
                action = await round().run(mode, machine: &machine)
            case .resume(let mode):
                self.hub.emit(.resumed)
                action = await round().run(mode, machine: &machine)
            case .fallBackToStream:
                try await self.fallBackToStream(session, output)
                action = await round().run(.stream, machine: &machine)
            case .saveBeforePause:
                do throws(DownloadError) {
                    try await self.saveJournal(journal, session: session)
                    action = machine.pauseSaved()
                } catch {
                    action = machine.pauseSaveFailed(error)
                }
            case .reportPaused:
                self.hub.emit(.paused)
                await self.gate.waitUntilResumed()
                action = machine.pauseEnded(cancelled: Task.isCancelled)
            case .verifyPieces:
                do throws(DownloadError) {
                    action = machine.piecesChecked(try await self.checkPieces(session))
                } catch {
                    action = machine.checkFailed(error)
                }
            case .verifyDigest:
                do throws(DownloadError) {
                    action = machine.digestChecked(try await self.checkDigest(session, against: output.expected))
                } catch {
                    action = machine.checkFailed(error)
                }
            case .refetchPieces(let ranges):
                do throws(DownloadError) {
                    try await self.forget(ranges, session, journal)
                    action = machine.piecesForgotten()
                } catch {
                    action = machine.refetchFailed(error)
                }
            case .startOver(let notice):
                do throws(DownloadError) {
                    try await self.startOver(notice, session, output)
                    action = machine.startedOver()
                } catch {
                    action = machine.startOverFailed(error)
                }
            case .finish:
                do throws(DownloadError) {
                    try await self.commitToFinish(session, output)
                } catch {
                    action = machine.finishRefused(error)
                    continue
                }
                return try await self.finish(session, output)
            case .fail(let error, let keepPartial):
                throw await self.abandon(session, output, error: error, keepPartial: keepPartial)
            }
        }
    }

    /// The server ignores ranges: the journal goes (only while this run may still write), and the plan with it.
    private func fallBackToStream(_ session: TransferSession, _ output: PreparedOutput) async throws(DownloadError) {
        do throws(DownloadError) {
            try await self.checkWritePermit()
        } catch {
            // Another writer's now: nothing here is this run's to keep or remove.
            throw await self.abandon(session, output, error: error, keepPartial: false)
        }
        self.logger.info("The server ignores ranges; downloading as one stream")
        self.hub.emit(.notice("The server ignores range requests; downloading as one stream."))
        let journal = output.journal
        try? await BlockingIO.runEvenIfCancelled { journal.remove() }
        session.fallBackToStream()
    }

    /// Takes the bad pieces `ranges` out of the journal and plans them again: only these pieces are fetched again.
    /// The journal forgets them first, so that a crash before they are in again does not trust their bytes.
    private func forget(
        _ ranges: [Range<Int64>],
        _ session: TransferSession,
        _ journal: JournalStore
    ) async throws(DownloadError) {
        var done = session.doneRanges()
        for range in ranges { done.remove(range) }
        try await self.saveJournal(journal, session: session, done: done)
        // The whole-file hash may have taken in the bad bytes: it starts over once they are replaced.
        if let lowest = ranges.map(\.lowerBound).min() {
            session.hasher?.noteRewrite(from: lowest)
        }
        // Each piece in one request, not cut up for the prefix hasher.
        session.replan(self.planner(for: session.remoteFile, done: done, inPiecesForHashing: false))
    }

    /// Tells `notice`, removes the journal, empties the file and plans it whole.
    private func startOver(
        _ notice: String,
        _ session: TransferSession,
        _ output: PreparedOutput
    ) async throws(DownloadError) {
        self.logger.info("\(notice)")
        self.hub.emit(.notice(notice))
        let (journal, file, remote) = (output.journal, output.file, session.remoteFile)
        try await self.checkWritePermit()
        try await BlockingIO.run { () throws(DownloadError) in
            journal.remove()
            try file.startOver(length: remote.isSegmentable ? remote.length : nil)
        }
        session.startOver(self.planner(for: remote, done: ByteRangeSet(), inPiecesForHashing: session.hasher != nil))
    }

    /// The plan for the bytes of `remote` not in `done`. `inPiecesForHashing` lets the planner hand out small
    /// pieces front first, for a prefix hasher that follows the download; `onItsWay` is the probe's response,
    /// a range of its own.
    private func planner(
        for remote: RemoteFile,
        done: ByteRangeSet,
        inPiecesForHashing: Bool,
        onItsWay: Range<Int64>? = nil
    ) -> SegmentPlanner {
        let configuration = self.request.configuration
        let length = remote.length ?? 0
        return SegmentPlanner(
            length: length,
            connections: configuration.connections,
            minimumSplitSize: configuration.minimumSplitSize,
            minimumRaceSize: configuration.minimumRaceSize,
            done: done,
            pieceSize: inPiecesForHashing && configuration.connections > 1
                ? Self.pieceSize(missing: length - done.byteCount, connections: configuration.connections) : nil,
            onItsWay: onItsWay
        )
    }

    /// The piece size when the file is hashed as it arrives: the connections work near the front of the file,
    /// so its gapless start grows at the speed of all of them together, and at the end only the last few pieces
    /// are left to hash. Pieces of a sixteenth of each connection's share (at most 16 MiB) keep that tail short
    /// and the extra requests few.
    static func pieceSize(missing: Int64, connections: Int) -> Int64 {
        min(16 * 1024 * 1024, max(1, missing / Int64(connections * 16)))
    }
}
