import Downpour

extension DownloadManager {
    /// The manager's state at one moment, read the way aria2 shows it (``QueueReader``). Made for one read and
    /// dropped: it shares the manager's storage, which is copied only if the manager changes while a view lives.
    struct View: QueueReader {
        var queue: DownloadQueue
        var runs: [DownloadID: Run]
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
                total + Int64(self.runs[gid]?.download.progress.bytesPerSecond ?? 0)
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
            // A Metalink's piece digests and size ride along as options of Downpour's own; they are not aria2's
            // to show.
            return options.filter { !Aria2Options.internalNames.contains($0.name) }
        }

        func globalOptions() -> [QueueOption] {
            var options = Aria2Options(directory: self.defaults.directory, configuration: self.defaults.configuration)
            for option in self.globals where Aria2Options.supportedNames.contains(option.name) {
                try? options.apply(name: option.name, value: option.value)
            }
            let configuration = options.configuration
            var values: [(String, String)] = [
                ("dir", options.directory),
                ("max-concurrent-downloads", "\(self.queue.maxConcurrentDownloads)"),
                ("max-download-result", "\(self.queue.maxDownloadResult)"),
                ("max-overall-download-limit", "\(self.downloader.configuration.maximumOverallRate ?? 0)"),
                ("split", "\(configuration.connections)"),
                ("max-connection-per-server", "\(configuration.connections)"),
                ("min-split-size", "\(configuration.minimumSplitSize)"),
                ("max-download-limit", "\(configuration.maximumRate ?? 0)"),
                ("max-tries", "\(configuration.retry.maximumTries)"),
                ("retry-wait", Self.seconds(configuration.retry.wait)),
                ("timeout", Self.seconds(configuration.timeouts.idleRead)),
                ("connect-timeout", Self.seconds(configuration.timeouts.connect)),
                ("lowest-speed-limit", "\(configuration.slowConnections.lowestSpeed ?? 0)"),
                ("user-agent", configuration.userAgent),
                ("allow-overwrite", "\(configuration.overwrite)"),
                ("continue", "\(configuration.resume)"),
                ("check-certificate", "\(configuration.tls.verifyCertificates)"),
                ("remote-time", "\(configuration.setsRemoteTime)"),
                ("conditional-get", "\(configuration.conditionalGet)"),
                ("follow-metalink", "\(configuration.followsMetalink)"),
            ]
            let listed = Set(values.map(\.0))
            for option in self.globals where !listed.contains(option.name) {
                values.append((option.name, option.value))
            }
            return values.map { QueueOption(name: $0.0, value: $0.1) }
        }

        private func directory(of entry: QueueEntry) -> String {
            DownloadManager.lastValue("dir", in: entry.options) ?? DownloadManager.lastValue("dir", in: self.globals)
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
            let planned = download.entry.options.last { $0.name == "out" }.map {
                directory.hasSuffix("/") ? directory + $0.value : directory + "/" + $0.value
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
                following: download.entry.following
            )
            // Before its probe is done a run knows nothing yet: what was recorded stands until then.
            if state == .active, let run = self.runs[gid], run.download.state != .queued, run.download.state != .probing
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
                completedRanges: result.errorCode == 0 && result.totalLength > 0 ? [0..<result.totalLength] : [],
                errorCode: result.errorCode,
                errorMessage: result.errorMessage,
                following: result.entry.following,
                followedBy: result.entry.followedBy
            )
        }

        private static func seconds(_ duration: Duration) -> String {
            let milliseconds =
                duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
            return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)" : "\(Double(milliseconds) / 1000)"
        }
    }
}
