/// Finds connections worth restarting: those whose speed over a whole window stays far below the other
/// connections' (a slow path or a slow server behind a load balancer; a new connection often gets a better
/// one), or below an absolute floor. A pure value type: it sees readings and a clock value, nothing else.
struct SlowConnectionDetector {
    /// What one active connection has done so far.
    struct Reading: Equatable {
        var connection: Int
        /// Changes whenever the connection starts a new request; a new request starts a new measurement.
        var attempt: Int
        /// Bytes this connection has written in total.
        var bytes: Int64
        /// Bytes its current range still needs.
        var remaining: Int64
    }

    /// Also the error that ends the judged connection's request.
    struct Verdict: Equatable, Error {
        var connection: Int
        /// Bytes per second over the window.
        var speed: Double
        /// Whether it was judged against the absolute floor (`true`) or against the other connections.
        var belowFloor: Bool
        /// The speed it was judged against: the floor, or the median of the others.
        var reference: Double
        /// The request that was measured (``Reading/attempt``).
        var attempt: Int
    }

    let window: Double
    let shareOfMedian: Double?
    let lowestSpeed: Double?

    private var history: [Int: (attempt: Int, samples: [(time: Double, bytes: Int64)])] = [:]

    init(window: Duration, shareOfMedian: Double?, lowestSpeed: Int64?) {
        self.window = max(window.inSeconds, 0.001)
        self.shareOfMedian = shareOfMedian
        self.lowestSpeed = lowestSpeed.map(Double.init)
    }

    var isEnabled: Bool { self.shareOfMedian != nil || self.lowestSpeed != nil }

    /// Records `readings` (the connections active now) taken at `now` (seconds, any origin) and returns the
    /// connections to restart. A connection is judged only once it has been measured for a whole window on
    /// one request, and not when its range would be done within a window anyway (racing the tail is cheaper).
    /// A connection returned starts a new measurement.
    mutating func check(_ readings: [Reading], now: Double) -> [Verdict] {
        let active = Set(readings.map(\.connection))
        self.history = self.history.filter { active.contains($0.key) }
        var speeds: [Int: Double] = [:]
        for reading in readings {
            var entry = self.history[reading.connection] ?? (reading.attempt, [])
            if entry.attempt != reading.attempt {
                entry = (reading.attempt, [])
            }
            entry.samples.append((now, reading.bytes))
            // Keep the newest sample at least a window old as the base, and everything after it.
            if let base = entry.samples.lastIndex(where: { $0.time <= now - self.window }), base > 0 {
                entry.samples.removeFirst(base)
            }
            self.history[reading.connection] = entry
            if let first = entry.samples.first, first.time <= now - self.window, now > first.time {
                speeds[reading.connection] = Double(reading.bytes - first.bytes) / (now - first.time)
            }
        }
        var verdicts: [Verdict] = []
        for reading in readings {
            guard let speed = speeds[reading.connection] else { continue }
            if Double(reading.remaining) <= speed * self.window { continue }
            if let floor = self.lowestSpeed, speed < floor {
                verdicts.append(
                    Verdict(
                        connection: reading.connection,
                        speed: speed,
                        belowFloor: true,
                        reference: floor,
                        attempt: reading.attempt
                    )
                )
                continue
            }
            let others = speeds.filter { $0.key != reading.connection }.map(\.value).sorted()
            if let share = self.shareOfMedian, !others.isEmpty {
                let median =
                    others.count % 2 == 1
                    ? others[others.count / 2] : (others[others.count / 2 - 1] + others[others.count / 2]) / 2
                if speed < share * median {
                    verdicts.append(
                        Verdict(
                            connection: reading.connection,
                            speed: speed,
                            belowFloor: false,
                            reference: median,
                            attempt: reading.attempt
                        )
                    )
                }
            }
        }
        for verdict in verdicts {
            self.history[verdict.connection] = nil
        }
        return verdicts
    }
}
