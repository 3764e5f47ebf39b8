import Foundation
import Logging

/// Runs one download from probe to final name: the work behind ``Download/run()``.
struct DownloadEngine: Sendable {
    let request: DownloadRequest
    let downloader: Downloader
    let hub: DownloadEventHub
    let gate: PauseGate
    let limiter: BandwidthLimiter
    let logger: Logger
    /// Told the `.part` path as soon as it is known, so that a cancel can remove it.
    let partPathKnown: @Sendable (String) -> Void

    func run() async throws(DownloadError) -> DownloadResult {
        do {
            return try await self.perform()
        } catch {
            if Task.isCancelled && error.code != .localIO {
                throw DownloadError(
                    code: .cancelled,
                    message: error.resumable
                        ? "The download was stopped; what arrived is kept and the same request resumes it."
                        : "The download was cancelled.",
                    resumable: error.resumable
                )
            }
            throw error
        }
    }

    private func perform() async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        try configuration.validate()
        if case .file(let path) = self.request.destination {
            try self.checkFree(path)
        }
        let transport = try self.downloader.transport(for: configuration, logger: self.logger)
        let clock = ContinuousClock()
        let startedAt = clock.now
        let probe = ResourceProbe(transport: transport, configuration: configuration, logger: self.logger)
        let host = self.request.url.host ?? ""
        let budget = self.downloader.connectionBudget
        do {
            try await budget.acquire(host: host)
        } catch {
            throw .cancelled
        }
        let outcome: ResourceProbe.Outcome
        do {
            outcome = try await probe.probe(self.request.url)
            budget.release(host: host)
        } catch {
            budget.release(host: host)
            throw error
        }
        let remote = outcome.remoteFile
        self.logger.info(
            "Probed",
            metadata: [
                "url": "\(remote.url.absoluteString)", "length": "\(remote.length.map(String.init) ?? "unknown")",
                "ranges": "\(remote.acceptsRanges)", "etag": "\(remote.etag ?? "-")",
            ]
        )

        let path = try self.destinationPath(for: remote)
        try self.checkFree(path)
        let partPath = path + ".part"
        let file = try await BlockingIO.run { () throws(DownloadError) in try OutputFile.openLocked(at: partPath) }
        self.partPathKnown(partPath)
        let journal = JournalStore(partPath: partPath)
        var session = TransferSession(
            transport: transport,
            file: file,
            remoteFile: remote,
            headers: outcome.headers,
            configuration: configuration,
            logger: self.logger,
            hub: self.hub,
            budget: budget,
            pacing: Pacing(limiters: [self.downloader.overallLimiter, self.limiter])
        )

        let length: Int64
        do {
            let (resumed, notices) = try await self.prepare(file, journal: journal, remote: remote)
            self.hub.emit(
                .started(
                    DownloadStart(
                        remoteFile: remote,
                        destinationPath: path,
                        connections: remote.isSegmentable ? configuration.connections : 1,
                        resumedBytes: resumed.byteCount
                    )
                )
            )
            for notice in notices {
                self.logger.info("\(notice)")
                self.hub.emit(.notice(notice))
            }
            length = try await self.transfer(&session, resumed: resumed, journal: journal)
        } catch {
            let keep =
                session.remoteFile.isSegmentable && session.completedBytes > 0
                && error.code != .remoteChanged && error.code != .remoteMisbehaved
            if keep {
                // The last save may be up to one interval old; bring it up to date if the disk lets us. In a
                // task of its own, so that the cancellation that stopped the download does not stop this too.
                let finalSave = Task { try await self.saveJournal(journal, session: session) }
                _ = await finalSave.result
            } else {
                journal.remove()
                FileOperations.remove(partPath)
            }
            file.close()
            var failure = error
            failure.resumable = keep
            throw failure
        }

        let finisher = DownloadFinisher(
            file: file,
            journal: journal,
            partPath: partPath,
            path: path,
            overwrite: configuration.overwrite
        )
        try await finisher.finish(truncatingTo: session.remoteFile.length == nil ? length : nil)
        let snapshot = session.snapshot()
        return DownloadResult(
            path: path,
            length: length,
            remoteFile: session.remoteFile,
            downloadedBytes: snapshot.bytesThisRun,
            elapsed: clock.now - startedAt,
            connectionsUsed: max(1, snapshot.mostActiveConnections)
        )
    }

    /// Decides between resuming and starting over (``ResumeDecision``), and readies the `.part` file for it,
    /// off the cooperative pool. Returns the bytes already on disk, and what a person should be told about it.
    private func prepare(
        _ file: OutputFile,
        journal: JournalStore,
        remote: RemoteFile
    ) async throws(DownloadError) -> (ByteRangeSet, [String]) {
        let resume = self.request.configuration.resume
        let (ranges, notices) = try await BlockingIO.run {
            () throws(DownloadError) -> (ByteRangeSet, [String]) in
            var notices: [String] = []
            func startOver(_ notice: String?) throws(DownloadError) -> ByteRangeSet {
                if let notice { notices.append(notice) }
                journal.remove()
                try file.startOver(length: remote.isSegmentable ? remote.length : nil)
                return ByteRangeSet()
            }
            guard remote.isSegmentable, resume else {
                return (try startOver(nil), notices)
            }
            switch journal.load() {
            case .missing:
                let notice = try file.size() > 0 ? "'\(file.path)' has no resume journal beside it; starting over." : nil
                return (try startOver(notice), notices)
            case .unreadable(let reason):
                return (
                    try startOver("The resume journal '\(journal.path)' cannot be trusted (\(reason)); starting over."),
                    notices
                )
            case .loaded(let saved):
                switch ResumeDecision(journal: saved, remote: remote, partSize: try file.size()) {
                case .startOver(let reason):
                    return (try startOver(reason), notices)
                case .resume(let warning):
                    if let warning { notices.append(warning) }
                    if saved.sourceURL != self.request.url.absoluteString && saved.finalURL != remote.url.absoluteString {
                        notices.append("Resuming from a different URL than the first run; length and validators match.")
                    }
                    return (saved.doneRanges, notices)
                }
            }
        }
        return (ranges, notices)
    }

    /// Downloads in ranges when the server allows, else as one stream; returns the length.
    private func transfer(
        _ session: inout TransferSession,
        resumed: ByteRangeSet,
        journal: JournalStore
    ) async throws(DownloadError) -> Int64 {
        do {
            if session.remoteFile.isSegmentable {
                do {
                    return try await self.runSegmented(session, resumed: resumed, journal: journal)
                } catch .rangesIgnored {
                    self.logger.info("The server ignores ranges; downloading as one stream")
                    self.hub.emit(.notice("The server ignores range requests; downloading as one stream."))
                    journal.remove()
                    var remote = session.remoteFile
                    remote.acceptsRanges = false
                    session = session.replacingRemoteFile(remote)
                }
            }
            return try await self.runStream(session)
        } catch {
            switch error {
            case .fatal(let error), .retryable(let error, _):
                throw error
            case .slow(let slow):
                throw DownloadError(
                    code: .network,
                    message: "The connection was too slow (\(ByteCount.formatRate(slow.speed)))."
                )
            case .rangesIgnored:
                throw DownloadError(
                    code: .remoteMisbehaved,
                    message: "The server ignored a range request it had accepted."
                )
            }
        }
    }

    /// Downloads in ranges over up to N connections, saving the journal as it goes; returns the length.
    private func runSegmented(
        _ session: TransferSession,
        resumed: ByteRangeSet,
        journal: JournalStore
    ) async throws(AttemptFailure) -> Int64 {
        let configuration = session.configuration
        let length = session.remoteFile.length ?? 0
        session.startSegmented(
            SegmentPlanner(
                length: length,
                connections: configuration.connections,
                minimumSplitSize: configuration.minimumSplitSize,
                minimumRaceSize: configuration.minimumRaceSize,
                done: resumed
            )
        )
        // No save before the first interval: until then the journal on disk (if any) is still true, and a
        // fresh download has nothing to lose.
        let workers = (1...configuration.connections).map { id in
            { @Sendable () async throws -> Void in
                try await SegmentWorker(id: id, session: session).run()
            }
        }
        let saver = { @Sendable () async throws -> Void in
            while true {
                do {
                    try await Task.sleep(for: configuration.journalInterval)
                } catch {
                    return
                }
                do throws(DownloadError) {
                    try await self.saveJournal(journal, session: session)
                } catch {
                    throw AttemptFailure.fatal(error)
                }
            }
        }
        while try await self.runRound(session, workers: workers, companion: saver, watchesSpeed: true) == .paused {
            do {
                try await self.saveJournal(journal, session: session)
            } catch {
                throw .fatal(error)
            }
            try await self.waitWhilePaused()
        }
        guard session.isPlanComplete else {
            throw .fatal(DownloadError(code: .remoteMisbehaved, message: "The download ended with bytes missing."))
        }
        return length
    }

    /// Downloads as one stream; returns the length. A pause drops the stream; resuming starts it again.
    private func runStream(_ session: TransferSession) async throws(AttemptFailure) -> Int64 {
        session.startStream()
        let worker = { @Sendable () async throws -> Void in
            _ = try await StreamWorker(id: 1, session: session).run()
        }
        while try await self.runRound(session, workers: [worker], companion: nil) == .paused {
            try await self.waitWhilePaused()
            session.startStream()
        }
        // The stream's byte count is its length once the worker has finished.
        return session.completedBytes
    }

    private func waitWhilePaused() async throws(AttemptFailure) {
        self.hub.emit(.paused)
        await self.gate.waitUntilResumed()
        if Task.isCancelled { throw .fatal(.cancelled) }
        self.hub.emit(.resumed)
    }

    private enum RoundOutcome {
        case completed, paused
    }

    private enum ChildOutcome {
        case workerFinished, pauseRequested, companionFinished
    }

    /// Runs the workers until they all finish or a pause is asked for, with progress reports and an optional
    /// companion task (the journal saver) beside them.
    private func runRound(
        _ session: TransferSession,
        workers: [@Sendable () async throws -> Void],
        companion: (@Sendable () async throws -> Void)?,
        watchesSpeed: Bool = false
    ) async throws(AttemptFailure) -> RoundOutcome {
        if self.gate.isPaused { return .paused }
        let reporter = ProgressReporter(session: session)
        let interval = session.configuration.progressInterval
        let gate = self.gate
        do {
            return try await withThrowingTaskGroup(of: ChildOutcome.self) { group in
                for worker in workers {
                    group.addTask {
                        try await worker()
                        return .workerFinished
                    }
                }
                group.addTask {
                    await gate.waitUntilPaused()
                    return Task.isCancelled ? .companionFinished : .pauseRequested
                }
                group.addTask {
                    while true {
                        do {
                            try await Task.sleep(for: interval)
                        } catch {
                            return .companionFinished
                        }
                        reporter.report()
                    }
                }
                if let companion {
                    group.addTask {
                        try await companion()
                        return .companionFinished
                    }
                }
                let slow = session.configuration.slowConnections
                if watchesSpeed, slow.lowestSpeed != nil || (slow.shareOfMedian != nil && workers.count > 1) {
                    group.addTask {
                        await Self.watchSpeed(session, policy: slow)
                        return .companionFinished
                    }
                }
                var running = workers.count
                while let outcome = try await group.next() {
                    switch outcome {
                    case .workerFinished:
                        running -= 1
                        // Every byte is in (a race was won): the losers still reading can stop now.
                        guard running == 0 || session.isPlanComplete else { continue }
                        group.cancelAll()
                        while !group.isEmpty { _ = try? await group.next() }
                        reporter.report()
                        return .completed
                    case .pauseRequested:
                        group.cancelAll()
                        while !group.isEmpty { _ = try? await group.next() }
                        reporter.report()
                        return .paused
                    case .companionFinished:
                        continue
                    }
                }
                return .completed
            }
        } catch let failure as AttemptFailure {
            reporter.report()
            throw failure
        } catch {
            throw .fatal(.cancelled)
        }
    }

    /// Restarts the connections the ``SlowConnectionDetector`` finds too slow, until cancelled.
    private static func watchSpeed(_ session: TransferSession, policy: DownloadConfiguration.SlowConnections) async {
        var detector = SlowConnectionDetector(
            window: policy.window,
            shareOfMedian: policy.shareOfMedian,
            lowestSpeed: policy.lowestSpeed
        )
        let clock = ContinuousClock()
        let start = clock.now
        let step = max(policy.window / 5, .milliseconds(20))
        while true {
            do {
                try await Task.sleep(for: step)
            } catch {
                return
            }
            for verdict in detector.check(session.readings(), now: (clock.now - start).inSeconds) {
                session.restart(verdict)
            }
        }
    }

    /// Syncs the data and records what is on disk.
    private func saveJournal(_ journal: JournalStore, session: TransferSession) async throws(DownloadError) {
        guard let length = session.remoteFile.length else { return }
        let done = session.doneRanges()
        let record = ResumeJournal(
            sourceURL: self.request.url.absoluteString,
            finalURL: session.remoteFile.url.absoluteString,
            length: length,
            etag: session.remoteFile.etag,
            lastModified: session.remoteFile.lastModified,
            done: done
        )
        let file = session.file
        try await BlockingIO.run { () throws(DownloadError) in
            try journal.save(record, syncing: file)
        }
    }

    private func destinationPath(for remote: RemoteFile) throws(DownloadError) -> String {
        switch self.request.destination {
        case .file(let path):
            return path
        case .directory(let directory):
            try FileOperations.createDirectory(directory)
            let name =
                remote.suggestedFilename
                ?? SafeFileName.sanitize(self.request.url.lastPathComponent)
                ?? SafeFileName.sanitize(remote.url.lastPathComponent)
                ?? "index.html"
            return directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    private func checkFree(_ path: String) throws(DownloadError) {
        if FileOperations.isDirectory(path) {
            throw .invalidRequest("'\(path)' is a directory; name a file to save to, or save into the directory.")
        }
        if !self.request.configuration.overwrite && FileOperations.exists(path) {
            throw .outputExists(path)
        }
    }
}
