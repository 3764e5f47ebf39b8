import Downpour
import DownpourHLS
import Logging
import NIOConcurrencyHelpers

/// What a run does after its ``Download``: nothing, or, when the URL answered with an HLS playlist, fetch its segments
/// into one video (``HLSDownload``) under the run's ``PlaylistStage``, in the run's own task.
struct PlaylistRun: Sendable {
    /// How a run ended well: its download's result, or the video (and audio) of its playlist.
    struct Outcome: Sendable {
        var path: String
        /// Every file's bytes.
        var length: Int64
        var audio: AudioFile?
        /// The document the download was, when a Metalink.
        var metalink: Metalink?
    }

    let stage: PlaylistStage
    let request: DownloadRequest
    let options: HLSDownload.Options
    let downloader: Downloader
    let logger: Logger
    /// The run's write permit, when a fleet's node runs it under a lease: the segments are fetched and the video
    /// written under it too, and a run without it removes nothing.
    var writePermit: (@Sendable () async -> Bool)? = nil

    /// Runs `download`, then, when it was an HLS playlist, fetches the video. `named` hears the outputs' names once
    /// they are known. A video an earlier run wrote and named, killed before the queue recorded its end, is taken as
    /// it is. A removal takes what was fetched for the video with it; a pause, a restart or the shutdown leaves it
    /// for the next run.
    func run(
        _ download: Download,
        named: @escaping @Sendable (HLSDownload.Progress) -> Void
    ) async throws(DownloadError) -> Outcome {
        do {
            return try await self.fetch(download, named: named)
        } catch {
            guard self.stage.removesLeftovers, error.code != .superseded, await self.writePermit?() ?? true else {
                throw error
            }
            if let progress = self.stage.snapshot()?.progress {
                await HLSDownload.removeLeftovers(path: progress.path, audioPath: progress.audioPath)
            } else if self.request.configuration.followsPlaylists, case .named = self.request.destination {
                // Removed before its playlist came, in a run again under the name an earlier run recorded: what
                // that run fetched for the video is this download's (a name from a URL alone may be another's).
                await HLSDownload.removeLeftovers(of: self.request)
            }
            throw error
        }
    }

    private func fetch(
        _ download: Download,
        named: @escaping @Sendable (HLSDownload.Progress) -> Void
    ) async throws(DownloadError) -> Outcome {
        let stage = self.stage
        if self.request.configuration.followsPlaylists, let video = await HLSDownload.finishedEarlier(self.request) {
            download.cancel(keepingPartialFile: true)
            guard stage.takeFinished() else {
                throw DownloadError(code: .cancelled, message: "The download was stopped.")
            }
            self.logger.notice(
                "The HLS video is on disk already: an earlier run finished it",
                metadata: ["path": "\(video.path)"]
            )
            return Outcome(
                path: video.path,
                length: video.length + video.audioLength,
                audio: video.audioPath.map { AudioFile(path: $0, length: video.audioLength) }
            )
        }
        let result = try await download.run()
        guard let document = result.playlist else {
            return Outcome(path: result.path, length: result.length, metalink: result.metalink)
        }
        guard stage.begin() else {
            throw DownloadError(code: .cancelled, message: "The download was stopped before its segments.")
        }
        let segments = HLSDownload(
            document,
            request: self.request,
            downloader: self.downloader,
            options: self.options,
            logger: self.logger,
            limiter: stage.limiter,
            writePermit: self.writePermit
        )
        let unnamed = NIOLockedValueBox(true)
        let video = try await segments.run(
            progress: { progress in
                stage.report(progress)
                if unnamed.withLockedValue({ first in
                    defer { first = false }
                    return first
                }) {
                    named(progress)
                }
            },
            finishing: { stage.finishing() }
        )
        self.logger.info(
            "HLS video written",
            metadata: ["path": "\(video.path)", "segments": "\(video.segments)", "bytes": "\(video.length)"]
        )
        return Outcome(
            path: video.path,
            length: video.length + video.audioLength,
            audio: video.audioPath.map { AudioFile(path: $0, length: video.audioLength) }
        )
    }
}
