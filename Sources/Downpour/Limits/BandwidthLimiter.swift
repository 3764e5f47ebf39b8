import NIOConcurrencyHelpers

/// A ``TokenBucket`` shared by the connections it paces, on a monotonic clock: each connection reports the bytes
/// it read and waits the delay it gets back before reading more. Its rate can change at any time.
package final class BandwidthLimiter: Sendable {
    private let bucket: NIOLockedValueBox<TokenBucket>
    /// Seconds on a monotonic clock.
    private let clock: @Sendable () -> Double

    /// - Parameters:
    ///   - rate: bytes per second; `nil` for no limit.
    ///   - clock: seconds on a monotonic clock (tests give their own); by default the continuous clock's since now.
    package init(rate: Int64?, clock: (@Sendable () -> Double)? = nil) {
        let start = ContinuousClock.now
        let clock = clock ?? { (ContinuousClock.now - start).inSeconds }
        self.clock = clock
        self.bucket = NIOLockedValueBox(TokenBucket(rate: rate, now: clock()))
    }

    private var now: Double {
        self.clock()
    }

    package var rate: Int64? {
        self.bucket.withLockedValue { $0.rate }
    }

    package func setRate(_ rate: Int64?) {
        let now = self.now
        self.bucket.withLockedValue { $0.setRate(rate, now: now) }
    }

    /// Takes `bytes` from the budget; returns the seconds to wait before reading more (0: none).
    func delay(for bytes: Int) -> Double {
        let now = self.now
        return self.bucket.withLockedValue { bucket in
            bucket.rate == nil ? 0 : bucket.reserve(bytes, now: now)
        }
    }
}

/// The limiters one connection's bytes go through: the whole ``Downloader``'s and its own download's.
struct Pacing: Sendable {
    var limiters: [BandwidthLimiter]

    static let unlimited = Pacing(limiters: [])

    /// Seconds to wait after reading `bytes`: the longest any limiter asks for.
    func delay(after bytes: Int) -> Double {
        var longest = 0.0
        for limiter in self.limiters {
            longest = max(longest, limiter.delay(for: bytes))
        }
        return longest
    }
}
