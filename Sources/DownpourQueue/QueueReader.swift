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
}
