import NIOConcurrencyHelpers
import Testing

@testable import Downpour

/// ``BandwidthLimiter`` and ``Pacing`` over an injected clock, as tables: the delays readers are told to wait, as
/// rates change and limiters combine. (``TokenBucket``, their core, has tests of its own.)
@Suite("BandwidthLimiter")
struct BandwidthLimiterTests {
    /// A clock the test moves.
    final class Clock: Sendable {
        private let seconds = NIOLockedValueBox(0.0)
        var now: Double { self.seconds.withLockedValue { $0 } }
        func advance(_ by: Double) { self.seconds.withLockedValue { $0 += by } }
    }

    enum Step: Sendable, CustomStringConvertible {
        /// `bytes` read now: the delay expected.
        case read(Int, delay: Double)
        case wait(Double)
        case setRate(Int64?)

        var description: String {
            switch self {
            case .read(let bytes, let delay): "read \(bytes) → \(delay) s"
            case .wait(let seconds): "wait \(seconds) s"
            case .setRate(let rate): "rate \(rate.map(String.init) ?? "none")"
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let rate: Int64?
        let steps: [Step]
        let note: String
        var testDescription: String { self.note }
    }

    /// 100,000 B/s has the smallest burst, 16 KiB (16,384 bytes).
    static let rows: [Row] = [
        Row(rate: nil, steps: [.read(10_000_000, delay: 0), .read(1, delay: 0)], note: "no limit: never a delay"),
        Row(
            rate: 100_000,
            steps: [.read(16_384, delay: 0), .read(50_000, delay: 0.5)],
            note: "the burst at once, then the debt at the rate"
        ),
        Row(
            rate: 100_000,
            steps: [.read(16_384, delay: 0), .read(50_000, delay: 0.5), .wait(0.5), .read(10_000, delay: 0.1)],
            note: "waiting the delay pays the debt; the next read waits for its own bytes"
        ),
        Row(
            rate: 100_000,
            steps: [.read(16_384, delay: 0), .wait(10), .read(16_384, delay: 0), .read(10_000, delay: 0.1)],
            note: "idle time refills no more than the burst"
        ),
        Row(
            rate: 100_000,
            steps: [.read(16_384, delay: 0), .read(50_000, delay: 0.5), .setRate(nil), .read(1_000_000, delay: 0)],
            note: "the limit lifted: no delay at once"
        ),
        Row(
            rate: nil,
            steps: [.read(5_000_000, delay: 0), .setRate(100_000), .read(16_384, delay: 0), .read(20_000, delay: 0.2)],
            note: "a limit set later counts only the reads after it"
        ),
    ]

    @Test("the delays a reader is told", arguments: rows)
    func delays(_ row: Row) {
        let clock = Clock()
        let limiter = BandwidthLimiter(rate: row.rate, clock: { clock.now })
        for (index, step) in row.steps.enumerated() {
            switch step {
            case .read(let bytes, let expected):
                let delay = limiter.delay(for: bytes)
                #expect(abs(delay - expected) < 1e-9, "step \(index): \(step), got \(delay)")
            case .wait(let seconds):
                clock.advance(seconds)
            case .setRate(let rate):
                limiter.setRate(rate)
                #expect(limiter.rate == rate)
            }
        }
    }

    @Test("pacing waits for the slowest of its limiters, and each limiter counts every read")
    func pacing() {
        let clock = Clock()
        let overall = BandwidthLimiter(rate: 100_000, clock: { clock.now })
        let own = BandwidthLimiter(rate: 200_000, clock: { clock.now })
        let pacing = Pacing(limiters: [overall, own])
        // Bursts: 16,384 and 16,384 (a twentieth of a second at 200,000 is 10,000, less than 16 KiB).
        #expect(pacing.delay(after: 16_384) == 0)
        #expect(abs(pacing.delay(after: 40_000) - 0.4) < 1e-9)
        // The download's own limiter was charged too: alone it asks for its debt at its rate.
        #expect(abs(own.delay(for: 0) - 0.2) < 1e-9)
        #expect(Pacing.unlimited.delay(after: 1_000_000) == 0)
    }

    @Test("the tightest rate is the lowest one set; none set is none")
    func tightestRate() {
        let none = BandwidthLimiter(rate: nil)
        #expect(Pacing(limiters: [none, BandwidthLimiter(rate: nil)]).tightestRate == nil)
        #expect(Pacing(limiters: [none, BandwidthLimiter(rate: 300), BandwidthLimiter(rate: 200)]).tightestRate == 200)
        #expect(Pacing.unlimited.tightestRate == nil)
    }

    struct RequestRow: Sendable, CustomStringConvertible {
        var range: Range<Int64>
        var rate: Int64?
        var connectionRate: Double?
        var roundTrip: Double? = nil
        var connections: Int
        var end: Int64
        var why: String
        var description: String { self.why }
    }

    static let requestRows: [RequestRow] = [
        .init(range: 0..<10_000_000, rate: nil, connectionRate: nil, connections: 4, end: 10_000_000, why: "no limit"),
        .init(range: 0..<10_000_000, rate: 0, connectionRate: nil, connections: 4, end: 10_000_000, why: "0 is none"),
        // 4,000,000 B/s: a tenth of a second is 400,000 bytes, 100,000 for each of 4 connections.
        .init(
            range: 1000..<10_000_000,
            rate: 4_000_000,
            connectionRate: nil,
            connections: 4,
            end: 1000 + 32_768,
            why: "the smallest step before it has a speed (the limit may be shared by other downloads)"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 500_000,
            connections: 4,
            end: 50_000,
            why: "a tenth of a second of its own speed"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 80_000_000,
            connections: 4,
            end: 100_000,
            why: "never more than a tenth of a second of its share (a burst read from the socket at once)"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 500_000,
            roundTrip: 0.1,
            connections: 4,
            end: 100_000,
            why: "two round trips of a far link when they are longer"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 80_000_000,
            roundTrip: 0.1,
            connections: 4,
            end: 200_000,
            why: "two round trips of its share at most"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 80_000_000,
            roundTrip: 2,
            connections: 4,
            end: 500_000,
            why: "half a second of its share at most, however far the server"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 4_000_000,
            connectionRate: 500_000,
            roundTrip: 0.001,
            connections: 4,
            end: 50_000,
            why: "a near link's round trips change nothing"
        ),
        .init(
            range: 0..<10_000_000,
            rate: 100_000,
            connectionRate: 10_000,
            connections: 4,
            end: 32_768,
            why: "never less than 32 KiB"
        ),
        .init(
            range: 0..<80_000,
            rate: 4_000_000,
            connectionRate: 500_000,
            connections: 4,
            end: 80_000,
            why: "the whole range when less than 32 KiB would be left"
        ),
        .init(
            range: 0..<90_000,
            rate: 4_000_000,
            connectionRate: 500_000,
            connections: 4,
            end: 50_000,
            why: "a step when 32 KiB or more is left"
        ),
    ]

    @Test("under a limit a request asks for a tenth of a second of reading", arguments: requestRows)
    func requestEnd(_ row: RequestRow) {
        let end = Pacing.requestEnd(
            of: row.range,
            rate: row.rate,
            connectionRate: row.connectionRate,
            roundTrip: row.roundTrip,
            connections: row.connections
        )
        #expect(end == row.end)
    }
}
