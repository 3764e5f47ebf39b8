import Testing

@testable import Downpour

@Suite("Token bucket (bandwidth limit core)")
struct TokenBucketTests {
    /// Reads `chunk` bytes at a time, always waiting the delay returned, until the fake clock reaches `end`.
    /// Returns the bytes read and the time of the first read not made (the measured span).
    private static func readSteadily(
        _ bucket: inout TokenBucket,
        chunk: Int,
        from start: Double,
        until end: Double
    ) -> (bytes: Int64, elapsed: Double) {
        var now = start
        var bytes: Int64 = 0
        while now < end {
            bytes += Int64(chunk)
            now += bucket.reserve(chunk, now: now)
        }
        return (bytes, now - start)
    }

    @Test("no limit never delays")
    func unlimited() {
        var bucket = TokenBucket(rate: nil, now: 0)
        #expect(bucket.rate == nil)
        for (step, bytes) in [0, 1, 65_536, 1 << 30, Int.max].enumerated() {
            #expect(bucket.reserve(bytes, now: Double(step) * 0.001) == 0, "\(bytes) bytes")
        }
        var zero = TokenBucket(rate: 0, now: 0)
        #expect(zero.rate == nil, "zero means unlimited")
        #expect(zero.reserve(1 << 40, now: 0) == 0)
    }

    static let steadyCases: [(rate: Int64, chunk: Int)] = [
        (200_000, 65_536),
        (200_000, 16_384),
        (1_048_576, 65_536),
        (1_048_576, 16_384),
        (10_000_000, 65_536),
        (100 * 1_048_576, 16_384),
    ]

    @Test("a steady reader gets the rate within 1% over 10 s", arguments: Self.steadyCases)
    func steadyReader(rate: Int64, chunk: Int) {
        var bucket = TokenBucket(rate: rate, now: 100)
        let (bytes, elapsed) = Self.readSteadily(&bucket, chunk: chunk, from: 100, until: 110)
        let measured = Double(bytes) / elapsed
        #expect(elapsed >= 10)
        #expect(abs(measured - Double(rate)) <= Double(rate) * 0.01, "\(measured) B/s for \(rate) B/s")
    }

    /// (rate, explicit burst, expected burst): the default is rate / 20, at least 16 KiB.
    static let burstCases: [(rate: Int64, burst: Int64?, expected: Int)] = [
        (1_048_576, nil, 52_428),
        (100_000, nil, 16_384),
        (1, nil, 16_384),
        (1_048_576, 4_096, 4_096),
        (1_048_576, 1_000_000, 1_000_000),
        (1_048_576, 0, 0),
    ]

    @Test("a long idle lets at most the burst through at once", arguments: Self.burstCases)
    func burstIsCapped(rate: Int64, burst: Int64?, expected: Int) {
        var bucket = TokenBucket(rate: rate, burst: burst, now: 0)
        // Starts full.
        #expect(bucket.reserve(expected, now: 0) == 0)
        #expect(bucket.reserve(1, now: 0) > 0)
        // A day of idling refills to the burst and no further.
        var idle = TokenBucket(rate: rate, burst: burst, now: 0)
        _ = idle.reserve(expected, now: 0)
        #expect(idle.reserve(expected, now: 86_400) == 0)
        let delay = idle.reserve(1, now: 86_400)
        #expect(delay > 0)
        #expect(abs(delay - 1 / Double(rate)) <= 1e-9 * max(1, delay), "one byte of debt")
    }

    @Test("a new rate takes effect from then on")
    func rateChange() {
        var bucket = TokenBucket(rate: 1_048_576, now: 0)
        let fast = Self.readSteadily(&bucket, chunk: 16_384, from: 0, until: 5)
        let slowStart = fast.elapsed
        bucket.setRate(262_144, now: slowStart)
        #expect(bucket.rate == 262_144)
        let slow = Self.readSteadily(&bucket, chunk: 16_384, from: slowStart, until: slowStart + 5)
        let measured = Double(slow.bytes) / slow.elapsed
        #expect(abs(measured - 262_144) <= 262_144 * 0.01, "\(measured) B/s after slowing down")

        bucket.setRate(4 * 1_048_576, now: slowStart + slow.elapsed)
        let faster = Self.readSteadily(&bucket, chunk: 65_536, from: slowStart + slow.elapsed, until: 20)
        let measuredFaster = Double(faster.bytes) / faster.elapsed
        #expect(abs(measuredFaster - 4 * 1_048_576) <= 4 * 1_048_576 * 0.01, "\(measuredFaster) B/s after speeding up")
    }

    @Test("debt owed is re-expressed at the new rate; lifting the limit forgives it")
    func debtAcrossRateChanges() {
        var bucket = TokenBucket(rate: 1000, burst: 0, now: 0)
        #expect(bucket.reserve(10_000, now: 0) == 10)
        bucket.setRate(2000, now: 0)
        #expect(bucket.reserve(0, now: 0) == 5, "the same 10 000 bytes of debt at twice the rate")
        bucket.setRate(500, now: 1)
        #expect(bucket.reserve(0, now: 1) == 16, "8 000 bytes left after a second at 2000 B/s")

        bucket.setRate(nil, now: 2)
        #expect(bucket.rate == nil)
        #expect(bucket.reserve(1 << 30, now: 2) == 0)
        bucket.setRate(1000, now: 3)
        #expect(bucket.reserve(0, now: 3) == 0, "the debt was forgiven")
        #expect(bucket.reserve(1000, now: 3) == 1, "an explicit burst of 0 stays 0")
    }

    @Test("a default burst follows the rate; a new limit starts full")
    func defaultBurstFollowsRate() {
        var bucket = TokenBucket(rate: 1_048_576, now: 0)
        bucket.setRate(20_971_520, now: 0)
        // Not refilled to the larger burst by the change itself...
        #expect(bucket.reserve(52_428, now: 0) == 0)
        #expect(bucket.reserve(1, now: 0) > 0)
        // ...but able to build up to it while idle.
        _ = bucket.reserve(0, now: 60)
        #expect(bucket.reserve(1_048_576, now: 60) == 0)
        #expect(bucket.reserve(1, now: 60) > 0)

        var lifted = TokenBucket(rate: nil, now: 0)
        lifted.setRate(1_048_576, now: 5)
        #expect(lifted.reserve(52_428, now: 5) == 0)
        #expect(lifted.reserve(1, now: 5) > 0)
    }

    @Test("two readers sharing a bucket each get about half", arguments: [(65_536, 65_536), (16_384, 16_384)])
    func twoReaders(chunkA: Int, chunkB: Int) {
        let rate: Int64 = 2_097_152
        var bucket = TokenBucket(rate: rate, now: 0)
        var next = [0.0, 0.0]
        var bytes: [Int64] = [0, 0]
        let chunks = [chunkA, chunkB]
        // Each reader reads, then waits its delay; the reader due first goes next (A on ties).
        while true {
            let reader = next[0] <= next[1] ? 0 : 1
            let now = next[reader]
            guard now < 10 else { break }
            bytes[reader] += Int64(chunks[reader])
            next[reader] = now + bucket.reserve(chunks[reader], now: now)
        }
        let half = Double(rate) * 10 / 2
        for reader in 0..<2 {
            #expect(abs(Double(bytes[reader]) - half) <= half * 0.05, "reader \(reader): \(bytes[reader]) bytes")
        }
        let total = Double(bytes[0] + bytes[1])
        #expect(abs(total - Double(rate) * 10) <= Double(rate) * 10 * 0.01, "together they get the whole rate")
    }

    @Test("time going backwards neither crashes nor mints tokens")
    func timeGoingBackwards() {
        var bucket = TokenBucket(rate: 1000, burst: 0, now: 10)
        #expect(bucket.reserve(2000, now: 10) == 2)
        // An earlier time: nothing is refilled, the debt still counts, and the answer is sane.
        #expect(bucket.reserve(0, now: 5) == 2)
        #expect(bucket.reserve(1000, now: 0) == 3)
        #expect(bucket.reserve(0, now: -1e300) == 3)
        // Back at the latest time seen: the trip back and forth earned nothing.
        #expect(bucket.reserve(0, now: 10) == 3)
        // Later still, tokens build up from the latest time seen.
        #expect(bucket.reserve(0, now: 11) == 2)
        // Times that are not numbers are ignored.
        #expect(bucket.reserve(0, now: .nan) == 2)
        #expect(bucket.reserve(0, now: .infinity) == 2)
        #expect(bucket.reserve(0, now: 12) == 1)
        bucket.setRate(2000, now: -.infinity)
        #expect(bucket.reserve(0, now: 12) == 0.5)

        var fresh = TokenBucket(rate: 1000, burst: 0, now: .nan)
        #expect(fresh.reserve(1000, now: 0) == 1)
    }

    @Test("huge byte counts and rates do not overflow")
    func hugeNumbers() {
        var slow = TokenBucket(rate: 1, now: 0)
        let delay = slow.reserve(Int.max, now: 0)
        #expect(delay.isFinite && delay > 9e18)
        let more = slow.reserve(Int.max, now: 1)
        #expect(more.isFinite && more > delay)

        // A burst of Int64.max / 20, then Int64.max bytes per second.
        var fast = TokenBucket(rate: .max, now: 0)
        let fastDelay = fast.reserve(Int.max, now: 0)
        #expect(abs(fastDelay - 0.95) < 1e-6)
        #expect(abs(fast.reserve(Int.max, now: 1e15) - 0.95) < 1e-6, "refilled to the burst, no further")

        var explicit = TokenBucket(rate: 1_048_576, burst: .max, now: 0)
        #expect(explicit.reserve(Int.max, now: 0) == 0)
        #expect(explicit.reserve(-5, now: 0) == 0, "a negative count takes nothing")
    }
}
