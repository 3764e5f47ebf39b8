import Downpour
import Foundation
import NIOConcurrencyHelpers

/// Prints a batch of downloads for people. On a terminal: one live line per active download and a total line,
/// redrawn at most every 200 ms, with finished and failed downloads printed above them for good. Otherwise a
/// plain line per download that ends, and a total line every second.
final class BatchRenderer: Sendable {
    private struct Active {
        var name: String
        var progress: DownloadProgress?
    }

    private struct State {
        var total = 0
        var finished = 0
        var failed = 0
        var active: [Int: Active] = [:]
        var drawnLines = 0
        var lastDraw: ContinuousClock.Instant?
        var bytesDone: Int64 = 0
        var started = ContinuousClock.now
    }

    private let mode: ProgressRenderer.Mode
    private let state = NIOLockedValueBox(State())

    init(mode: ProgressRenderer.Mode) {
        self.mode = mode
    }

    var isQuiet: Bool {
        self.mode == .quiet
    }

    func begin(total: Int) {
        self.state.withLockedValue {
            $0.total = total
            $0.started = .now
        }
    }

    func render(_ event: DownloadEvent, of index: Int, url: String) {
        guard self.mode != .quiet else { return }
        self.state.withLockedValue { state in
            var permanent: [String] = []
            switch event {
            case .started(let start):
                state.active[index] = Active(name: (start.destinationPath as NSString).lastPathComponent)
            case .progress(let progress):
                state.active[index]?.progress = progress
            case .notice(let message):
                permanent.append("downpour: \(message)")
            case .finished(let result) where result.playlist != nil:
                // Its segments come next, in the same slot (``playlistEnded(_:of:url:)``).
                permanent.append("HLS playlist \(url): fetching its segments")
            case .finished(let result) where result.metalink != nil:
                // Not a download of its own: its files join the batch (``addMetalinkFiles(_:)``).
                state.active[index] = nil
                permanent.append("Metalink \(url): \(result.metalink?.files.count ?? 0) file(s) to download")
            case .finished(let result):
                state.active[index] = nil
                state.finished += 1
                state.bytesDone += result.downloadedBytes
                permanent.append(
                    "[\(state.finished + state.failed)/\(state.total)] "
                        + (result.wasSkipped ? "Up to date: " : "Saved ")
                        + "\(result.path) (\(ByteCount.format(result.length)))"
                        + ProgressRenderer.waste(result)
                )
            case .failed(let error):
                state.active[index] = nil
                if error.code != .cancelled {
                    state.failed += 1
                    permanent.append(
                        "[\(state.finished + state.failed)/\(state.total)] FAILED \(url): \(error.message)"
                    )
                }
            case .paused, .resumed, .retrying, .restarted:
                break
            }
            self.draw(&state, permanent: permanent)
        }
    }

    /// An entry whose URL was an HLS playlist ended: its video was saved, or it failed.
    func playlistEnded(_ outcome: Result<DownloadResult, DownloadError>, of index: Int, url: String) {
        switch outcome {
        case .success(let result): self.render(.finished(result), of: index, url: url)
        case .failure(let error): self.render(.failed(error), of: index, url: url)
        }
    }

    /// The files of a Metalink document that an entry answered with join the batch: the entry itself is no
    /// longer counted as a download, its `count` files are.
    func addMetalinkFiles(_ count: Int) {
        self.state.withLockedValue { $0.total += count - 1 }
    }

    /// An entry's Metalink document was read, but its files could not be made into downloads: a failure.
    func metalinkFailed(url: String, _ error: DownloadError) {
        guard self.mode != .quiet else { return }
        self.state.withLockedValue { state in
            state.failed += 1
            let line = "[\(state.finished + state.failed)/\(state.total)] FAILED \(url): \(error.message)"
            self.draw(&state, permanent: [line])
        }
    }

    /// Prints a line above the live block.
    func line(_ text: String) {
        guard self.mode != .quiet else { return }
        self.state.withLockedValue { self.draw(&$0, permanent: [text], force: true) }
    }

    func end() {
        guard self.mode == .terminal else { return }
        self.state.withLockedValue { state in
            state.active = [:]
            self.draw(&state, permanent: [], force: true)
        }
    }

    private func draw(_ state: inout State, permanent: [String], force: Bool = false) {
        let now = ContinuousClock.now
        switch self.mode {
        case .quiet:
            return
        case .lines:
            var text = permanent.map { $0 + "\n" }.joined()
            if force || state.lastDraw.map({ now - $0 >= .seconds(1) }) ?? true, !state.active.isEmpty {
                state.lastDraw = now
                text += Self.totalLine(state, now: now) + "\n"
            }
            Self.write(text)
        case .terminal:
            guard force || !permanent.isEmpty || state.lastDraw.map({ now - $0 >= .milliseconds(200) }) ?? true
            else { return }
            state.lastDraw = now
            // Up to the first live line, clear to the end of the screen, print, then the live block again.
            var text = state.drawnLines > 0 ? "\u{1B}[\(state.drawnLines)A\r\u{1B}[J" : "\r\u{1B}[J"
            text += permanent.map { $0 + "\n" }.joined()
            var live: [String] = []
            if !state.active.isEmpty {
                for index in state.active.keys.sorted().prefix(Self.maximumLiveLines) {
                    let active = state.active[index]!
                    let detail = active.progress.map(ProgressRenderer.describe) ?? "starting"
                    live.append(Self.fit(active.name, 32) + "  " + detail)
                }
                if state.active.count > Self.maximumLiveLines {
                    live.append("… and \(state.active.count - Self.maximumLiveLines) more")
                }
                live.append(Self.totalLine(state, now: now))
            }
            text += live.map { $0 + "\n" }.joined()
            state.drawnLines = live.count
            Self.write(text)
        }
    }

    static let maximumLiveLines = 20

    private static func totalLine(_ state: State, now: ContinuousClock.Instant) -> String {
        let speed = state.active.values.reduce(0.0) { $0 + ($1.progress?.bytesPerSecond ?? 0) }
        return "Total: \(state.finished) of \(state.total) done, \(state.failed) failed, \(state.active.count) active, "
            + ByteCount.formatRate(speed)
    }

    private static func fit(_ text: String, _ width: Int) -> String {
        if text.count > width { return String(text.prefix(width - 1)) + "…" }
        return text + String(repeating: " ", count: width - text.count)
    }

    private static func write(_ text: String) {
        guard !text.isEmpty else { return }
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
