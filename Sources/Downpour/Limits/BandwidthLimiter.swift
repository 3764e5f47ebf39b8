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

    /// The lowest limit set now, in bytes per second; `nil` when no limiter has one.
    var tightestRate: Int64? {
        self.limiters.compactMap(\.rate).filter { $0 > 0 }.min()
    }

    /// How far ahead of its reading a paced connection asks: about this many seconds of its own speed.
    ///
    /// A server writes a range into the socket as fast as the link lets it, while a limit reads it slowly. What
    /// was asked and not yet read is lost when the process dies (a fleet node killed, say), and asked again by
    /// whoever resumes. Asking a tenth of a second at a time keeps that loss small.
    static let lead = 0.1

    /// The most seconds of reading a paced connection asks for, however far its server.
    static let longestLead = 0.5

    /// The smallest request a paced connection makes, so that a slow limit does not cost a request per read.
    static let smallestRequest: Int64 = 32 * 1024

    /// Where the next request for `range` ends under a limit of `rate` bytes per second: about ``lead`` seconds of
    /// the connection's measured speed (`connectionRate`), or two of its round trips (`roundTrip`, its quickest
    /// wait for a response's head) when they are longer, up to ``longestLead``, so that a far link is not idle half
    /// the time between requests;
    /// never more than that time of its even share of the limit among `connections` (a burst read from the socket
    /// at once measures fast), never less than ``smallestRequest`` (also before it has a speed: the limit may be
    /// shared by other downloads too), and the whole range when what would be left after it is smaller than that.
    /// Without a limit, the whole range.
    static func requestEnd(
        of range: Range<Int64>,
        rate: Int64?,
        connectionRate: Double?,
        roundTrip: Double? = nil,
        connections: Int
    ) -> Int64 {
        guard let rate, rate > 0 else { return range.upperBound }
        let seconds = min(max(Self.lead, 2 * (roundTrip ?? 0)), Self.longestLead)
        let share = Double(rate) * seconds / Double(max(connections, 1))
        let size = max(Int64(min((connectionRate ?? 0) * seconds, share)), Self.smallestRequest)
        guard Int64(range.count) > size + Self.smallestRequest else { return range.upperBound }
        return range.lowerBound + size
    }
}
