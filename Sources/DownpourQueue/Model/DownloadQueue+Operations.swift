import Downpour
import DownpourAria2

/// The queue's operations: each checks what it is asked, changes the queue through the primitives of
/// ``DownloadQueue`` (the only code that writes its stored state, in `DownloadQueue.swift`) and returns the actions
/// for the manager.
extension DownloadQueue {
    // MARK: - Adding

    /// Adds a download to the waiting queue at `position` (past the end, or `nil`, appends), paused or not, and
    /// starts it at once when a slot is free.
    ///
    /// - Throws: ``QueueError`` `duplicateGID` when the GID is taken, `invalidRequest` for a negative position.
    public mutating func add(
        _ entry: QueueEntry,
        paused: Bool = false,
        position: Int? = nil
    ) throws(QueueError) -> [QueueAction] {
        guard !self.contains(entry.gid) else {
            throw QueueError(
                .duplicateGID,
                gid: entry.gid.description,
                message: "The GID \(entry.gid) is in use already; give another one or none."
            )
        }
        if let position, position < 0 {
            throw QueueError(.invalidRequest, message: "The position must be 0 or more, not \(position).")
        }
        let index = min(position ?? self.waiting.count, self.waiting.count)
        let download = QueuedDownload(entry: entry)
        self.setDownload(download)
        let stored = self.insertWaiting(WaitingItem(gid: entry.gid, isPaused: paused), at: index)
        self.record(.insert(download, state: paused ? .paused : .waiting, position: stored))
        return [.emit(.added(entry.gid))] + self.fillSlots()
    }

    // MARK: - Pausing

    /// Pauses an active download (it stops and goes to the front of the waiting queue, paused) or a waiting one
    /// (paused in place). A freed slot goes to the next waiting download.
    ///
    /// - Throws: ``QueueError`` `cannotPause` for one already paused or stopped.
    public mutating func pause(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        if let index = self.active.firstIndex(of: gid) {
            self.removeActive(at: index)
            let position = self.insertWaiting(WaitingItem(gid: gid, isPaused: true), at: 0)
            self.record(.place(gid, state: .paused, position: position))
            return [.stop(gid, reason: .pause), .emit(.paused(gid))] + self.fillSlots()
        }
        if let index = self.waitingIndex(of: gid), !self.waiting[index].isPaused {
            self.setPaused(true, at: index)
            return [.emit(.changed(gid))]
        }
        throw QueueError(.cannotPause, gid: gid.description, message: "Download \(gid) cannot be paused now.")
    }

    /// Pauses every active and waiting download. The active ones go to the front of the waiting queue in the order
    /// they ran.
    public mutating func pauseAll() -> [QueueAction] {
        var actions: [QueueAction] = []
        var changed: [QueueAction] = []
        if self.unpausedCount > 0 {
            for index in self.waiting.indices where !self.waiting[index].isPaused {
                self.setPaused(true, at: index)
                changed.append(.emit(.changed(self.waiting[index].gid)))
            }
        }
        let wereActive = self.active
        while !self.active.isEmpty { self.removeActive(at: self.active.count - 1) }
        for gid in wereActive.reversed() {
            let position = self.insertWaiting(WaitingItem(gid: gid, isPaused: true), at: 0)
            self.record(.place(gid, state: .paused, position: position))
        }
        for gid in wereActive {
            actions.append(.stop(gid, reason: .pause))
            actions.append(.emit(.paused(gid)))
        }
        return actions + changed
    }

    /// A paused download waits again (and starts when a slot is free).
    ///
    /// - Throws: ``QueueError`` `cannotUnpause` for one that is not paused.
    public mutating func unpause(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        guard let index = self.waitingIndex(of: gid), self.waiting[index].isPaused else {
            throw QueueError(
                .cannotUnpause,
                gid: gid.description,
                message: "Download \(gid) cannot be unpaused now: it is not paused."
            )
        }
        self.setPaused(false, at: index)
        return [.emit(.changed(gid))] + self.fillSlots()
    }

    /// Every paused download waits again.
    public mutating func unpauseAll() -> [QueueAction] {
        var actions: [QueueAction] = []
        if self.unpausedCount < self.waiting.count {
            for index in self.waiting.indices where self.waiting[index].isPaused {
                self.setPaused(false, at: index)
                actions.append(.emit(.changed(self.waiting[index].gid)))
            }
        }
        return actions + self.fillSlots()
    }

    // MARK: - Removing

    /// Removes a download that has not stopped. An active one stops and becomes a `removed` result (code 31) with
    /// what is known of it; a waiting or paused one leaves the queue with no result.
    ///
    /// - Throws: ``QueueError`` `notActive` for a stopped one.
    public mutating func remove(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        if let index = self.active.firstIndex(of: gid), let download = self.downloads[gid] {
            self.removeActive(at: index)
            self.setDownload(nil, for: gid)
            self.record(.delete(gid))
            self.appendResult(
                StoppedResult(
                    entry: download.entry,
                    errorCode: Aria2ErrorCode.removed.rawValue,
                    path: download.path,
                    totalLength: download.totalLength,
                    completedLength: download.completedLength
                )
            )
            return [.stop(gid, reason: .remove), .emit(.stopped(gid))] + self.fillSlots()
        }
        if let index = self.waitingIndex(of: gid) {
            self.removeWaiting(at: index)
            self.setDownload(nil, for: gid)
            self.record(.delete(gid))
            return [.emit(.changed(gid))]
        }
        throw QueueError(
            .notActive,
            gid: gid.description,
            message: "Download \(gid) is not active, waiting or paused; there is nothing to remove."
        )
    }

    // MARK: - Finishing

    /// Records how a run ended. An active download becomes a result (complete, or an error with its code) and the
    /// next waiting download starts. A download that completed while it was being paused also becomes a result.
    /// Anything else (a run that ended after a remove, or with an error after a pause or a shutdown) changes
    /// nothing.
    public mutating func finish(_ gid: DownloadID, outcome: DownloadOutcome) -> [QueueAction] {
        guard var download = self.downloads[gid] else { return [] }
        if self.isShuttingDown, case .failed = outcome { return [] }
        if let index = self.active.firstIndex(of: gid) {
            self.removeActive(at: index)
        } else if case .complete = outcome, let index = self.waitingIndex(of: gid) {
            self.removeWaiting(at: index)
        } else {
            return []
        }
        self.setDownload(nil, for: gid)
        self.record(.delete(gid))
        let event: QueueEvent
        let result: StoppedResult
        switch outcome {
        case .complete(let path, let length, let audio):
            download.path = path
            event = .completed(gid)
            result = StoppedResult(
                entry: download.entry,
                errorCode: Aria2ErrorCode.finished.rawValue,
                path: path,
                totalLength: length,
                completedLength: length,
                audio: audio
            )
        case .failed(let code, let message):
            event = .failed(gid)
            result = StoppedResult(
                entry: download.entry,
                errorCode: (code == .finished || code == .removed ? Aria2ErrorCode.unknown : code).rawValue,
                errorMessage: message,
                path: download.path,
                totalLength: download.totalLength,
                completedLength: download.completedLength
            )
        }
        self.appendResult(result)
        return [.emit(event)] + self.fillSlots()
    }

    /// Records that an active download's URL was a Metalink document whose files are to be downloaded, as aria2
    /// does after a `.meta4` download: the download becomes a `complete` result (`path` where the document would
    /// have been saved, `length` the document's, its `followedBy` the new GIDs), and `files` (each with `following` set to it) go to the
    /// front of the waiting queue in their order, where aria2 puts the downloads a finished one makes; then the
    /// free slots are filled. All of it is one set of ``changes``.
    ///
    /// - Throws: ``QueueError`` `duplicateGID` when a file's GID is taken; nothing is changed then (revert).
    public mutating func finish(
        _ gid: DownloadID,
        path: String,
        length: Int64,
        followedBy files: [QueueEntry]
    ) throws(QueueError) -> [QueueAction] {
        guard var download = self.downloads[gid], let index = self.active.firstIndex(of: gid) else { return [] }
        var seen: Set<DownloadID> = []
        for file in files where self.contains(file.gid) || !seen.insert(file.gid).inserted {
            throw QueueError(
                .duplicateGID,
                gid: file.gid.description,
                message: "The GID \(file.gid) is in use already; give another one or none."
            )
        }
        self.removeActive(at: index)
        self.setDownload(nil, for: gid)
        self.record(.delete(gid))
        var actions: [QueueAction] = [.emit(.completed(gid))]
        for (offset, var file) in files.enumerated() {
            file.following = gid
            let added = QueuedDownload(entry: file)
            self.setDownload(added)
            let position = self.insertWaiting(WaitingItem(gid: file.gid, isPaused: false), at: offset)
            self.record(.insert(added, state: .waiting, position: position))
            actions.append(.emit(.added(file.gid)))
        }
        download.entry.followedBy = files.map(\.gid)
        self.appendResult(
            StoppedResult(
                entry: download.entry,
                errorCode: Aria2ErrorCode.finished.rawValue,
                path: path,
                totalLength: length,
                completedLength: length
            )
        )
        return actions + self.fillSlots()
    }

    /// Notes what a run has learnt of its file: the resolved path, the length, the bytes on disk, the audio beside
    /// an HLS video (`.some(nil)`: none). A `nil` argument leaves what was recorded.
    public mutating func record(
        _ gid: DownloadID,
        path: String? = nil,
        totalLength: Int64? = nil,
        completedLength: Int64? = nil,
        audioPath: String?? = nil
    ) {
        guard var download = self.downloads[gid] else { return }
        if let path { download.path = path }
        if let audioPath { download.audioPath = audioPath }
        if let totalLength { download.totalLength = totalLength }
        if let completedLength { download.completedLength = completedLength }
        guard download != self.downloads[gid] else { return }
        self.setDownload(download)
        self.record(.update(download))
    }

    // MARK: - Moving and changing

    /// Moves a waiting download, clamping as aria2's `IndexedList::move` does: `POS_SET` to `position`, `POS_CUR`
    /// by `position` from where it is, `POS_END` to `position` from the last place (so 0 is the last); the
    /// destination is clamped to the queue. Returns the new index.
    ///
    /// - Throws: ``QueueError`` `notWaiting` for one that is not in the waiting queue.
    public mutating func changePosition(
        _ gid: DownloadID,
        by position: Int,
        from origin: PositionOrigin
    ) throws(QueueError) -> (index: Int, actions: [QueueAction]) {
        guard let current = self.waitingIndex(of: gid) else {
            throw QueueError(
                .notWaiting,
                gid: gid.description,
                message: "Download \(gid) is not in the waiting queue, so it has no position to change."
            )
        }
        let destination = Self.destination(from: current, by: position, from: origin, count: self.waiting.count)
        if destination != current {
            let item = self.removeWaiting(at: current)
            let position = self.insertWaiting(item, at: destination)
            self.record(.place(gid, state: item.isPaused ? .paused : .waiting, position: position))
        }
        return (destination, destination == current ? [] : [.emit(.changed(gid))])
    }

    /// Where ``changePosition(_:by:from:)`` moves the item at `current` of a waiting queue of `count` items, as
    /// aria2's `IndexedList::move` clamps it (also for a queue kept elsewhere, a fleet's).
    public static func destination(from current: Int, by position: Int, from origin: PositionOrigin, count: Int) -> Int
    {
        let last = count - 1
        let wanted: Int
        switch origin {
        case .set: wanted = position
        case .current: wanted = current.addingReportingOverflow(position).partialValue
        case .end: wanted = last.addingReportingOverflow(position).partialValue
        }
        return min(max(wanted, 0), last)
    }

    /// Changes the URIs of a download that has not stopped: removes one occurrence of each of `remove`, then
    /// inserts `add` at `position` (clamped) or appends. Returns how many were removed and added.
    ///
    /// - Throws: ``QueueError`` `notFound` for a stopped one.
    public mutating func changeURIs(
        _ gid: DownloadID,
        remove: [String],
        add: [String],
        position: Int?
    ) throws(QueueError) -> (removed: Int, added: Int, actions: [QueueAction]) {
        guard var download = self.downloads[gid] else {
            throw QueueError(
                .notFound,
                gid: gid.description,
                message: "Download \(gid) has stopped; its URIs are fixed."
            )
        }
        let removed = Self.change(&download.entry.uris, remove: remove, add: add, position: position)
        let changed = removed > 0 || !add.isEmpty
        if changed {
            self.setDownload(download)
            self.record(.update(download))
        }
        return (removed, add.count, changed ? [.emit(.changed(gid))] : [])
    }

    /// aria2's `changeUri` on a list of URIs: removes one occurrence of each of `remove`, then inserts `add` at
    /// `position` (clamped) or appends; returns how many were removed.
    public static func change(_ uris: inout [String], remove: [String], add: [String], position: Int?) -> Int {
        var removed = 0
        for uri in remove {
            if let index = uris.firstIndex(of: uri) {
                uris.remove(at: index)
                removed += 1
            }
        }
        let index = min(max(position ?? uris.count, 0), uris.count)
        uris.insert(contentsOf: add, at: index)
        return removed
    }

    /// Replaces the options of a download that has not stopped (same name: the new values replace all the old
    /// ones of that name). An active one restarts with them, keeping its bytes, unless only options in
    /// ``optionsChangedLive`` changed.
    ///
    /// - Throws: ``QueueError`` `cannotChangeOption` for a stopped one.
    public mutating func changeOptions(_ gid: DownloadID, _ options: [QueueOption]) throws(QueueError) -> [QueueAction]
    {
        guard var download = self.downloads[gid] else {
            throw QueueError(
                .cannotChangeOption,
                gid: gid.description,
                message: "Download \(gid) has stopped; its options cannot change."
            )
        }
        let names = Set(options.map(\.name))
        download.entry.options = download.entry.options.filter { !names.contains($0.name) } + options
        if names.contains(Aria2Option.dir.name) || names.contains(Aria2Option.out.name) {
            // The file goes somewhere else now: what an earlier run resolved no longer holds.
            download.path = nil
            download.audioPath = nil
        }
        if download != self.downloads[gid] {
            self.setDownload(download)
            self.record(.update(download))
        }
        if self.active.contains(gid) {
            guard !names.isSubset(of: Self.optionsChangedLive) else { return [] }
            return [.stop(gid, reason: .restart), .start(gid), .emit(.started(gid))]
        }
        return [.emit(.changed(gid))]
    }

    /// Changes how many downloads run at once (at least 1); more start at once if there is room. Active ones
    /// above a lowered limit run on; no new one starts until the count is below it.
    public mutating func setMaxConcurrentDownloads(_ count: Int) -> [QueueAction] {
        self.setLimits(maxConcurrentDownloads: max(1, count), maxDownloadResult: self.maxDownloadResult)
        return [.emit(.optionsChanged)] + self.fillSlots()
    }

    /// Changes how many results are kept (0 or more); the oldest beyond it are dropped.
    public mutating func setMaxDownloadResult(_ count: Int) -> [QueueAction] {
        self.setLimits(maxConcurrentDownloads: self.maxConcurrentDownloads, maxDownloadResult: max(0, count))
        self.trimResults()
        return [.emit(.optionsChanged)]
    }

    // MARK: - Results

    /// Forgets every stopped result (``stoppedTotal`` stays).
    public mutating func purgeResults() -> [QueueAction] {
        if !self.stopped.isEmpty {
            self.removeResults(0..<self.stopped.count)
            self.record(.deleteAllResults)
        }
        return [.emit(.resultsRemoved(nil))]
    }

    /// Forgets one stopped result.
    ///
    /// - Throws: ``QueueError`` `noResult` when `gid` is not a stopped result.
    public mutating func removeResult(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        guard let index = self.stopped.lastIndex(where: { $0.gid == gid }) else {
            throw QueueError(
                .noResult,
                gid: gid.description,
                message: "Download \(gid) is not a stopped result; only those can be removed this way."
            )
        }
        self.removeResults(index..<index + 1)
        self.record(.deleteResult(gid))
        return [.emit(.resultsRemoved(gid))]
    }

    // MARK: - Starting and stopping the queue

    /// Starts a waiting or paused download now, whatever ``maxConcurrentDownloads`` says (a user's "start now", or
    /// the only way a download starts in a queue that does not fill its slots itself, ``fillsFreeSlots``).
    ///
    /// - Throws: ``QueueError`` `notWaiting` for one that is not in the waiting queue, `invalidRequest` after
    ///   ``shutdown()``.
    public mutating func start(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        guard !self.isShuttingDown else {
            throw QueueError(.invalidRequest, gid: gid.description, message: "The queue is shutting down.")
        }
        guard let index = self.waitingIndex(of: gid) else {
            throw QueueError(
                .notWaiting,
                gid: gid.description,
                message: "Download \(gid) is not in the waiting queue, so it cannot be started."
            )
        }
        self.removeWaiting(at: index)
        let position = self.appendActive(gid)
        self.record(.place(gid, state: .active, position: position))
        return [.start(gid), .emit(.started(gid))]
    }

    /// Starts what should run: the downloads recorded as active, then waiting ones while slots are free.
    public mutating func startUp() -> [QueueAction] {
        self.setShuttingDown(false)
        var actions: [QueueAction] = []
        for gid in self.active {
            actions.append(.start(gid))
            actions.append(.emit(.started(gid)))
        }
        return actions + self.fillSlots()
    }

    /// Stops taking work: every active download is to stop keeping its bytes, and stays recorded as active so
    /// that the next ``startUp()`` runs it again. Nothing starts or finishes after this.
    public mutating func shutdown() -> [QueueAction] {
        guard !self.isShuttingDown else { return [] }
        self.setShuttingDown(true)
        return self.active.flatMap { gid -> [QueueAction] in [.stop(gid, reason: .shutdown), .emit(.stopped(gid))] }
    }
}
