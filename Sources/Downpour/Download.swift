import Foundation
import Logging

/// One file being downloaded.
///
/// ```swift
/// let download = Download(try DownloadRequest(url: "https://example.com/big.iso", destination: .file("big.iso")))
/// async let result = download.run()
/// for await event in download.events {
///     if case .progress(let progress) = event { print(progress.completedBytes) }
/// }
/// print(try await result.path)
/// ```
///
/// ``run()`` does the work in the calling task. ``pause()`` and ``resume()`` suspend and continue it in
/// process; cancelling the task stops it and keeps what was fetched (`NAME.part` and its journal
/// `NAME.part.downpour`), so the same request, in this process or a later one, continues where it stopped.
/// ``events`` reports what happens, for one consumer.
public final class Download: Sendable {
    public let request: DownloadRequest
    /// What happens, as it happens; finishes after `finished` or `failed`.
    public let events: AsyncStream<DownloadEvent>
    private let continuation: AsyncStream<DownloadEvent>.Continuation
    private let logger: Logger
    private let gate = PauseGate()

    /// - Parameter logger: receives diagnostics at `info` and below; silent by default.
    public init(
        _ request: DownloadRequest,
        logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.request = request
        self.logger = logger
        (self.events, self.continuation) = AsyncStream.makeStream(
            of: DownloadEvent.self,
            bufferingPolicy: .bufferingNewest(1024)
        )
    }

    /// A download that continues the one whose output is `path`, from its journal alone: the URL, the
    /// length and the validators come from `path.part.downpour`.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when there is no readable journal for `path`.
    public static func resuming(
        path: String,
        configuration: DownloadConfiguration = .init(),
        logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(DownloadError) -> Download {
        let store = JournalStore(partPath: path + ".part")
        switch store.load() {
        case .loaded(let journal):
            var configuration = configuration
            configuration.resume = true
            let request = try DownloadRequest(
                url: journal.sourceURL,
                destination: .file(path),
                configuration: configuration
            )
            return Download(request, logger: logger)
        case .missing:
            throw .invalidRequest("There is no resume journal at '\(store.path)'; nothing to resume.")
        case .unreadable(let reason):
            throw .invalidRequest("The resume journal '\(store.path)' cannot be used: \(reason).")
        }
    }

    /// Closes the connections and saves the journal; the download waits until ``resume()``.
    public func pause() {
        self.gate.pause()
    }

    /// Continues a paused download with the bytes that are missing.
    public func resume() {
        self.gate.resume()
    }

    /// Downloads the file. Call once.
    ///
    /// - Returns: where the file is and what was transferred.
    /// - Throws: a ``DownloadError``. Nothing is ever left under the final name unless the download succeeded;
    ///   when the error is ``DownloadError/resumable``, `NAME.part` and its journal are kept for the next run.
    @discardableResult
    public func run() async throws(DownloadError) -> DownloadResult {
        do {
            let result = try await self.perform()
            self.continuation.yield(.finished(result))
            self.continuation.finish()
            return result
        } catch {
            var failure = error
            if Task.isCancelled && error.code != .localIO {
                failure = DownloadError(
                    code: .cancelled,
                    message: error.resumable
                        ? "The download was stopped; what arrived is kept and the same request resumes it."
                        : "The download was cancelled.",
                    resumable: error.resumable
                )
            }
            self.continuation.yield(.failed(failure))
            self.continuation.finish()
            throw failure
        }
    }

    private func perform() async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        try configuration.validate()
        if case .file(let path) = self.request.destination {
            try self.checkFree(path)
        }
        let transport = try HTTPTransport(configuration: configuration, logger: self.logger)
        do {
            let result = try await self.perform(with: transport)
            await transport.shutdown()
            return result
        } catch {
            await transport.shutdown()
            throw error
        }
    }

    private func perform(with transport: HTTPTransport) async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        let clock = ContinuousClock()
        let startedAt = clock.now
        let probe = ResourceProbe(transport: transport, configuration: configuration, logger: self.logger)
        let outcome = try await probe.probe(self.request.url)
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
        let file = try OutputFile.openLocked(at: partPath)
        let journal = JournalStore(partPath: partPath)
        var session = TransferSession(
            transport: transport,
            file: file,
            remoteFile: remote,
            headers: outcome.headers,
            configuration: configuration,
            logger: self.logger,
            events: self.continuation
        )

        let length: Int64
        do {
            let resumed = try self.prepare(file, journal: journal, remote: remote)
            self.continuation.yield(
                .started(
                    DownloadStart(
                        remoteFile: remote,
                        destinationPath: path,
                        connections: remote.isSegmentable ? configuration.connections : 1,
                        resumedBytes: resumed.byteCount
                    )
                )
            )
            length = try await self.transfer(&session, resumed: resumed, journal: journal)
            if session.remoteFile.length == nil {
                try file.truncate(to: length)
            }
            try file.sync()
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

        do {
            try FileOperations.move(partPath, to: path, replacing: configuration.overwrite)
        } catch {
            file.close()
            journal.remove()
            FileOperations.remove(partPath)
            throw error
        }
        file.close()
        journal.remove()
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

    /// Decides between resuming and starting over, and readies the `.part` file for it.
    /// Returns the bytes already on disk.
    private func prepare(
        _ file: OutputFile,
        journal: JournalStore,
        remote: RemoteFile
    ) throws(DownloadError) -> ByteRangeSet {
        func startOver(_ notice: String?) throws(DownloadError) -> ByteRangeSet {
            if let notice {
                self.logger.info("\(notice)")
                self.continuation.yield(.notice(notice))
            }
            journal.remove()
            try file.startOver(length: remote.isSegmentable ? remote.length : nil)
            return ByteRangeSet()
        }
        guard remote.isSegmentable else {
            return try startOver(nil)
        }
        guard self.request.configuration.resume else {
            return try startOver(nil)
        }
        let saved: ResumeJournal
        switch journal.load() {
        case .missing:
            return try startOver(
                try file.size() > 0 ? "'\(file.path)' has no resume journal beside it; starting over." : nil
            )
        case .unreadable(let reason):
            return try startOver("The resume journal '\(journal.path)' cannot be trusted (\(reason)); starting over.")
        case .loaded(let journal):
            saved = journal
        }
        let decision = ResumeDecision(journal: saved, remote: remote, partSize: try file.size())
        switch decision {
        case .startOver(let reason):
            return try startOver(reason)
        case .resume(let warning):
            if let warning { self.continuation.yield(.notice(warning)) }
            if saved.sourceURL != self.request.url.absoluteString && saved.finalURL != remote.url.absoluteString {
                self.continuation.yield(
                    .notice("Resuming from a different URL than the first run; length and validators match.")
                )
            }
            return saved.doneRanges
        }
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
                    self.continuation.yield(.notice("The server ignores range requests; downloading as one stream."))
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
        self.continuation.yield(.paused)
        await self.gate.waitUntilResumed()
        if Task.isCancelled { throw .fatal(.cancelled) }
        self.continuation.yield(.resumed)
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
            throw .invalidRequest("'\(path)' is a directory; give a file name with -o, or use -d for a directory.")
        }
        if !self.request.configuration.overwrite && FileOperations.exists(path) {
            throw .outputExists(path)
        }
    }
}

/// Whether a journal from an earlier run may be continued against the remote file as probed now.
enum ResumeDecision: Equatable {
    /// Continue; with a warning when nothing proves the file unchanged.
    case resume(warning: String?)
    /// Throw the old bytes away, for this reason.
    case startOver(String)

    init(journal: ResumeJournal, remote: RemoteFile, partSize: Int64) {
        guard let length = remote.length, length == journal.length else {
            self = .startOver(
                "The remote file is now \(remote.length.map { "\($0) bytes" } ?? "of unknown length"), "
                    + "not \(journal.length) bytes as in the last run: it changed. Starting over."
            )
            return
        }
        var changes: [String] = []
        if let old = journal.etag, old != remote.etag {
            changes.append("ETag \(old) → \(remote.etag ?? "none")")
        }
        if let old = journal.lastModified, old != remote.lastModified {
            changes.append("Last-Modified '\(old)' → '\(remote.lastModified ?? "none")'")
        }
        guard changes.isEmpty else {
            self = .startOver(
                "The remote file changed since the last run (\(changes.joined(separator: "; "))). Starting over."
            )
            return
        }
        guard partSize == length else {
            self = .startOver("The partial file is \(partSize) bytes, not \(length) as expected. Starting over.")
            return
        }
        if journal.etag == nil && journal.lastModified == nil {
            self = .resume(
                warning: "The server sends no ETag or Last-Modified, so it cannot be proven that the remote file "
                    + "is unchanged since the last run; resuming because the length matches. Use --no-resume to "
                    + "start over."
            )
        } else {
            self = .resume(warning: nil)
        }
    }
}
