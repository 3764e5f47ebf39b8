import Downpour

/// One change to the stored queue, row by row, as ``DownloadQueue`` records them: what ``QueueStore`` writes so
/// that an operation costs the rows it touched, not the whole queue.
///
/// Positions order the downloads of one state: the active ones in the order they started, the waiting queue in
/// its order. They are sparse (an append takes the last plus one, an insert at the front the first minus one, an
/// insert between two their midpoint), so that a move rewrites one row; only when two neighbours leave no room
/// between them is the whole waiting queue renumbered (a `place` for every item).
public enum QueueChange: Sendable, Hashable {
    /// A download joined the queue: its row is inserted.
    case insert(QueuedDownload, state: QueueStatus, position: Double)
    /// A download started, was paused or unpaused, or moved: its state and position change.
    case place(DownloadID, state: QueueStatus, position: Double)
    /// What is known of a download changed (its URIs, options, path or lengths): its row is updated.
    case update(QueuedDownload)
    /// A download left the queue (it stopped or was removed): its row is deleted.
    case delete(DownloadID)
    /// A download stopped: its result is appended.
    case appendResult(StoppedResult)
    /// A result is forgotten.
    case deleteResult(DownloadID)
    /// Every result is forgotten.
    case deleteAllResults
    /// The count of every download that stopped.
    case stoppedTotal(Int)
}
