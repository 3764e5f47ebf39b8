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
        var progress: HLSDownload.Progress?
        /// The bytes fetched in this run, when: the speed is the slope over the last ``window``.
        var samples: [(at: ContinuousClock.Instant, bytes: Int64)] = []
    }

    private static let window = Duration.seconds(3)
    private let state = NIOLockedValueBox(State())
    /// Segments fetched at once (``HLSDownload/Options/concurrentSegments``): the connections it shows.
    let concurrentSegments: Int

    init(concurrentSegments: Int) {
        self.concurrentSegments = concurrentSegments
    }

    var phase: Phase { self.state.withLockedValue { $0.phase } }

    /// The run handed over a playlist: from now on it fetches segments.
    func begin() {
        self.state.withLockedValue { state in
            if state.phase == .download { state.phase = .segments }
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
            switch state.phase {
            case .download:
                return .download
            case .segments where keepingSegments && state.progress?.isLive == true:
                return .finishing(recordingEnds: true)
            case .segments:
                state.phase = .stopped(keepingSegments: keepingSegments)
                return .stopped
            case .finishing:
                return .finishing(recordingEnds: false)
            case .stopped(let keeping):
                state.phase = .stopped(keepingSegments: keeping && keepingSegments)
                return .stopped
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
            if let first = state.samples.first, let last = state.samples.last {
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
