import Downpour

/// A change in the queue. The first five are aria2's notifications (`aria2.onDownloadStart` ...); the others
/// are changes aria2 does not announce, for listeners that want every change (a dashboard).
public enum QueueEvent: Sendable, Hashable {
    /// A waiting download became active (also after an unpause, or a restart for changed options).
    case started(DownloadID)
    /// An active download stopped because it was paused.
    case paused(DownloadID)
    /// An active download stopped because it was removed, or the queue shut down.
    case stopped(DownloadID)
    /// A download finished; the file has its final name.
    case completed(DownloadID)
    /// A download stopped with an error.
    case failed(DownloadID)
    /// A download was added (waiting or paused).
    case added(DownloadID)
    /// A waiting or paused download changed: paused, unpaused, moved, options changed, or removed from the
    /// waiting queue.
    case changed(DownloadID)
    /// Stopped results were removed (one, or all with `nil`).
    case resultsRemoved(DownloadID?)
    /// The queue's own options changed (`max-concurrent-downloads`, limits, defaults).
    case optionsChanged
}
