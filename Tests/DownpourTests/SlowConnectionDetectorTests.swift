import Testing

@testable import Downpour

@Suite("SlowConnectionDetector")
struct SlowConnectionDetectorTests {
    typealias Reading = SlowConnectionDetector.Reading

    /// Connections 1-3 at `fast` bytes per second, connection 4 at `slow`, read every `step` seconds from 0
    /// to `until`; returns every verdict with the time it came.
    static func run(
        _ detector: inout SlowConnectionDetector,
        fast: Int64,
        slow: Int64,
        remaining: Int64 = 1 << 40,
        step: Double = 0.5,
        until: Double
    ) -> [(time: Double, verdict: SlowConnectionDetector.Verdict)] {
        var verdicts: [(Double, SlowConnectionDetector.Verdict)] = []
        var time = 0.0
        while time <= until + 1e-9 {
            let readings = (1...4).map { id in
                let rate = id == 4 ? slow : fast
                return Reading(connection: id, attempt: 1, bytes: Int64(Double(rate) * time), remaining: remaining)
            }
            verdicts += detector.check(readings, now: time).map { (time, $0) }
            time += step
        }
        return verdicts
    }

    @Test("a connection far below the others' median is restarted once a whole window is measured")
    func relative() {
        var detector = SlowConnectionDetector(window: .seconds(2), shareOfMedian: 0.1, lowestSpeed: nil)
        let verdicts = Self.run(&detector, fast: 10_000_000, slow: 500_000, until: 2)
        #expect(verdicts.count == 1)
        #expect(verdicts.first?.time == 2)
        #expect(verdicts.first?.verdict.connection == 4)
        #expect(verdicts.first?.verdict.belowFloor == false)
        #expect(verdicts.first?.verdict.reference == 10_000_000)
        #expect(verdicts.first?.verdict.speed == 500_000)
    }

    @Test("connections within the share of the median are left alone")
    func withinShare() {
        var detector = SlowConnectionDetector(window: .seconds(2), shareOfMedian: 0.1, lowestSpeed: nil)
        #expect(Self.run(&detector, fast: 10_000_000, slow: 1_500_000, until: 10).isEmpty)
    }

    @Test("a restarted connection is measured afresh: judged again only a whole window later")
    func measuredAfresh() {
        var detector = SlowConnectionDetector(window: .seconds(2), shareOfMedian: 0.1, lowestSpeed: nil)
        // Judged at 2 s; measured again from the next reading (2.5 s), so judged again at 4.5 s.
        let times = Self.run(&detector, fast: 10_000_000, slow: 100_000, until: 6).map(\.time)
        #expect(times == [2, 4.5])
    }

    @Test("a new request on the connection starts a new measurement")
    func newAttempt() {
        var detector = SlowConnectionDetector(window: .seconds(1), shareOfMedian: 0.1, lowestSpeed: nil)
        for (index, time) in [0.0, 0.5, 1.0].enumerated() {
            let readings = [
                Reading(connection: 1, attempt: 1, bytes: Int64(time * 1e7), remaining: 1 << 40),
                Reading(connection: 2, attempt: index + 1, bytes: 0, remaining: 1 << 40),
            ]
            #expect(detector.check(readings, now: time).isEmpty)
        }
    }

    @Test("a range that would be done within a window is not restarted")
    func shortRemainder() {
        var detector = SlowConnectionDetector(window: .seconds(2), shareOfMedian: 0.1, lowestSpeed: nil)
        #expect(Self.run(&detector, fast: 10_000_000, slow: 500_000, remaining: 900_000, until: 6).isEmpty)
    }

    @Test("the lowest speed applies even when every connection is as slow")
    func floor() {
        var detector = SlowConnectionDetector(window: .seconds(1), shareOfMedian: 0.1, lowestSpeed: 1_000_000)
        let verdicts = Self.run(&detector, fast: 900_000, slow: 900_000, until: 1)
        #expect(verdicts.map(\.verdict.connection).sorted() == [1, 2, 3, 4])
        #expect(verdicts.allSatisfy { $0.verdict.belowFloor && $0.verdict.reference == 1_000_000 })
    }

    @Test("nothing to compare with: a lone connection is judged only against the floor")
    func alone() {
        var detector = SlowConnectionDetector(window: .seconds(1), shareOfMedian: 0.1, lowestSpeed: nil)
        for time in stride(from: 0.0, through: 5.0, by: 0.5) {
            let reading = Reading(connection: 1, attempt: 1, bytes: Int64(time * 10), remaining: 1 << 40)
            #expect(detector.check([reading], now: time).isEmpty)
        }
    }
}
