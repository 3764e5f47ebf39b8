import Downpour
import DownpourAria2
import DownpourHLS
import Foundation
import Logging

extension Aria2DownloadSettings {
    /// What to fetch of an HLS playlist: `--media-video`, `--media-audio`, and `-x` segments at once.
    var playlistOptions: HLSDownload.Options {
        HLSDownload.Options(
            video: self.mediaVideo,
            audio: self.mediaAudio,
            concurrentSegments: max(1, self.configuration.connections)
        )
    }
}

extension GetPlan {
    /// Fetches the segments of the playlist `request` answered with into one file, with a live progress line;
    /// returns the exit status. Ctrl-C or SIGTERM stops it with every whole segment kept, for the same command to
    /// go on from.
    func runPlaylist(
        _ document: PlaylistDocument,
        request: DownloadRequest,
        downloader: Downloader,
        logger: Logger
    ) async -> Int32 {
        let renderer = ProgressRenderer(mode: self.renderMode)
        let started = ContinuousClock.now
        let download = HLSDownload(
            document,
            request: request,
            downloader: downloader,
            options: self.options.playlistOptions,
            logger: logger
        )
        let running = Task { () async -> Result<HLSDownload.Result, DownloadError> in
            do throws(DownloadError) {
                return .success(
                    try await download.run { progress in renderer.render(progress, elapsed: .now - started) }
                )
            } catch {
                return .failure(error)
            }
        }
        let interruptions = InterruptionHandler { running.cancel() }
        defer { interruptions.stop() }
        switch await running.value {
        case .success(let result):
            renderer.finished(result, elapsed: .now - started)
            return ExitStatus.success
        case .failure(let error):
            renderer.render(.failed(error))
            for line in Remedy.lines(for: error) { writeError(line) }
            if error.code == .cancelled {
                writeError("downpour: run the same command again to go on; the segments on disk are kept.")
            }
            return ExitStatus.code(for: error)
        }
    }
}
