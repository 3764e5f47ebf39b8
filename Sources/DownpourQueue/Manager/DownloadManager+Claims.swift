import Downpour
import DownpourAria2
import Logging

/// Downloads started and dropped on another's word: a fleet node's manager (``fillsFreeSlots`` off) runs what the
/// node claimed from the fleet's queue, and drops what it no longer holds.
extension DownloadManager {
    /// Checks a download to add and makes its entry, as ``add(uris:options:position:)`` would, without adding it:
    /// its GID (new, or the `gid` option), and whether it is to wait paused.
    ///
    /// - Throws: ``QueueError`` `invalidRequest` (no URI, a bad URI, a bad value for a known option).
    public func prepare(uris: [String], options: [QueueOption]) throws(QueueError) -> (entry: QueueEntry, paused: Bool)
    {
        try self.prepareAdd(uris: uris, options: options, position: nil)
    }

    /// Runs `entry` now, whatever `max-concurrent-downloads` says. One that runs already goes on (one whose run lost
    /// its permit, ``orphans()``, runs again); a waiting or
    /// paused one with the same entry starts (keeping what its last run learnt, its path); anything else this
    /// manager has under that GID (a result, or a waiting one whose entry changed) is replaced.
    ///
    /// - Throws: ``QueueError`` `invalidRequest` when the entry cannot be run (a bad option), `storage`.
    public func run(_ entry: QueueEntry) async throws(QueueError) {
        try self.checkRunning()
        try await self.transaction { () throws(QueueError) in
            let orphaned = self.supervisor.clearSuperseded(entry.gid)
            try self.check(QueuedDownload(entry: entry))
            let actions = try await self.change { queue throws(QueueError) -> [QueueAction] in
                let gid = entry.gid
                var actions: [QueueAction] = []
                switch queue.status(of: gid) {
                case .active:
                    // Its last run lost its write permit and ended: this claim's run starts afresh.
                    return orphaned ? [.start(gid), .emit(.started(gid))] : []
                case .waiting, .paused:
                    if queue.downloads[gid]?.entry == entry { return try queue.start(gid) }
                    actions += try queue.remove(gid)
                case .complete, .error, .removed:
                    actions += try queue.removeResult(gid)
                case nil:
                    break
                }
                actions += try queue.add(entry, paused: true, position: 0)
                actions += try queue.start(gid)
                return actions
            }
            self.perform(actions)
        }
    }

    /// Drops a download from this manager, announcing nothing: a run stops keeping its files (they are another
    /// writer's now, or its next run's), and no result is left. Nothing happens to one the manager does not have.
    public func forget(_ gid: DownloadID) async {
        await self.selfMadeTransaction {
            self.supervisor.clearSuperseded(gid)
            do throws(QueueError) {
                let actions = try await self.change { queue throws(QueueError) -> [QueueAction] in
                    switch queue.status(of: gid) {
                    case .active:
                        let stop = try queue.pause(gid)
                        return try stop + queue.remove(gid)
                    case .waiting, .paused: return try queue.remove(gid)
                    case .complete, .error, .removed: return try queue.removeResult(gid)
                    case nil: return []
                    }
                }
                self.perform(
                    actions.filter { action in
                        if case .emit = action { return false }
                        return true
                    }
                )
            } catch {
                self.logger.info("Download not dropped", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            }
        }
    }

    /// Returns once the run of `gid` under way now (if any) has ended and let go of its file.
    public func waitForRun(_ gid: DownloadID) async {
        guard let run = self.supervisor[gid] else { return }
        await run.task.value
    }

    /// The active downloads whose run stopped because its write permit was withdrawn
    /// (``Downpour/DownloadError/Code/superseded``): they wait for their owner to ``forget(_:)`` them.
    public func orphans() -> Set<DownloadID> {
        self.supervisor.superseded.filter { self.ledger.queue.active.contains($0) }
    }

    /// How a reader of a queue kept elsewhere shows a download's options and directory as this manager would: the
    /// options in effect for a download with these of its own (`getOption`'s answer), and the directory it goes to.
    public func optionShaper() -> OptionShaper {
        OptionShaper(
            resolver: OptionResolver(
                base: Aria2DownloadSettings(
                    directory: self.defaults.directory,
                    configuration: self.defaults.configuration
                ),
                globals: self.effectiveGlobals
            ),
            directory: Self.lastValue(.dir, in: self.effectiveGlobals) ?? self.defaults.directory
        )
    }
}

/// See ``DownloadManager/optionShaper()``.
public struct OptionShaper: Sendable {
    let resolver: OptionResolver
    /// Where a download that names no `dir` goes.
    public let directory: String

    /// Every download option in effect for a download with `own` options, as `getOption` answers.
    public func optionsInEffect(_ own: [QueueOption]) -> [QueueOption] {
        self.resolver.downloadOptions(own)
    }

    /// The directory of a download with `own` options.
    public func directory(_ own: [QueueOption]) -> String {
        DownloadManager.lastValue(.dir, in: own) ?? self.directory
    }
}
