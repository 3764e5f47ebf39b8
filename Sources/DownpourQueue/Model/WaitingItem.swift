import Downpour

/// One place in the waiting queue: a GID and whether it is paused.
public struct WaitingItem: Sendable, Hashable, Codable {
    public var gid: DownloadID
    /// A paused item is passed over when a slot frees up.
    public var isPaused: Bool

    public init(gid: DownloadID, isPaused: Bool) {
        self.gid = gid
        self.isPaused = isPaused
    }
}
