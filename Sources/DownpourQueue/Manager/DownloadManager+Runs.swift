import Downpour
import DownpourAria2
import DownpourHLS
import Logging

/// The supervision of runs: each active download runs as a ``Download`` in a task of its own, kept in the
/// ``RunSupervisor`` under a token, so that a run that ended late is not taken for its successor. The queue says
/// when to start and stop runs (``QueueAction``); a run reports back when it has its destination
/// (``runStarted(_:token:start:)``) and when it ends (``runEnded(_:token:outcome:)``), each a transaction of its own.
extension DownloadManager {
    /// Does what the queue answered. Called within a transaction: a run that cannot start changes the queue, and
    /// the transaction stores that on its way out.
    func perform(_ actions: [QueueAction]) {
        for action in actions {
            switch action {
            case .start(let gid): self.startRun(gid)
            case .stop(let gid, let reason): self.stopRun(gid, reason: reason)
            case .emit(let event): self.broadcaster.send(event)
            }
        }
    }

    private func startRun(_ gid: DownloadID) {
        guard let queued = self.ledger.queue.downloads[gid] else { return }
        var request: DownloadRequest
        let playlistOptions: HLSDownload.Options
        do {
            (request, playlistOptions) = try self.makeRun(for: queued)
        } catch {
            // The options were good when set; a global default changed since. It cannot run as it is.
            self.logger.info("Download cannot start", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            let actions = self.ledger.queue.finish(gid, outcome: .failed(code: .badOption, message: error.message))
            self.perform(actions)
            return
        }
        let previous = self.supervisor[gid]?.task
        let token = self.supervisor.nextToken()
        var logger = self.logger
        logger[metadataKey: "gid"] = "\(gid)"
        var willFinish: (@Sendable () async -> Void)?
        if let runFinishing = self.runFinishing { willFinish = { await runFinishing(gid) } }
        let download: Download
        let permit = self.writePermit?(gid)
        if let permit {
            download = self.downloader.download(request, id: gid, logger: logger, writePermit: permit)
        } else {
            download = self.downloader.download(request, id: gid, logger: logger, willFinish: willFinish)
        }
        let playlist = PlaylistStage(
            concurrentSegments: playlistOptions.concurrentSegments,
            maximumRate: request.configuration.maximumRate
        )
        let segments = PlaylistRun(
            stage: playlist,
            request: request,
            options: playlistOptions,
            downloader: self.downloader,
            logger: logger,
            writePermit: permit
        )
        let task = Task {
            // A run stopped for a pause or a restart must let go of the file before the next one takes it.
            await previous?.value
            guard !Task.isCancelled else {
                // Stopped before it began: nothing ran, nothing to record.
                self.forgetRun(gid, token: token)
                return
            }
            await Self.execute(download, segments, token: token, manager: self)
        }
        self.supervisor.started(
            gid,
            RunSupervisor.Run(download: download, playlist: playlist, task: task, token: token)
        )
        logger.info("Download started", metadata: ["url": "\(request.url)"])
    }

    private func stopRun(_ gid: DownloadID, reason: QueueAction.StopReason) {
        // A run asked to stop before is asked again: a removal after a pause removes its files.
        _ = self.supervisor.requestStop(gid)
        guard let run = self.supervisor[gid] else { return }
        switch reason {
        case .remove:
            _ = run.stop(keepingPartialFile: false)
        case .pause, .shutdown, .restart:
            _ = run.stop(keepingPartialFile: true)
            run.task.cancel()
        }
        self.logger.info("Download stopping", metadata: ["gid": "\(gid)", "reason": "\(reason)"])
    }

    private nonisolated static func execute(
        _ download: Download,
        _ segments: PlaylistRun,
        token: Int,
        manager: DownloadManager
    ) async {
        let events = download.events
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events {
                    if case .started(let start) = event {
                        await manager.runStarted(download.id, token: token, start: start)
                    }
                }
            }
            let outcome: Result<PlaylistRun.Outcome, DownloadError>
            do throws(DownloadError) {
                outcome = .success(
                    try await segments.run(download) { progress in
                        // Where the video goes, once: tellStatus and a run started again use that name.
                        Task { await manager.runNamed(download.id, token: token, progress: progress) }
                    }
                )
            } catch {
                outcome = .failure(error)
            }
            if let runEnding = manager.runEnding { await runEnding(download.id) }
            await manager.runEnded(download.id, token: token, outcome: outcome)
            group.cancelAll()
        }
    }

    /// Stops the runs among `ids` (read again after each wait) before a change that stops them (a pause, a
    /// restart), so that none of them can complete after the change is acknowledged; returns the ones it stopped,
    /// for ``transaction(restartingOnFailure:_:)``. Outside a transaction: a run past its point of no return cannot
    /// be stopped (``Download/cancel(keepingPartialFile:)`` refuses), and its end, which the change waits for, is a
    /// transaction of its own; the change then finds the download complete, which cannot be paused or changed (as in
    /// aria2).
    func stopRuns(
        for change: String,
        _ ids: () -> [DownloadID]
    ) async throws(QueueError) -> [DownloadID] {
        var stopped: [DownloadID] = []
        while true {
            var finishing: RunSupervisor.Run?
            for id in ids() {
                guard let run = self.supervisor[id], !run.stopRequested else { continue }
                guard run.stop(keepingPartialFile: true) else {
                    finishing = run
                    break
                }
                _ = self.supervisor.requestStop(id)
                stopped.append(id)
            }
            guard let finishing else { return stopped }
            self.logger.debug(
                "\(change) waits for the run's end: its file is being finished",
                metadata: ["gid": "\(finishing.download.id)"]
            )
            await finishing.task.value
            // A shutdown meanwhile stops every run anyway.
            try self.checkRunning()
        }
    }

    /// After a change that stopped runs could not be stored: the runs it stopped start again, where the queue
    /// still has them active (each new run waits for the old one to let go of the file). Within a transaction.
    func restartRuns(_ stopped: [DownloadID]) {
        for id in stopped where self.ledger.queue.active.contains(id) && self.supervisor[id]?.stopRequested ?? true {
            self.startRun(id)
        }
    }

    private func forgetRun(_ gid: DownloadID, token: Int) {
        _ = self.supervisor.ended(gid, token: token)
    }

    /// A run has its destination: the queue records its path and lengths. Stored with the next change, or within
    /// `recordDelay`, not in a transaction of its own: a small file ends moments after it starts, and its end is
    /// stored anyway. Nothing depends on the record after a crash (the restarted run probes again and finds its
    /// journal by the name it gets); it is what `tellStatus` shows.
    private func runStarted(_ gid: DownloadID, token: Int, start: DownloadStart) async {
        await self.gate.enter()
        defer { self.gate.leave() }
        guard self.supervisor.isCurrent(gid, token: token), self.ledger.queue.downloads[gid] != nil else { return }
        // Which run fetched which bytes, for a person lining a fleet's nodes up with a server's log.
        self.logger.log(
            level: start.resumedBytes > 0 ? .notice : .info,
            start.resumedBytes > 0 ? "Download resumed: the bytes on disk are kept" : "Download running from byte 0",
            metadata: [
                "gid": "\(gid)", "on disk": "\(start.resumedBytes)",
                "length": "\(start.remoteFile.length.map(String.init) ?? "unknown")",
            ]
        )
        self.ledger.queue.record(
            gid,
            path: start.destinationPath,
            totalLength: start.remoteFile.length ?? 0,
            completedLength: start.resumedBytes
        )
        self.scheduleRecord()
    }

    /// A run fetching an HLS playlist's segments named its video: the queue records that path, as
    /// ``runStarted(_:token:start:)`` records a file's. A run started again asks for that name, and finds the segments.
    private func runNamed(_ gid: DownloadID, token: Int, progress: HLSDownload.Progress) async {
        await self.gate.enter()
        defer { self.gate.leave() }
        guard self.supervisor.isCurrent(gid, token: token), self.ledger.queue.downloads[gid] != nil else { return }
        self.logger.info(
            "Download is an HLS playlist: fetching its segments",
            metadata: ["gid": "\(gid)", "path": "\(progress.path)", "live": "\(progress.isLive)"]
        )
        self.ledger.queue.record(
            gid,
            path: progress.path,
            totalLength: 0,
            completedLength: 0,
            // This run's names: an audio an earlier run had (another variant, other options) is gone from them.
            audioPath: .some(progress.audioPath)
        )
        self.scheduleRecord()
    }

    /// A run ended: the queue records its outcome, in a transaction.
    ///
    /// Ends wait in ``endedRuns`` for one transaction that records them all and stores them once (10,000 dead links
    /// end about as fast as they start), then takes their actions in order. Ends that come while that transaction
    /// waits for the gate join it (``endsRecording``): however many runs end, they hold one place in the gate's line,
    /// so a change behind them (an add) waits for one transaction, not for one turn per end. Each caller returns once
    /// its own end is stored.
    private func runEnded(_ gid: DownloadID, token: Int, outcome: Result<PlaylistRun.Outcome, DownloadError>) async {
        self.endedRuns.append(EndedRun(gid: gid, token: token, outcome: outcome))
        let recording: Task<Void, Never>
        if let waiting = self.endsRecording {
            recording = waiting
        } else {
            recording = Task { await self.recordEndedRuns() }
            self.endsRecording = recording
        }
        await recording.value
    }

    /// The transaction of the ends in ``endedRuns``: it takes those that came before it had the gate; ends that
    /// come later have a transaction of their own.
    private func recordEndedRuns() async {
        await self.selfMadeTransaction { () async -> Void in
            self.endsRecording = nil
            let ended = self.endedRuns
            self.endedRuns = []
            var actions: [QueueAction] = []
            for end in ended {
                actions += await self.record(end)
            }
            // Stored before the actions are taken (a notification says what is stored).
            await self.storeSelfMade()
            self.perform(actions)
        }
    }

    /// A run's end, waiting in ``endedRuns`` for its transaction.
    struct EndedRun {
        var gid: DownloadID
        var token: Int
        var outcome: Result<PlaylistRun.Outcome, DownloadError>
    }

    /// Within a transaction: the queue's answer to one run's end; nothing when the run was not the current one.
    private func record(_ end: EndedRun) async -> [QueueAction] {
        let gid = end.gid
        guard let run = self.supervisor.ended(gid, token: end.token) else { return [] }
        let actions: [QueueAction]
        switch end.outcome {
        case .success(let result):
            if let metalink = result.metalink {
                // Following may be refused and taken back; the run's record is not part of that.
                await self.storeSelfMade()
                actions = self.follow(metalink, of: gid, path: result.path, length: result.length)
            } else {
                actions = self.ledger.queue.finish(
                    gid,
                    outcome: .complete(path: result.path, length: result.length, audio: result.audio)
                )
                self.logger.info("Download complete", metadata: ["gid": "\(gid)", "path": "\(result.path)"])
            }
        case .failure(let error):
            let lengths = run.lengths
            self.ledger.queue.record(
                gid,
                path: run.playlist.snapshot()?.progress.path,
                totalLength: lengths.total,
                completedLength: lengths.completed
            )
            if error.code == .superseded {
                // Its download is another writer's now: the owner drops it (``orphans()``).
                self.supervisor.supersede(gid)
                actions = []
            } else if run.stopRequested || (run.playlist.endsByRequest && error.code == .cancelled) {
                actions = []
            } else {
                let code = Aria2ErrorCode(error)
                actions = self.ledger.queue.finish(gid, outcome: .failed(code: code, message: error.message))
                self.logger.info(
                    "Download failed",
                    metadata: ["gid": "\(gid)", "code": "\(code.rawValue)", "error": "\(error.message)"]
                )
            }
        }
        return actions
    }

    /// A run whose URL was a Metalink document (it follows Metalinks, the `follow-metalink` option): as aria2
    /// does, the download is `complete` (`followedBy` the new GIDs) and one download per file of the document
    /// joins the front of the waiting queue (``DownloadQueue/finish(_:path:length:followedBy:)``), each as
    /// `aria2.addMetalink` would add it (``AddRequest/files(of:options:position:)``) with this download's options
    /// but `out` and `checksum`, which were the document's. A file that cannot be added fails the download
    /// (aria2's code 1) and adds none.
    private func follow(_ metalink: Metalink, of gid: DownloadID, path: String, length: Int64) -> [QueueAction] {
        guard let download = self.ledger.queue.downloads[gid] else { return [] }
        let options = download.entry.options.filter {
            $0.name != Aria2Option.out.name && $0.name != Aria2Option.checksum.name
        }
        do throws(QueueError) {
            var files: [QueueEntry] = []
            for request in AddRequest.files(of: metalink, options: options, position: nil) {
                var entry = try self.prepareAdd(uris: request.uris, options: request.options, position: nil).entry
                while self.ledger.queue.contains(entry.gid) || files.contains(where: { $0.gid == entry.gid }) {
                    entry.gid = self.gids.next()
                }
                files.append(entry)
            }
            let actions = try self.ledger.queue.finish(gid, path: path, length: length, followedBy: files)
            self.logger.info(
                "Metalink followed",
                metadata: ["gid": "\(gid)", "files": "\(files.map(\.gid.description).joined(separator: ","))"]
            )
            return actions
        } catch {
            self.ledger.refused()
            self.logger.info("Metalink cannot be followed", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            return self.ledger.queue.finish(gid, outcome: .failed(code: .unknown, message: error.message))
        }
    }

    /// Records the bytes an active download has on disk, before a change stops it.
    func noteProgress(of gid: DownloadID, in queue: inout DownloadQueue) {
        guard let run = self.supervisor[gid] else { return }
        let lengths = run.lengths
        queue.record(
            gid,
            path: run.playlist.snapshot()?.progress.path,
            totalLength: lengths.total,
            completedLength: lengths.completed
        )
    }

    /// Removes the `.part` file and the journal of a download removed while waiting or paused (aria2 leaves them;
    /// a user who removes a download expects its partial file gone, as ``Download/cancel(keepingPartialFile:)``
    /// does for an active one), on the library's blocking-I/O threads, not the manager's loop. A run still letting
    /// go of the file (paused a moment ago) is waited for first, in a task of its own.
    func removePartialFile(of gid: DownloadID, path: String, audioPath: String?) async {
        let logger = self.logger
        let remove: @Sendable () async -> Void = {
            for file in await PartialFiles.remove(forDestination: path) {
                logger.debug("Partial file removed", metadata: ["gid": "\(gid)", "path": "\(file)"])
            }
            // An HLS video's segments, waiting beside it (`PATH.hls/`, only what Downpour fetched there).
            await HLSDownload.removeLeftovers(path: path, audioPath: audioPath)
        }
        if let previous = self.supervisor[gid]?.task {
            Task {
                await previous.value
                await remove()
            }
        } else {
            await remove()
        }
    }
}
