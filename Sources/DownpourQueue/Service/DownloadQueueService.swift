import Downpour

/// How `changePosition` counts (aria2's `POS_SET`, `POS_CUR`, `POS_END`).
public enum PositionOrigin: String, Sendable, Hashable {
    case set = "POS_SET"
    case current = "POS_CUR"
    case end = "POS_END"
}

/// The operations of a download queue with aria2's model: active downloads, a waiting queue in order (each
/// possibly paused) and stopped results. ``DownloadManager`` is the real one; the RPC layer speaks to this
/// protocol only.
///
/// Every operation that changes the queue returns only after the change is stored, so a caller that replies to a
/// client after it returns never promises what a crash could lose. GIDs are given as text: a full GID or a
/// unique prefix, any case.
public protocol DownloadQueueService: Sendable {
    /// Adds a download of one file at `uris` (mirrors) with `options` (aria2's names; `gid` forces the GID,
    /// `pause=true` adds it paused). `position` inserts into the waiting queue (past the end appends).
    /// - Throws: ``QueueError`` `invalidRequest` (no URI, a bad URI, a bad value for a known option),
    ///   `duplicateGID`, `storage`.
    func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID

    /// Adds several downloads, each as ``add(uris:options:position:)`` would, and stores them together: one
    /// write for the lot (aria2's clients add many at once with `system.multicall`). Each gets its own result; a
    /// store that cannot be written fails them all, and none is added.
    func add(batch: [AddRequest]) async -> [Result<DownloadID, QueueError>]

    /// Pauses an active download (it stops, keeps its bytes and journal, and goes to the front of the waiting
    /// queue, paused) or a waiting one (paused in place). `force` skips nothing today; aria2's clients use both.
    func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID
    /// Pauses every active and waiting download.
    func pauseAll(force: Bool) async throws(QueueError)
    /// A paused download waits again.
    func unpause(_ gid: String) async throws(QueueError) -> DownloadID
    func unpauseAll() async throws(QueueError)
    /// An active download stops and becomes a `removed` result (its `.part` and journal deleted); a waiting or
    /// paused one leaves the queue with no result, as in aria2. Unlike aria2, which leaves them, the `NAME.part`
    /// and `NAME.part.downpour` of a waiting or paused one (from an earlier run, once its path is known) are
    /// deleted too: a user who removes a download expects its partial file gone.
    func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID

    /// Moves a waiting download; returns its new index in the waiting queue.
    func changePosition(_ gid: String, by position: Int, from origin: PositionOrigin) async throws(QueueError) -> Int
    /// Removes `remove` (one occurrence each) then inserts `add` at `position` (or appends) in the URIs of a
    /// download that has not stopped; returns how many were removed and added.
    func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (
        removed: Int, added: Int
    )
    /// Changes options of a download that has not stopped; an active one restarts with them where needed
    /// (keeping its bytes).
    func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError)

    /// Changes the queue's options; `max-concurrent-downloads` takes effect at once.
    func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError)

    /// Runs `body` with the queue as it is now and returns what `body` returns: every read in it sees the same
    /// moment (``QueueReader``). It runs where the queue's state lives, so `body` should only read and shape.
    func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value

    /// Runs `body` as ``read(_:)`` does, but at once, when the calling thread is the one the queue's state lives
    /// on (for a ``DownloadManager``, its ``DownloadManager/eventLoop``); returns `nil` without running it
    /// anywhere else. A server on that loop answers reads with no task and no hop. A queue with no such thread
    /// always returns `nil` (the default).
    func readIfIsolated<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) throws(Failure) -> Value?

    /// Forgets every stopped result.
    func purgeResults() async throws(QueueError)
    /// Forgets one stopped result.
    func removeResult(_ gid: String) async throws(QueueError)

    /// Every change from now on, for as many listeners as ask; a listener that does not read loses its oldest
    /// events and never holds up the queue.
    var events: AsyncStream<QueueEvent> { get }

    /// What clients are told of (aria2's notifications, a dashboard's refresh): ``events``, and, where several
    /// daemons share the queue (a fleet), the changes the others made too. Hooks follow ``events``: they run
    /// where the download ran, which has its file.
    var announcements: AsyncStream<QueueEvent> { get }

    /// Stops taking work: active downloads pause (journals saved), everything is stored, and the queue is left
    /// as it was, so the next start resumes them.
    func shutdown() async

    /// `aria2.saveSession`: writes the session file (the global option `save-session`) in aria2's format.
    ///
    /// - Throws: ``QueueError`` `invalidRequest` when no file is set, `storage` when it cannot be written.
    func saveSession() async throws(QueueError)
}

/// One download to add, for ``DownloadQueueService/add(batch:)``.
public struct AddRequest: Sendable, Hashable {
    public var uris: [String]
    public var options: [QueueOption]
    public var position: Int?

    public init(uris: [String], options: [QueueOption], position: Int?) {
        self.uris = uris
        self.options = options
        self.position = position
    }
}

extension DownloadQueueService {
    public var announcements: AsyncStream<QueueEvent> { self.events }

    public func readIfIsolated<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) throws(Failure) -> Value? {
        nil
    }

    /// One download, active, waiting or stopped (``QueueReader/status(of:)``).
    public func status(of gid: String) async throws(QueueError) -> DownloadStatus {
        try await self.read { queue throws(QueueError) in try queue.status(of: gid) }
    }

    /// The active downloads, in the order they started.
    public func activeDownloads() async -> [DownloadStatus] {
        await self.read { $0.activeDownloads() }
    }

    /// Waiting and paused downloads at `range` of the waiting queue (clamped), in queue order.
    public func waitingDownloads(_ range: Range<Int>) async -> [DownloadStatus] {
        await self.read { $0.waitingDownloads(range) }
    }

    /// Stopped results at `range`, the least recently stopped first (clamped).
    public func stoppedDownloads(_ range: Range<Int>) async -> [DownloadStatus] {
        await self.read { $0.stoppedDownloads(range) }
    }

    public func globalStat() async -> GlobalStat {
        await self.read { $0.globalStat() }
    }

    /// The options set for the download (also for stopped results).
    public func options(of gid: String) async throws(QueueError) -> [QueueOption] {
        try await self.read { queue throws(QueueError) in try queue.options(of: gid) }
    }

    /// The queue's own options and the defaults new downloads take (`dir`, `split`, `max-concurrent-downloads`,
    /// `max-overall-download-limit`, ...), every one with its value.
    public func globalOptions() async -> [QueueOption] {
        await self.read { $0.globalOptions() }
    }

    /// One ``add(uris:options:position:)`` after the other: for a queue with nothing to gain from a batch.
    public func add(batch: [AddRequest]) async -> [Result<DownloadID, QueueError>] {
        await self.addEach(of: batch)
    }

    /// Adds the requests of `batch` one after the other, each its own result.
    public func addEach(of batch: [AddRequest]) async -> [Result<DownloadID, QueueError>] {
        var results: [Result<DownloadID, QueueError>] = []
        results.reserveCapacity(batch.count)
        for request in batch {
            do {
                results.append(
                    .success(
                        try await self.add(uris: request.uris, options: request.options, position: request.position)
                    )
                )
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }
}
