import Downpour
import DownpourHLS
import Foundation
import NIOConcurrencyHelpers

/// Prints download events for people: a live line on a terminal, a plain line every few seconds otherwise.
final class ProgressRenderer: Sendable {
    enum Mode {
        case terminal, lines, quiet
    }

    private let mode: Mode
    private let lastLine = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
    private static let lineInterval: Duration = .seconds(1)

    init(mode: Mode) {
        self.mode = mode
    }

    func render(_ event: DownloadEvent) {
        guard self.mode != .quiet else { return }
        switch event {
        case .started(let start):
            let length = start.remoteFile.length.map { ByteCount.format($0) } ?? "unknown size"
            var line = "Downloading \(start.remoteFile.url.absoluteString) (\(length))"
            line +=
                start.remoteFile.isSegmentable
                ? " over up to \(start.connections) connections" : " as one stream (no ranges)"
            line += " to \(start.destinationPath)"
            self.printLine(line)
            if start.resumedBytes > 0 {
                let total = start.remoteFile.length.map { " of " + ByteCount.format($0) } ?? ""
                self.printLine(
                    "Resuming: \(ByteCount.format(start.resumedBytes))\(total) already on disk; fetching the rest."
                )
            }
        case .notice(let message):
            self.clearLine()
            writeError("downpour: \(message)")
        case .paused:
            self.clearLine()
            self.printLine("Paused.")
        case .resumed:
            self.printLine("Resumed.")
        case .progress(let progress):
            self.live(Self.describe(progress))
        case .restarted(let connection, let reason):
            self.clearLine()
            writeError("connection \(connection): \(reason)")
        case .retrying(let connection, let attempt, let delay, let reason):
            self.clearLine()
            writeError("connection \(connection): \(reason) Retry \(attempt) in \(Self.seconds(delay)) s.")
        case .finished(let result) where result.wasSkipped:
            self.printLine("\(result.path) is as new as the remote file; nothing downloaded.")
        case .finished(let result) where result.playlist != nil:
            self.clearLine()
            self.printLine("\(result.remoteFile.url.absoluteString) is an HLS playlist; fetching its segments.")
        case .finished(let result) where result.metalink != nil:
            self.clearLine()
            let count = result.metalink?.files.count ?? 0
            self.printLine(
                "\(result.remoteFile.url.absoluteString) is a Metalink of \(count) file(s); downloading "
                    + (count == 1 ? "it." : "them.")
            )
        case .finished(let result):
            self.clearLine()
            let seconds = result.elapsed.inSeconds
            let speed = seconds > 0 ? Double(result.downloadedBytes) / seconds : 0
            self.printLine(
                "Saved \(result.path) (\(ByteCount.format(result.length))) in \(Self.seconds(result.elapsed)) s, "
                    + "\(ByteCount.formatRate(speed)), \(result.connectionsUsed) connection(s)"
                    + Self.waste(result) + "."
            )
        case .failed:
            self.clearLine()
        }
    }

    /// A line of an HLS download's progress: live on a terminal, one a second otherwise.
    func render(_ progress: HLSDownload.Progress, elapsed: Duration) {
        guard self.mode != .quiet else { return }
        let seconds = elapsed.inSeconds
        let speed = seconds > 0 ? Double(progress.downloadedBytes) / seconds : 0
        var parts = ["\(progress.segmentsDone)/\(progress.segmentsTotal) segments"]
        parts.append(
            ByteCount.format(progress.bytes) + (progress.estimatedLength.map { " / ~" + ByteCount.format($0) } ?? "")
        )
        parts.append(ByteCount.formatRate(speed))
        if speed > 0, let estimate = progress.estimatedLength, estimate > progress.bytes {
            parts.append("ETA " + Self.clock(.seconds(Double(estimate - progress.bytes) / speed)))
        }
        self.live(parts.joined(separator: "  "), always: progress.segmentsDone == progress.segmentsTotal)
    }

    /// A progress line: redrawn in place on a terminal; otherwise printed at most once a ``lineInterval`` (and
    /// `always` when it is the last).
    private func live(_ line: String, always: Bool = false) {
        if self.mode == .terminal {
            self.write("\r\u{1B}[K" + line)
            return
        }
        let now = ContinuousClock.now
        let due = self.lastLine.withLockedValue { last in
            guard let previous = last, now - previous < Self.lineInterval else {
                last = now
                return true
            }
            return false
        }
        if due || always { self.printLine(line) }
    }

    /// The line an HLS download ends with.
    func finished(_ result: HLSDownload.Result, elapsed: Duration) {
        guard self.mode != .quiet else { return }
        self.clearLine()
        let seconds = elapsed.inSeconds
        let speed = seconds > 0 ? Double(result.downloadedBytes) / seconds : 0
        var line = "Saved \(result.path) (\(ByteCount.format(result.length)), \(result.segments) segments) in "
        line += "\(Self.seconds(elapsed)) s, \(ByteCount.formatRate(speed))"
        if let audio = result.audioPath { line += "; its audio in \(audio)" }
        if !result.subtitlesPaths.isEmpty { line += "; subtitles in " + result.subtitlesPaths.joined(separator: ", ") }
        self.printLine(line + ".")
    }

    /// What came for nothing (``DownloadResult/wastedBytes``), as a clause to end a line with; empty when nothing
    /// did.
    static func waste(_ result: DownloadResult) -> String {
        result.wastedBytes > 0 ? "; \(ByteCount.format(result.wastedBytes)) received twice or unwanted" : ""
    }

    static func describe(_ progress: DownloadProgress) -> String {
        var parts: [String] = []
        if let fraction = progress.fractionCompleted {
            parts.append(String(format: "%5.1f%%", fraction * 100))
        }
        let total = progress.totalBytes.map { " / " + ByteCount.format($0) } ?? ""
        parts.append(ByteCount.format(progress.completedBytes) + total)
        parts.append(ByteCount.formatRate(progress.bytesPerSecond))
        if let eta = progress.estimatedTimeRemaining {
            parts.append("ETA " + Self.clock(eta))
        }
        parts.append("\(progress.activeConnections) conn")
        return parts.joined(separator: "  ")
    }

    private static func clock(_ duration: Duration) -> String {
        let total = duration.components.seconds
        let (hours, minutes, seconds) = (total / 3600, (total % 3600) / 60, total % 60)
        return hours > 0
            ? String(format: "%d:%02d:%02d", hours, minutes, seconds) : String(format: "%d:%02d", minutes, seconds)
    }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f", duration.inSeconds)
    }

    private func clearLine() {
        if self.mode == .terminal { self.write("\r\u{1B}[K") }
    }

    private func printLine(_ line: String) {
        self.write(line + "\n")
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
