import Downpour
import DownpourHLS

/// The runs of a queue's active downloads: which ``Download`` runs each, in which task, under which token, whether it
/// was asked to stop, and which downloads lost their run to another writer. The manager's one home for runs, a value
/// tested as a table.
///
/// Each run gets a new token as it starts, so that the end of a run that stopped late (after a pause and an unpause,
/// say) is not taken for the end of the run that replaced it. A run whose write permit was withdrawn (its download
/// is another writer's now: ``Downpour/DownloadError/Code/superseded``) leaves its download *superseded*, until its
/// owner runs it again or forgets it.
struct RunSupervisor: Sendable {
    struct Run: Sendable {
        var download: Download
        /// The segments, when ``download`` turned out to be an HLS playlist.
        var playlist: PlaylistStage
        var task: Task<Void, Never>
        var token: Int
        /// Asked to stop (a pause, a removal, a restart, the shutdown): its end is not the download's end.
        var stopRequested = false

        /// The bytes it has on disk, of how many (`nil` while unknown): its segments' once it fetches an HLS
        /// playlist's, else its download's.
        var lengths: (total: Int64?, completed: Int64) {
            if let segments = self.playlist.snapshot() {
                return (segments.progress.estimatedLength, segments.progress.bytes)
            }
            let progress = self.download.progress
            return (progress.totalBytes, progress.completedBytes)
        }

        var bytesPerSecond: Int64 {
            self.playlist.snapshot()?.bytesPerSecond ?? Int64(self.download.progress.bytesPerSecond)
        }

        /// Asks the run to stop, keeping what is on disk or not; `false` when it is past its point of no return (it
        /// completes: its file is being finished, or a live recording ends with what it recorded).
        func stop(keepingPartialFile: Bool) -> Bool {
            let answer = self.playlist.stop(keepingSegments: keepingPartialFile) {
                self.download.cancel(keepingPartialFile: keepingPartialFile)
            }
            if answer.cancelsTask { self.task.cancel() }
            return answer.accepted
        }
    }

    /// The run of each download that has one.
    private(set) var runs: [DownloadID: Run] = [:]
    private var lastToken = 0
    /// Downloads whose run ended because its write permit was withdrawn.
    private(set) var superseded: Set<DownloadID> = []

    subscript(_ gid: DownloadID) -> Run? {
        self.runs[gid]
    }

    /// A token no run had before.
    mutating func nextToken() -> Int {
        self.lastToken += 1
        return self.lastToken
    }

    /// `run` is the run of `gid` from now on; the one before (stopped, ending) is no longer its run.
    mutating func started(_ gid: DownloadID, _ run: Run) {
        self.runs[gid] = run
    }

    /// Whether `token` is the run of `gid` now.
    func isCurrent(_ gid: DownloadID, token: Int) -> Bool {
        self.runs[gid]?.token == token
    }

    /// Marks the run of `gid` asked to stop; the run, or `nil` when it has none or was asked already.
    mutating func requestStop(_ gid: DownloadID) -> Run? {
        guard var run = self.runs[gid], !run.stopRequested else { return nil }
        run.stopRequested = true
        self.runs[gid] = run
        return run
    }

    /// The run of `gid` under `token` ended: it is forgotten and returned; `nil` when `token` is not its run now
    /// (a run that was replaced, whose end says nothing).
    mutating func ended(_ gid: DownloadID, token: Int) -> Run? {
        guard let run = self.runs[gid], run.token == token else { return nil }
        self.runs[gid] = nil
        return run
    }

    /// `gid`'s run ended because another writer has its download now.
    mutating func supersede(_ gid: DownloadID) {
        self.superseded.insert(gid)
    }

    /// `gid` is run again, or forgotten: `true` when it was superseded.
    @discardableResult
    mutating func clearSuperseded(_ gid: DownloadID) -> Bool {
        self.superseded.remove(gid) != nil
    }
}
