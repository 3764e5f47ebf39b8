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
    /// The download this one was made by: a Metalink document it was one of the files of (aria2's `following`).
    public var following: DownloadID?
    /// The downloads this one made: the files of the Metalink document it turned out to be (aria2's `followedBy`).
    public var followedBy: [DownloadID]

    public init(
        gid: DownloadID,
        uris: [String],
        options: [QueueOption],
        following: DownloadID? = nil,
        followedBy: [DownloadID] = []
    ) {
        self.gid = gid
        self.uris = uris
        self.options = options
        self.following = following
        self.followedBy = followedBy
    }
}
