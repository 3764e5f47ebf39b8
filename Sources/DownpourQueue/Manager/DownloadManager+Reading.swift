import Downpour
import DownpourAria2
import DownpourHLS

extension DownloadManager {
    /// The manager's state at one moment, read the way aria2 shows it (``QueueReader``). Made for one read and
    /// dropped: it shares the manager's storage, which is copied only if the manager changes while a view lives.
    struct View: QueueReader {
        var queue: DownloadQueue
        var runs: [DownloadID: RunSupervisor.Run]
        var defaults: Defaults
        /// ``Defaults/options`` with the options clients changed over them.
        var globals: [QueueOption]
        var downloader: Downloader

        func status(of gid: String) throws(QueueError) -> DownloadStatus {
            let id = try self.queue.resolve(gid)
            guard let status = self.status(id) else {
                throw QueueError(.notFound, gid: gid, message: "No download has the GID \(gid).")
            }
            return status
        }

        func activeDownloads() -> [DownloadStatus] {
            self.queue.active.compactMap { self.status($0) }
        }

        func waitingDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            let waiting = self.queue.waiting
            return waiting[range.clamped(to: waiting.indices)].compactMap { item in
                self.status(item.gid, state: item.isPaused ? .paused : .waiting)
            }
        }

        func stoppedDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            let stopped = self.queue.stopped
            return stopped[range.clamped(to: stopped.indices)].map { self.status(result: $0) }
        }

        func globalStat() -> GlobalStat {
            let speed = self.queue.active.reduce(Int64(0)) { total, gid in
                total + (self.runs[gid]?.bytesPerSecond ?? 0)
            }
            return GlobalStat(
                downloadSpeed: speed,
                numActive: self.queue.active.count,
                numWaiting: self.queue.waiting.count,
                numStopped: self.queue.stopped.count,
                numStoppedTotal: self.queue.stoppedTotal
            )
        }

        func options(of gid: String) throws(QueueError) -> [QueueOption] {
            let id = try self.queue.resolve(gid)
            let options = self.queue.downloads[id]?.entry.options ?? self.queue.result(of: id)?.entry.options ?? []
            return self.resolver.downloadOptions(options)
        }

        func globalOptions() -> [QueueOption] {
            self.resolver.globalOptions(
                queue: self.queue,
                overallLimit: self.downloader.configuration.maximumOverallRate
            )
        }

        private var resolver: OptionResolver {
            OptionResolver(
                base: Aria2DownloadSettings(
                    directory: self.defaults.directory,
                    configuration: self.defaults.configuration
                ),
                globals: self.globals
            )
        }

        private func directory(of entry: QueueEntry) -> String {
            DownloadManager.lastValue(.dir, in: entry.options) ?? DownloadManager.lastValue(.dir, in: self.globals)
                ?? self.defaults.directory
        }

        /// The status of `gid`; `state` when the caller knows it already (saves looking it up).
        func status(_ gid: DownloadID, state known: QueueStatus? = nil) -> DownloadStatus? {
            guard let download = self.queue.downloads[gid], let state = known ?? self.queue.status(of: gid) else {
                return self.queue.result(of: gid).map { self.status(result: $0) }
            }
            let directory = self.directory(of: download.entry)
            // Before the probe names the file, the path is the one `out` asks for, as aria2 shows it (clients show
            // a download's name from it).
            let planned = DownloadManager.lastValue(.out, in: download.entry.options).map {
                directory.hasSuffix("/") ? directory + $0 : directory + "/" + $0
            }
            var status = DownloadStatus(
                gid: gid,
                status: state,
                uris: download.entry.uris,
                options: download.entry.options,
                directory: directory,
                path: download.path ?? planned,
                totalLength: download.totalLength,
                completedLength: download.completedLength,
                following: download.entry.following,
                audio: download.audioPath.map { AudioFile(path: $0, length: 0) }
            )
            // Before its probe is done a run knows nothing yet: what was recorded stands until then.
            if state == .active, let run = self.runs[gid], let segments = run.playlist.snapshot() {
                // An HLS playlist's segments: the length is estimated from those in, and sharpened as they come.
                let progress = segments.progress
                status.path = progress.path
                status.audio = progress.audioPath.map { AudioFile(path: $0, length: 0) }
                status.totalLength = progress.estimatedLength ?? 0
                status.completedLength = progress.bytes
                status.downloadSpeed = segments.bytesPerSecond
                status.connections = segments.connections
                status.completedRanges = progress.bytes > 0 ? [0..<progress.bytes] : []
            } else if state == .active, let run = self.runs[gid], run.download.state != .queued,
                run.download.state != .probing
            {
                let progress = run.download.progress
                status.totalLength = progress.totalBytes ?? download.totalLength
                status.completedLength = progress.completedBytes
                status.downloadSpeed = Int64(progress.bytesPerSecond)
                status.connections = progress.activeConnections
                status.connectionProgress = progress.connections
                status.completedRanges = progress.completedRanges
            }
            return status
        }

        func status(result: StoppedResult) -> DownloadStatus {
            DownloadStatus(
                gid: result.gid,
                status: result.status,
                uris: result.entry.uris,
                options: result.entry.options,
                directory: self.directory(of: result.entry),
                path: result.path,
                totalLength: result.totalLength,
                completedLength: result.completedLength,
                completedRanges: result.status == .complete && result.totalLength > 0 ? [0..<result.totalLength] : [],
                errorCode: result.errorCode,
                errorMessage: result.errorMessage,
                following: result.entry.following,
                followedBy: result.entry.followedBy,
                audio: result.audio
            )
        }
    }
}
