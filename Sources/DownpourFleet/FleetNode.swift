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
    let wakes: AsyncStream<Void>
    nonisolated let waker: AsyncStream<Void>.Continuation

    var tasks: [Task<Void, Never>] = []
    /// Holds the node's name (an advisory lock on a connection of its own) while the node runs.
    var nameHolder: Task<Void, Never>?
    var isStarted = false
    /// Where this node's RPC listens, for the list of nodes (``advertise(address:)``).
    var address = ""
    /// Changes to tell the other nodes of at the end of the loop's turn.
    var unannounced: [QueueEvent] = []
    /// How many changes this node told the others of (each payload's serial).
    var announced = 0
    /// The ends of runs that are not recorded yet: told to the other nodes once they are (so that a client told
    /// of an end reads it through any node).
    var untoldEnds: [DownloadID: QueueEvent] = [:]
    /// When the fleet was last told how this node stands.
    var lastHeartbeat: ContinuousClock.Instant?
    /// The session file (`save-session`): the fleet's queue, written by this node.
    var sessionWriter = SessionWriter()
    var isShutDown = false
    /// What was last recorded in the database for each run (path, total, completed, speed).
    var recorded: [DownloadID: Progress] = [:]
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
        var audioPath: String?
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

    func giveBackAll() async -> Int {
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
    func holdName() async throws(QueueError) {
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

}
