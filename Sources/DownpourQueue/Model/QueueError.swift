import Downpour

/// Why the queue refused an operation. The RPC layer turns each into aria2's words.
public struct QueueError: Error, Sendable, Hashable {
    public enum Reason: Sendable, Hashable {
        /// No download has this GID (or a prefix matched none).
        case notFound
        /// A prefix matched more than one GID.
        case notUnique
        /// The GID is not 1 to 16 hexadecimal digits.
        case invalidGID
        /// `remove` of a download that is not active, waiting or paused.
        case notActive
        /// `pause` of one that is already paused or stopped.
        case cannotPause
        /// `unpause` of one that is not paused.
        case cannotUnpause
        /// `changePosition` of one that is not in the waiting queue.
        case notWaiting
        /// `changeOption` of a stopped download.
        case cannotChangeOption
        /// `removeDownloadResult` of one that is not a stopped result.
        case noResult
        /// A GID given with the `gid` option is already in use.
        case duplicateGID
        /// No URI, a URI that cannot be downloaded, or an option with a bad value: `message` says which.
        case invalidRequest
        /// The store could not be written; the change was not made.
        case storage
    }

    public var reason: Reason
    /// The GID or prefix as given, when the operation named one.
    public var gid: String?
    /// For `invalidRequest` and `storage`: what was wrong, in a sentence. For an option: its name in `option`.
    public var message: String
    /// For an option with a bad value: its name.
    public var option: String?

    public init(_ reason: Reason, gid: String? = nil, message: String = "", option: String? = nil) {
        self.reason = reason
        self.gid = gid
        self.message = message
        self.option = option
    }
}
