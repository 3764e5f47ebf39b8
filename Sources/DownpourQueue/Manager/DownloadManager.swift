import Downpour
import DownpourAria2
import Foundation
import Logging
import NIOCore
import NIOPosix

/// The download queue that runs: aria2's model (``DownloadQueue``) kept in a ``QueueStore`` and carried out with a
/// ``Downloader``.
///
/// ```swift
/// let store = try QueueStore(directory: stateDirectory)
/// let manager = DownloadManager(
///     downloader: downloader,
///     store: store,
///     defaults: .init(directory: "/downloads", options: [QueueOption(name: "split", value: "8")]),
///     logger: logger
/// )
/// try await manager.start()
/// let gid = try await manager.add(uris: ["https://example.com/big.iso"], options: [], position: nil)
/// ```
///
/// Every change is committed to the store before the method that made it returns; if the store cannot be written
/// the change is not made (``QueueError`` `storage`). The manager is a facade over three homes: the transactions
/// (`DownloadManager+Transactions.swift`, the ``QueueLedger``: one change at a time, committed on the store's writer
/// thread while the loop answers reads), the runs (`DownloadManager+Runs.swift`) and the options (``OptionResolver``
/// over the table, ``Aria2Option``). Each active download runs in a task of its own. Pausing an
/// active download cancels its run (the `.part` file and its journal stay); unpausing starts a new run of the same
/// request, which resumes from the journal. The resolved path of each file is stored when its run starts, so a run
/// after a restart continues the same `.part`. ``shutdown()`` stops the runs the same way and leaves them
/// recorded as active: the next ``start()`` resumes them.
///
/// Removing a waiting or paused download deletes its `NAME.part` and `NAME.part.downpour` when its path is known
/// (a run resolved it), as removing an active one does; aria2 leaves them behind.
///
/// Each change writes only the rows it touched (``DownloadQueue/changes`` through ``QueueStore/apply(_:options:)``),
/// in one transaction, so its cost does not grow with the queue; per download the manager keeps the queue's entry
/// and, only while it runs, a ``Download`` and its task.
///
/// Options a download or ``changeGlobalOptions(_:)`` gives by a name the queue does not know are ignored (logged
/// at debug level), as aria2's RPC does; a bad value for a known name is refused with
/// ``QueueError`` `invalidRequest` naming the option.
public actor DownloadManager: DownloadQueueService {
    /// Options a download takes at `add` that are about the queue, not the request.
    static let placementOptionNames = Set(Aria2Option.all.filter { $0.scope == .placement }.map(\.name))
    /// Options a download gives when added that only aria2's `changeGlobalOption` refuses as global ones.
    static let perDownloadOnly: Set<String> = [Aria2Option.out.name, Aria2Option.checksum.name]

    /// The loop the manager runs on: its executor, so every change and every read of the queue happens on this
    /// loop's thread. The downloads run elsewhere (Swift's global executor and their connections' loops) and come
    /// here only to start, to record and to end; the store commits on its own thread.
    public nonisolated let eventLoop: any EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { self.eventLoop.executor.asUnownedSerialExecutor() }

    let downloader: Downloader
    let defaults: Defaults
    let logger: Logger
    let broadcaster = QueueEventBroadcaster()

    /// The queue, and what of it the store has not taken yet.
    var ledger: QueueLedger
    /// One transaction at a time (``transaction(restartingOnFailure:_:)``).
    nonisolated let gate = TransactionGate()
    var gids = GIDSource()
    /// Global options changed by clients (stored); they override ``Defaults/options``.
    var overrides: [QueueOption] = [] {
        didSet {
            self.effectiveGlobals = Self.effectiveGlobals(self.defaults.options, self.overrides)
        }
    }
    /// ``Defaults/options`` with ``overrides`` over them.
    private(set) var effectiveGlobals: [QueueOption] = []
    /// The runs of the active downloads, their tokens, and the downloads another writer took (``orphans()``).
    var supervisor = RunSupervisor()
    /// Runs that ended and wait for the transaction that records them (``runEnded(_:token:outcome:)``), in one
    /// store.
    var endedRuns: [EndedRun] = []
    /// That transaction while it waits for the gate: a run that ends meanwhile waits for it too, rather than for a
    /// place of its own in the gate's line.
    var endsRecording: Task<Void, Never>?
    private var isStarted = false
    var isShutDown = false
    let recordDelay: Duration
    nonisolated let runEnding: (@Sendable (DownloadID) async -> Void)?
    nonisolated let runFinishing: (@Sendable (DownloadID) async -> Void)?
    let fillsFreeSlots: Bool
    /// The session file (`save-session`), for a manager that writes one; a fleet node's does not: its queue is a
    /// part of the fleet's, which the node writes.
    var sessionWriter: SessionWriter?
    let writePermit: WritePermitSource?
    /// Stores a run's record (see ``runStarted(_:token:start:)``) once `recordDelay` is over; `nil` while none
    /// waits. Whatever stores the queue's changes first takes the record with them and cancels it.
    var recordTimer: Task<Void, Never>?
    /// Writes the session file every `save-session-interval` seconds while the queue runs.
    var sessionTimer: Task<Void, Never>?

    /// A manager over `store`; nothing is read or started until ``start()``.
    ///
    /// - Parameters:
    ///   - downloader: Runs the downloads; `max-overall-download-limit` goes to its configuration.
    ///   - store: Where the queue is kept.
    ///   - defaults: The directory, configuration and global options new downloads start from.
    ///   - eventLoop: Where the manager runs (``eventLoop``); by default one of NIO's shared loops. A server that
    ///     reads the queue gives its connections this loop, and its reads are answered right there
    ///     (``readIfIsolated(_:)``).
    ///   - logger: For what the queue does (info and below).
    ///   - fillsFreeSlots: `false` for a queue whose downloads start only when told (``run(_:)``): a fleet node's,
    ///     which runs what it claimed (``DownloadQueue/fillsFreeSlots``).
    ///   - writesSession: `false` for a manager whose queue is a part of a bigger one (a fleet node's): it writes
    ///     no session file, at exit or every `save-session-interval`.
    ///   - writePermit: Gives each run, as it starts, the write permit it asks before every write that matters
    ///     (``Downloader/download(_:id:logger:writePermit:)``); `nil` for runs that always may write.
    public init(
        downloader: Downloader,
        store: QueueStore,
        defaults: Defaults = Defaults(),
        eventLoop: (any EventLoop)? = nil,
        logger: Logger,
        fillsFreeSlots: Bool = true,
        writesSession: Bool = true,
        writePermit: WritePermitSource? = nil
    ) {
        self.init(
            downloader: downloader,
            store: store,
            defaults: defaults,
            eventLoop: eventLoop,
            logger: logger,
            recordDelay: .milliseconds(100),
            fillsFreeSlots: fillsFreeSlots,
            writesSession: writesSession,
            writePermit: writePermit
        )
    }

    /// Gives a run of the download with this GID its write permit, as the run starts.
    public typealias WritePermitSource = @Sendable (DownloadID) -> @Sendable () async -> Bool

    /// - Parameters:
    ///   - recordDelay: How long a run's record (its path and length) may wait for the next change before it is
    ///     stored on its own.
    ///   - runFinishing: Called when a run is past its point of no return, before its file is synced and renamed
    ///     (tests hold a finishing run there).
    ///   - runEnding: Called when a run's download has returned, before the manager hears of it (tests hold a
    ///     finished run there).
    init(
        downloader: Downloader,
        store: QueueStore,
        defaults: Defaults,
        eventLoop: (any EventLoop)? = nil,
        logger: Logger,
        recordDelay: Duration,
        runFinishing: (@Sendable (DownloadID) async -> Void)? = nil,
        runEnding: (@Sendable (DownloadID) async -> Void)? = nil,
        fillsFreeSlots: Bool = true,
        writesSession: Bool = true,
        writePermit: WritePermitSource? = nil
    ) {
        self.fillsFreeSlots = fillsFreeSlots
        self.sessionWriter = writesSession ? SessionWriter() : nil
        self.writePermit = writePermit
        self.runFinishing = runFinishing
        self.runEnding = runEnding
        self.downloader = downloader
        self.ledger = QueueLedger(store: store)
        self.defaults = defaults
        self.eventLoop = eventLoop ?? MultiThreadedEventLoopGroup.singleton.next()
        self.logger = logger
        self.effectiveGlobals = defaults.options
        self.recordDelay = recordDelay
    }

    /// Loads the stored queue and starts what should run: the downloads that were active when the queue last
    /// stopped, then waiting ones while there is room.
    ///
    /// - Throws: ``QueueError`` `storage` when the store cannot be read, `invalidRequest` when a global option has
    ///   a bad value.
    public func start() async throws(QueueError) {
        guard !self.isStarted else { return }
        var startedHere = false
        try await self.transaction { () throws(QueueError) in
            // Another caller may have started it while this one waited for the gate.
            guard !self.isStarted else { return }
            startedHere = true
            let contents = try await self.ledger.store.contents()
            self.overrides = contents.options
            let globals = self.effectiveGlobals
            for option in globals { try self.validateGlobal(option) }
            let maxConcurrent = Self.lastValue(.maxConcurrentDownloads, in: globals).flatMap { Int($0) } ?? 5
            let maxResults = Self.lastValue(.maxDownloadResult, in: globals).flatMap { Int($0) } ?? 1000
            var queue = DownloadQueue(
                active: contents.active,
                waiting: contents.waiting,
                stopped: contents.stopped,
                stoppedTotal: contents.stoppedTotal,
                maxConcurrentDownloads: maxConcurrent,
                maxDownloadResult: maxResults,
                positions: contents.positions,
                fillsFreeSlots: self.fillsFreeSlots
            )
            if let limit = Self.lastValue(.maxOverallDownloadLimit, in: globals) {
                try self.setOverallLimit(limit)
            }
            let actions = queue.startUp()
            try await self.ledger.store.commit(.changes(queue.changes, options: nil))
            queue.acceptChanges()
            self.ledger.queue = queue
            self.isStarted = true
            self.logger.info(
                "Queue started",
                metadata: [
                    "active": "\(queue.active.count)", "waiting": "\(queue.waiting.count)",
                    "stopped": "\(queue.stopped.count)",
                ]
            )
            self.perform(actions)
        }
        // Not after a shutdown that came while the queue was being stored.
        if startedHere, self.sessionWriter != nil, !self.isShutDown {
            self.sessionTimer = Task { await self.saveSessionPeriodically() }
        }
    }

    // MARK: - DownloadQueueService

    public func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        try body(self.view)
    }

    public nonisolated func readIfIsolated<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) throws(Failure) -> Value? {
        guard self.eventLoop.inEventLoop else { return nil }
        let result = self.assumeIsolated { manager in
            Result { () throws(Failure) in try body(manager.view) }
        }
        return try result.get()
    }

    /// The queue as it is now, for one read.
    private var view: View {
        View(
            queue: self.ledger.queue,
            runs: self.supervisor.runs,
            defaults: self.defaults,
            globals: self.effectiveGlobals,
            downloader: self.downloader
        )
    }

    public func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID {
        try self.checkRunning()
        return try await self.transaction { () throws(QueueError) in
            let prepared = try self.prepareAdd(uris: uris, options: options, position: position)
            let actions = try await self.change { queue throws(QueueError) in
                try queue.add(prepared.entry, paused: prepared.paused, position: position)
            }
            self.logger.info(
                "Download added",
                metadata: ["gid": "\(prepared.entry.gid)", "uri": "\(uris[0])", "paused": "\(prepared.paused)"]
            )
            self.perform(actions)
            return prepared.entry.gid
        }
    }

    public func add(batch: [AddRequest]) async -> [Result<DownloadID, QueueError>] {
        do {
            try self.checkRunning()
        } catch {
            return batch.map { _ in .failure(error) }
        }
        return await self.selfMadeTransaction { () async -> [Result<DownloadID, QueueError>] in
            // Checked again at the gate: a shutdown may have come meanwhile.
            do throws(QueueError) {
                try self.checkRunning()
            } catch {
                return batch.map { _ in .failure(error) }
            }
            var results: [Result<DownloadID, QueueError>] = batch.map { _ in .failure(QueueError(.invalidRequest)) }
            var prepared: [(index: Int, entry: QueueEntry, paused: Bool, position: Int?)] = []
            for (index, request) in batch.enumerated() {
                do throws(QueueError) {
                    let add = try self.prepareAdd(
                        uris: request.uris,
                        options: request.options,
                        position: request.position
                    )
                    prepared.append((index, add.entry, add.paused, request.position))
                } catch {
                    results[index] = .failure(error)
                }
            }
            var actions: [QueueAction] = []
            do throws(QueueError) {
                try await self.change { queue throws(QueueError) in
                    for item in prepared {
                        do throws(QueueError) {
                            actions += try queue.add(item.entry, paused: item.paused, position: item.position)
                            results[item.index] = .success(item.entry.gid)
                        } catch {
                            results[item.index] = .failure(error)
                        }
                    }
                }
            } catch {
                for item in prepared { results[item.index] = .failure(error) }
                return results
            }
            self.logger.info("Downloads added", metadata: ["count": "\(prepared.count)"])
            self.perform(actions)
            return results
        }
    }

    /// Checks a download to add and makes its entry: its GID (new, or the `gid` option), whether it starts paused.
    func prepareAdd(
        uris: [String],
        options: [QueueOption],
        position: Int?
    ) throws(QueueError) -> (entry: QueueEntry, paused: Bool) {
        guard !uris.isEmpty else {
            throw QueueError(.invalidRequest, message: "A download needs at least one URI.")
        }
        var gid = self.gids.next()
        while self.ledger.queue.contains(gid) { gid = self.gids.next() }
        var paused = false
        var kept: [QueueOption] = []
        for option in options {
            switch option.name {
            case Aria2Option.gid.name:
                guard let forced = DownloadID(option.value), forced.value != 0 else {
                    throw QueueError(
                        .invalidRequest,
                        message: "The option 'gid' takes 16 hexadecimal digits (not all zero), not '\(option.value)'.",
                        option: option.name
                    )
                }
                gid = forced
            case Aria2Option.pause.name:
                do {
                    paused = try Aria2Option.pause.checked(option.value) == "true"
                } catch {
                    throw QueueError(.invalidRequest, message: error.message, option: option.name)
                }
            default:
                kept.append(option)
            }
        }
        let entry = QueueEntry(gid: gid, uris: uris, options: kept)
        // The mirrors' URIs too: the request parses every one.
        try self.check(QueuedDownload(entry: entry))
        return (entry, paused)
    }

    public func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        try self.checkRunning()
        let id = try self.ledger.queue.resolve(gid)
        let stopped = try await self.stopRuns(for: "Pause") { [id] }
        return try await self.transaction(restartingOnFailure: stopped) { () throws(QueueError) in
            let actions = try await self.change { queue throws(QueueError) in
                self.noteProgress(of: id, in: &queue)
                return try queue.pause(id)
            }
            self.perform(actions)
            return id
        }
    }

    public func pauseAll(force: Bool) async throws(QueueError) {
        try self.checkRunning()
        let stopped = try await self.stopRuns(for: "Pause") { Array(self.supervisor.runs.keys) }
        try await self.transaction(restartingOnFailure: stopped) { () throws(QueueError) in
            // Runs started since are stopped by the queue's own actions.
            let actions = try await self.change { queue in
                for id in queue.active { self.noteProgress(of: id, in: &queue) }
                return queue.pauseAll()
            }
            self.perform(actions)
        }
    }

    public func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        try self.checkRunning()
        return try await self.transaction { () throws(QueueError) in
            let id = try self.ledger.queue.resolve(gid)
            let actions = try await self.change { queue throws(QueueError) in try queue.unpause(id) }
            self.perform(actions)
            return id
        }
    }

    public func unpauseAll() async throws(QueueError) {
        try self.checkRunning()
        try await self.transaction { () throws(QueueError) in
            let actions = try await self.change { queue in queue.unpauseAll() }
            self.perform(actions)
        }
    }

    public func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        try self.checkRunning()
        let (id, waitingPath) = try await self.transaction { () throws(QueueError) in
            let id = try self.ledger.queue.resolve(gid)
            let queue = self.ledger.queue
            let waiting = queue.waitingIndex(of: id) != nil ? queue.downloads[id] : nil
            let waitingPath = waiting?.path.map { (path: $0, audio: waiting?.audioPath) }
            let actions = try await self.change { queue throws(QueueError) in
                self.noteProgress(of: id, in: &queue)
                return try queue.remove(id)
            }
            self.perform(actions)
            return (id, waitingPath)
        }
        if let waitingPath {
            await self.removePartialFile(of: id, path: waitingPath.path, audioPath: waitingPath.audio)
        }
        return id
    }

    public func changePosition(
        _ gid: String,
        by position: Int,
        from origin: PositionOrigin
    ) async throws(QueueError)
        -> Int
    {
        try self.checkRunning()
        return try await self.transaction { () throws(QueueError) in
            let id = try self.ledger.queue.resolve(gid)
            let (index, actions) = try await self.change { queue throws(QueueError) in
                try queue.changePosition(id, by: position, from: origin)
            }
            self.perform(actions)
            return index
        }
    }

    public func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (
        removed: Int, added: Int
    ) {
        try self.checkRunning()
        for uri in add { try Self.checkURI(uri) }
        return try await self.transaction { () throws(QueueError) in
            let id = try self.ledger.queue.resolve(gid)
            let (removed, added, actions) = try await self.change { queue throws(QueueError) in
                let changed = try queue.changeURIs(id, remove: remove, add: add, position: position)
                guard queue.downloads[id]?.entry.uris.isEmpty == false else {
                    throw QueueError(
                        .invalidRequest,
                        gid: gid,
                        message: "Download \(id) would be left with no URI; add one before removing the last."
                    )
                }
                return changed
            }
            self.perform(actions)
            return (removed, added)
        }
    }

    public func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        try self.checkRunning()
        let id = try self.ledger.queue.resolve(gid)
        guard var download = self.ledger.queue.downloads[id] else {
            throw QueueError(
                .cannotChangeOption,
                gid: gid,
                message: "Download \(id) has stopped; its options cannot change."
            )
        }
        let changes = options.filter { option in
            if Self.placementOptionNames.contains(option.name) {
                self.logger.debug("Option cannot change after add; ignored", metadata: ["option": "\(option.name)"])
                return false
            }
            return true
        }
        let names = Set(changes.map(\.name))
        download.entry.options = download.entry.options.filter { !names.contains($0.name) } + changes
        try self.check(download)
        // An active one restarts with them: its run stops first, so that it cannot complete under the old ones
        // after the change is acknowledged (one finishing is waited for, and then the change is refused).
        let restarts = self.ledger.queue.active.contains(id) && !names.isSubset(of: DownloadQueue.optionsChangedLive)
        let stopped = try await self.stopRuns(for: "An option change") { restarts ? [id] : [] }
        try await self.transaction(restartingOnFailure: stopped) { () throws(QueueError) in
            let actions = try await self.change { queue throws(QueueError) in try queue.changeOptions(id, changes) }
            if actions.isEmpty, let run = self.supervisor[id], names.contains(Aria2Option.maxDownloadLimit.name),
                let limit = Self.lastValue(.maxDownloadLimit, in: changes), let rate = ByteCount.parse(limit)
            {
                run.download.setMaximumRate(rate == 0 ? nil : rate)
                run.playlist.limiter.setRate(rate == 0 ? nil : rate)
            }
            self.perform(actions)
        }
    }

    public func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        try self.checkRunning()
        var accepted: [QueueOption] = []
        for option in options {
            if let known = Aria2Option.named(option.name), known.scope == .queue || known.scope == .download,
                !Self.perDownloadOnly.contains(option.name)
            {
                try self.validateGlobal(option)
                accepted.append(option)
            } else {
                self.logger.debug("Unsupported global option ignored", metadata: ["option": "\(option.name)"])
            }
        }
        guard !accepted.isEmpty else { return }
        let names = Set(accepted.map(\.name))
        try await self.transaction { () throws(QueueError) in
            let overrides = self.overrides.filter { !names.contains($0.name) } + accepted
            var actions = try await self.change(options: overrides) { queue in
                var actions: [QueueAction] = []
                if let value = Self.lastValue(.maxConcurrentDownloads, in: accepted), let count = Int(value) {
                    actions += queue.setMaxConcurrentDownloads(count)
                }
                if let value = Self.lastValue(.maxDownloadResult, in: accepted), let count = Int(value) {
                    actions += queue.setMaxDownloadResult(count)
                }
                return actions
            }
            if !actions.contains(.emit(.optionsChanged)) { actions.append(.emit(.optionsChanged)) }
            self.overrides = overrides
            if let limit = Self.lastValue(.maxOverallDownloadLimit, in: accepted) {
                try self.setOverallLimit(limit)
            }
            self.logger.info("Global options changed", metadata: ["options": "\(names.sorted())"])
            self.perform(actions)
        }
    }

    public func purgeResults() async throws(QueueError) {
        try self.checkRunning()
        try await self.transaction { () throws(QueueError) in
            let actions = try await self.change { queue in queue.purgeResults() }
            self.perform(actions)
        }
    }

    public func removeResult(_ gid: String) async throws(QueueError) {
        try self.checkRunning()
        try await self.transaction { () throws(QueueError) in
            let id = try self.ledger.queue.resolve(gid)
            let actions = try await self.change { queue throws(QueueError) in try queue.removeResult(id) }
            self.perform(actions)
        }
    }

    public nonisolated var events: AsyncStream<QueueEvent> {
        self.broadcaster.subscribe()
    }

    public func shutdown() async {
        guard self.isStarted, !self.isShutDown else { return }
        self.isShutDown = true
        self.sessionTimer?.cancel()
        // As aria2 does at exit, with the active downloads as they are (they continue when the file is loaded).
        if self.sessionWriter != nil, Self.lastValue(.saveSession, in: self.effectiveGlobals) != nil {
            do {
                try await self.writeSession(onlyIfChanged: false)
            } catch {
                self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
            }
        }
        await self.selfMadeTransaction { () async in
            for id in self.ledger.queue.active { self.noteProgress(of: id, in: &self.ledger.queue) }
            let actions = self.ledger.queue.shutdown()
            self.perform(actions)
        }
        // The runs end with their bytes and journals saved; none of them changes the queue now but for its record.
        while let (gid, run) = self.supervisor.runs.first {
            await run.task.value
            _ = self.supervisor.ended(gid, token: run.token)
        }
        // What the runs recorded on their way out.
        await self.selfMadeTransaction { () async in }
        if self.ledger.storeIsBehind {
            self.logger.error("The queue could not be stored at shutdown")
        }
        self.logger.info("Queue shut down", metadata: ["active": "\(self.ledger.queue.active.count)"])
        self.broadcaster.finish()
    }

    // MARK: - Helpers

    func checkRunning() throws(QueueError) {
        guard self.isStarted else {
            throw QueueError(.storage, message: "The queue has not been started; call start() first.")
        }
        guard !self.isShutDown else {
            throw QueueError(.storage, message: "The queue has shut down; it takes no more changes.")
        }
    }
}
