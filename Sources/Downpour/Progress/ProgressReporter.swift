import NIOConcurrencyHelpers

/// Turns session snapshots into ``DownloadProgress`` events, keeping the speed meters between calls.
final class ProgressReporter: Sendable {
    private struct Meters {
        var total = TransferRateMeter()
        var connections: [Int: TransferRateMeter] = [:]
    }

    private let session: TransferSession
    private let meters = NIOLockedValueBox(Meters())
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant

    init(session: TransferSession) {
        self.session = session
        self.start = self.clock.now
    }

    func report() {
        let snapshot = self.session.snapshot()
        let now = self.clock.now - self.start
        let progress = self.meters.withLockedValue { meters in
            meters.total.record(totalBytes: snapshot.bytesThisRun, at: now)
            let connections = snapshot.connections.map { entry in
                meters.connections[entry.id, default: TransferRateMeter()].record(
                    totalBytes: entry.state.receivedBytes,
                    at: now
                )
                return ConnectionProgress(
                    id: entry.id,
                    receivedBytes: entry.state.receivedBytes,
                    bytesPerSecond: meters.connections[entry.id]!.bytesPerSecond,
                    remainingRange: entry.remaining,
                    restarts: entry.state.restarts,
                    source: entry.source
                )
            }
            return DownloadProgress(
                completedBytes: snapshot.completedBytes,
                totalBytes: self.session.remoteFile.length,
                bytesPerSecond: meters.total.bytesPerSecond,
                activeConnections: snapshot.connections.filter { $0.state.active }.count,
                connections: connections,
                completedRanges: snapshot.completedRanges
            )
        }
        self.session.emit(.progress(progress))
    }
}
