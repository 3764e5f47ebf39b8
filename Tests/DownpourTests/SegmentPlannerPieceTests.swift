import DownpourTestSupport
import Testing

@testable import Downpour

@Suite("Planning in pieces")
struct SegmentPlannerPieceTests {
    @Test("in pieces, the planner hands out the lowest free bytes first, so the done bytes grow from the start")
    func pieces() {
        var planner = SegmentPlanner(length: 1000, connections: 2, minimumSplitSize: 10, pieceSize: 100)
        #expect(planner.free.count == 10)
        let first = planner.acquire()
        let second = planner.acquire()
        #expect(first?.remaining == 0..<100)
        #expect(second?.remaining == 100..<200)
        _ = planner.claim(second!.id, upTo: 200)
        planner.markDone(100..<200)
        planner.release(second!.id)
        // A connection that failed half-way gives back what it did not fetch; that goes out before later pieces.
        _ = planner.claim(first!.id, upTo: 50)
        planner.markDone(0..<50)
        planner.release(first!.id)
        #expect(planner.acquire()?.remaining == 50..<100)
        #expect(planner.acquire()?.remaining == 200..<300)
        var resumed = SegmentPlanner(
            length: 1000,
            connections: 4,
            minimumSplitSize: 100,
            done: ByteRangeSet([0..<420]),
            pieceSize: 250
        )
        #expect(resumed.acquire()?.remaining == 420..<670)
        #expect(resumed.acquire()?.remaining == 670..<1000, "no piece shorter than the minimum split is left over")
    }

    @Test(
        "in pieces, every byte is written once, and the gapless start reaches the slowest connection's cursor",
        arguments: [1, 2, 4, 16]
    )
    func piecesInOrder(connections: Int) {
        for seed in UInt64(1)...20 {
            let length = Int64(seed * 7919 + 123_456)
            var generator = SplitMix64(seed: seed)
            var planner = SegmentPlanner(
                length: length,
                connections: connections,
                minimumSplitSize: 1024,
                pieceSize: 4096
            )
            var active: [SegmentPlanner.LeaseID] = []
            var written: Int64 = 0
            while true {
                while active.count < connections, let lease = planner.acquire() {
                    active.append(lease.id)
                }
                SegmentPlannerTests.checkInvariants(planner, length: length)
                let cursors = active.compactMap { planner.lease($0)?.cursor } + planner.free.map(\.lowerBound)
                let gapless = planner.done.ranges.first.map { $0.lowerBound == 0 ? $0.upperBound : 0 } ?? 0
                #expect(gapless == cursors.min() ?? length, "the done bytes have a gap before every connection")
                if active.isEmpty { break }
                let index = Int(generator.next() % UInt64(active.count))
                let id = active[index]
                let start = planner.lease(id)!.cursor
                let allowed = planner.claim(id, upTo: start + Int64(generator.next() % 2048) + 1)
                if allowed > start {
                    planner.markDone(start..<allowed)
                    written += allowed - start
                }
                if planner.lease(id)!.remaining.isEmpty {
                    planner.release(id)
                    active.remove(at: index)
                }
            }
            #expect(planner.isComplete)
            #expect(written == length, "bytes written twice or missed")
        }
    }
}
