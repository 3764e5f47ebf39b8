import Downpour
import DownpourAria2
import DownpourQueue
import Foundation
import Logging

/// The session file (`save-session`) of a fleet node: the fleet's queue in aria2's format, written on
/// `aria2.saveSession`, every `save-session-interval` when it changed, and when the node stops. Each node that has
/// the option writes the whole queue (a copy to move it to aria2 or a single daemon); the node's own manager
/// writes none.
extension FleetNode {
    public func saveSession() async throws(QueueError) {
        try await self.writeSession(onlyIfChanged: false)
    }

    func writeSession(onlyIfChanged: Bool) async throws(QueueError) {
        let globals = await self.manager.globalOptions()
        let path = try SessionWriter.path(in: globals)
        let rows: [FleetQueue.Row]
        do {
            rows = try await self.queue.rows()
        } catch {
            throw Self.refusal(error)
        }
        let entries = DownloadQueue.sessionEntries(
            active: rows.filter { $0.status == .active }.map(\.entry),
            waiting: rows.filter { $0.status == .waiting || $0.status == .paused }.map {
                ($0.entry, isPaused: $0.status == .paused)
            },
            stopped: rows.filter { [.complete, .error, .removed].contains($0.status) }.map { ($0.entry, $0.status) },
            globals: globals
        )
        guard let text = self.sessionWriter.text(of: entries, onlyIfChanged: onlyIfChanged) else { return }
        try await SessionWriter.write(text, to: path)
        self.sessionWriter.wrote(text)
    }

    /// Writes the session file when `save-session-interval` seconds passed since it was last looked at, if the
    /// queue changed.
    func saveSessionIfDue() async {
        let globals = await self.manager.globalOptions()
        guard self.sessionWriter.isDue(globals: globals, now: .now) else { return }
        do {
            try await self.writeSession(onlyIfChanged: true)
        } catch {
            self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
        }
    }
}
