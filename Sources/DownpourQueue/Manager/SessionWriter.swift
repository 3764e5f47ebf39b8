import Downpour
import DownpourAria2

/// The session file of a queue (the global options `save-session` and `save-session-interval`), in aria2's format:
/// where it goes, when a periodic write is due, and whether its text changed since it was last written. One home for
/// what a ``DownloadManager`` and a fleet node both do; each owns one and gives it the entries of its queue.
///
/// A value with no clock of its own (``isDue(globals:now:)`` takes `now`); only ``write(_:to:)`` does I/O.
public struct SessionWriter: Sendable {
    /// The text last written, so that an unchanged queue is not written again.
    private var written: String?
    /// When a periodic write was last looked at.
    private var lastCheck: ContinuousClock.Instant?

    public init() {}

    /// The file `save-session` names, last value first; aria2's refusal when there is none.
    ///
    /// - Throws: ``QueueError`` `invalidRequest` ("Filename is not given.", as aria2 answers `aria2.saveSession`).
    public static func path(in globals: [QueueOption]) throws(QueueError) -> String {
        guard let path = globals.last(where: { $0.name == Aria2Option.saveSession.name })?.value, !path.isEmpty else {
            throw QueueError(.invalidRequest, message: "Filename is not given.")
        }
        return path
    }

    /// How often the file is written while the queue runs: `save-session-interval`, when it is positive and
    /// `save-session` names a file; `nil` otherwise.
    public static func interval(in globals: [QueueOption]) -> Duration? {
        guard (try? Self.path(in: globals)) != nil,
            let seconds = globals.last(where: { $0.name == Aria2Option.saveSessionInterval.name }).flatMap({
                Double($0.value)
            }),
            seconds > 0
        else { return nil }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// Whether a periodic write is due at `now`: an interval has passed since the last time this answered `true`
    /// (the first time, at once). Reads the interval from `globals` each time, as a client may change it.
    public mutating func isDue(globals: [QueueOption], now: ContinuousClock.Instant) -> Bool {
        guard let interval = Self.interval(in: globals) else { return false }
        if let last = self.lastCheck, now - last < interval { return false }
        self.lastCheck = now
        return true
    }

    /// The file's text for `entries`; `nil` when `onlyIfChanged` and it is the text last written.
    public func text(of entries: [SessionFile.Entry], onlyIfChanged: Bool) -> String? {
        let text = SessionFile.text(of: entries)
        return onlyIfChanged && text == self.written ? nil : text
    }

    /// Records that `text` was written.
    public mutating func wrote(_ text: String) {
        self.written = text
    }

    /// Writes `text` to `path`, off the caller's thread: a temporary file, synced, then renamed over the old one.
    ///
    /// - Throws: ``QueueError`` `storage` when it cannot be written.
    public static func write(_ text: String, to path: String) async throws(QueueError) {
        let written = await Task.detached { () -> Result<Void, DownloadError> in
            Result { () throws(DownloadError) in try SessionFile.write(text, to: path) }
        }.value
        do {
            try written.get()
        } catch {
            throw QueueError(.storage, message: error.message)
        }
    }
}
