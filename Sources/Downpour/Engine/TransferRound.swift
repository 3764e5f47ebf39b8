/// One round of a download's workers, from a ``DownloadStateMachine/Action/startRound(_:)`` until the machine has
/// stopped them: the workers, the pause watch, the permit watch, the progress reports, the journal timer and the
/// slow-connection watch run as one task group; what they report goes to the machine, and the round does the
/// ``DownloadStateMachine/RoundAction`` it answers.
struct TransferRound: Sendable {
    typealias RoundAction = DownloadStateMachine.RoundAction

    let session: TransferSession
    let gate: PauseGate
    /// Syncs the data and records what is on disk.
    let saveJournal: @Sendable () async throws(DownloadError) -> Void
    /// The download's write permit, asked every ``permitInterval`` while the round runs; `nil`: none.
    let writePermit: (@Sendable () async -> Bool)?
    /// Records what is written without a sync, every ``unsyncedJournalInterval``; `nil`: never.
    let saveUnsyncedJournal: (@Sendable () async -> Void)?
    private let reporter: ProgressReporter

    /// How often a round asks the write permit: between the journal's saves (which ask it too), and in a stream,
    /// which saves none, so that a run whose permit was withdrawn stops writing within this, not at its end.
    static let permitInterval = Duration.milliseconds(250)

    /// How often a round records what is written without a sync: a process killed loses at most this much of its
    /// reading to the next run of the same boot (the synced journal lags by its interval and a sync).
    static let unsyncedJournalInterval = Duration.milliseconds(100)

    init(
        session: TransferSession,
        gate: PauseGate,
        writePermit: (@Sendable () async -> Bool)? = nil,
        saveUnsyncedJournal: (@Sendable () async -> Void)? = nil,
        saveJournal: @escaping @Sendable () async throws(DownloadError) -> Void
    ) {
        self.session = session
        self.gate = gate
        self.writePermit = writePermit
        self.saveUnsyncedJournal = saveUnsyncedJournal
        self.saveJournal = saveJournal
        self.reporter = ProgressReporter(session: session)
    }

    /// What the round's tasks report.
    private enum Report: Sendable {
        case workerFinished
        case attemptFailed(AttemptFailure)
        case pauseRequested
        case cancelled
        case journalTick
        case journalSaved
        case journalSaveFailed(DownloadError)
        case slowConnections([SlowConnectionDetector.Verdict], SpeedWatch)
        case permitWithdrawn
        /// A task with nothing to tell ended: the progress reports or a timer, cancelled.
        case ended
    }

    /// Runs a round in `mode` until the machine has stopped its tasks; returns the machine's answer to their
    /// stopping.
    func run(
        _ mode: DownloadStateMachine.Mode,
        machine: inout DownloadStateMachine
    ) async -> DownloadStateMachine.Action {
        if self.gate.isPaused {
            // Paused before the round began: nothing is started, so nothing needs to stop.
            let stop = machine.pauseRequested()
            assert(stop == .cancelWorkers, "a pause at the start of a round answered \(stop)")
            self.session.dropProbeResponse()
            return machine.workersStopped(bytesOnDisk: self.session.completedBytes > 0)
        }
        await withTaskGroup(of: Report.self) { group in
            self.start(mode, in: &group)
            // The pause watch and the progress reports run until cancelled: the group empties only after the
            // machine has cancelled it.
            while let report = await group.next() {
                let next: RoundAction
                switch report {
                case .workerFinished:
                    next = machine.workerFinished(planComplete: self.session.isPlanComplete)
                case .attemptFailed(let failure):
                    next = machine.attemptFailed(failure)
                case .pauseRequested:
                    next = machine.pauseRequested()
                case .cancelled:
                    next = machine.cancelled()
                case .journalTick:
                    next = machine.journalTick()
                case .journalSaved:
                    next = machine.journalSaved()
                case .journalSaveFailed(let error):
                    next = machine.journalSaveFailed(error)
                case .slowConnections(let verdicts, let watch):
                    self.watchSpeed(watch, in: &group)
                    next = machine.slowVerdicts(verdicts)
                case .permitWithdrawn:
                    next = machine.permitWithdrawn()
                case .ended:
                    next = .none
                }
                self.execute(next, in: &group)
            }
        }
        // Only the first round's connection 1 can take the probe's response on.
        self.session.dropProbeResponse()
        self.reporter.report()
        return machine.workersStopped(bytesOnDisk: self.session.completedBytes > 0)
    }

    /// Starts the round's tasks: the workers, their companions, and in ranges the journal's timer and the
    /// slow-connection watch.
    private func start(_ mode: DownloadStateMachine.Mode, in group: inout TaskGroup<Report>) {
        let session = self.session
        switch mode {
        case .segmented:
            for id in 1...session.configuration.connections {
                group.addTask {
                    do throws(AttemptFailure) {
                        try await SegmentWorker(id: id, session: session).run()
                        return .workerFinished
                    } catch {
                        return .attemptFailed(error)
                    }
                }
            }
            self.startCompanions(in: &group)
            self.execute(.scheduleJournalTick, in: &group)
            let policy = session.configuration.slowConnections
            if policy.lowestSpeed != nil || (policy.shareOfMedian != nil && session.configuration.connections > 1) {
                self.watchSpeed(SpeedWatch(policy: policy), in: &group)
            }
        case .stream:
            session.startStream()
            group.addTask {
                do throws(AttemptFailure) {
                    _ = try await StreamWorker(id: 1, session: session).run()
                    return .workerFinished
                } catch {
                    return .attemptFailed(error)
                }
            }
            self.startCompanions(in: &group)
        }
    }

    private func execute(_ action: RoundAction, in group: inout TaskGroup<Report>) {
        switch action {
        case .none:
            break
        case .cancelWorkers:
            group.cancelAll()
        case .scheduleJournalTick:
            let interval = self.session.configuration.journalInterval
            _ = group.addTaskUnlessCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return .ended
                }
                return .journalTick
            }
        case .saveJournal:
            let save = self.saveJournal
            _ = group.addTaskUnlessCancelled {
                do throws(DownloadError) {
                    try await save()
                    return .journalSaved
                } catch {
                    return .journalSaveFailed(error)
                }
            }
        case .restartConnections(let verdicts):
            for verdict in verdicts {
                self.session.restart(verdict)
            }
        }
    }

    /// The pause watch, the permit watch, the progress reports and the hashing of the file's first bytes, beside
    /// the workers of every round.
    private func startCompanions(in group: inout TaskGroup<Report>) {
        let gate = self.gate
        group.addTask {
            await gate.waitUntilPaused()
            return Task.isCancelled ? .cancelled : .pauseRequested
        }
        if let permitted = self.writePermit {
            // Asked at once too: a round resumed after a pause has asked nothing since.
            group.addTask {
                while true {
                    if !(await permitted()) { return .permitWithdrawn }
                    do {
                        try await Task.sleep(for: Self.permitInterval)
                    } catch {
                        return .ended
                    }
                }
            }
        }
        if let save = self.saveUnsyncedJournal, self.session.isSegmented {
            group.addTask {
                while true {
                    do {
                        try await Task.sleep(for: Self.unsyncedJournalInterval)
                    } catch {
                        return .ended
                    }
                    await save()
                }
            }
        }
        let reporter = self.reporter
        let interval = self.session.configuration.progressInterval
        group.addTask {
            while true {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return .ended
                }
                reporter.report()
            }
        }
        if let hasher = self.session.hasher {
            let session = self.session
            group.addTask {
                await Self.hashAsBytesArrive(hasher, session: session)
                return .ended
            }
        }
        if let checker = self.session.pieceChecker {
            let session = self.session
            group.addTask {
                await Self.verifyAsPiecesArrive(checker, session: session)
                return .ended
            }
        }
    }

    /// Verifies every piece whose bytes are all on disk, until cancelled, so that the check after the transfer
    /// reads only what came last. Only matches count here: a bad piece, or a failed read, is left for that check
    /// to find again and act on.
    private static func verifyAsPiecesArrive(_ checker: PieceChecker, session: TransferSession) async {
        while !Task.isCancelled {
            let pieces = checker.piecesToHash(done: session.bytesOnDisk(), final: false)
            for index in pieces {
                do {
                    _ = try await checker.check(index, final: false)
                } catch {
                    return
                }
            }
            if pieces.isEmpty {
                do {
                    try await Task.sleep(for: Self.hashingPollInterval)
                } catch {
                    return
                }
            }
        }
    }

    /// Hashes the file as far as it is on disk without a gap, until cancelled, so that verifying it at the end
    /// reads only the tail. A failed read is left for that last step to find again and report.
    private static func hashAsBytesArrive(_ hasher: PrefixHasher, session: TransferSession) async {
        while !Task.isCancelled {
            let worked: Bool
            do {
                worked = try await hasher.advance(to: session.contiguousBytes, atMost: Self.hashingStep)
            } catch {
                return
            }
            if !worked {
                do {
                    try await Task.sleep(for: Self.hashingPollInterval)
                } catch {
                    return
                }
            }
        }
    }

    /// The most bytes hashed before the hasher looks at the file again.
    static let hashingStep: Int64 = 64 * 1024 * 1024
    /// How often a hasher that has caught up looks for new bytes.
    static let hashingPollInterval = Duration.milliseconds(20)

    private func watchSpeed(_ watch: SpeedWatch, in group: inout TaskGroup<Report>) {
        let session = self.session
        _ = group.addTaskUnlessCancelled {
            var watch = watch
            guard let verdicts = await watch.next(session.readings) else { return .ended }
            return .slowConnections(verdicts, watch)
        }
    }

    /// The ``SlowConnectionDetector`` with its clock, checking the connections' readings every fifth of its
    /// window; carried from one watch task to the next.
    private struct SpeedWatch: Sendable {
        var detector: SlowConnectionDetector
        let step: Duration
        let start = ContinuousClock.now

        init(policy: DownloadConfiguration.SlowConnections) {
            self.detector = SlowConnectionDetector(
                window: policy.window,
                shareOfMedian: policy.shareOfMedian,
                lowestSpeed: policy.lowestSpeed
            )
            self.step = max(policy.window / 5, .milliseconds(20))
        }

        /// Waits until the detector finds connections too slow; `nil` when cancelled first.
        mutating func next(
            _ readings: () -> [SlowConnectionDetector.Reading]
        ) async -> [SlowConnectionDetector.Verdict]? {
            while true {
                do {
                    try await Task.sleep(for: self.step)
                } catch {
                    return nil
                }
                let verdicts = self.detector.check(readings(), now: (ContinuousClock.now - self.start).inSeconds)
                if !verdicts.isEmpty { return verdicts }
            }
        }
    }
}
