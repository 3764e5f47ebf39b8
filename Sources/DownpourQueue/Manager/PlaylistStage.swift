import Downpour
import DownpourHLS
import NIOConcurrencyHelpers

/// The second stage of a run whose URL answered with an HLS playlist: the segments fetched and written as one video
/// (``HLSDownload``). The run's task moves it on; the manager reads its progress and stops it. Until the playlist is
/// in, the run is its ``Download``, which answers for itself.
final class PlaylistStage: Sendable {
    enum Phase: Sendable, Hashable {
        /// The run's ``Download`` has not handed over a playlist (and may never).
        case download
        /// Fetching segments; recording them, for a live playlist.
        case segments
        /// Writing the outputs: past the point of no return.
        case finishing
        /// Asked to stop while fetching segments: they stay for the next run unless `keepingSegments` is false.
        case stopped(keepingSegments: Bool)
    }

    /// What ``stop(keepingSegments:)`` did.
    enum StopAnswer: Sendable, Hashable {
        /// Nothing: the run is still its ``Download``, which is to be cancelled instead.
        case download
        /// The run is to be cancelled; it ends without its outputs.
        case stopped
        /// The run is writing its outputs, or, `recordingEnds`, a live recording is to be cancelled, which ends it with
        /// what it recorded: either way it completes.
        case finishing(recordingEnds: Bool)
    }

    /// The progress the manager shows: the last report and the speed over the last few seconds.
    struct Snapshot: Sendable, Hashable {
        var progress: HLSDownload.Progress
        var bytesPerSecond: Int64
        /// Segment fetches under way: one connection each.
        var connections: Int
    }

    private struct State {
        var phase = Phase.download
        /// A stop was asked for: a run that then ends without its outputs ended as asked, not in error.
        var stopRequested = false
        var progress: HLSDownload.Progress?
        /// The bytes fetched in this run, when: the speed is the slope over the last ``window``.
        var samples: [(at: ContinuousClock.Instant, bytes: Int64)] = []
    }

    private static let window = Duration.seconds(3)
    private let state = NIOLockedValueBox(State())
    /// Segments fetched at once (``HLSDownload/Options/concurrentSegments``): the connections it shows.
    let concurrentSegments: Int
    /// The download's rate limit, shared by the segments: `max-download-limit` changes it while they come.
    let limiter: BandwidthLimiter

    init(concurrentSegments: Int, maximumRate: Int64?) {
        self.concurrentSegments = concurrentSegments
        self.limiter = BandwidthLimiter(rate: maximumRate)
    }

    var phase: Phase { self.state.withLockedValue { $0.phase } }

    var stopRequested: Bool { self.state.withLockedValue { $0.stopRequested } }

    /// The run handed over a playlist: from now on it fetches segments. `false` when it was asked to stop meanwhile
    /// (``stopBeforeSegments(keepingSegments:)``): it stops instead.
    func begin() -> Bool {
        self.state.withLockedValue { state in
            guard state.phase == .download else { return false }
            state.phase = .segments
            return true
        }
    }

    /// A stop came while the run's ``Download`` was past its point of no return: should that download turn out to be
    /// a playlist, its segments are not fetched (``begin()``).
    func stopBeforeSegments(keepingSegments: Bool) {
        self.state.withLockedValue { state in
            state.stopRequested = true
            if state.phase == .download { state.phase = .stopped(keepingSegments: keepingSegments) }
        }
    }

    /// Every segment is on disk: `true` when the outputs may be written (the run was not stopped first).
    func finishing() -> Bool {
        self.state.withLockedValue { state in
            switch state.phase {
            case .download, .segments, .finishing:
                state.phase = .finishing
                return true
            case .stopped:
                return false
            }
        }
    }

    /// Asks the stage to stop. A live recording asked to stop while keeping its work ends as `get`'s Ctrl-C ends it:
    /// with what was recorded saved.
    func stop(keepingSegments: Bool) -> StopAnswer {
        self.state.withLockedValue { state in
            if state.phase != .download { state.stopRequested = true }
            switch state.phase {
            case .download:
                return .download
            case .stopped(let keeping):
                state.phase = .stopped(keepingSegments: keeping && keepingSegments)
                return .stopped
            case .segments where keepingSegments && state.progress?.isLive == true:
                return .finishing(recordingEnds: true)
            case .segments:
                state.phase = .stopped(keepingSegments: keepingSegments)
                return .stopped
            case .finishing:
                return .finishing(recordingEnds: false)
            }
        }
    }

    func report(_ progress: HLSDownload.Progress, at now: ContinuousClock.Instant = .now) {
        self.state.withLockedValue { state in
            state.progress = progress
            state.samples.append((now, progress.downloadedBytes))
            // One sample older than the window stays, so the slope spans all of it.
            while state.samples.count > 2, now - state.samples[1].at > Self.window { state.samples.removeFirst() }
        }
    }

    /// The last progress, with the speed as of `now`; `nil` before the first report.
    func snapshot(at now: ContinuousClock.Instant = .now) -> Snapshot? {
        self.state.withLockedValue { state in
            guard let progress = state.progress else { return nil }
            var speed: Int64 = 0
            if let first = state.samples.first, let last = state.samples.last, now - last.at <= Self.window {
                let span = now - first.at
                let seconds = Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18
                if seconds > 0 { speed = Int64(Double(last.bytes - first.bytes) / max(seconds, 1)) }
            }
            let fetching =
                state.phase == .segments
                ? min(self.concurrentSegments, progress.segmentsTotal - progress.segmentsDone) : 0
            return Snapshot(progress: progress, bytesPerSecond: speed, connections: max(0, fetching))
        }
    }
}
