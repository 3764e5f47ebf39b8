/// How a run of an active download ended, as ``DownloadQueue/finish(_:outcome:)`` takes it.
public enum DownloadOutcome: Sendable, Hashable {
    /// Every byte is on disk and the file has its final name. `length` counts every file: the video of an HLS
    /// playlist and its separate audio rendition (`audio`), when it had one.
    case complete(path: String, length: Int64, audio: AudioFile? = nil)
    /// It stopped with an error: aria2's code (never ``Aria2ErrorCode/finished`` or ``Aria2ErrorCode/removed``)
    /// and a message.
    case failed(code: Aria2ErrorCode, message: String)
}

/// The audio of an HLS video that had a rendition of its own: a second file, beside the video (`files[1]` of
/// `tellStatus`).
public struct AudioFile: Sendable, Hashable {
    public var path: String
    /// 0 until it is written.
    public var length: Int64

    public init(path: String, length: Int64) {
        self.path = path
        self.length = length
    }
}
