import Downpour
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
        let task = Task { [queue] () throws -> ([FleetQueue.Row], FleetView) in
            let rows = try await queue.rows()
            return (rows, FleetView(rows: rows, globals: globals, shaper: shaper))
        }
        self.pendingRead = (task, startedAt)
        do {
            let (rows, view) = try await task.value
            // Shown unless a later read was shown already; fresh unless a change through this node came meanwhile
            // (which dropped this read: the next read reads again).
            if startedAt >= self.lastRowsStartedAt {
                self.lastRows = rows
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

    /// Adds the downloads at the end of the fleet's queue, in one transaction (a `position` is not kept: the
    /// fleet's queue is in the order downloads were added).
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
            let added = try await self.queue.add(prepared.map { ($0.entry, $0.paused) })
            self.rowsChanged()
            for (item, wasAdded) in zip(prepared, added) {
                if wasAdded {
                    self.broadcaster.send(.added(item.entry.gid))
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
            for item in prepared { results[item.index] = .failure(Self.refusal(error)) }
        }
        self.waker.yield()
        return results
    }

    public func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        switch try await self.database({ () throws(FleetError) in try await self.queue.pause(id) }) {
        case .done: self.broadcaster.send(.changed(id))
        case .asked: self.waker.yield()
        case .refused: throw QueueError(.cannotPause, gid: gid, message: "Download \(id) cannot be paused now.")
        }
        return id
    }

    public func pauseAll(force: Bool) async throws(QueueError) {
        try await self.database { () throws(FleetError) in try await self.queue.pauseAll() }
        self.waker.yield()
    }

    public func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        guard try await self.database({ () throws(FleetError) in try await self.queue.unpause(id) }) else {
            throw QueueError(.cannotUnpause, gid: gid, message: "Download \(id) is not paused.")
        }
        self.broadcaster.send(.changed(id))
        self.waker.yield()
        return id
    }

    public func unpauseAll() async throws(QueueError) {
        try await self.database { () throws(FleetError) in try await self.queue.unpauseAll() }
        self.waker.yield()
    }

    /// As ``DownloadManager/remove(_:force:)``, but a waiting or paused download's `.part` file is left where it
    /// is: the node that wrote it may not be this one.
    public func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try await self.resolve(gid)
        switch try await self.database({ () throws(FleetError) in try await self.queue.remove(id) }) {
        case .done: self.broadcaster.send(.changed(id))
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
        _ = try await self.resolve(gid)
        throw QueueError(
            .invalidRequest,
            gid: gid,
            message: "A fleet's queue keeps the order downloads were added in; changePosition is not available yet."
        )
    }

    public func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (removed: Int, added: Int) {
        _ = try await self.resolve(gid)
        throw QueueError(
            .invalidRequest,
            gid: gid,
            message: "changeUri is not available in a fleet yet: remove the download and add it with its new URIs."
        )
    }

    /// Changes the options of a waiting or paused download. An active one's are refused: pause it, change them,
    /// unpause it.
    public func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        let id = try await self.resolve(gid)
        let view = await self.view()
        let status = try view.status(of: id.description)
        switch status.status {
        case .waiting, .paused:
            break
        case .active:
            throw QueueError(
                .invalidRequest,
                gid: gid,
                message: "Download \(id) runs on node \(status.node ?? "?"); in a fleet, pause it, change its "
                    + "options, and unpause it."
            )
        case .complete, .error, .removed:
            throw QueueError(
                .cannotChangeOption,
                gid: gid,
                message: "Download \(id) has stopped; its options cannot change."
            )
        }
        let names = Set(options.map(\.name))
        let merged = status.options.filter { !names.contains($0.name) } + options
        // Checked as an add would check them.
        _ = try await self.manager.prepare(uris: status.uris, options: merged)
        guard try await self.database({ () throws(FleetError) in try await self.queue.setOptions(id, merged) }) else {
            throw QueueError(.cannotChangeOption, gid: gid, message: "Download \(id) started or stopped meanwhile.")
        }
        self.broadcaster.send(.changed(id))
    }

    /// This node's own options (`max-concurrent-downloads`, limits, defaults): each node has its own.
    public func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        try await self.manager.changeGlobalOptions(options)
        self.cachedView = nil
        let globals = await self.manager.globalOptions()
        let capacity = globals.last { $0.name == Aria2Option.maxConcurrentDownloads.name }.flatMap { Int($0.value) }
        if let capacity { self.leases.withLockedValue { $0.capacity = capacity } }
        self.broadcaster.send(.optionsChanged)
        self.waker.yield()
    }

    public func purgeResults() async throws(QueueError) {
        try await self.database { () throws(FleetError) in try await self.queue.purgeResults() }
        self.broadcaster.send(.resultsRemoved(nil))
    }

    public func removeResult(_ gid: String) async throws(QueueError) {
        let id = try await self.resolve(gid)
        guard try await self.database({ () throws(FleetError) in try await self.queue.removeResult(id) }) else {
            throw QueueError(
                .noResult,
                gid: gid,
                message: "Download \(id) is not a stopped result; only those can be removed this way."
            )
        }
        self.broadcaster.send(.resultsRemoved(id))
    }

    public nonisolated var events: AsyncStream<QueueEvent> {
        self.broadcaster.subscribe()
    }

    public func saveSession() async throws(QueueError) {
        throw QueueError(
            .invalidRequest,
            message: "In a fleet the queue is kept in PostgreSQL, which every node shares; there is no session file."
        )
    }

    // MARK: - Helpers

    private func resolve(_ text: String) async throws(QueueError) -> DownloadID {
        let prefix = try DownloadQueue.gidPrefix(text)
        let matches = try await self.database { () throws(FleetError) in try await self.queue.matching(prefix) }
        return try DownloadQueue.unique(matches, for: text)
    }

    /// Runs a statement of the fleet's queue; a failure becomes a refusal that says the database cannot be
    /// reached.
    private func database<Value>(
        _ body: () async throws(FleetError) -> Value
    ) async throws(QueueError) -> Value {
        do {
            let value = try await body()
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
