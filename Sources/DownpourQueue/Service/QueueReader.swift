import Downpour

/// What a queue shows, all read at one moment: the status of its downloads, its totals and its options, as
/// aria2's `tellStatus`, `tellActive`, `tellWaiting`, `tellStopped`, `getGlobalStat`, `getOption` and
/// `getGlobalOption` answer. A ``DownloadQueueService`` lends one to the closure given to
/// ``DownloadQueueService/read(_:)``; nothing changes the queue while that closure runs.
public protocol QueueReader {
    /// The download with this GID or a unique prefix of it, active, waiting or stopped.
    /// - Throws: ``QueueError`` `invalidGID`, `notFound` or `notUnique`.
    func status(of gid: String) throws(QueueError) -> DownloadStatus
    /// The active downloads, in the order they started.
    func activeDownloads() -> [DownloadStatus]
    /// The waiting downloads (paused ones included) at these positions of the waiting list, in its order.
    func waitingDownloads(_ range: Range<Int>) -> [DownloadStatus]
    /// The stopped results at these positions, oldest first.
    func stoppedDownloads(_ range: Range<Int>) -> [DownloadStatus]
    /// The totals: speed and the sizes of the three lists.
    func globalStat() -> GlobalStat
    /// The options a download was given (aria2's names), without Downpour's internal ones.
    /// - Throws: ``QueueError`` `invalidGID`, `notFound` or `notUnique`.
    func options(of gid: String) throws(QueueError) -> [QueueOption]
    /// The global options in effect, by aria2's names.
    func globalOptions() -> [QueueOption]
    /// The daemons that share this queue (a fleet's nodes), by name; none for a daemon's own queue.
    func nodes() -> [QueueNode]
}

extension QueueReader {
    public func nodes() -> [QueueNode] { [] }
}

/// One daemon of those that share a queue (a node of a fleet), as it last told the others.
public struct QueueNode: Sendable, Hashable {
    /// Its name (`--node-name`): `node` in the status of a download it runs.
    public var name: String
    /// Where its RPC listens (`HOST:PORT`), for a person who wants to reach it.
    public var address: String
    /// Bytes per second over its active downloads.
    public var downloadSpeed: Int64
    public var numActive: Int
    /// How long ago it last told the others how it stands.
    public var secondsSinceSeen: Double
    /// Whether it told them lately (a node tells them every second or so): a node that is not up stopped
    /// without saying so (a crash, a lost link), and its downloads go to others once their leases run out.
    public var isUp: Bool

    public init(
        name: String,
        address: String,
        downloadSpeed: Int64,
        numActive: Int,
        secondsSinceSeen: Double,
        isUp: Bool
    ) {
        self.name = name
        self.address = address
        self.downloadSpeed = downloadSpeed
        self.numActive = numActive
        self.secondsSinceSeen = secondsSinceSeen
        self.isUp = isUp
    }
}
