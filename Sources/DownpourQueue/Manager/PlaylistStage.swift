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
        /// Writing the outputs (or taking those an earlier run wrote): past the point of no return.
        case finishing
        /// Asked to stop: the segments stay for the next run unless `keepingSegments` is false.
        case stopped(keepingSegments: Bool)
        /// Asked to stop while the run's ``Download`` finished, which refused: it completes, or, should it be a
        /// playlist, stops before its segments (``begin()``). Every stop until then is refused too.
        case stopPending(keepingSegments: Bool)
    }

    /// What ``stop(keepingSegments:cancellingDownload:)`` did.
    struct StopAnswer: Sendable, Hashable {
        /// The run ends without completing; `false`: it completes (its file is being finished, or a live recording
        /// ends with what it recorded).
        var accepted: Bool
        /// The run's task is to be cancelled (which stops the segments, or ends a recording).
        var cancelsTask: Bool
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
        /// The run's ``Download`` accepted a cancel: it hands over nothing, and nothing an earlier run left is taken.
        var downloadCancelled = false
        /// The run was stopped as asked (its segments, or its recording): an end as cancelled is that stop's, not an
        /// error.
        var endsByRequest = false
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

    /// The run was stopped as asked: its end as cancelled is no error.
    var endsByRequest: Bool { self.state.withLockedValue { $0.endsByRequest } }

    /// Whether a removal (a stop that keeps nothing) reached the run.
    var removesLeftovers: Bool {
        self.state.withLockedValue { state in
            if case .stopped(keepingSegments: false) = state.phase { return true }
            return false
        }
    }

    /// The run handed over a playlist: from now on it fetches segments. `false` when it was asked to stop first: it
    /// stops instead.
    func begin() -> Bool {
        self.state.withLockedValue { state in
            if case .stopPending(let keeping) = state.phase { state.phase = .stopped(keepingSegments: keeping) }
            guard state.phase == .download, !state.downloadCancelled else {
                state.endsByRequest = true
                return false
            }
            state.phase = .segments
            return true
        }
    }

    /// The video an earlier run wrote is there: `true` when the run may complete with it (it was not stopped first).
    func takeFinished() -> Bool {
        self.state.withLockedValue { state in
            guard state.phase == .download, !state.downloadCancelled else { return false }
            state.phase = .finishing
            return true
        }
    }

    /// Every segment is on disk: `true` when the outputs may be written (the run was not stopped first).
    func finishing() -> Bool {
        self.state.withLockedValue { state in
            switch state.phase {
            case .download, .segments, .finishing:
                state.phase = .finishing
                return true
            case .stopped, .stopPending:
                return false
            }
        }
    }

    /// Asks the run to stop, in one step with its phase: before the playlist is in, `cancellingDownload` cancels the
    /// run's ``Download`` (its answer is the run's: a download past its point of no return completes, and should it
    /// be a playlist, its segments are not fetched). A live recording asked to stop while keeping its work ends as
    /// `get`'s Ctrl-C ends it: with what it recorded.
    func stop(keepingSegments: Bool, cancellingDownload: () -> Bool) -> StopAnswer {
        self.state.withLockedValue { state in
            switch state.phase {
            case .download:
                if cancellingDownload() {
                    state.downloadCancelled = true
                    if !keepingSegments { state.phase = .stopped(keepingSegments: false) }
                    return StopAnswer(accepted: true, cancelsTask: false)
                }
                state.phase = .stopPending(keepingSegments: keepingSegments)
                return StopAnswer(accepted: false, cancelsTask: false)
            case .stopPending(let keeping):
                state.phase = .stopPending(keepingSegments: keeping && keepingSegments)
                return StopAnswer(accepted: false, cancelsTask: false)
            case .stopped(let keeping):
                state.phase = .stopped(keepingSegments: keeping && keepingSegments)
                return StopAnswer(accepted: true, cancelsTask: true)
            case .segments where keepingSegments && state.progress?.isLive == true:
                state.endsByRequest = true
                return StopAnswer(accepted: false, cancelsTask: true)
            case .segments:
                state.phase = .stopped(keepingSegments: keepingSegments)
                state.endsByRequest = true
                return StopAnswer(accepted: true, cancelsTask: true)
            case .finishing:
                return StopAnswer(accepted: false, cancelsTask: false)
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
