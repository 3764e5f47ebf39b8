import Downpour
import DownpourAria2

extension DownloadQueue {
    /// The downloads aria2 writes to its session file (`save-session`), in its order: the active ones, the waiting
    /// ones (paused or not), the stopped ones that failed; those that completed or were removed only with
    /// `force-save=true` (the download's own, else the global one in `globals`). Options of Downpour's own are left
    /// out: aria2 would refuse them.
    func sessionEntries(globals: [QueueOption]) -> [SessionFile.Entry] {
        Self.sessionEntries(
            active: self.active.compactMap { self.downloads[$0]?.entry },
            waiting: self.waiting.compactMap { item in self.downloads[item.gid].map { ($0.entry, item.isPaused) } },
            stopped: self.stopped.map { ($0.entry, $0.status) },
            globals: globals
        )
    }

    /// The session file's entries of a queue of `active`, `waiting` (paused or not) and `stopped` downloads, each
    /// list in its order (also for a queue kept elsewhere, a fleet's); see ``sessionEntries(globals:)``.
    public static func sessionEntries(
        active: [QueueEntry],
        waiting: [(QueueEntry, isPaused: Bool)],
        stopped: [(QueueEntry, QueueStatus)],
        globals: [QueueOption]
    ) -> [SessionFile.Entry] {
        func entry(_ queued: QueueEntry, paused: Bool) -> SessionFile.Entry {
            let options = queued.options.filter { option in
                !Aria2Option.internalOptions.contains { $0.name == option.name }
            }
            return SessionFile.Entry(
                uris: queued.uris,
                gid: queued.gid.description,
                isPaused: paused,
                options: options.map { ($0.name, $0.value) }
            )
        }
        func forceSave(_ queued: QueueEntry) -> Bool {
            let value =
                DownloadManager.lastValue(.forceSave, in: queued.options)
                ?? DownloadManager.lastValue(.forceSave, in: globals)
            return value?.lowercased() == "true"
        }
        return active.map { entry($0, paused: false) }
            + waiting.map { entry($0.0, paused: $0.isPaused) }
            + stopped.filter { $0.1 == .error || forceSave($0.0) }.map { entry($0.0, paused: false) }
    }
}
