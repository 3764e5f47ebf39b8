import Downpour
import DownpourAria2
import DownpourHLS
import Foundation
import Logging

extension GetPlan {
    /// The video of the HLS playlist `request` answered with (`document`), with a live progress line: `document`
    /// with the video's path and length. Cancelled (Ctrl-C), it stops with every whole segment kept for the same
    /// command to go on from.
    func fetchVideo(
        _ playlist: PlaylistDocument,
        of document: DownloadResult,
        request: DownloadRequest,
        downloader: Downloader,
        renderer: ProgressRenderer,
        logger: Logger
    ) async throws(DownloadError) -> DownloadResult {
        let started = ContinuousClock.now
        let download = HLSDownload(
            playlist,
            request: request,
            downloader: downloader,
            options: self.options.playlistOptions,
            logger: logger
        )
        do {
            let video = try await download.run { progress in renderer.render(progress, elapsed: .now - started) }
            renderer.finished(video, elapsed: .now - started)
            var result = document
            result.playlist = nil
            result.path = video.path
            result.length = video.length
            result.downloadedBytes += video.downloadedBytes
            result.elapsed += .now - started
            return result
        } catch {
            renderer.render(.failed(error))
            if error.code == .cancelled {
                writeError("downpour: run the same command again to go on; the whole segments on disk are kept.")
            }
            throw error
        }
    }
}
