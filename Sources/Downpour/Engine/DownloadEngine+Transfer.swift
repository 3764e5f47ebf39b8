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
        let mode: TransferSession.Mode
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
            pacing: Pacing(limiters: [self.downloader.overallLimiter, self.limiter]),
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

    /// Does what the ``DownloadStateMachine`` answers, action by action, until every byte is in and checked. A
    /// start action takes the rest of its list into its ``TransferRound``; an action that waits for an event (a
    /// save, a pause, a check) ends its list, and the machine's answer to that event is the next list. Returns the
    /// machine, finished.
    ///
    /// - Throws: what ends the download, after ``abandon(_:_:error:machine:)`` or ``discard(_:error:)`` left on
    ///   disk what is worth keeping.
    func fetch(_ session: TransferSession, _ output: PreparedOutput) async throws(DownloadError) -> DownloadStateMachine
    {
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
        var actions = machine.probeFinished(segmentable: session.isSegmented, allBytesIn: allBytesIn)
        let journal = output.journal
        while let action = actions.first {
            switch action {
            case .startSegmented, .startStream:
                let round = TransferRound(session: session, gate: self.gate) {
                    [self, session] () async throws(DownloadError) in
                    try await self.saveJournal(journal, session: session)
                }
                actions = await round.run(actions, machine: &machine)
            case .saveJournal:
                precondition(actions.count == 1, "a save ends its list: \(actions)")
                do throws(DownloadError) {
                    try await self.saveJournal(journal, session: session)
                    actions = machine.journalSaved()
                } catch {
                    actions = machine.journalSaveFailed(error)
                }
            case .reportPaused:
                precondition(actions.count == 1, "a pause ends its list: \(actions)")
                self.hub.emit(.paused)
                await self.gate.waitUntilResumed()
                actions = Task.isCancelled ? machine.cancelled() : machine.resumeRequested()
            case .reportResumed:
                self.hub.emit(.resumed)
                actions.removeFirst()
            case .fallBackToStream:
                // The journal goes: only while this run may still write.
                do throws(DownloadError) {
                    try await self.checkWritePermit()
                } catch {
                    throw await self.abandon(session, output, error: error, machine: machine)
                }
                self.logger.info("The server ignores ranges; downloading as one stream")
                self.hub.emit(.notice("The server ignores range requests; downloading as one stream."))
                try? await BlockingIO.runEvenIfCancelled { journal.remove() }
                session.fallBackToStream()
                actions.removeFirst()
            case .verifyPieces:
                precondition(actions.count == 1, "a check ends its list: \(actions)")
                do throws(DownloadError) {
                    actions = machine.piecesChecked(try await self.checkPieces(session))
                } catch {
                    actions = machine.checkFailed(error)
                }
            case .verifyDigest:
                precondition(actions.count == 1, "a check ends its list: \(actions)")
                do throws(DownloadError) {
                    actions = machine.digestChecked(try await self.checkDigest(session, against: output.expected))
                } catch {
                    actions = machine.checkFailed(error)
                }
            case .refetchPieces(let ranges):
                precondition(actions.count == 1, "a refetch ends its list: \(actions)")
                // Only these pieces are fetched again; the journal forgets them first, so that a crash before they
                // are in again does not trust their bytes.
                var done = session.doneRanges()
                for range in ranges { done.remove(range) }
                do throws(DownloadError) {
                    try await self.saveJournal(journal, session: session, done: done)
                    // The whole-file hash may have taken in the bad bytes: it starts over once they are replaced.
                    if let lowest = ranges.map(\.lowerBound).min() {
                        session.hasher?.noteRewrite(from: lowest)
                    }
                    // Each piece in one request, not cut up for the prefix hasher.
                    session.replan(self.planner(for: session.remoteFile, done: done, inPiecesForHashing: false))
                    actions = machine.piecesForgotten()
                } catch {
                    actions = machine.journalSaveFailed(error)
                }
            case .startOver(let notice):
                precondition(actions.count == 1, "a start over ends its list: \(actions)")
                self.logger.info("\(notice)")
                self.hub.emit(.notice(notice))
                let (file, remote) = (output.file, session.remoteFile)
                do throws(DownloadError) {
                    try await self.checkWritePermit()
                    try await BlockingIO.run { () throws(DownloadError) in
                        journal.remove()
                        try file.startOver(length: remote.isSegmentable ? remote.length : nil)
                    }
                    session.startOver(
                        self.planner(for: remote, done: ByteRangeSet(), inPiecesForHashing: session.hasher != nil)
                    )
                    actions = machine.startedOver()
                } catch {
                    actions = machine.startOverFailed(error)
                }
            case .finish:
                return machine
            case .fail(let error):
                throw await self.abandon(session, output, error: error, machine: machine)
            case .discard(let error):
                throw await self.discard(output, error: error)
            case .cancelWorkers, .scheduleJournalTick, .restartConnection:
                preconditionFailure("\(action) outside a round")
            }
        }
        preconditionFailure("the state machine left the download without an action")
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
