/// Speed over a sliding window: the bytes counted in the last few seconds divided by the time they took.
public struct TransferRateMeter: Sendable {
    private var samples: [(time: Duration, bytes: Int64)] = []
    /// How far back the speed looks.
    public let window: Duration

    public init(window: Duration = .seconds(5)) {
        self.window = window
    }

    /// Adds a reading: `totalBytes` transferred so far, at `time` (any monotonic clock's offset).
    public mutating func record(totalBytes: Int64, at time: Duration) {
        self.samples.append((time, totalBytes))
        // Keep one sample older than the window so the window is always covered.
        while self.samples.count > 2, time - self.samples[1].time >= self.window {
            self.samples.removeFirst()
        }
    }

    /// Bytes per second over the window; 0 until there are two readings.
    public var bytesPerSecond: Double {
        guard let first = self.samples.first, let last = self.samples.last, last.time > first.time else { return 0 }
        return Double(last.bytes - first.bytes) / (last.time - first.time).inSeconds
    }
}
