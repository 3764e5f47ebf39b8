import Downpour

/// What ``DownloadQueue`` asks its owner to do after a change: start or stop a download, or tell listeners.
///
/// The queue itself does no I/O; ``DownloadManager`` carries the actions out in order.
public enum QueueAction: Sendable, Hashable {
    /// Why an active download is to stop.
    public enum StopReason: Sendable, Hashable {
        /// Paused: keep the bytes and the journal; the download waits, paused, at the front of the queue.
        case pause
        /// Removed: delete the partial file and the journal.
        case remove
        /// The queue shuts down: keep the bytes and the journal; the download stays recorded as active.
        case shutdown
        /// Its options changed: keep the bytes and start it again at once with the new options.
        case restart
    }

    /// Start (or, after a `.stop(_, reason: .restart)`, start again) the download with this GID.
    case start(DownloadID)
    /// Stop the running download with this GID.
    case stop(DownloadID, reason: StopReason)
    /// Send this event to the listeners.
    case emit(QueueEvent)
}
