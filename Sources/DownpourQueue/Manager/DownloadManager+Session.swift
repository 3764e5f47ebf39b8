import Downpour
import DownpourAria2
import Logging

/// The session file (the global options `save-session` and `save-session-interval`): aria2's format, written off the
/// manager's loop, at exit, on `aria2.saveSession` and every interval when it changed.
extension DownloadManager {
    /// Writes the session file (the global option `save-session`) in aria2's format: the downloads that are not
    /// finished, and those with `force-save=true` (``DownloadQueue/sessionEntries(globals:)``).
    ///
    /// - Throws: ``QueueError`` `invalidRequest` when no `save-session` file is set; `storage` when it cannot be
    ///   written.
    public func saveSession() async throws(QueueError) {
        try self.checkRunning()
        try await self.writeSession(onlyIfChanged: false)
    }

    func writeSession(onlyIfChanged: Bool) async throws(QueueError) {
        guard let path = Self.lastValue(.saveSession, in: self.effectiveGlobals), !path.isEmpty else {
            throw QueueError(.invalidRequest, message: "Filename is not given.")
        }
        let text = SessionFile.text(of: self.ledger.queue.sessionEntries(globals: self.effectiveGlobals))
        if onlyIfChanged, text == self.savedSession { return }
        try await Self.writeSessionFile(text, to: path)
        self.savedSession = text
    }

    /// Every `save-session-interval` seconds (read again each time, as a client may change it), the session file
    /// when it changed.
    func saveSessionPeriodically() async {
        while !Task.isCancelled {
            let interval = Self.lastValue(.saveSessionInterval, in: self.effectiveGlobals).flatMap(Double.init) ?? 0
            let wait: Duration = interval > 0 ? .milliseconds(Int64(interval * 1000)) : .seconds(1)
            try? await Task.sleep(for: wait)
            guard !Task.isCancelled, !self.isShutDown, interval > 0,
                Self.lastValue(.saveSession, in: self.effectiveGlobals) != nil
            else { continue }
            do {
                try await self.writeSession(onlyIfChanged: true)
            } catch {
                self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
            }
        }
    }

    /// Writes a session file's `text` to `path` off the caller's thread (the write ends with an fsync), for every
    /// queue that writes one (a fleet node's too).
    ///
    /// - Throws: ``QueueError`` `storage` when it cannot be written.
    public static func writeSessionFile(_ text: String, to path: String) async throws(QueueError) {
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
