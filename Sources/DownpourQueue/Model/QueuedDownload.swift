import Downpour

/// A download that has not stopped: its entry and what is known of its file so far.
public struct QueuedDownload: Sendable, Hashable {
    public var entry: QueueEntry
    /// The path of the finished file, once a run has resolved it (from `out`, the server or the URL).
    public var path: String?
    /// The file's length; 0 until known.
    public var totalLength: Int64
    /// Bytes on disk when it last stopped or reported progress.
    public var completedLength: Int64
    /// The path of the audio an HLS video's run writes beside it (a rendition of its own), once a run has named it.
    public var audioPath: String?

    public init(
        entry: QueueEntry,
        path: String? = nil,
        totalLength: Int64 = 0,
        completedLength: Int64 = 0,
        audioPath: String? = nil
    ) {
        self.entry = entry
        self.path = path
        self.totalLength = totalLength
        self.completedLength = completedLength
        self.audioPath = audioPath
    }
}
