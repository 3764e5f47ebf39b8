import Downpour

/// aria2's queue as a value: active downloads in the order they started, a waiting queue in order (each item
/// possibly paused), and the results of stopped downloads.
///
/// It does no I/O and reads no clock. Every operation that changes it returns the ``QueueAction``s its owner must
/// carry out, in order (start this one, stop that one, tell the listeners), the way AsyncHTTPClient's
/// connection-pool state machines return actions:
///
/// ```swift
/// var queue = DownloadQueue(maxConcurrentDownloads: 1)
/// let actions = try queue.add(QueueEntry(gid: gid, uris: [url], options: []))
/// // [.emit(.added(gid)), .start(gid), .emit(.started(gid))]
/// ```
///
/// Slots are filled from the front of the waiting queue, passing over paused items. A download paused while
/// active goes to the front of the waiting queue, paused. Removing a waiting or paused download drops it with no
/// result; an active one becomes a `removed` result (code 31). Results are kept first in, first out, at most
/// ``maxDownloadResult`` of them; ``stoppedTotal`` counts every download that stopped.
public struct DownloadQueue: Sendable, Hashable {
    /// The downloads that run, in the order they started.
    public private(set) var active: [DownloadID] = []
    /// The waiting queue, in order.
    public private(set) var waiting: [WaitingItem] = []
    /// Stopped results, the least recently stopped first.
    public private(set) var stopped: [StoppedResult] = []
    /// Every download that stopped, including results no longer kept.
    public private(set) var stoppedTotal = 0
    /// Active and waiting downloads by GID.
    public private(set) var downloads: [DownloadID: QueuedDownload] = [:]
    /// After ``shutdown()`` nothing starts any more.
    public private(set) var isShuttingDown = false

    /// How many downloads run at once (aria2's `max-concurrent-downloads`, 5 by default). Set it with
    /// ``setMaxConcurrentDownloads(_:)`` to start more at once.
    public private(set) var maxConcurrentDownloads: Int
    /// How many stopped results are kept (aria2's `max-download-result`, 1,000 by default).
    public private(set) var maxDownloadResult: Int

    /// Options whose change does not restart an active download (the download applies them while it runs).
    public static let optionsChangedLive: Set<String> = ["max-download-limit"]

    /// An empty queue.
    public init(maxConcurrentDownloads: Int = 5, maxDownloadResult: Int = 1000) {
        self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
        self.maxDownloadResult = max(0, maxDownloadResult)
    }

    /// A queue as it was stored. Nothing starts until ``startUp()``.
    ///
    /// - Parameters:
    ///   - active: The downloads that were running, in order; they run again at ``startUp()``.
    ///   - waiting: The waiting queue, in order.
    ///   - stopped: The results, the least recently stopped first.
    public init(
        active: [QueuedDownload],
        waiting: [(QueuedDownload, isPaused: Bool)],
        stopped: [StoppedResult],
        stoppedTotal: Int,
        maxConcurrentDownloads: Int = 5,
        maxDownloadResult: Int = 1000
    ) {
        self.init(maxConcurrentDownloads: maxConcurrentDownloads, maxDownloadResult: maxDownloadResult)
        for download in active {
            self.active.append(download.entry.gid)
            self.downloads[download.entry.gid] = download
        }
        for (download, isPaused) in waiting {
            self.waiting.append(WaitingItem(gid: download.entry.gid, isPaused: isPaused))
            self.downloads[download.entry.gid] = download
        }
        self.stopped = stopped
        self.stoppedTotal = max(stoppedTotal, stopped.count)
        self.trimResults()
    }

    // MARK: - Looking up

    /// The status of a GID that is in the queue or among the results; `nil` for an unknown one.
    public func status(of gid: DownloadID) -> QueueStatus? {
        if self.active.contains(gid) { return .active }
        if let item = self.waiting.first(where: { $0.gid == gid }) { return item.isPaused ? .paused : .waiting }
        return self.stopped.last(where: { $0.gid == gid })?.status
    }

    /// The result of a stopped download.
    public func result(of gid: DownloadID) -> StoppedResult? {
        self.stopped.last(where: { $0.gid == gid })
    }

    /// The GID that `text` names: 16 hexadecimal digits, or a unique prefix of a known GID, in either case.
    ///
    /// - Throws: ``QueueError`` `invalidGID` (empty, longer than 16 or not hexadecimal), `notUnique` (a prefix of
    ///   several), `notFound`.
    public func resolve(_ text: String) throws(QueueError) -> DownloadID {
        let hexDigits = Set("0123456789abcdef")
        let prefix = text.lowercased()
        guard !prefix.isEmpty, prefix.count <= 16, prefix.allSatisfy({ hexDigits.contains($0) }) else {
            throw QueueError(
                .invalidGID,
                gid: text,
                message: "'\(text)' is not a GID: give 1 to 16 hexadecimal digits."
            )
        }
        var matches: Set<DownloadID> = []
        for gid in self.downloads.keys where gid.description.hasPrefix(prefix) { matches.insert(gid) }
        for result in self.stopped where result.gid.description.hasPrefix(prefix) { matches.insert(result.gid) }
        guard let match = matches.first else {
            throw QueueError(.notFound, gid: text, message: "No download has the GID \(text).")
        }
        guard matches.count == 1 else {
            throw QueueError(
                .notUnique,
                gid: text,
                message: "The GID prefix \(text) matches \(matches.count) downloads; give more digits."
            )
        }
        return match
    }

    /// Whether `gid` is taken by a download in the queue or a result.
    public func contains(_ gid: DownloadID) -> Bool {
        self.downloads[gid] != nil || self.stopped.contains { $0.gid == gid }
    }

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
        self.waiting.insert(WaitingItem(gid: entry.gid, isPaused: paused), at: index)
        self.downloads[entry.gid] = QueuedDownload(entry: entry)
        return [.emit(.added(entry.gid))] + self.fillSlots()
    }

    // MARK: - Pausing

    /// Pauses an active download (it stops and goes to the front of the waiting queue, paused) or a waiting one
    /// (paused in place). A freed slot goes to the next waiting download.
    ///
    /// - Throws: ``QueueError`` `cannotPause` for one already paused or stopped.
    public mutating func pause(_ gid: DownloadID) throws(QueueError) -> [QueueAction] {
        if let index = self.active.firstIndex(of: gid) {
            self.active.remove(at: index)
            self.waiting.insert(WaitingItem(gid: gid, isPaused: true), at: 0)
            return [.stop(gid, reason: .pause), .emit(.paused(gid))] + self.fillSlots()
        }
        if let index = self.waiting.firstIndex(where: { $0.gid == gid }), !self.waiting[index].isPaused {
            self.waiting[index].isPaused = true
            return [.emit(.changed(gid))]
        }
        throw QueueError(.cannotPause, gid: gid.description, message: "Download \(gid) cannot be paused now.")
    }

    /// Pauses every active and waiting download. The active ones go to the front of the waiting queue in the order
    /// they ran.
    public mutating func pauseAll() -> [QueueAction] {
        var actions: [QueueAction] = []
        var changed: [QueueAction] = []
        for index in self.waiting.indices where !self.waiting[index].isPaused {
            self.waiting[index].isPaused = true
            changed.append(.emit(.changed(self.waiting[index].gid)))
        }
        let wereActive = self.active
        self.active.removeAll()
        self.waiting.insert(contentsOf: wereActive.map { WaitingItem(gid: $0, isPaused: true) }, at: 0)
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
        guard let index = self.waiting.firstIndex(where: { $0.gid == gid }), self.waiting[index].isPaused else {
            throw QueueError(
                .cannotUnpause,
                gid: gid.description,
                message: "Download \(gid) cannot be unpaused now: it is not paused."
            )
        }
        self.waiting[index].isPaused = false
        return [.emit(.changed(gid))] + self.fillSlots()
    }

    /// Every paused download waits again.
    public mutating func unpauseAll() -> [QueueAction] {
        var actions: [QueueAction] = []
        for index in self.waiting.indices where self.waiting[index].isPaused {
            self.waiting[index].isPaused = false
            actions.append(.emit(.changed(self.waiting[index].gid)))
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
            self.active.remove(at: index)
            self.downloads[gid] = nil
            self.appendResult(
                StoppedResult(
                    entry: download.entry,
                    errorCode: StoppedResult.removedCode,
                    path: download.path,
                    totalLength: download.totalLength,
                    completedLength: download.completedLength
                )
            )
            return [.stop(gid, reason: .remove), .emit(.stopped(gid))] + self.fillSlots()
        }
        if let index = self.waiting.firstIndex(where: { $0.gid == gid }) {
            self.waiting.remove(at: index)
            self.downloads[gid] = nil
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
            self.active.remove(at: index)
        } else if case .complete = outcome, let index = self.waiting.firstIndex(where: { $0.gid == gid }) {
            self.waiting.remove(at: index)
        } else {
            return []
        }
        self.downloads[gid] = nil
        let event: QueueEvent
        let result: StoppedResult
        switch outcome {
        case .complete(let path, let length):
            download.path = path
            event = .completed(gid)
            result = StoppedResult(
                entry: download.entry,
                errorCode: 0,
                path: path,
                totalLength: length,
                completedLength: length
            )
        case .failed(let code, let message):
            event = .failed(gid)
            result = StoppedResult(
                entry: download.entry,
                errorCode: code == 0 || code == StoppedResult.removedCode ? 1 : code,
                errorMessage: message,
                path: download.path,
                totalLength: download.totalLength,
                completedLength: download.completedLength
            )
        }
        self.appendResult(result)
        return [.emit(event)] + self.fillSlots()
    }

    /// Notes what a run has learnt of its file: the resolved path, the length, the bytes on disk.
    public mutating func record(
        _ gid: DownloadID,
        path: String? = nil,
        totalLength: Int64? = nil,
        completedLength: Int64? = nil
    ) {
        guard var download = self.downloads[gid] else { return }
        if let path { download.path = path }
        if let totalLength { download.totalLength = totalLength }
        if let completedLength { download.completedLength = completedLength }
        self.downloads[gid] = download
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
        guard let current = self.waiting.firstIndex(where: { $0.gid == gid }) else {
            throw QueueError(
                .notWaiting,
                gid: gid.description,
                message: "Download \(gid) is not in the waiting queue, so it has no position to change."
            )
        }
        let last = self.waiting.count - 1
        let wanted: Int
        switch origin {
        case .set: wanted = position
        case .current: wanted = current.addingReportingOverflow(position).partialValue
        case .end: wanted = last.addingReportingOverflow(position).partialValue
        }
        let destination = min(max(wanted, 0), last)
        let item = self.waiting.remove(at: current)
        self.waiting.insert(item, at: destination)
        return (destination, destination == current ? [] : [.emit(.changed(gid))])
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
        var removed = 0
        for uri in remove {
            if let index = download.entry.uris.firstIndex(of: uri) {
                download.entry.uris.remove(at: index)
                removed += 1
            }
        }
        let index = min(max(position ?? download.entry.uris.count, 0), download.entry.uris.count)
        download.entry.uris.insert(contentsOf: add, at: index)
        self.downloads[gid] = download
        let changed = removed > 0 || !add.isEmpty
        return (removed, add.count, changed ? [.emit(.changed(gid))] : [])
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
        if names.contains("dir") || names.contains("out") {
            // The file goes somewhere else now: what an earlier run resolved no longer holds.
            download.path = nil
        }
        self.downloads[gid] = download
        if self.active.contains(gid) {
            guard !names.isSubset(of: Self.optionsChangedLive) else { return [] }
            return [.stop(gid, reason: .restart), .start(gid), .emit(.started(gid))]
        }
        return [.emit(.changed(gid))]
    }

    /// Changes how many downloads run at once (at least 1); more start at once if there is room. Active ones
    /// above a lowered limit run on; no new one starts until the count is below it.
    public mutating func setMaxConcurrentDownloads(_ count: Int) -> [QueueAction] {
        self.maxConcurrentDownloads = max(1, count)
        return [.emit(.optionsChanged)] + self.fillSlots()
    }

    /// Changes how many results are kept (0 or more); the oldest beyond it are dropped.
    public mutating func setMaxDownloadResult(_ count: Int) -> [QueueAction] {
        self.maxDownloadResult = max(0, count)
        self.trimResults()
        return [.emit(.optionsChanged)]
    }

    // MARK: - Results

    /// Forgets every stopped result (``stoppedTotal`` stays).
    public mutating func purgeResults() -> [QueueAction] {
        self.stopped.removeAll()
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
        self.stopped.remove(at: index)
        return [.emit(.resultsRemoved(gid))]
    }

    // MARK: - Starting and stopping the queue

    /// Starts what should run: the downloads recorded as active, then waiting ones while slots are free.
    public mutating func startUp() -> [QueueAction] {
        self.isShuttingDown = false
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
        self.isShuttingDown = true
        return self.active.flatMap { gid -> [QueueAction] in [.stop(gid, reason: .shutdown), .emit(.stopped(gid))] }
    }

    // MARK: - Internals

    private mutating func fillSlots() -> [QueueAction] {
        guard !self.isShuttingDown else { return [] }
        var actions: [QueueAction] = []
        while self.active.count < self.maxConcurrentDownloads,
            let index = self.waiting.firstIndex(where: { !$0.isPaused })
        {
            let gid = self.waiting.remove(at: index).gid
            self.active.append(gid)
            actions.append(.start(gid))
            actions.append(.emit(.started(gid)))
        }
        return actions
    }

    private mutating func appendResult(_ result: StoppedResult) {
        self.stopped.append(result)
        self.stoppedTotal += 1
        self.trimResults()
    }

    private mutating func trimResults() {
        if self.stopped.count > self.maxDownloadResult {
            self.stopped.removeFirst(self.stopped.count - self.maxDownloadResult)
        }
    }
}
