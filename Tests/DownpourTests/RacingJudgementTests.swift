import Testing

@testable import Downpour

/// When a tail is raced (its bytes then come twice): only with evidence that it comes slowly. A table over an
/// injected clock: no timing of real transfers.
@Suite("Racing a tail")
struct RacingJudgementTests {
    static let start = ContinuousClock.now
    static let now = start + .seconds(10)
    static let megabyte = 1_000_000.0

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// The holder's moving average (bytes per second), if measured.
        var rate: Double?
        /// Seconds before `now` its current request started, and it last wrote (`nil`: not in this request).
        var requestAge: Double
        var lastWrite: Double?
        var remaining: Int64
        var others: [Double]
        var expected: Bool
        /// `false`: between two requests of its lease (waiting to retry).
        var active = true

        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(
            name: "a fast tail",
            rate: 100 * megabyte,
            requestAge: 1,
            lastWrite: 0.01,
            remaining: 50_000_000,
            others: [100 * megabyte, 90 * megabyte],
            expected: false
        ),
        Case(
            name: "a slow tail with seconds to go",
            rate: 1 * megabyte,
            requestAge: 5,
            lastWrite: 0.1,
            remaining: 5_000_000,
            others: [10 * megabyte, 10 * megabyte],
            expected: true
        ),
        Case(
            name: "a slow tail about to end",
            rate: 1 * megabyte,
            requestAge: 5,
            lastWrite: 0.1,
            remaining: 300_000,
            others: [10 * megabyte],
            expected: false
        ),
        Case(
            name: "no other connection to compare with, silent for seconds",
            rate: 1 * megabyte,
            requestAge: 5,
            lastWrite: 3,
            remaining: 5_000_000,
            others: [],
            expected: true
        ),
        Case(
            name: "waiting to retry for seconds",
            rate: 10 * megabyte,
            requestAge: 5,
            lastWrite: 3,
            remaining: 5_000_000,
            others: [10 * megabyte],
            expected: true,
            active: false
        ),
        Case(
            name: "waiting to retry for a moment",
            rate: 10 * megabyte,
            requestAge: 5,
            lastWrite: 0.5,
            remaining: 5_000_000,
            others: [10 * megabyte],
            expected: false,
            active: false
        ),
        Case(
            name: "no other connection to compare with",
            rate: 1 * megabyte,
            requestAge: 5,
            lastWrite: 0.1,
            remaining: 5_000_000,
            others: [],
            expected: false
        ),
        Case(
            name: "waiting for its first bytes, within the grace",
            rate: nil,
            requestAge: 1,
            lastWrite: nil,
            remaining: 5_000_000,
            others: [10 * megabyte],
            expected: false
        ),
        Case(
            name: "waiting for its first bytes, past the grace",
            rate: nil,
            requestAge: 3,
            lastWrite: nil,
            remaining: 5_000_000,
            others: [10 * megabyte],
            expected: true
        ),
        Case(
            name: "a pause shorter than the grace (a burst of disk writes)",
            rate: 10 * megabyte,
            requestAge: 5,
            lastWrite: 0.3,
            remaining: 50_000_000,
            others: [10 * megabyte],
            expected: false
        ),
        Case(
            name: "a stall of seconds",
            rate: 10 * megabyte,
            requestAge: 5,
            lastWrite: 3,
            remaining: 50_000_000,
            others: [10 * megabyte],
            expected: true
        ),
    ]

    @Test("only a tail measured to come slowly, with time left to gain, is raced", arguments: cases)
    func judgement(_ row: Case) {
        var holder = TransferSession.ConnectionState()
        holder.active = row.active
        holder.recent = row.rate.map { ($0, 1) }
        holder.requestStarted = Self.now - .seconds(row.requestAge)
        holder.wroteSinceRequest = row.lastWrite != nil
        holder.lastProgress = row.lastWrite.map { Self.now - .seconds($0) } ?? holder.requestStarted
        let verdict = TransferSession.isWorthRacing(
            holder,
            remaining: row.remaining,
            others: row.others,
            now: Self.now,
            bufferSize: 256 * 1024
        )
        #expect(verdict == row.expected)
    }
}

/// When the back half of a running lease is taken: not from a connection that will be done within moments (its
/// response carries that half already).
@Suite("Splitting a lease")
struct SplitJudgementTests {
    static let now = ContinuousClock.now + .seconds(10)

    @Test(
        "a lease is split unless its connection will be done within 0.2 s",
        arguments: [
            ("fast, done within moments", 300_000_000.0 as Double?, true, 2_500_000 as Int64, false),
            ("slow, seconds to go", 1_000_000.0, true, 20_000_000, true),
            ("no bytes yet in this request", nil, false, 2_500_000, true),
        ] as [(String, Double?, Bool, Int64, Bool)]
    )
    func judgement(name: String, rate: Double?, wrote: Bool, remaining: Int64, expected: Bool) {
        var holder = TransferSession.ConnectionState()
        holder.active = true
        holder.recent = rate.map { ($0, 1) }
        holder.requestStarted = Self.now - .seconds(1)
        holder.wroteSinceRequest = wrote
        holder.lastProgress = Self.now - .milliseconds(10)
        let verdict = TransferSession.isWorthSplitting(
            holder,
            remaining: remaining,
            now: Self.now,
            bufferSize: 256 * 1024
        )
        #expect(verdict == expected, "\(name)")
    }
}
