import DownpourHLS
import Testing

@testable import DownpourQueue

/// ``PlaylistStage`` as a table: how each stop lands in each phase, and what the run then does.
@Suite("Playlist stage")
struct PlaylistStageTests {
    static func progress(live: Bool, done: Int = 1) -> HLSDownload.Progress {
        HLSDownload.Progress(
            path: "/d/v.ts",
            audioPath: nil,
            isLive: live,
            segmentsDone: done,
            segmentsTotal: 4,
            bytes: Int64(done) * 100,
            downloadedBytes: Int64(done) * 100,
            estimatedLength: done > 0 ? 400 : nil
        )
    }

    typealias Answer = PlaylistStage.StopAnswer

    @Test("before the playlist is in, the download answers: a cancel it takes stops the run, and nothing is taken")
    func downloadCancelled() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.stop(keepingSegments: true) { true } == Answer(accepted: true, cancelsTask: false))
        #expect(!stage.begin() && stage.endsByRequest)
        #expect(!stage.takeFinished())
        #expect(!stage.removesLeftovers)

        let removed = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(removed.stop(keepingSegments: false) { true } == Answer(accepted: true, cancelsTask: false))
        #expect(removed.removesLeftovers && !removed.begin())
    }

    @Test("a cancel the finishing download refuses: it completes, and should it be a playlist its segments wait")
    func downloadFinishing() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.stop(keepingSegments: true) { false } == Answer(accepted: false, cancelsTask: false))
        #expect(!stage.endsByRequest)
        // A second stop before the download's end is refused too: it would otherwise be acknowledged while the
        // download completes.
        #expect(stage.stop(keepingSegments: true) { false } == Answer(accepted: false, cancelsTask: false))
        #expect(!stage.begin())
        #expect(stage.endsByRequest)
        #expect(stage.phase == .stopped(keepingSegments: true))
        #expect(!stage.finishing())
    }

    @Test("the video an earlier run wrote is taken unless a stop came first; a stop after it is refused")
    func finishedEarlier() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.takeFinished())
        #expect(stage.stop(keepingSegments: true) { true } == Answer(accepted: false, cancelsTask: false))
    }

    @Test("fetching segments: a pause keeps them, a removal after it does not; the outputs are not written")
    func whileFetching() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.begin())
        stage.report(Self.progress(live: false))
        #expect(stage.stop(keepingSegments: true) { false } == Answer(accepted: true, cancelsTask: true))
        #expect(stage.phase == .stopped(keepingSegments: true) && stage.endsByRequest && !stage.removesLeftovers)
        #expect(stage.stop(keepingSegments: false) { false } == Answer(accepted: true, cancelsTask: true))
        #expect(stage.removesLeftovers)
        #expect(!stage.finishing())
    }

    @Test("writing the outputs is past the point of no return: a stop is refused, and is no stop of the run's")
    func whileFinishing() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.begin())
        #expect(stage.finishing())
        #expect(stage.stop(keepingSegments: true) { true } == Answer(accepted: false, cancelsTask: false))
        #expect(stage.stop(keepingSegments: false) { true } == Answer(accepted: false, cancelsTask: false))
        #expect(stage.phase == .finishing && !stage.endsByRequest)
    }

    @Test("a live recording: a pause ends it with what it recorded; a removal gives it up")
    func live() {
        let paused = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(paused.begin())
        paused.report(Self.progress(live: true))
        #expect(paused.stop(keepingSegments: true) { false } == Answer(accepted: false, cancelsTask: true))
        #expect(paused.endsByRequest)
        #expect(paused.finishing())

        let removed = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(removed.begin())
        removed.report(Self.progress(live: true))
        #expect(removed.stop(keepingSegments: false) { false } == Answer(accepted: true, cancelsTask: true))
        #expect(!removed.finishing() && removed.removesLeftovers)
    }

    @Test("the status: the last report, the segments under way as connections, no speed without a recent report")
    func snapshot() {
        let stage = PlaylistStage(concurrentSegments: 3, maximumRate: nil)
        #expect(stage.snapshot() == nil)
        #expect(stage.begin())
        let start = ContinuousClock.now
        stage.report(Self.progress(live: false, done: 0), at: start)
        stage.report(Self.progress(live: false, done: 2), at: start + .seconds(1))
        let now = stage.snapshot(at: start + .seconds(1))
        #expect(now?.progress.bytes == 200 && now?.connections == 2 && now?.bytesPerSecond == 200)
        #expect(stage.snapshot(at: start + .seconds(10))?.bytesPerSecond == 0)
    }
}
