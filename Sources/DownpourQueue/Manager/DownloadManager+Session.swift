import Downpour
import DownpourAria2
import Logging

/// The session file (the global options `save-session` and `save-session-interval`) through the manager's
/// ``SessionWriter``: aria2's format, written off the manager's loop, at exit, on `aria2.saveSession` and every
/// interval when it changed.
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
        let path = try SessionWriter.path(in: self.effectiveGlobals)
        let entries = self.ledger.queue.sessionEntries(globals: self.effectiveGlobals)
        // A manager that keeps no writer (a fleet node's) still writes when asked.
        let writer = self.sessionWriter ?? SessionWriter()
        guard let text = writer.text(of: entries, onlyIfChanged: onlyIfChanged) else { return }
        try await SessionWriter.write(text, to: path)
        self.sessionWriter?.wrote(text)
    }

    /// Every `save-session-interval` seconds (read again each time, as a client may change it), the session file
    /// when it changed.
    func saveSessionPeriodically() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: SessionWriter.interval(in: self.effectiveGlobals) ?? .seconds(1))
            guard !Task.isCancelled, !self.isShutDown, SessionWriter.interval(in: self.effectiveGlobals) != nil
            else { continue }
            do {
                try await self.writeSession(onlyIfChanged: true)
            } catch {
                self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
            }
        }
    }
}
