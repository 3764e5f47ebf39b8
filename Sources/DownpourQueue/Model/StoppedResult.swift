import Downpour

/// A stopped download as the queue remembers it: complete, failed or removed, with aria2's error code.
public struct StoppedResult: Sendable, Hashable {
    public var entry: QueueEntry
    /// aria2's error code (§4 of the reference): 0 complete, 31 removed, anything else an error.
    public var errorCode: Int
    /// What went wrong; "" when complete or removed.
    public var errorMessage: String
    /// The file's path, when it was known.
    public var path: String?
    /// Every file's bytes: the video's and, for an HLS video with a separate audio rendition, the audio's.
    public var totalLength: Int64
    public var completedLength: Int64
    /// The audio of an HLS video that had a rendition of its own, when complete.
    public var audio: AudioFile?

    public init(
        entry: QueueEntry,
        errorCode: Int,
        errorMessage: String = "",
        path: String? = nil,
        totalLength: Int64 = 0,
        completedLength: Int64 = 0,
        audio: AudioFile? = nil
    ) {
        self.entry = entry
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.path = path
        self.totalLength = totalLength
        self.completedLength = completedLength
        self.audio = audio
    }

    public var gid: DownloadID { self.entry.gid }

    /// aria2's status for the code: `complete` when finished, `removed` when removed, `error` for the rest.
    public var status: QueueStatus {
        switch Aria2ErrorCode(rawValue: self.errorCode) {
        case .finished: .complete
        case .removed: .removed
        default: .error
        }
    }
}
