import Downpour

/// What the queue knows of one download before, while and after it runs: its GID, its URIs (mirrors of one
/// file) and the options set for it. This is what is stored; everything else is derived.
public struct QueueEntry: Sendable, Hashable, Codable {
    /// aria2's GID.
    public var gid: DownloadID
    /// The URIs of the file, all of them mirrors of one file.
    public var uris: [String]
    /// The options set for this download, in the order given (the queue's defaults are not copied in).
    public var options: [QueueOption]

    public init(gid: DownloadID, uris: [String], options: [QueueOption]) {
        self.gid = gid
        self.uris = uris
        self.options = options
    }
}
