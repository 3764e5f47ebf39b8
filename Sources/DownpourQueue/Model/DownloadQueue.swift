import Downpour
import DownpourAria2

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
///
/// Each operation also records the rows it changed (``changes``, as ``QueueChange``s) for ``QueueStore`` to write,
/// and how to undo itself: its owner stores the changes, then calls ``acceptChanges()``, or, when the store refuses
/// them, ``revertChanges()`` to get the queue back as it was. Lookups by GID are dictionary lookups (a waiting
/// item's index is a binary search over its position), and filling a slot passes over paused items only when an
/// unpaused one waits, so that a queue of 10,000 paused downloads costs little per operation.
public struct DownloadQueue: Sendable {
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
    /// Whether free slots are filled from the waiting queue on their own (aria2's way, the default). A queue that
    /// does not fill them starts a download only when ``start(_:)`` says so: for an owner that decides itself
    /// what runs and when (a scheduler that claims work elsewhere, a test that drives the queue step by step).
    public let fillsFreeSlots: Bool

    /// How many downloads run at once (aria2's `max-concurrent-downloads`, 5 by default). Set it with
    /// ``setMaxConcurrentDownloads(_:)`` to start more at once.
    public private(set) var maxConcurrentDownloads: Int
    /// How many stopped results are kept (aria2's `max-download-result`, 1,000 by default).
    public private(set) var maxDownloadResult: Int

    /// The rows changed since the last ``acceptChanges()`` or ``revertChanges()``, in order.
    public private(set) var changes: [QueueChange] = []

    /// The stored position of every download that has not stopped (see ``QueueChange``).
    private var positions: [DownloadID: Double] = [:]
    /// The positions of ``waiting``, index for index: increasing, so an item's index is a binary search.
    private var waitingPositions: [Double] = []
    /// How many items of ``waiting`` are not paused.
    private(set) var unpausedCount = 0
    /// The GIDs of ``stopped``.
    private var resultGIDs: Set<DownloadID> = []
    /// How to undo what happened since the last ``acceptChanges()``, the oldest step first.
    private var undoSteps: [UndoStep] = []

    /// Options whose change does not restart an active download (the download applies them while it runs).
    public static let optionsChangedLive: Set<String> = [Aria2Option.maxDownloadLimit.name]

    /// An empty queue; with `fillsFreeSlots` false, only ``start(_:)`` starts a download.
    public init(maxConcurrentDownloads: Int = 5, maxDownloadResult: Int = 1000, fillsFreeSlots: Bool = true) {
        self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
        self.maxDownloadResult = max(0, maxDownloadResult)
        self.fillsFreeSlots = fillsFreeSlots
    }

    /// A queue as it was stored. Nothing starts until ``startUp()``.
    ///
    /// Positions missing from `positions`, or out of order, are given anew; ``changes`` then holds the rows to
    /// rewrite, and nothing else.
    ///
    /// - Parameters:
    ///   - active: The downloads that were running, in order; they run again at ``startUp()``.
    ///   - waiting: The waiting queue, in order.
    ///   - stopped: The results, the least recently stopped first.
    ///   - positions: The stored positions (``QueueStore/Contents/positions``).
    public init(
        active: [QueuedDownload],
        waiting: [(QueuedDownload, isPaused: Bool)],
        stopped: [StoppedResult],
        stoppedTotal: Int,
        maxConcurrentDownloads: Int = 5,
        maxDownloadResult: Int = 1000,
        positions: [DownloadID: Double] = [:],
        fillsFreeSlots: Bool = true
    ) {
        self.init(
            maxConcurrentDownloads: maxConcurrentDownloads,
            maxDownloadResult: maxDownloadResult,
            fillsFreeSlots: fillsFreeSlots
        )
        func ordered(_ gids: [DownloadID]) -> Bool {
            var previous = -Double.infinity
            for gid in gids {
                guard let position = positions[gid], position.isFinite, position > previous else { return false }
                previous = position
            }
            return true
        }
        let activeGIDs = active.map(\.entry.gid)
        let activeKept = ordered(activeGIDs)
        for (index, download) in active.enumerated() {
            let gid = download.entry.gid
            self.active.append(gid)
            self.downloads[gid] = download
            self.positions[gid] = activeKept ? positions[gid]! : Double(index + 1)
            if !activeKept { self.changes.append(.place(gid, state: .active, position: Double(index + 1))) }
        }
        let waitingKept = ordered(waiting.map(\.0.entry.gid))
        for (index, (download, isPaused)) in waiting.enumerated() {
            let gid = download.entry.gid
            let position = waitingKept ? positions[gid]! : Double(index + 1)
            self.waiting.append(WaitingItem(gid: gid, isPaused: isPaused))
            self.waitingPositions.append(position)
            self.positions[gid] = position
            self.downloads[gid] = download
            if !isPaused { self.unpausedCount += 1 }
            if !waitingKept {
                self.changes.append(.place(gid, state: isPaused ? .paused : .waiting, position: position))
            }
        }
        self.stopped = stopped
        self.resultGIDs = Set(stopped.map(\.gid))
        self.stoppedTotal = max(stoppedTotal, stopped.count)
        self.trimResults()
        self.undoSteps = []
    }

    // MARK: - Changes

    /// Forgets the recorded ``changes`` and how to undo them: the owner has stored them.
    public mutating func acceptChanges() {
        self.changes.removeAll(keepingCapacity: true)
        self.undoSteps.removeAll(keepingCapacity: true)
    }

    /// Undoes everything since the last ``acceptChanges()`` (the store refused it): the queue is as it was then,
    /// with no recorded changes.
    public mutating func revertChanges() {
        let steps = self.undoSteps
        for step in steps.reversed() { self.undo(step) }
        self.acceptChanges()
    }

    // MARK: - Looking up

    /// The status of a GID that is in the queue or among the results; `nil` for an unknown one.
    public func status(of gid: DownloadID) -> QueueStatus? {
        if self.positions[gid] != nil {
            if let index = self.waitingIndex(of: gid) { return self.waiting[index].isPaused ? .paused : .waiting }
            return .active
        }
        return self.result(of: gid)?.status
    }

    /// The index of a waiting or paused download in ``waiting``; `nil` for any other.
    public func waitingIndex(of gid: DownloadID) -> Int? {
        guard let position = self.positions[gid] else { return nil }
        var low = 0
        var high = self.waitingPositions.count
        while low < high {
            let middle = (low + high) / 2
            if self.waitingPositions[middle] < position { low = middle + 1 } else { high = middle }
        }
        guard low < self.waiting.count, self.waitingPositions[low] == position, self.waiting[low].gid == gid else {
            return nil
        }
        return low
    }

    /// The stored position of a download that has not stopped (see ``QueueChange``).
    public func position(of gid: DownloadID) -> Double? {
        self.positions[gid]
    }

    /// The result of a stopped download.
    public func result(of gid: DownloadID) -> StoppedResult? {
        guard self.resultGIDs.contains(gid) else { return nil }
        return self.stopped.last(where: { $0.gid == gid })
    }

    /// The GID that `text` names: 16 hexadecimal digits, or a unique prefix of a known GID, in either case.
    ///
    /// - Throws: ``QueueError`` `invalidGID` (empty, longer than 16 or not hexadecimal), `notUnique` (a prefix of
    ///   several), `notFound`.
    public func resolve(_ text: String) throws(QueueError) -> DownloadID {
        try Self.resolve(text) { prefix in
            // A whole GID is looked up, not searched for.
            if prefix.utf8.count == 16, let gid = DownloadID(prefix) { return self.contains(gid) ? [gid] : [] }
            var matches: Set<DownloadID> = []
            for gid in self.downloads.keys where gid.description.hasPrefix(prefix) { matches.insert(gid) }
            for gid in self.resultGIDs where gid.description.hasPrefix(prefix) { matches.insert(gid) }
            return matches
        }
    }

    /// ``resolve(_:)`` for a queue kept elsewhere: `matching` gives the GIDs that start with a prefix (in lower
    /// case); two of them are enough to know it is not unique.
    public static func resolve(
        _ text: String,
        matching: (String) throws(QueueError) -> Set<DownloadID>
    ) throws(QueueError) -> DownloadID {
        try Self.unique(matching(try Self.gidPrefix(text)), for: text)
    }

    /// `text` as a GID prefix to look up (lower case).
    ///
    /// - Throws: ``QueueError`` `invalidGID` when it is empty, longer than 16 or not hexadecimal.
    public static func gidPrefix(_ text: String) throws(QueueError) -> String {
        let isHex = text.utf8.allSatisfy { byte in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
        }
        guard !text.isEmpty, text.utf8.count <= 16, isHex else {
            throw QueueError(
                .invalidGID,
                gid: text,
                message: "'\(text)' is not a GID: give 1 to 16 hexadecimal digits."
            )
        }
        return text.lowercased()
    }

    /// The one GID among `matches`, the downloads whose GID starts with `text`.
    ///
    /// - Throws: ``QueueError`` `notFound` for none, `notUnique` for more than one.
    public static func unique(_ matches: Set<DownloadID>, for text: String) throws(QueueError) -> DownloadID {
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
        self.downloads.index(forKey: gid) != nil || self.resultGIDs.contains(gid)
    }

    // MARK: - Internals

    mutating func fillSlots() -> [QueueAction] {
        guard self.fillsFreeSlots, !self.isShuttingDown else { return [] }
        var actions: [QueueAction] = []
        while self.active.count < self.maxConcurrentDownloads, self.unpausedCount > 0,
            let index = self.waiting.firstIndex(where: { !$0.isPaused })
        {
            let gid = self.removeWaiting(at: index).gid
            let position = self.appendActive(gid)
            self.changes.append(.place(gid, state: .active, position: position))
            actions.append(.start(gid))
            actions.append(.emit(.started(gid)))
        }
        return actions
    }

    mutating func appendResult(_ result: StoppedResult) {
        self.stopped.append(result)
        self.resultGIDs.insert(result.gid)
        self.undoSteps.append(.resultAppended)
        self.changes.append(.appendResult(result))
        self.undoSteps.append(.stoppedTotal(self.stoppedTotal))
        self.stoppedTotal += 1
        self.changes.append(.stoppedTotal(self.stoppedTotal))
        self.trimResults()
    }

    mutating func trimResults() {
        guard self.stopped.count > self.maxDownloadResult else { return }
        let excess = self.stopped.count - self.maxDownloadResult
        for result in self.stopped[..<excess] { self.changes.append(.deleteResult(result.gid)) }
        self.removeResults(0..<excess)
    }

    // MARK: - Primitives (each keeps the indexes right and records its undo step)

    /// Records a row the operation changed, for the store.
    mutating func record(_ change: QueueChange) {
        self.changes.append(change)
    }

    /// Sets the limits on active downloads and on results kept.
    mutating func setLimits(maxConcurrentDownloads: Int, maxDownloadResult: Int) {
        self.undoSteps.append(.limits(self.maxConcurrentDownloads, self.maxDownloadResult))
        self.maxConcurrentDownloads = maxConcurrentDownloads
        self.maxDownloadResult = maxDownloadResult
    }

    /// Sets whether the queue is shutting down.
    mutating func setShuttingDown(_ isShuttingDown: Bool) {
        guard isShuttingDown != self.isShuttingDown else { return }
        self.undoSteps.append(.shuttingDown(self.isShuttingDown))
        self.isShuttingDown = isShuttingDown
    }

    private enum UndoStep: Sendable {
        case download(DownloadID, QueuedDownload?)
        case waitingInserted(at: Int)
        case waitingRemoved(WaitingItem, position: Double, at: Int)
        case waitingPaused(at: Int, Bool)
        case waitingPositioned(at: Int, Double)
        case activeAppended
        case activeRemoved(DownloadID, position: Double, at: Int)
        case resultAppended
        case resultsRemoved([StoppedResult], at: Int)
        case stoppedTotal(Int)
        case limits(Int, Int)
        case shuttingDown(Bool)
    }

    private mutating func undo(_ step: UndoStep) {
        switch step {
        case .download(let gid, let download): self.downloads[gid] = download
        case .waitingInserted(let index): self.removeWaiting(at: index)
        case .waitingRemoved(let item, let position, let index): self.insertWaiting(item, position: position, at: index)
        case .waitingPaused(let index, let isPaused): self.setPaused(isPaused, at: index)
        case .waitingPositioned(let index, let position): self.setPosition(position, at: index)
        case .activeAppended: self.removeActive(at: self.active.count - 1)
        case .activeRemoved(let gid, let position, let index):
            self.active.insert(gid, at: index)
            self.positions[gid] = position
        case .resultAppended:
            let result = self.stopped.removeLast()
            self.resultGIDs.remove(result.gid)
        case .resultsRemoved(let results, let index):
            self.stopped.insert(contentsOf: results, at: index)
            for result in results { self.resultGIDs.insert(result.gid) }
        case .stoppedTotal(let total): self.stoppedTotal = total
        case .limits(let concurrent, let results):
            self.maxConcurrentDownloads = concurrent
            self.maxDownloadResult = results
        case .shuttingDown(let value): self.isShuttingDown = value
        }
    }

    mutating func setDownload(_ download: QueuedDownload) {
        self.setDownload(download, for: download.entry.gid)
    }

    mutating func setDownload(_ download: QueuedDownload?, for gid: DownloadID) {
        self.undoSteps.append(.download(gid, self.downloads[gid]))
        self.downloads[gid] = download
    }

    /// Inserts `item` at `index` of the waiting queue with a position between its neighbours (renumbering the
    /// waiting queue first when they leave no room), and returns that position.
    @discardableResult
    mutating func insertWaiting(_ item: WaitingItem, at index: Int) -> Double {
        var position = self.freePosition(at: index)
        if position == nil {
            self.renumberWaiting()
            position = self.freePosition(at: index)
        }
        let chosen = position ?? Double(index)
        self.insertWaiting(item, position: chosen, at: index)
        return chosen
    }

    mutating func insertWaiting(_ item: WaitingItem, position: Double, at index: Int) {
        self.waiting.insert(item, at: index)
        self.waitingPositions.insert(position, at: index)
        self.positions[item.gid] = position
        if !item.isPaused { self.unpausedCount += 1 }
        self.undoSteps.append(.waitingInserted(at: index))
    }

    @discardableResult
    mutating func removeWaiting(at index: Int) -> WaitingItem {
        let item = self.waiting.remove(at: index)
        let position = self.waitingPositions.remove(at: index)
        self.positions[item.gid] = nil
        if !item.isPaused { self.unpausedCount -= 1 }
        self.undoSteps.append(.waitingRemoved(item, position: position, at: index))
        return item
    }

    mutating func setPaused(_ isPaused: Bool, at index: Int) {
        let item = self.waiting[index]
        guard item.isPaused != isPaused else { return }
        self.undoSteps.append(.waitingPaused(at: index, item.isPaused))
        self.waiting[index].isPaused = isPaused
        self.unpausedCount += isPaused ? -1 : 1
        self.changes.append(
            .place(item.gid, state: isPaused ? .paused : .waiting, position: self.waitingPositions[index])
        )
    }

    mutating func setPosition(_ position: Double, at index: Int) {
        self.undoSteps.append(.waitingPositioned(at: index, self.waitingPositions[index]))
        self.waitingPositions[index] = position
        self.positions[self.waiting[index].gid] = position
    }

    /// A position strictly between the neighbours of `index` (append: the last plus one; front: the first minus
    /// one), or `nil` when there is no room.
    func freePosition(at index: Int) -> Double? {
        let before = index > 0 ? self.waitingPositions[index - 1] : nil
        let after = index < self.waitingPositions.count ? self.waitingPositions[index] : nil
        let position: Double
        switch (before, after) {
        case (nil, nil): position = 1
        case (let before?, nil): position = before + 1
        case (nil, let after?): position = after - 1
        case (let before?, let after?): position = before + (after - before) / 2
        }
        if let before, !(position > before) { return nil }
        if let after, !(position < after) { return nil }
        guard position.isFinite, abs(position) < 9e15 else { return nil }
        return position
    }

    /// Gives the waiting queue the positions 1, 2, 3 ... (rare: only when two neighbours leave no room between
    /// them).
    mutating func renumberWaiting() {
        for index in self.waiting.indices {
            let position = Double(index + 1)
            guard self.waitingPositions[index] != position else { continue }
            self.setPosition(position, at: index)
            let item = self.waiting[index]
            self.changes.append(.place(item.gid, state: item.isPaused ? .paused : .waiting, position: position))
        }
    }

    @discardableResult
    mutating func appendActive(_ gid: DownloadID) -> Double {
        let position = (self.active.last.flatMap { self.positions[$0] } ?? 0) + 1
        self.active.append(gid)
        self.positions[gid] = position
        self.undoSteps.append(.activeAppended)
        return position
    }

    mutating func removeActive(at index: Int) {
        let gid = self.active.remove(at: index)
        let position = self.positions.removeValue(forKey: gid) ?? 0
        self.undoSteps.append(.activeRemoved(gid, position: position, at: index))
    }

    mutating func removeResults(_ range: Range<Int>) {
        let removed = Array(self.stopped[range])
        self.stopped.removeSubrange(range)
        for result in removed { self.resultGIDs.remove(result.gid) }
        self.undoSteps.append(.resultsRemoved(removed, at: range.lowerBound))
    }
}

extension DownloadQueue: Hashable {
    /// Two queues are equal when they hold the same downloads in the same places with the same results and
    /// limits; positions, recorded changes and undo steps are bookkeeping and do not count.
    public static func == (lhs: DownloadQueue, rhs: DownloadQueue) -> Bool {
        lhs.active == rhs.active && lhs.waiting == rhs.waiting && lhs.stopped == rhs.stopped
            && lhs.stoppedTotal == rhs.stoppedTotal && lhs.downloads == rhs.downloads
            && lhs.isShuttingDown == rhs.isShuttingDown && lhs.maxConcurrentDownloads == rhs.maxConcurrentDownloads
            && lhs.maxDownloadResult == rhs.maxDownloadResult && lhs.fillsFreeSlots == rhs.fillsFreeSlots
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.active)
        hasher.combine(self.waiting)
        hasher.combine(self.stopped)
        hasher.combine(self.stoppedTotal)
        hasher.combine(self.downloads)
        hasher.combine(self.isShuttingDown)
        hasher.combine(self.maxConcurrentDownloads)
        hasher.combine(self.maxDownloadResult)
        hasher.combine(self.fillsFreeSlots)
    }
}
