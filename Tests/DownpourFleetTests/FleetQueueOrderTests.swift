import Downpour
import DownpourQueue
import DownpourTestSupport
import Testing

@testable import DownpourFleet

/// `changePosition` in the fleet's queue: where a move lands (aria2's clamping) and the positions it chooses.
struct FleetQueuePositionTests {
    @Test func aPositionLiesBetweenItsNeighboursOrThereIsNone() {
        #expect(FleetQueue.position(at: 0, among: []) == 0)
        #expect(FleetQueue.position(at: 0, among: [-3, 5]) == -4)
        #expect(FleetQueue.position(at: 2, among: [-3, 5]) == 6)
        #expect(FleetQueue.position(at: 1, among: [-3, 5]) == 1)
        let one = 1.0
        #expect(FleetQueue.position(at: 1, among: [one, one.nextUp]) == nil)
    }
}

@Suite(.enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"))
struct FleetQueueOrderTests {
    static func waitingOrder(_ queue: FleetQueue) async throws -> [UInt64] {
        try await queue.rows().filter { $0.status == .waiting || $0.status == .paused }.map(\.gid.value)
    }

    @Test func aMoveLandsWhereAria2sWouldAndClaimsFollowTheNewOrder() async throws {
        try await FleetQueueTests.withQueue { queue in
            for value in 1...5 as ClosedRange<UInt64> {
                try await queue.add(FleetQueueTests.entry(value), paused: value == 4)
            }
            let three = DownloadID(value: 3)
            #expect(try await queue.move(three, by: 0, from: .set) == 0)
            #expect(try await Self.waitingOrder(queue) == [3, 1, 2, 4, 5])
            #expect(try await queue.move(three, by: 10, from: .current) == 4, "clamped to the last place")
            #expect(try await Self.waitingOrder(queue) == [1, 2, 4, 5, 3])
            #expect(try await queue.move(DownloadID(value: 4), by: -1, from: .end) == 3, "paused ones move too")
            #expect(try await Self.waitingOrder(queue) == [1, 2, 5, 4, 3])
            #expect(try await queue.move(DownloadID(value: 1), by: -5, from: .current) == 0, "clamped to the first")
            // Claims take the waiting ones in the new order, passing over the paused one.
            let claimed = try await queue.claim(node: "a", count: 4, lease: FleetQueueTests.hour)
            #expect(claimed.map(\.entry.gid.value) == [1, 2, 5, 3])
            // Neither an active download nor an unknown one has a place in the waiting queue.
            #expect(try await queue.move(DownloadID(value: 1), by: 0, from: .set) == nil)
            #expect(try await queue.move(DownloadID(value: 99), by: 0, from: .set) == nil)
        }
    }

    @Test func movesBetweenTheSameTwoNeighboursNeverRunOutOfPositions() async throws {
        try await FleetQueueTests.withQueue { queue in
            for value in 1...4 as ClosedRange<UInt64> { try await queue.add(FleetQueueTests.entry(value)) }
            // Each move halves the gap between the first two: doubles run out after about 50, and the queue is
            // numbered anew.
            for round in 0..<80 {
                let mover = DownloadID(value: round % 2 == 0 ? 3 : 4)
                #expect(try await queue.move(mover, by: 1, from: .set) == 1)
            }
            #expect(try await Self.waitingOrder(queue) == [1, 4, 3, 2])
            // Appends still go last, and a download given back still goes first.
            try await queue.add(FleetQueueTests.entry(5))
            #expect(try await Self.waitingOrder(queue) == [1, 4, 3, 2, 5])
            let claim = try #require(try await queue.claim(node: "a", count: 1, lease: FleetQueueTests.hour).first)
            #expect(claim.entry.gid.value == 1)
            #expect(try await queue.move(DownloadID(value: 2), by: 0, from: .set) == 0)
            #expect(try await queue.release(claim.entry.gid, fence: claim.fence, paused: false))
            #expect(try await Self.waitingOrder(queue) == [1, 2, 4, 3, 5])
        }
    }

    @Test func theOldestResultsBeyondMaxDownloadResultAreForgotten() async throws {
        try await FleetQueueTests.withQueue { queue in
            for value in 1...5 as ClosedRange<UInt64> { try await queue.add(FleetQueueTests.entry(value)) }
            let claims = try await queue.claim(node: "a", count: 5, lease: FleetQueueTests.hour)
            // They end in another order than they were added: 4, 2, 5, 1, 3.
            for index in [3, 1, 4, 0, 2] {
                let claim = claims[index]
                #expect(
                    try await queue.finish(claim.entry.gid, fence: claim.fence, outcome: .complete(path: "", length: 0))
                )
            }
            #expect(try await queue.trimResults(keeping: 1000).isEmpty)
            #expect(try await queue.rows().map(\.gid.value) == [4, 2, 5, 1, 3])
            #expect(try await Set(queue.trimResults(keeping: 2).map(\.value)) == [4, 2, 5])
            #expect(try await queue.rows().map(\.gid.value) == [1, 3], "the newest two")
            #expect(try await Set(queue.trimResults(keeping: 0).map(\.value)) == [1, 3])
            #expect(try await queue.rows().isEmpty)
        }
    }
}
