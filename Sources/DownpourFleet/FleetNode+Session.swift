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
        guard let path = globals.last(where: { $0.name == Aria2Option.saveSession.name })?.value, !path.isEmpty
        else {
            throw QueueError(.invalidRequest, message: "Filename is not given.")
        }
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
        let text = SessionFile.text(of: entries)
        if onlyIfChanged, text == self.savedSession { return }
        try await DownloadManager.writeSessionFile(text, to: path)
        self.savedSession = text
    }

    /// Writes the session file when `save-session-interval` seconds passed since it was last looked at, if the
    /// queue changed.
    func saveSessionIfDue() async {
        let globals = await self.manager.globalOptions()
        let interval =
            globals.last { $0.name == Aria2Option.saveSessionInterval.name }.flatMap { Double($0.value) } ?? 0
        guard interval > 0, globals.contains(where: { $0.name == Aria2Option.saveSession.name }) else { return }
        let now = ContinuousClock.now
        if let last = self.lastSessionCheck, now - last < .milliseconds(Int64(interval * 1000)) { return }
        self.lastSessionCheck = now
        do {
            try await self.writeSession(onlyIfChanged: true)
        } catch {
            self.logger.error("The session file could not be written", metadata: ["error": "\(error.message)"])
        }
    }
}
