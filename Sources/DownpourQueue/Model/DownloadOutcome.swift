/// How a run of an active download ended, as ``DownloadQueue/finish(_:outcome:)`` takes it.
public enum DownloadOutcome: Sendable, Hashable {
    /// Every byte is on disk and the file has its final name.
    case complete(path: String, length: Int64)
    /// It stopped with an error: aria2's code (never ``Aria2ErrorCode/finished`` or ``Aria2ErrorCode/removed``)
    /// and a message.
    case failed(code: Aria2ErrorCode, message: String)
}
