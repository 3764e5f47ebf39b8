import Downpour
import DownpourAria2
import DownpourQueue
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// One daemon of a fleet: the queue it shows and changes is the fleet's (``FleetQueue``, in PostgreSQL); the
/// downloads it runs are those it claimed, run by a ``DownloadManager`` of its own that starts nothing by itself.
///
/// The node's loop, once a second or when woken (a change through this node, a notification on
/// ``FleetQueue/wakeChannel``, a run's end):
/// 1. carries out what ``FleetLeases`` asks: claims while there is room, renews the leases, starts what it
///    claimed (each run's write permit is ``FleetLeases/mayWrite(_:fence:at:)``), stops what it lost;
/// 2. carries out the requests other nodes stored for the downloads it runs (pause, remove);
/// 3. reports each run to the database: its progress while it runs, its end (a result), a pause (given back,
///    paused); a run that lost its write permit is dropped and left to the node that takes it;
/// 4. tells the other nodes' clients what happened here (``FleetQueue/eventChannel``: a run's start once claimed,
///    its end once recorded, a change made through this node), and the fleet how this node stands (its row in
///    `downpour_nodes`, for the dashboard's list of nodes).
///
/// Reads (`tellActive`, ...) show the whole fleet: the database's rows, with this node's own runs as they are now.
/// When the database cannot be reached, the runs go on until their leases may have run out, reads show the fleet
/// as last read, and changes are refused with ``QueueError`` `storage`; the loop keeps trying.
public actor FleetNode {
    /// The node's name in the fleet (`node` in a status, the lease holder in the database).
    public nonisolated let name: String
    public nonisolated let queue: FleetQueue
    /// Runs this node's downloads.
    public nonisolated let manager: DownloadManager
    /// Where files go when a download names no `dir` (for statuses of downloads not run here).
    nonisolated let directory: String
    nonisolated let leases: NIOLockedValueBox<FleetLeases>
    /// This node's own changes: ``events``, which hooks follow.
    nonisolated let broadcaster = QueueEventBroadcaster()
    /// This node's changes and the other nodes': ``announcements``, which clients are told of.
    nonisolated let announcer = QueueEventBroadcaster()
    nonisolated let logger: Logger
    nonisolated let tick: Duration
    private let wakes: AsyncStream<Void>
    nonisolated let waker: AsyncStream<Void>.Continuation

    private var tasks: [Task<Void, Never>] = []
    /// Holds the node's name (an advisory lock on a connection of its own) while the node runs.
    private var nameHolder: Task<Void, Never>?
    private var isStarted = false
    /// Where this node's RPC listens, for the list of nodes (``advertise(address:)``).
    private var address = ""
    /// Changes to tell the other nodes of at the end of the loop's turn.
    var unannounced: [QueueEvent] = []
    /// How many changes this node told the others of (each payload's serial).
    private var announced = 0
    /// The ends of runs that are not recorded yet: told to the other nodes once they are (so that a client told
    /// of an end reads it through any node).
    private var untoldEnds: [DownloadID: QueueEvent] = [:]
    /// When the fleet was last told how this node stands.
    private var lastHeartbeat: ContinuousClock.Instant?
    /// The session file (`save-session`): the fleet's queue, written by this node.
    var sessionWriter = SessionWriter()
    private var isShutDown = false
    /// What was last recorded in the database for each run (path, total, completed, speed).
    private var recorded: [DownloadID: Progress] = [:]
    /// The fleet as last read: reads within ``readInterval`` of it show it (unless this node changed the queue
    /// since), and so do all reads while the database cannot be reached.
    var lastRows: [FleetQueue.Row] = [] {
        didSet { self.cachedView = nil }
    }
    /// The fleet's nodes as last read, with ``lastRows``.
    var lastNodes: [QueueNode] = []
    /// ``lastRows`` made into a view, made at the first read that needs it.
    var cachedView: FleetView?
    /// When ``lastRows`` was read; `nil` once a change through this node made it stale.
    var lastRowsReadAt: ContinuousClock.Instant?
    /// When the read that gave ``lastRows`` began.
    var lastRowsStartedAt = ContinuousClock.now
    /// The read under way, which reads that come meanwhile share.
    var pendingRead: (task: Task<([FleetQueue.Row], FleetView), any Error>, startedAt: ContinuousClock.Instant)?
    /// How long a read of the fleet serves the reads after it: a client polling `tellStatus` and `tellActive`
    /// many times a second costs the database a few reads a second. Changes through this node are seen at once.
    static let readInterval: Duration = .milliseconds(250)
    /// Whether the last statement failed: changes are refused until one succeeds.
    var databaseLost = false

    struct Progress: Hashable {
        var path: String?
        var total: Int64
        var completed: Int64
        var speed: Int64
    }

    /// - Parameters:
    ///   - name: The node's name in the fleet; a node restarted with the same name takes its leases back at once.
    ///   - queue: The fleet's queue (a running, migrated client).
    ///   - downloader: Runs the downloads.
    ///   - store: This node's own store for the downloads it runs; the fleet's queue is the record of truth, so
    ///     it should start empty.
    ///   - defaults: As a ``DownloadManager``'s.
    ///   - leaseDuration: How long a claim holds a download without renewal (15 s).
    ///   - tick: How often the loop runs when nothing wakes it (1 s).
    public init(
        name: String,
        queue: FleetQueue,
        downloader: Downloader,
        store: QueueStore,
        defaults: DownloadManager.Defaults,
        eventLoop: (any EventLoop)? = nil,
        logger: Logger,
        leaseDuration: Duration = .seconds(15),
        tick: Duration = .seconds(1)
    ) {
        self.name = name
        self.queue = queue
        self.directory = defaults.directory
        self.logger = logger
        self.tick = tick
        let leases = NIOLockedValueBox(FleetLeases(capacity: 1, leaseDuration: leaseDuration))
        self.leases = leases
        self.manager = DownloadManager(
            downloader: downloader,
            store: store,
            defaults: defaults,
            eventLoop: eventLoop,
            logger: logger,
            fillsFreeSlots: false,
            writesSession: false,
            writePermit: { gid in
                // The fence of the claim this run was started for: a later claim's run is not this one's.
                let fence = leases.withLockedValue { $0.held[gid]?.fence }
                return {
                    guard let fence else { return false }
                    return leases.withLockedValue { $0.mayWrite(gid, fence: fence, at: .now) }
                }
            }
        )
        (self.wakes, self.waker) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: - Starting and stopping

    /// Starts the node's manager, takes back the downloads this node held before it stopped (a crash: their
    /// leases may not have run out yet), and starts the loop.
    ///
    /// - Throws: ``QueueError`` `storage` when the database cannot be reached or the manager's store read.
    public func start() async throws(QueueError) {
        guard !self.isStarted else { return }
        try await self.holdName()
        try await self.manager.start()
        let globals = await self.manager.globalOptions()
        let capacity = globals.last { $0.name == Aria2Option.maxConcurrentDownloads.name }.flatMap { Int($0.value) }
        self.leases.withLockedValue { $0.capacity = capacity ?? 5 }
        let sentAt = ContinuousClock.now
        let duration = self.leases.withLockedValue { $0.leaseDuration }
        let claims: [FleetQueue.Claim]
        do {
            claims = try await self.queue.reclaim(node: self.name, lease: duration)
            self.lastRows = try await self.queue.rows()
            self.lastRowsReadAt = .now
        } catch {
            await self.manager.shutdown()
            self.nameHolder?.cancel()
            throw Self.refusal(error)
        }
        self.isStarted = true
        // Listening before the first run starts, so that no notification is missed.
        let events = self.manager.events
        let actions = self.leases.withLockedValue { $0.claimed(claims, sentAt: sentAt) }
        await self.perform(actions)
        // A shutdown that came meanwhile found no loop to stop: none starts.
        guard !self.isShutDown else { return }
        self.logger.notice(
            "Fleet node started",
            metadata: ["node": "\(self.name)", "resumed": "\(claims.count)", "downloads": "\(self.lastRows.count)"]
        )
        let (listening, heard) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.tasks = [
            Task { await self.runLoop() },
            Task { await self.listen(whenListening: heard) },
            Task { await self.forward(events) },
            Task { [tick, waker] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: tick)
                    waker.yield()
                }
            },
        ]
        // Started once it hears the others: what they do from now on reaches this node's clients.
        do {
            _ = try await FleetSQL.run("listening for the other nodes", timeout: self.queue.statementTimeout) {
                var iterator = listening.makeAsyncIterator()
                return await iterator.next()
            }
        } catch {
            self.logger.notice("Not listening for the other nodes yet", metadata: ["error": "\(error.message)"])
        }
    }

    /// Stops the loop, pauses the runs (their bytes and journals kept), records what ended meanwhile as it ended,
    /// and gives the other downloads back to the fleet, at the front of the queue, for whichever node claims them
    /// next (paused, when a pause was asked for them).
    public func shutdown() async {
        guard self.isStarted, !self.isShutDown else { return }
        self.isShutDown = true
        for task in self.tasks { task.cancel() }
        self.waker.finish()
        for task in self.tasks { await task.value }
        await self.manager.shutdown()
        // Not cancelled with the caller (a service group that ran out of patience): these statements are what
        // keeps the downloads from waiting a lease for nobody.
        let given = await Task {
            let given = await self.giveBackAll()
            try? await self.queue.leave(node: self.name)
            // As aria2 does at exit: the queue as it is now (what this node ran is waiting again).
            let globals = await self.manager.globalOptions()
            if globals.contains(where: { $0.name == Aria2Option.saveSession.name }) {
                do throws(QueueError) {
                    try await self.writeSession(onlyIfChanged: false)
                } catch {
                    self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
                }
            }
            await self.announceNow()
            // The name is free once the node has stopped: a node started with it next is not refused.
            if let holder = await self.nameHolder {
                holder.cancel()
                _ = try? await FleetSQL.run("giving the node's name back", timeout: self.queue.statementTimeout) {
                    await holder.value
                }
            }
            return given
        }.value
        self.broadcaster.finish()
        self.announcer.finish()
        self.logger.notice("Fleet node stopped", metadata: ["node": "\(self.name)", "gave back": "\(given)"])
    }

    private func giveBackAll() async -> Int {
        await self.report()
        let held = self.leases.withLockedValue { $0.held.mapValues(\.fence) }
        guard !held.isEmpty else { return 0 }
        do {
            let given = try await self.queue.release(Array(held.values))
            // Waiting again: the other nodes' dashboards show them so.
            self.unannounced += held.keys.map { QueueEvent.changed($0) }
            return given
        } catch {
            // Their leases run out, and other nodes take them then.
            self.logger.notice("Downloads not given back", metadata: ["count": "\(held.count)", "error": "\(error)"])
            return 0
        }
    }

    /// Takes the node's name for as long as it runs: a second daemon started with the same name (the same
    /// configuration on another machine, say) would take this one's downloads back as its own while they run.
    /// The lock lives with its connection: a database restart frees it.
    private func holdName() async throws(QueueError) {
        let (answers, answer) = AsyncStream<Result<Bool, FleetError>>.makeStream()
        let holder = Task { [queue, name, logger] in
            do {
                try await queue.client.withConnection { connection in
                    let key: PostgresQuery = "SELECT pg_try_advisory_lock(hashtext('downpour-node'), hashtext(\(name)))"
                    var held = false
                    for try await value in try await connection.query(key, logger: logger).decode(Bool.self) {
                        held = value
                    }
                    answer.yield(.success(held))
                    guard held else { return }
                    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
                    // The lock lives with the connection, which goes back to the pool: it is released first, in a
                    // task of its own (this one is cancelled), and read to its end.
                    await Task {
                        guard
                            let rows = try? await connection.query(
                                "SELECT pg_advisory_unlock(hashtext('downpour-node'), hashtext(\(name)))",
                                logger: logger
                            )
                        else { return }
                        _ = try? await rows.collect()
                    }.value
                }
            } catch {
                answer.yield(.failure(FleetSQL.explained(error, doing: "taking the node's name")))
            }
            answer.finish()
        }
        let first = try? await FleetSQL.run("taking the node's name", timeout: self.queue.statementTimeout) {
            var iterator = answers.makeAsyncIterator()
            return await iterator.next()
        }
        switch first {
        case .success(true)?:
            self.nameHolder = holder
        case .success(false)?:
            holder.cancel()
            throw QueueError(
                .invalidRequest,
                message: "A node named '\(self.name)' runs already on this fleet: give this one another --node-name."
            )
        case .failure(let error)?:
            holder.cancel()
            throw Self.refusal(error)
        case nil:
            holder.cancel()
            throw Self.refusal(FleetError("PostgreSQL did not answer while the node took its name."))
        }
    }

    // MARK: - The loop

    private func runLoop() async {
        for await _ in self.wakes {
            guard !Task.isCancelled else { return }
            await self.step()
        }
    }

    /// One turn of the loop (see the type's description).
    func step() async {
        let actions = self.leases.withLockedValue { $0.tick(at: .now) }
        await self.perform(actions)
        await self.carryOutRequests()
        await self.report()
        await self.announceNow()
        await self.heartbeat()
        await self.saveSessionIfDue()
    }

    /// Carries out what the leases asked, and what their answers ask in turn.
    private func perform(_ actions: [FleetLeases.Action]) async {
        var pending = actions
        while !pending.isEmpty {
            let action = pending.removeFirst()
            switch action {
            case .claim(let count):
                let sentAt = ContinuousClock.now
                let duration = self.leases.withLockedValue { $0.leaseDuration }
                do {
                    // One at a time, and again at once while there is room: nodes woken together by new work
                    // take turns, so a batch is shared among them rather than filling the first node that woke.
                    let claims = try await self.queue.claim(node: self.name, count: min(count, 1), lease: duration)
                    self.databaseLost = false
                    if !claims.isEmpty {
                        self.rowsChanged()
                        if count > 1 { self.waker.yield() }
                    }
                    pending += self.leases.withLockedValue { $0.claimed(claims, sentAt: sentAt) }
                } catch {
                    self.leases.withLockedValue { $0.claimFailed() }
                    self.lost(error)
                }
            case .renew(let fences):
                let sentAt = ContinuousClock.now
                let duration = self.leases.withLockedValue { $0.leaseDuration }
                do {
                    let kept = try await self.queue.renew(node: self.name, fences: fences, lease: duration)
                    self.databaseLost = false
                    pending += self.leases.withLockedValue { $0.renewed(kept, asked: fences, sentAt: sentAt) }
                } catch {
                    self.leases.withLockedValue { $0.renewFailed() }
                    self.lost(error)
                }
            case .start(let claim):
                await self.startRun(claim)
            case .stop(let gid, let fence):
                // A run that ended on its own before its lease may have run out here is not dropped: `report()`
                // records its end under its fence.
                let ended = await self.manager.read { reader in
                    (try? reader.status(of: gid.description)).map { [.complete, .error, .removed].contains($0.status) }
                }
                if ended == true, self.leases.withLockedValue({ $0.unrecorded[gid] == fence }) {
                    self.logger.notice(
                        "Download ended before its lease may have run out; its end is recorded under its fence",
                        metadata: ["gid": "\(gid)", "fence": "\(fence)"]
                    )
                    continue
                }
                self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                self.logger.notice(
                    "Download stopped: its lease ran out or was taken",
                    metadata: ["gid": "\(gid)", "fence": "\(fence)"]
                )
                self.recorded[gid] = nil
                self.untoldEnds[gid] = nil
                await self.manager.forget(gid)
            }
        }
    }

    private func startRun(_ claim: FleetQueue.Claim) async {
        let gid = claim.entry.gid
        if let previous = claim.previousNode {
            // The `.part` and journal are resumed when this node sees the storage the other one wrote to (one
            // machine, NFS); otherwise the download starts over.
            let message: Logger.Message =
                previous == self.name
                ? "Download taken back after a restart: resumes from its .part file"
                : "Download taken over from another node: resumes from its .part file where this node sees it, starts over otherwise"
            self.logger.notice(message, metadata: ["gid": "\(gid)", "from": "\(previous)"])
        }
        do {
            try await self.manager.run(claim.entry)
        } catch {
            self.logger.notice("Download cannot run here", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            if error.reason == .invalidRequest {
                // An option that cannot apply: a result, as a queue of one daemon gives.
                _ = try? await self.queue.finish(
                    gid,
                    fence: claim.fence,
                    outcome: .failed(code: .badOption, message: error.message)
                )
            } else {
                // This node cannot run it (its own store, or it is stopping): another may.
                _ = try? await self.queue.release(gid, fence: claim.fence, paused: false)
            }
            self.rowsChanged()
            self.leases.withLockedValue { $0.ended(gid, fence: claim.fence) }
            self.settled(gid, recorded: true)
        }
    }

    /// Carries out what other nodes asked of this one's runs.
    private func carryOutRequests() async {
        let requests: [(entry: QueueEntry, fence: Int64, FleetQueue.Request)]
        do {
            requests = try await self.queue.requests(for: self.name)
            self.databaseLost = false
        } catch {
            self.lost(error)
            return
        }
        for (entry, fence, request) in requests {
            let gid = entry.gid
            guard self.leases.withLockedValue({ $0.held[gid]?.fence }) == fence else { continue }
            do {
                switch request {
                case .pause: _ = try await self.manager.pause(gid.description, force: false)
                case .remove: _ = try await self.manager.remove(gid.description, force: false)
                case .change: await self.apply(entry, fence: fence)
                }
            } catch {
                // It ended meanwhile: its end is reported below, and the request goes with it.
                self.logger.debug("Request not carried out", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            }
        }
    }

    /// Applies the URIs and options another node stored for a run of this node, as a single daemon applies a
    /// client's changes (a restart, keeping the bytes, where an option needs one), and notes that it did.
    private func apply(_ entry: QueueEntry, fence: Int64) async {
        let gid = entry.gid.description
        do throws(QueueError) {
            let running = try await self.manager.status(of: gid)
            // Only the options whose values changed, as a client's changeOption gives them: a run restarts only
            // for those that need it (a speed limit changes live).
            let changed = Set(entry.options.map(\.name)).filter { name in
                entry.options.filter { $0.name == name } != running.options.filter { $0.name == name }
            }
            if !changed.isEmpty {
                try await self.manager.changeOptions(gid, entry.options.filter { changed.contains($0.name) })
            }
            if running.uris != entry.uris {
                _ = try await self.manager.changeURIs(gid, remove: running.uris, add: entry.uris, position: nil)
            }
        } catch {
            // It ended meanwhile (its end is reported next), or the change cannot apply to this run: the row keeps
            // it for the download's next run.
            self.logger.notice(
                "A change asked through another node was not applied to the run",
                metadata: ["gid": "\(gid)", "error": "\(error.message)"]
            )
        }
        do {
            try await self.queue.changed(entry.gid, fence: fence, to: entry)
        } catch {
            self.lost(error)
        }
    }

    /// Tells the database how each run stands, and gives back what ended.
    private func report() async {
        // The runs held, and those stopped after they had ended (their ends are still to be recorded).
        let held = self.leases.withLockedValue { leases in
            leases.held.mapValues(\.fence).merging(leases.unrecorded) { current, _ in current }
        }
        guard !held.isEmpty else { return }
        let orphans = await self.manager.orphans()
        let read = { @Sendable (reader: any QueueReader) in
            held.keys.map { gid in (gid, try? reader.status(of: gid.description)) }
        }
        var statuses = await self.manager.read(read)
        // A run that was stopped or ended lets go of its file first (a removed one deletes its .part, a paused one
        // saves its journal; each asks its write permit, which ends with the lease): then it is told as it is now.
        let ending = statuses.filter { $0.1.map { $0.status != .active } ?? false }.map(\.0)
        if !ending.isEmpty {
            for gid in ending { await self.manager.waitForRun(gid) }
            statuses = await self.manager.read(read)
        }
        var finished = false
        defer { if finished { self.waker.yield() } }
        for (gid, status) in statuses {
            guard let fence = held[gid] else { continue }
            do {
                if orphans.contains(gid) {
                    // Its permit was withdrawn: another node may hold it now. Nothing is written for it.
                    self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                    self.recorded[gid] = nil
                    self.untoldEnds[gid] = nil
                    await self.manager.forget(gid)
                    continue
                }
                guard let status else {
                    try await self.giveBack(gid, fence: fence, paused: false)
                    continue
                }
                let recorded: Bool
                switch status.status {
                case .active:
                    try await self.record(status, fence: fence)
                    continue
                case .complete:
                    // A Metalink URL: the files it lists join the fleet's queue before its end is recorded (a
                    // second try after a failure finds them added already).
                    try await self.handOver(status.followedBy)
                    recorded = try await self.queue.finish(
                        gid,
                        fence: fence,
                        outcome: .complete(path: status.path ?? "", length: status.totalLength)
                    )
                case .error, .removed:
                    let code = status.errorCode.flatMap(Aria2ErrorCode.init(rawValue:)) ?? .unknown
                    recorded = try await self.queue.finish(
                        gid,
                        fence: fence,
                        outcome: .failed(
                            code: status.status == .removed ? .removed : code,
                            message: status.errorMessage ?? ""
                        )
                    )
                case .paused, .waiting:
                    try await self.giveBack(gid, fence: fence, paused: status.status == .paused)
                    continue
                }
                self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                self.recorded[gid] = nil
                self.rowsChanged()
                self.settled(gid, recorded: recorded)
                await self.manager.forget(gid)
                finished = true
            } catch {
                self.lost(error)
                return
            }
        }
        if finished { await self.trimResults() }
    }

    /// Keeps the fleet's newest results, as many as this node's `max-download-result` (aria2's default: 1000).
    private func trimResults() async {
        let globals = await self.manager.globalOptions()
        let keep = globals.last { $0.name == Aria2Option.maxDownloadResult.name }.flatMap { Int($0.value) } ?? 1000
        do {
            for gid in try await self.queue.trimResults(keeping: keep) { self.announce(.resultsRemoved(gid)) }
        } catch {
            self.lost(error)
        }
    }

    /// Moves the downloads this node's manager added (the files of a Metalink document) into the fleet's queue.
    private func handOver(_ gids: [DownloadID]) async throws(FleetError) {
        guard !gids.isEmpty else { return }
        let entries = await self.manager.read { reader in
            gids.compactMap { gid in
                (try? reader.status(of: gid.description)).map {
                    QueueEntry(gid: $0.gid, uris: $0.uris, options: $0.options)
                }
            }
        }
        _ = try await self.queue.add(entries.map { ($0, paused: false) })
        for entry in entries {
            await self.manager.forget(entry.gid)
            self.announce(.added(entry.gid))
        }
    }

    private func giveBack(_ gid: DownloadID, fence: Int64, paused: Bool) async throws(FleetError) {
        let given = try await self.queue.release(gid, fence: fence, paused: paused)
        self.rowsChanged()
        self.leases.withLockedValue { $0.ended(gid, fence: fence) }
        self.settled(gid, recorded: given)
        self.recorded[gid] = nil
        await self.manager.forget(gid)
        self.waker.yield()
    }

    private func record(_ status: DownloadStatus, fence: Int64) async throws(FleetError) {
        let progress = Progress(
            path: status.path,
            total: status.totalLength,
            completed: status.completedLength,
            speed: status.downloadSpeed
        )
        guard self.recorded[status.gid] != progress else { return }
        _ = try await self.queue.record(
            status.gid,
            fence: fence,
            path: status.path,
            totalLength: status.totalLength,
            completedLength: status.completedLength,
            downloadSpeed: status.downloadSpeed
        )
        self.recorded[status.gid] = progress
    }

    /// A change through this node (a client's, or the loop's: a claim, an end): the next read reads the fleet
    /// again first.
    func rowsChanged() {
        self.lastRowsReadAt = nil
        self.pendingRead = nil
    }

    private func lost(_ error: FleetError) {
        if !self.databaseLost {
            self.logger.error(
                "The fleet's database cannot be reached; running downloads go on, changes are refused",
                metadata: ["error": "\(error.message)"]
            )
        }
        self.databaseLost = true
    }

    // MARK: - Telling the others

    /// Sets where this node's RPC listens, for the list of nodes (once the port is bound).
    public func advertise(address: String) {
        self.address = address
        self.lastHeartbeat = nil
        self.waker.yield()
    }

    /// A change made through this node: told to its own clients at once, and to the other nodes' at the end of
    /// the loop's turn.
    func announce(_ event: QueueEvent) {
        self.broadcaster.send(event)
        self.announcer.send(event)
        self.unannounced.append(event)
        self.waker.yield()
    }

    /// An event of one of this node's runs (hooks were told already): a start is told to clients now (the
    /// download was claimed first), an end once it is recorded (``settled(_:)``), so that a client told of it
    /// reads it through any node.
    private func ranEvent(_ event: QueueEvent) {
        switch event {
        case .started:
            self.announcer.send(event)
            self.unannounced.append(event)
        case .paused(let gid), .stopped(let gid), .completed(let gid), .failed(let gid):
            if self.leases.withLockedValue({ $0.held[gid] == nil && $0.unrecorded[gid] == nil }) {
                self.rowsChanged()
                self.announcer.send(event)
                self.unannounced.append(event)
            } else {
                self.untoldEnds[gid] = event
            }
        case .added, .changed, .resultsRemoved, .optionsChanged:
            return
        }
        self.waker.yield()
    }

    /// The run of `gid` is over here (its lease ended, the rows read again at the next read): its end is told if
    /// the database `recorded` it; if not, another node held the download by then, and it tells what comes of it.
    private func settled(_ gid: DownloadID, recorded: Bool) {
        guard let event = self.untoldEnds.removeValue(forKey: gid), recorded else { return }
        self.announcer.send(event)
        self.unannounced.append(event)
    }

    /// Tells the other nodes of the changes made here since the last time; while the database is lost, they are
    /// not told (their clients see the changes at their next read).
    func announceNow() async {
        guard !self.unannounced.isEmpty else { return }
        let events = self.unannounced
        self.unannounced = []
        let first = self.announced
        self.announced += events.count
        do {
            try await self.queue.announce(
                events.enumerated().map { FleetQueue.Announcement(node: self.name, event: $1, serial: first + $0) }
            )
        } catch {
            self.logger.debug("Changes not told to the other nodes", metadata: ["error": "\(error.message)"])
        }
    }

    /// Tells the fleet how this node stands, once a tick.
    private func heartbeat() async {
        let now = ContinuousClock.now
        if let last = self.lastHeartbeat, now - last < self.tick { return }
        let stat = await self.manager.read { $0.globalStat() }
        do {
            try await self.queue.heartbeat(
                node: self.name,
                address: self.address,
                downloadSpeed: stat.downloadSpeed,
                active: stat.numActive
            )
            self.lastHeartbeat = now
        } catch {
            self.lost(error)
        }
    }

    /// Another node's change: the next read reads the fleet again, and this node's clients are told.
    private func heard(_ event: QueueEvent) {
        self.rowsChanged()
        self.announcer.send(event)
    }

    // MARK: - Waking

    /// Listens on ``FleetQueue/wakeChannel`` and wakes the loop for work to claim or a request for this node, and
    /// on ``FleetQueue/eventChannel`` for the other nodes' changes; connects again after a failure.
    private nonisolated func listen(whenListening listening: AsyncStream<Void>.Continuation) async {
        while !Task.isCancelled {
            do {
                try await self.queue.client.withConnection { connection in
                    try await connection.listen(on: FleetQueue.wakeChannel) { notifications in
                        try await connection.listen(on: FleetQueue.eventChannel) { announcements in
                            listening.yield()
                            try await withThrowingDiscardingTaskGroup { group in
                                group.addTask {
                                    for try await notification in notifications
                                    where notification.payload == "*" || notification.payload == self.name {
                                        self.waker.yield()
                                    }
                                }
                                for try await notification in announcements {
                                    guard let announcement = FleetQueue.Announcement(payload: notification.payload),
                                        announcement.node != self.name
                                    else { continue }
                                    await self.heard(announcement.event)
                                }
                                group.cancelAll()
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                self.logger.debug("Listening for the fleet again", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: self.tick)
        }
    }

    /// Passes on aria2's notifications for this node's runs, and wakes the loop when a run ends.
    private nonisolated func forward(_ events: AsyncStream<QueueEvent>) async {
        for await event in events {
            switch event {
            case .started, .paused, .stopped, .completed, .failed:
                self.broadcaster.send(event)
                await self.ranEvent(event)
            case .added, .changed, .resultsRemoved, .optionsChanged:
                break
            }
        }
    }

    static func refusal(_ error: FleetError) -> QueueError {
        QueueError(
            .storage,
            message: "The fleet's database cannot be reached (\(error.message)); nothing was changed. Try again."
        )
    }
}
