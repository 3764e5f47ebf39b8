import Downpour

/// Where a download is in the queue, by aria2's names.
public enum QueueStatus: String, Sendable, Hashable, Codable {
    /// Running (probing or fetching bytes).
    case active
    /// In the waiting queue, to start when a slot is free.
    case waiting
    /// In the waiting queue, paused: it does not start until unpaused.
    case paused
    /// Finished; the file has its final name.
    case complete
    /// Stopped with an error.
    case error
    /// Removed by a user while it ran.
    case removed
}

/// A snapshot of one download, enough to answer aria2's `tellStatus` and to draw a dashboard row.
public struct DownloadStatus: Sendable, Hashable {
    public var gid: DownloadID
    public var status: QueueStatus
    /// The URIs still to try first, then those used.
    public var uris: [String]
    /// The options set for this download (as ``QueueEntry/options``).
    public var options: [QueueOption]
    /// The directory the file goes into (`dir`): the download's own or the queue's default.
    public var directory: String
    /// The path of the finished file once known (from `out`, the server or the URL); `nil` before.
    public var path: String?
    /// 0 until the length is known.
    public var totalLength: Int64
    public var completedLength: Int64
    /// Bytes per second now; 0 when not active.
    public var downloadSpeed: Int64
    /// Open connections; 0 when not active.
    public var connections: Int
    /// Each connection of an active download, with the range it is fetching.
    public var connectionProgress: [ConnectionProgress]
    /// The byte ranges on disk, merged and sorted.
    public var completedRanges: [Range<Int64>]
    /// aria2's error code (§4 of the reference), for stopped downloads only: 0 complete, 31 removed.
    public var errorCode: Int?
    /// What went wrong, for stopped downloads only ("" when complete or removed).
    public var errorMessage: String?
    /// The Metalink download this one is a file of (aria2's `following`).
    public var following: DownloadID?
    /// The downloads of the files of the Metalink document this download turned out to be (aria2's `followedBy`).
    public var followedBy: [DownloadID]
    /// In a fleet, the node that runs this download (active ones only); `nil` outside a fleet.
    public var node: String?
    /// The second file of an HLS video whose audio is a rendition of its own (its length 0 until it is written; the
    /// lengths above count both files).
    public var audio: AudioFile?

    public init(
        gid: DownloadID,
        status: QueueStatus,
        uris: [String],
        options: [QueueOption],
        directory: String,
        path: String? = nil,
        totalLength: Int64 = 0,
        completedLength: Int64 = 0,
        downloadSpeed: Int64 = 0,
        connections: Int = 0,
        connectionProgress: [ConnectionProgress] = [],
        completedRanges: [Range<Int64>] = [],
        errorCode: Int? = nil,
        errorMessage: String? = nil,
        following: DownloadID? = nil,
        followedBy: [DownloadID] = [],
        node: String? = nil,
        audio: AudioFile? = nil
    ) {
        self.gid = gid
        self.status = status
        self.uris = uris
        self.options = options
        self.directory = directory
        self.path = path
        self.totalLength = totalLength
        self.completedLength = completedLength
        self.downloadSpeed = downloadSpeed
        self.connections = connections
        self.connectionProgress = connectionProgress
        self.completedRanges = completedRanges
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.following = following
        self.followedBy = followedBy
        self.node = node
        self.audio = audio
    }
}

/// The queue's totals, as aria2's `getGlobalStat` gives them.
public struct GlobalStat: Sendable, Hashable {
    /// Bytes per second over all active downloads.
    public var downloadSpeed: Int64
    public var numActive: Int
    /// Waiting and paused downloads.
    public var numWaiting: Int
    /// Stopped results kept (capped by `max-download-result`).
    public var numStopped: Int
    /// Every download stopped since the queue began (not capped).
    public var numStoppedTotal: Int

    public init(downloadSpeed: Int64, numActive: Int, numWaiting: Int, numStopped: Int, numStoppedTotal: Int) {
        self.downloadSpeed = downloadSpeed
        self.numActive = numActive
        self.numWaiting = numWaiting
        self.numStopped = numStopped
        self.numStoppedTotal = numStoppedTotal
    }
}
