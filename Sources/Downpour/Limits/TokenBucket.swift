/// The core of a bandwidth limit: a token bucket with injected time, so it can be tested without a clock.
///
/// After a connection reads `n` bytes it calls ``reserve(_:now:)`` and waits the returned number of seconds before
/// reading more; the bucket itself never sleeps. Tokens are bytes. They build up at ``rate`` bytes per second, up to
/// `burst`, and a read may take more than there are: the balance then goes negative (debt), and the delay returned
/// is how long the current rate needs to bring it back to zero. Several readers can share one bucket (behind a lock
/// or in an actor): when each waits its delay, they share the rate in proportion to their read sizes (equally for
/// equal reads).
///
/// Time is seconds as a `Double` from any monotonic clock. Time that goes backwards is treated as standing still:
/// it neither mints tokens nor moves the bucket's own idea of "now" back.
///
/// ```swift
/// var bucket = TokenBucket(rate: 1_048_576, now: clock.seconds)
/// let delay = bucket.reserve(bytesRead, now: clock.seconds)
/// if delay > 0 { try await Task.sleep(for: .seconds(delay)) }
/// ```
struct TokenBucket: Sendable {
    /// The limit in bytes per second, or `nil` for no limit.
    private(set) var rate: Int64?

    /// The burst asked for at init, or `nil` to derive it from the rate.
    private let requestedBurst: Int64?

    /// The most tokens that can build up while idle.
    private var burst: Double

    /// Tokens available now; negative when reads have run ahead of the rate.
    private var tokens: Double

    /// The latest time seen; tokens are counted up to here.
    private var last: Double

    /// The smallest default burst, so that slow limits still let a usual read buffer through at once.
    private static let minimumDefaultBurst: Int64 = 16 * 1024

    /// Creates a full bucket.
    ///
    /// - Parameters:
    ///   - rate: Bytes per second; `nil` (or zero or less) means unlimited, and ``reserve(_:now:)`` always returns 0.
    ///   - burst: The most tokens that can build up while idle. By default a twentieth of a second at `rate`, and at
    ///     least 16 KiB; a default burst follows later rate changes, an explicit one stays.
    ///   - now: The current time in seconds.
    init(rate: Int64?, burst: Int64? = nil, now: Double) {
        self.rate = Self.normalized(rate)
        self.requestedBurst = burst.map { max($0, 0) }
        self.burst = Self.burst(requested: self.requestedBurst, rate: self.rate)
        self.tokens = self.burst
        self.last = now.isFinite ? now : 0
    }

    /// Changes the rate from `now` on.
    ///
    /// Tokens earned until `now` are counted at the old rate. Debt already owed stays owed and is paid off at the new
    /// rate. `nil` (or zero or less) lifts the limit and forgives the debt; setting a limit again starts a full bucket.
    mutating func setRate(_ rate: Int64?, now: Double) {
        self.advance(to: now)
        let wasLimited = self.rate != nil
        self.rate = Self.normalized(rate)
        self.burst = Self.burst(requested: self.requestedBurst, rate: self.rate)
        // Without a limit nothing is counted: the debt is dropped, and a later limit starts from a full bucket.
        self.tokens = wasLimited ? min(self.tokens, self.burst) : self.burst
    }

    /// Takes `bytes` tokens at `now` and returns how many seconds to wait before reading more.
    ///
    /// Returns 0 when there were enough tokens (or there is no limit). Negative counts are taken as 0, so
    /// `reserve(0, now:)` asks for the delay still owed without taking anything. The result is always finite, but
    /// can be very large for huge counts at a low rate; clamp it before turning it into a `Duration`.
    mutating func reserve(_ bytes: Int, now: Double) -> Double {
        self.advance(to: now)
        guard let rate = self.rate else { return 0 }
        self.tokens -= Double(max(bytes, 0))
        guard self.tokens < 0 else { return 0 }
        return -self.tokens / Double(rate)
    }

    /// Adds the tokens earned between the last time seen and `now`, up to the burst.
    private mutating func advance(to now: Double) {
        guard now.isFinite, now > self.last else { return }
        if let rate = self.rate, self.tokens < self.burst {
            self.tokens = min(self.burst, self.tokens + (now - self.last) * Double(rate))
        }
        self.last = now
    }

    private static func normalized(_ rate: Int64?) -> Int64? {
        guard let rate, rate > 0 else { return nil }
        return rate
    }

    private static func burst(requested: Int64?, rate: Int64?) -> Double {
        if let requested { return Double(requested) }
        guard let rate else { return Double(Self.minimumDefaultBurst) }
        return Double(max(rate / 20, Self.minimumDefaultBurst))
    }
}
