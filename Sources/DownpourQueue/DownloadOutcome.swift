/// How a run of an active download ended, as ``DownloadQueue/finish(_:outcome:)`` takes it.
public enum DownloadOutcome: Sendable, Hashable {
    /// Every byte is on disk and the file has its final name.
    case complete(path: String, length: Int64)
    /// It stopped with an error: aria2's code (never 0 or 31) and a message.
    case failed(code: Int, message: String)
}
