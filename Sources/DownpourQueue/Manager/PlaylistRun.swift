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

    /// `result`, or the video of the playlist it is. `named` hears the outputs' names once they are known.
    func run(
        after result: DownloadResult,
        named: @escaping @Sendable (HLSDownload.Progress) -> Void
    ) async throws(DownloadError) -> Outcome {
        guard let document = result.playlist else {
            return Outcome(path: result.path, length: result.length, metalink: result.metalink)
        }
        self.stage.begin()
        let stage = self.stage
        let download = HLSDownload(
            document,
            request: self.request,
            downloader: self.downloader,
            options: self.options,
            logger: self.logger
        )
        let unnamed = NIOLockedValueBox(true)
        do {
            let video = try await download.run(
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
        } catch {
            // A removal takes the segments with it; a pause, a restart or the shutdown leaves them for the next run.
            if stage.phase == .stopped(keepingSegments: false), let progress = stage.snapshot()?.progress {
                await HLSDownload.removeLeftovers(path: progress.path, audioPath: progress.audioPath)
            }
            throw error
        }
    }
}
