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

    @Test("before the playlist is in, the download answers; a stop it refused keeps the segments from starting")
    func beforeSegments() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.stop(keepingSegments: true) == .download)
        #expect(!stage.stopRequested)
        stage.stopBeforeSegments(keepingSegments: true)
        #expect(stage.stopRequested)
        #expect(!stage.begin())
        #expect(stage.phase == .stopped(keepingSegments: true))
        #expect(!stage.finishing())
    }

    @Test("fetching segments: a pause keeps them, a removal after it does not; the outputs are not written")
    func whileFetching() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.begin())
        stage.report(Self.progress(live: false))
        #expect(stage.stop(keepingSegments: true) == .stopped)
        #expect(stage.phase == .stopped(keepingSegments: true) && stage.stopRequested)
        #expect(stage.stop(keepingSegments: false) == .stopped)
        #expect(stage.phase == .stopped(keepingSegments: false))
        #expect(!stage.finishing())
    }

    @Test("writing the outputs is past the point of no return: a stop is refused")
    func whileFinishing() {
        let stage = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(stage.begin())
        #expect(stage.finishing())
        #expect(stage.stop(keepingSegments: true) == .finishing(recordingEnds: false))
        #expect(stage.stop(keepingSegments: false) == .finishing(recordingEnds: false))
        #expect(stage.phase == .finishing)
    }

    @Test("a live recording: a pause ends it with what it recorded; a removal gives it up")
    func live() {
        let paused = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(paused.begin())
        paused.report(Self.progress(live: true))
        #expect(paused.stop(keepingSegments: true) == .finishing(recordingEnds: true))
        #expect(paused.stopRequested)
        #expect(paused.finishing())

        let removed = PlaylistStage(concurrentSegments: 4, maximumRate: nil)
        #expect(removed.begin())
        removed.report(Self.progress(live: true))
        #expect(removed.stop(keepingSegments: false) == .stopped)
        #expect(!removed.finishing())
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
