import Downpour
import DownpourAria2
import DownpourQueue
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// aria2's operations over the fleet's queue: reads show every node's downloads; a change to a waiting or stopped
/// download is made in the database, one to an active download is asked of the node that runs it (through the
/// database, and a notification that wakes it). A change returns once the database took it; the running node
/// carries out a pause or a remove within a moment (aria2 too answers before its download has stopped).
extension FleetNode: DownloadQueueService {
    public func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        try body(await self.view())
    }

    /// The fleet now: the database's rows, read again when the last read is older than
    /// ``FleetNode/readInterval`` or a change came since, with this node's runs as they are. While the database is
    /// lost (the loop tries it every tick), reads answer with what was last read.
    func view() async -> FleetView {
        let local = await self.manager.read { reader in reader.activeDownloads() }
        let fresh = self.lastRowsReadAt.map { ContinuousClock.now - $0 < Self.readInterval } ?? false
        if !self.databaseLost, !fresh {
            await self.refresh()
        }
        if self.cachedView == nil {
            self.cachedView = FleetView(
                rows: self.lastRows,
                nodes: self.lastNodes,
                globals: await self.manager.globalOptions(),
                shaper: await self.manager.optionShaper()
            )
        }
        return self.cachedView!.overlaid(local, node: self.name)
    }

    /// Reads the fleet's rows and makes them into a view, away from the node's executor; reads that come meanwhile
    /// share it.
    func refresh() async {
        if let pending = self.pendingRead {
            _ = try? await pending.task.value
            return
        }
        let startedAt = ContinuousClock.now
        let globals = await self.manager.globalOptions()
        let shaper = await self.manager.optionShaper()
        if let pending = self.pendingRead {
            _ = try? await pending.task.value
            return
        }
        // A node is up while it renews its leases (every third of a lease).
        let upWithin = self.leases.withLockedValue { $0.leaseDuration } / 3
        let task = Task { [queue] () throws -> ([FleetQueue.Row], FleetView) in
            let rows = try await queue.rows()
            let nodes = try await queue.nodes(upWithin: upWithin)
            return (rows, FleetView(rows: rows, nodes: nodes, globals: globals, shaper: shaper))
        }
        self.pendingRead = (task, startedAt)
        do {
            let (rows, view) = try await task.value
            // Shown unless a later read was shown already; fresh unless a change through this node came meanwhile
            // (which dropped this read: the next read reads again).
            if startedAt >= self.lastRowsStartedAt {
                self.lastRows = rows
                self.lastNodes = view.fleetNodes
                self.cachedView = view
                self.lastRowsStartedAt = startedAt
            }
            if self.pendingRead?.task == task { self.lastRowsReadAt = startedAt }
        } catch {
            self.databaseLost = true
            self.logger.debug("The fleet is shown as last read", metadata: ["error": "\(error)"])
        }
        if self.pendingRead?.task == task { self.pendingRead = nil }
    }

    public func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID {
        let result = await self.add(batch: [AddRequest(uris: uris, options: options, position: position)])
        return try result[0].get()
    }

    /// Adds the downloads at the end of the fleet's queue, in one transaction; one with a `position` then moves
    /// there (unless a node claimed it meanwhile: the queue had room for it).
    public func add(batch: [AddRequest]) async -> [Result<DownloadID, QueueError>] {
        var results: [Result<DownloadID, QueueError>] = []
        var prepared: [(index: Int, entry: QueueEntry, paused: Bool)] = []
        for (index, request) in batch.enumerated() {
            do {
                let add = try await self.manager.prepare(uris: request.uris, options: request.options)
                prepared.append((index, add.entry, add.paused))
                results.append(.success(add.entry.gid))
            } catch {
                results.append(.failure(error))
            }
        }
        do {
            let queue = self.writeQueue
            let added = try await queue.add(prepared.map { ($0.entry, $0.paused) })
            self.databaseLost = false
            for (item, wasAdded) in zip(prepared, added) {
                if wasAdded, let position = batch[item.index].position {
                    // Added at the end whatever this says: the add stands.
                    _ = try? await queue.move(item.entry.gid, by: position, from: .set)
                }
            }
            self.rowsChanged()
            for (item, wasAdded) in zip(prepared, added) {
                if wasAdded {
                    self.announce(.added(item.entry.gid))
                } else {
                    results[item.index] = .failure(
                        QueueError(
                            .duplicateGID,
                            gid: item.entry.gid.description,
                            message:
                                "The GID \(item.entry.gid) is in use already in the fleet; give another one or none."
                        )
                    )
                }
            }
        } catch {
            self.databaseLost = true
            for item in prepared { results[item.index] = .failure(Self.refusal(error)) }
        }
        self.waker.yield()
        return results
    }

    public func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        switch try await self.database({ queue throws(FleetError) in try await queue.pause(id) }) {
        case .done: self.announce(.changed(id))
        case .asked: self.waker.yield()
        case .refused: throw QueueError(.cannotPause, gid: gid, message: "Download \(id) cannot be paused now.")
        }
        return id
    }

    public func pauseAll(force: Bool) async throws(QueueError) {
        try await self.database { queue throws(FleetError) in try await queue.pauseAll() }
        self.waker.yield()
    }

    public func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        guard try await self.database({ queue throws(FleetError) in try await queue.unpause(id) }) else {
            throw QueueError(.cannotUnpause, gid: gid, message: "Download \(id) is not paused.")
        }
        self.announce(.changed(id))
        self.waker.yield()
        return id
    }

    public func unpauseAll() async throws(QueueError) {
        try await self.database { queue throws(FleetError) in try await queue.unpauseAll() }
        self.waker.yield()
    }

    /// As ``DownloadManager/remove(_:force:)``, but a waiting or paused download's `.part` file is left where it
    /// is: the node that wrote it may not be this one.
    public func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        switch try await self.database({ queue throws(FleetError) in try await queue.remove(id) }) {
        case .done: self.announce(.changed(id))
        case .asked: self.waker.yield()
        case .refused:
            throw QueueError(
                .notActive,
                gid: gid,
                message: "Download \(id) is not active, waiting or paused; there is nothing to remove."
            )
        }
        return id
    }

    public func changePosition(
        _ gid: String,
        by position: Int,
        from origin: PositionOrigin
    ) async throws(QueueError) -> Int {
        let id = try await self.resolve(gid)
        let moved = try await self.database { queue throws(FleetError) in
            try await queue.move(id, by: position, from: origin)
        }
        guard let index = moved else {
            throw QueueError(
                .notWaiting,
                gid: gid,
                message: "Download \(id) is not in the waiting queue, so it has no position to change."
            )
        }
        self.rowsChanged()
        self.announce(.changed(id))
        return index
    }

    /// As aria2's, for a download of any node: a waiting or paused one's URIs change in the fleet's queue; an
    /// active one's are asked of the node that runs it, which uses them for the connections it opens from then on.
    public func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (removed: Int, added: Int) {
        let id = try await self.resolve(gid)
        let row = try await self.unstoppedRow(id, gid: gid, stopped: .notFound, "its URIs are fixed")
        var uris = row.entry.uris
        let removed = DownloadQueue.change(&uris, remove: remove, add: add, position: position)
        guard !uris.isEmpty else {
            throw QueueError(
                .invalidRequest,
                gid: gid,
                message: "Download \(id) would be left with no URI; add one before removing the last."
            )
        }
        if uris != row.entry.uris {
            try await self.change(row.entry, uris: uris, options: row.entry.options, gid: gid)
        }
        return (removed, add.count)
    }

    /// As aria2's, for a download of any node: a waiting or paused one's options change in the fleet's queue; an
    /// active one's are asked of the node that runs it, which restarts the download with them where it must
    /// (keeping its bytes), as a single daemon does.
    public func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        let id = try await self.resolve(gid)
        let row = try await self.unstoppedRow(id, gid: gid, stopped: .cannotChangeOption, "its options cannot change")
        let names = Set(options.map(\.name))
        let merged = row.entry.options.filter { !names.contains($0.name) } + options
        try await self.change(row.entry, uris: row.entry.uris, options: merged, gid: gid)
    }

    /// The row of a download that has not stopped, as the database has it now.
    private func unstoppedRow(
        _ id: DownloadID,
        gid: String,
        stopped reason: QueueError.Reason,
        _ consequence: String
    ) async throws(QueueError) -> FleetQueue.Row {
        let row = try await self.database { queue throws(FleetError) in try await queue.row(id) }
        guard let row else { throw QueueError(.notFound, gid: gid, message: "Download \(id) is not in the fleet.") }
        guard [.waiting, .paused, .active].contains(row.status) else {
            throw QueueError(reason, gid: gid, message: "Download \(id) has stopped; \(consequence).")
        }
        return row
    }

    /// Checks `uris` and `options` as an add would, and sets them (``FleetQueue/change(_:uris:options:)``).
    private func change(_ old: QueueEntry, uris: [String], options: [QueueOption], gid: String) async throws(QueueError)
    {
        _ = try await self.manager.prepare(uris: uris, options: options)
        let outcome = try await self.database { queue throws(FleetError) in
            try await queue.change(old, uris: uris, options: options)
        }
        switch outcome {
        case .done: self.announce(.changed(old.gid))
        case .asked: self.waker.yield()
        case .refused:
            throw QueueError(
                .invalidRequest,
                gid: gid,
                message: "Download \(old.gid) stopped or was changed by another client meanwhile; nothing was "
                    + "changed. Read it again and retry."
            )
        }
    }

    /// This node's own options (`max-concurrent-downloads`, limits, defaults): each node has its own.
    public func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        try await self.manager.changeGlobalOptions(options)
        self.cachedView = nil
        let globals = await self.manager.globalOptions()
        let capacity = globals.last { $0.name == Aria2Option.maxConcurrentDownloads.name }.flatMap { Int($0.value) }
        if let capacity { self.leases.withLockedValue { $0.capacity = capacity } }
        self.announce(.optionsChanged)
        self.waker.yield()
    }

    public func purgeResults() async throws(QueueError) {
        try await self.database { queue throws(FleetError) in try await queue.purgeResults() }
        self.announce(.resultsRemoved(nil))
    }

    public func removeResult(_ gid: String) async throws(QueueError) {
        let id = try await self.resolve(gid)
        guard try await self.database({ queue throws(FleetError) in try await queue.removeResult(id) }) else {
            throw QueueError(
                .noResult,
                gid: gid,
                message: "Download \(id) is not a stopped result; only those can be removed this way."
            )
        }
        self.announce(.resultsRemoved(id))
    }

    /// The changes made through this node and those of its runs (hooks follow these).
    public nonisolated var events: AsyncStream<QueueEvent> {
        self.broadcaster.subscribe()
    }

    /// ``events`` and the other nodes' changes: aria2's notifications of every download of the fleet.
    public nonisolated var announcements: AsyncStream<QueueEvent> {
        self.announcer.subscribe()
    }

    // MARK: - Helpers

    private func resolve(_ text: String) async throws(QueueError) -> DownloadID {
        let prefix = try DownloadQueue.gidPrefix(text)
        let matches = try await self.database { queue throws(FleetError) in try await queue.matching(prefix) }
        return try DownloadQueue.unique(matches, for: text)
    }

    /// The queue a client's change goes through: while the database is lost, its statements wait a second, not
    /// ``FleetQueue/statementTimeout``, so that a change during an outage is refused at once (the loop finds the
    /// database again; a change a moment later is taken).
    var writeQueue: FleetQueue {
        self.databaseLost
            ? self.queue.withStatementTimeout(min(Self.lostStatementTimeout, self.queue.statementTimeout)) : self.queue
    }

    /// How long a statement of a client's change may take while the database is lost.
    static let lostStatementTimeout: Duration = .seconds(1)

    /// Runs a statement of the fleet's queue (``writeQueue``); a failure becomes a refusal that says the database
    /// cannot be reached.
    private func database<Value>(
        _ body: (FleetQueue) async throws(FleetError) -> Value
    ) async throws(QueueError) -> Value {
        do {
            let value = try await body(self.writeQueue)
            self.databaseLost = false
            self.rowsChanged()
            return value
        } catch {
            self.databaseLost = true
            throw Self.refusal(error)
        }
    }
}

/// The node runs in a `ServiceGroup`: it starts (if ``FleetNode/start()`` has not), runs until the group shuts
/// down gracefully, then pauses its runs and gives them back to the fleet (``FleetNode/shutdown()``).
extension FleetNode: Service {
    public func run() async throws {
        try await self.start()
        try? await gracefulShutdown()
        await self.shutdown()
    }
}
