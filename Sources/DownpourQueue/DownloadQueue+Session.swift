import Downpour

extension DownloadQueue {
    /// The downloads aria2 writes to its session file (`save-session`), in its order: the active ones, the waiting
    /// ones (paused or not), the stopped ones that failed; those that completed or were removed only with
    /// `force-save=true` (the download's own, else the global one in `globals`). Options of Downpour's own are left
    /// out: aria2 would refuse them.
    func sessionEntries(globals: [QueueOption]) -> [SessionFile.Entry] {
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
        var entries: [SessionFile.Entry] = []
        for gid in self.active {
            if let queued = self.downloads[gid] { entries.append(entry(queued.entry, paused: false)) }
        }
        for item in self.waiting {
            if let queued = self.downloads[item.gid] { entries.append(entry(queued.entry, paused: item.isPaused)) }
        }
        for result in self.stopped where result.status == .error || forceSave(result.entry) {
            entries.append(entry(result.entry, paused: false))
        }
        return entries
    }
}
