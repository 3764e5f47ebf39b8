import DownpourTestSupport
import Testing

@testable import Downpour

@Suite("SegmentPlanner")
struct SegmentPlannerTests {
    /// Drives a plan to the end the way workers do, in a random interleaving, and checks the invariants at
    /// every step: leases never overlap each other or done bytes, and done + leased + free is the whole file.
    static func simulate(
        length: Int64,
        connections: Int,
        minimumSplitSize: Int64,
        minimumRaceSize: Int64? = nil,
        done: ByteRangeSet = ByteRangeSet(),
        seed: UInt64
    ) -> (planner: SegmentPlanner, writes: [Range<Int64>], splits: Int) {
        var generator = SplitMix64(seed: seed)
        var planner = SegmentPlanner(
            length: length,
            connections: connections,
            minimumSplitSize: minimumSplitSize,
            minimumRaceSize: minimumRaceSize,
            done: done
        )
        var active: [SegmentPlanner.LeaseID] = []
        var idle = connections
        var writes: [Range<Int64>] = []
        var splits = 0
        var steps = 0
        while true {
            steps += 1
            precondition(steps < 1_000_000, "simulation does not terminate")
            // Idle workers take work.
            while idle > 0 {
                let hadFreeRange = !planner.free.isEmpty
                guard let lease = planner.acquire() else { break }
                if !hadFreeRange { splits += 1 }
                active.append(lease.id)
                idle -= 1
            }
            checkInvariants(planner, length: length)
            if active.isEmpty { break }
            // One worker writes a random amount.
            let index = Int(generator.next() % UInt64(active.count))
            let id = active[index]
            let lease = planner.lease(id)!
            let amount = Int64(generator.next() % UInt64(max(1, minimumSplitSize))) + 1
            let start = lease.cursor
            let allowed = planner.claim(id, upTo: start + amount)
            if allowed > start {
                planner.markDone(start..<allowed)
                writes.append(start..<allowed)
            }
            if planner.lease(id)!.remaining.isEmpty {
                planner.release(id)
                active.remove(at: index)
                idle += 1
            }
        }
        return (planner, writes, splits)
    }

    /// Done, leased and free bytes tile the file exactly; only the two sides of a race may share bytes, and
    /// then only their own tail.
    static func checkInvariants(_ planner: SegmentPlanner, length: Int64) {
        var pieces: [Range<Int64>] = planner.done.ranges
        var races: [Int: Range<Int64>] = [:]
        for lease in planner.leases.values where !lease.remaining.isEmpty {
            guard let group = lease.raceGroup else {
                pieces.append(contentsOf: planner.done.gaps(in: lease.remaining))
                continue
            }
            // The sides of a race share one tail: count it once.
            let known = races[group] ?? lease.remaining
            races[group] = min(known.lowerBound, lease.cursor)..<max(known.upperBound, lease.end)
        }
        for tail in races.values {
            pieces.append(contentsOf: planner.done.gaps(in: tail))
        }
        pieces += planner.free
        pieces.sort { $0.lowerBound < $1.lowerBound }
        var cursor: Int64 = 0
        for piece in pieces where !piece.isEmpty {
            #expect(piece.lowerBound <= cursor, "a gap at \(cursor): \(pieces)")
            #expect(piece.lowerBound >= cursor, "an overlap at \(cursor): \(pieces)")
            cursor = max(cursor, piece.upperBound)
        }
        #expect(cursor == length)
    }

    @Test("every byte is written exactly once", arguments: [1, 2, 3, 4, 8, 16, 64])
    func everyByteOnce(connections: Int) {
        for seed in UInt64(1)...20 {
            let length = Int64(seed * 7919 + 12345)
            let (planner, writes, _) = Self.simulate(
                length: length,
                connections: connections,
                minimumSplitSize: 1024,
                seed: seed
            )
            #expect(planner.isComplete)
            #expect(planner.done.ranges == [0..<length])
            let total = writes.reduce(Int64(0)) { $0 + Int64($1.count) }
            #expect(total == length, "bytes written twice or missed")
            let sorted = writes.sorted { $0.lowerBound < $1.lowerBound }
            for (first, second) in zip(sorted, sorted.dropFirst()) {
                #expect(first.upperBound <= second.lowerBound, "\(first) overlaps \(second)")
            }
        }
    }

    @Test("starts with N equal ranges")
    func initialPlan() {
        var planner = SegmentPlanner(length: 100 * 1024 * 1024, connections: 4, minimumSplitSize: 1024 * 1024)
        var leases: [SegmentPlanner.Lease] = []
        for _ in 0..<4 { leases.append(planner.acquire()!) }
        let sizes = Set(leases.map { $0.remaining.count })
        #expect(sizes == [25 * 1024 * 1024])
        #expect(planner.free.isEmpty)
    }

    /// The probe's response (one split, on its way) is a range of its own when it carries most of a share: no
    /// other range starts inside it, and its connection needs no second request for a few last bytes. A response
    /// that carries less keeps the even shares (its connection asks for the rest of its own).
    @Test(
        "the range a response on its way carries: its own when it is most of a share",
        arguments: [
            (1_052_897, 262_144, [0..<262_144, 262_144..<525_369, 525_369..<788_594, 788_594..<1_052_897]),
            (
                100 * 1_048_576, 1_048_576,
                [
                    0..<26_214_400, 26_214_400..<52_428_800, 52_428_800..<78_643_200,
                    78_643_200..<104_857_600,
                ]
            ),
        ] as [(Int64, Int64, [Range<Int64>])]
    )
    func rangeOnItsWay(length: Int64, onItsWay: Int64, expected: [Range<Int64>]) {
        let planner = SegmentPlanner(
            length: length,
            connections: 4,
            minimumSplitSize: 256 * 1024,
            onItsWay: 0..<onItsWay
        )
        #expect(planner.free.sorted { $0.lowerBound < $1.lowerBound } == expected)
    }

    @Test("more connections than bytes")
    func tinyFile() {
        var planner = SegmentPlanner(length: 1, connections: 16, minimumSplitSize: 1024 * 1024)
        let first = planner.acquire()
        #expect(first?.remaining == 0..<1)
        #expect(planner.acquire() == nil)
    }

    @Test("an empty file needs no work")
    func emptyFile() {
        var planner = SegmentPlanner(length: 0, connections: 4, minimumSplitSize: 1024)
        #expect(planner.isComplete)
        #expect(planner.acquire() == nil)
    }

    @Test("a free connection takes half of the longest remaining lease")
    func stealsHalf() {
        let mib: Int64 = 1024 * 1024
        var planner = SegmentPlanner(length: 10 * mib, connections: 1, minimumSplitSize: mib)
        let first = planner.acquire()!
        #expect(planner.claim(first.id, upTo: 2 * mib) == 2 * mib)
        planner.markDone(0..<(2 * mib))
        let second = planner.acquire()!
        #expect(second.remaining == (6 * mib)..<(10 * mib))
        #expect(planner.lease(first.id)!.remaining == (2 * mib)..<(6 * mib))
        // The owner's claim past the new end is cut short.
        #expect(planner.claim(first.id, upTo: 7 * mib) == 6 * mib)
    }

    @Test("splitting stops at the floor")
    func splitFloor() {
        let floor: Int64 = 1024 * 1024
        var planner = SegmentPlanner(length: 2 * floor - 1, connections: 1, minimumSplitSize: floor)
        _ = planner.acquire()!
        #expect(planner.acquire() == nil, "a split would leave a piece below the floor")

        var exact = SegmentPlanner(length: 2 * floor, connections: 1, minimumSplitSize: floor)
        _ = exact.acquire()!
        let second = exact.acquire()
        #expect(second?.remaining.count == Int(floor))
        #expect(exact.acquire() == nil)
    }

    @Test("no piece is ever below the floor, except a gap that was smaller to begin with")
    func piecesRespectFloor() {
        let floor: Int64 = 4096
        for seed in UInt64(1)...30 {
            var planner = SegmentPlanner(length: Int64(seed) * 10_000 + 1, connections: 8, minimumSplitSize: floor)
            var leases: [SegmentPlanner.Lease] = []
            while let lease = planner.acquire() { leases.append(lease) }
            for lease in leases {
                let current = planner.lease(lease.id)!
                #expect(current.end - current.start >= floor || planner.length < 2 * floor)
            }
        }
    }

    @Test("a released lease gives back what it did not write")
    func releaseReturnsRest() {
        var planner = SegmentPlanner(length: 1000, connections: 1, minimumSplitSize: 100)
        let lease = planner.acquire()!
        _ = planner.claim(lease.id, upTo: 300)
        planner.markDone(0..<300)
        planner.release(lease.id)
        #expect(planner.free == [300..<1000])
        let again = planner.acquire()!
        #expect(again.remaining == 300..<1000)
    }

    @Test("plans only the gaps when bytes are on disk already")
    func resumesGaps() {
        let done = ByteRangeSet([0..<4000, 6000..<9000])
        let (planner, writes, _) = Self.simulate(
            length: 10_000,
            connections: 4,
            minimumSplitSize: 500,
            done: done,
            seed: 7
        )
        #expect(planner.isComplete)
        for write in writes {
            #expect(!done.overlaps(write), "re-fetched \(write)")
        }
        #expect(writes.reduce(0) { $0 + $1.count } == 3000)
    }

    @Test("with racing on, every byte arrives and duplicates stay within the racing tails", arguments: [2, 4, 16])
    func racing(connections: Int) {
        let floor: Int64 = 1024
        for seed in UInt64(1)...20 {
            let length = Int64(seed * 7919 + 12345)
            let (planner, writes, _) = Self.simulate(
                length: length,
                connections: connections,
                minimumSplitSize: floor,
                minimumRaceSize: 256,
                seed: seed
            )
            #expect(planner.isComplete)
            #expect(planner.leases.isEmpty)
            let total = writes.reduce(Int64(0)) { $0 + Int64($1.count) }
            #expect(total >= length)
            let bound = length + Int64(connections) * Int64(SegmentPlanner.maximumRacers) * 2 * floor
            #expect(total <= bound, "too many duplicate bytes: \(total - length)")
        }
    }

    @Test("a race: the first to finish wins, the other stops, nothing is freed twice")
    func raceWinner() {
        var planner = SegmentPlanner(length: 1000, connections: 1, minimumSplitSize: 1000, minimumRaceSize: 100)
        let slow = planner.acquire()!
        #expect(planner.claim(slow.id, upTo: 300) == 300)
        planner.markDone(0..<300)
        let racer = planner.acquire()!
        #expect(racer.remaining == 300..<1000)
        #expect(planner.lease(slow.id)?.raceGroup != nil)
        #expect(planner.lease(slow.id)?.raceGroup == planner.lease(racer.id)?.raceGroup)
        let third = planner.acquire()
        #expect(third?.remaining == 300..<1000, "a second racer, in case the first is slow too")
        #expect(planner.acquire() == nil, "at most three on one tail")
        // The racer finishes first.
        #expect(planner.claim(racer.id, upTo: 1000) == 1000)
        planner.markDone(300..<1000)
        #expect(planner.isComplete)
        // The slow side is told to stop at its next write.
        #expect(planner.claim(slow.id, upTo: 400) == 300)
        #expect(planner.claim(third!.id, upTo: 400) == 300)
        planner.release(racer.id)
        planner.release(slow.id)
        planner.release(third!.id)
        #expect(planner.free.isEmpty)
    }

    @Test(
        "only leases the engine finds worth racing are raced, the longest first; takesOver false takes only free ranges"
    )
    func raceFilter() {
        var planner = SegmentPlanner(length: 3000, connections: 3, minimumSplitSize: 1000, minimumRaceSize: 100)
        let leases = (0..<3).map { _ in planner.acquire()! }
        for (index, lease) in leases.enumerated() {
            // Lease 0 has 900 bytes left, lease 1 has 800, lease 2 is done.
            let end = lease.start + [100, 200, 1000][index]
            #expect(planner.claim(lease.id, upTo: end) == end)
            planner.markDone(lease.start..<end)
        }
        planner.release(leases[2].id)
        #expect(planner.acquire(takesOver: false) == nil, "nothing free, and neither a split nor a race wanted")
        #expect(planner.acquire(isWorthRacing: { _ in false }) == nil, "as fast as the racer: not worth a request")
        let racer = planner.acquire(isWorthRacing: { $0.id == leases[1].id })
        #expect(racer?.remaining == leases[1].start + 200..<leases[1].end)
        #expect(planner.lease(leases[0].id)?.raceGroup == nil)
        #expect(planner.acquire()?.remaining == leases[0].start + 100..<leases[0].end, "without a filter, the longest")
    }

    @Test("a split takes the lease that gives the most past what its holder keeps; none that keeps it all")
    func splitWhereItGives() {
        var planner = SegmentPlanner(length: 30_000, connections: 3, minimumSplitSize: 1000)
        let leases = (0..<3).map { _ in planner.acquire()! }
        // Lease 0 has 10,000 bytes left, lease 1 has 8,000, lease 2 is done.
        for (index, lease) in leases.enumerated() {
            let end = lease.start + [0, 2000, 10_000][index]
            #expect(planner.claim(lease.id, upTo: end) == end)
            if end > lease.start { planner.markDone(lease.start..<end) }
        }
        planner.release(leases[2].id)
        #expect(planner.acquire(keeping: { _ in nil }) == nil, "no holder may be split yet")
        // Lease 0's holder keeps 9,500 bytes (500 left to take: under the floor); lease 1's 1,000 (half: 4,000).
        let taken = planner.acquire(keeping: { $0.id == leases[0].id ? 9500 : 1000 })
        #expect(taken?.remaining == leases[1].start + 6000..<leases[1].end)
        #expect(planner.lease(leases[1].id)?.end == leases[1].start + 6000)
        // Lease 0's holder keeps 7,000: the back 3,000 are taken, past the middle.
        let past = planner.acquire(keeping: { $0.id == leases[0].id ? 7000 : nil })
        #expect(past?.remaining == leases[0].start + 7000..<leases[0].end)
    }

    @Test("a racer that fails leaves the tail to its partner, not to the free list")
    func racerFails() {
        var planner = SegmentPlanner(length: 1000, connections: 1, minimumSplitSize: 1000, minimumRaceSize: 100)
        let first = planner.acquire()!
        _ = planner.claim(first.id, upTo: 200)
        planner.markDone(0..<200)
        let racer = planner.acquire()!
        planner.release(racer.id)
        #expect(planner.free.isEmpty)
        #expect(planner.lease(first.id)?.raceGroup == nil)
        // The survivor can be raced again.
        let again = planner.acquire()
        #expect(again?.remaining == 200..<1000)
    }

    @Test("idle connections keep the slowest one company until the floor")
    func splitsUntilFloor() {
        let (planner, _, splits) = Self.simulate(
            length: 64 * 1024,
            connections: 4,
            minimumSplitSize: 1024,
            seed: 3
        )
        #expect(planner.isComplete)
        #expect(splits > 0)
    }

    /// The range a response already on its way carries (the probe's) is leased whole: the free ranges from its start
    /// on, as far as it reaches, as one lease; none when its first bytes are not free.
    @Test(
        "a lease covering a range on its way",
        arguments: [
            // Pieces in order of 1,000 bytes (piece mode); the range ends inside the second piece: two pieces.
            (0..<1500, ByteRangeSet(), 1000 as Int64?, 0..<2000 as Range<Int64>?),
            // A range shorter than the first piece: the piece.
            (0..<500, ByteRangeSet(), 1000, 0..<1000),
            // One range per connection (no piece size): the first, or as many as the range reaches into.
            (0..<2000, ByteRangeSet(), nil, 0..<2500),
            (0..<3000, ByteRangeSet(), nil, 0..<5000),
            // Bytes done in between: the run of free bytes stops there.
            (0..<9000, ByteRangeSet([1000..<2000]), 1000, 0..<1000),
            // The first bytes done: nothing.
            (0..<1500, ByteRangeSet([0..<10]), 1000, nil),
        ] as [(Range<Int64>, ByteRangeSet, Int64?, Range<Int64>?)]
    )
    func acquireCovering(
        range: Range<Int64>,
        done: ByteRangeSet,
        pieceSize: Int64?,
        expected: Range<Int64>?
    ) {
        var planner = SegmentPlanner(
            length: 10_000,
            connections: 4,
            minimumSplitSize: 100,
            done: done,
            pieceSize: pieceSize
        )
        let lease = planner.acquire(covering: range)
        #expect(lease.map { $0.start..<$0.end } == expected)
        // What it leased is no longer free, and the rest of the plan still covers the file with it.
        if let lease {
            #expect(!planner.free.contains { $0.overlaps(lease.start..<lease.end) })
            let free = planner.free.reduce(0) { $0 + $1.count }
            #expect(Int64(free) + Int64(lease.end - lease.start) + planner.done.byteCount == 10_000)
        }
    }
}
