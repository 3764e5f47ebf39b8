import Foundation
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
        var holder = TransferState.Connection()
        holder.active = row.active
        holder.recent = row.rate.map { ($0, 1) }
        holder.requestStarted = Self.now - .seconds(row.requestAge)
        holder.wroteSinceRequest = row.lastWrite != nil
        holder.lastProgress = row.lastWrite.map { Self.now - .seconds($0) } ?? holder.requestStarted
        let verdict = TransferState.isWorthRacing(
            holder,
            remaining: row.remaining,
            others: row.others,
            now: Self.now,
            bufferSize: 256 * 1024
        )
        #expect(verdict == row.expected)
    }
}

/// Where a running lease is cut when an idle connection takes the back of it: past what its server has likely sent
/// ahead of what was read, so that no byte is asked for twice. A table over an injected clock.
@Suite("Splitting a lease")
struct SplitJudgementTests {
    static let now = ContinuousClock.now + .seconds(10)
    static let megabyte = 1_000_000.0
    static let nearAhead = TransferState.nearLinkAhead

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// `nil`: no connection holds the lease.
        var active: Bool? = true
        /// The holder's moving average (bytes per second), if it wrote in this request.
        var rate: Double?
        /// Seconds before `now` its current request started.
        var requestAge: Double = 1
        /// The quickest first bytes of its requests, in milliseconds (`nil`: never timed).
        var firstBytes: Double?
        var remaining: Int64
        var others: [Double]
        /// The bytes it keeps past its cursor; `nil`: not split at all.
        var expected: Int64?

        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(name: "nobody holds it", active: nil, remaining: 20_000_000, others: [], expected: 0),
        Case(name: "waiting to retry", active: false, remaining: 20_000_000, others: [megabyte], expected: 0),
        Case(
            name: "a request just sent, others fast: its server may be sending the whole lease",
            rate: nil,
            remaining: 2_700_000,
            others: [100 * megabyte, 80 * megabyte],
            expected: 2_700_000
        ),
        Case(
            name: "a request just sent to a near server, others slow: up to what the sockets hold",
            rate: nil,
            firstBytes: 1,
            remaining: 20_000_000,
            others: [megabyte],
            expected: nearAhead
        ),
        Case(
            name: "a request just sent, no other speed to go by: not yet",
            rate: nil,
            remaining: 20_000_000,
            others: [],
            expected: nil
        ),
        Case(
            name: "a request sent to a far server, others slow: 0.2 s of their speed",
            rate: nil,
            firstBytes: 80,
            remaining: 20_000_000,
            others: [megabyte, 2 * megabyte],
            expected: 400_000
        ),
        Case(
            name: "no first bytes past the grace: nothing is coming",
            rate: nil,
            requestAge: 3,
            remaining: 20_000_000,
            others: [100 * megabyte],
            expected: 0
        ),
        Case(
            name: "fast, done within moments",
            rate: 300 * megabyte,
            remaining: 2_500_000,
            others: [300 * megabyte],
            expected: nil
        ),
        Case(
            name: "a far link: 0.2 s of its bytes",
            rate: megabyte,
            firstBytes: 80,
            remaining: 20_000_000,
            others: [megabyte, megabyte],
            expected: 200_000
        ),
        Case(
            name: "a near link at the others' pace: what the sockets may hold",
            rate: 20 * megabyte,
            firstBytes: 1,
            remaining: 20_000_000,
            others: [20 * megabyte],
            expected: nearAhead
        ),
        Case(
            name: "a near link, its lease shorter than the sockets hold",
            rate: 10 * megabyte,
            firstBytes: 1,
            remaining: 3_000_000,
            others: [10 * megabyte],
            expected: 3_000_000
        ),
        Case(
            name: "a near link, much slower than the others (its server's pace, not the sockets')",
            rate: megabyte,
            firstBytes: 1,
            remaining: 20_000_000,
            others: [20 * megabyte, 20 * megabyte],
            expected: 200_000
        ),
    ]

    @Test("a lease is cut past what its server has likely sent", arguments: cases)
    func judgement(_ row: Case) {
        let holder = row.active.map { active in
            var holder = TransferState.Connection()
            holder.active = active
            holder.recent = row.rate.map { ($0, 1) }
            holder.requestStarted = Self.now - .seconds(row.requestAge)
            holder.wroteSinceRequest = row.rate != nil
            holder.lastProgress = row.rate != nil ? Self.now - .milliseconds(10) : holder.requestStarted
            holder.quickestFirstBytes = row.firstBytes.map { .microseconds(Int64($0 * 1000)) }
            return holder
        }
        let kept = TransferState.bytesKept(
            by: holder,
            remaining: row.remaining,
            others: row.others,
            now: Self.now,
            bufferSize: 256 * 1024
        )
        #expect(kept == row.expected)
    }
}

/// The shared state of one transfer, driven as the connections drive it, over an injected clock: leases, the speed
/// each connection is measured at, and the bytes of the run.
@Suite("Transfer state")
struct TransferStateTableTests {
    static let start = ContinuousClock.now
    static let length: Int64 = 30_000_000
    static let remote = RemoteFile(
        url: URL(string: "http://127.0.0.1:8080/big.iso")!,
        length: length,
        acceptsRanges: true,
        etag: "\"a\"",
        lastModified: nil
    )

    static func state(connections: Int = 2) -> TransferState {
        TransferState(
            remoteFile: Self.remote,
            mode: .segmented(
                SegmentPlanner(length: Self.length, connections: connections, minimumSplitSize: 1 << 20)
            )
        )
    }

    /// Connection `id` fetches `count` bytes of its lease in `writes` writes, `seconds` apart, from `at` on; the time
    /// of its last write.
    static func fetch(
        _ state: inout TransferState,
        connection id: Int,
        lease: SegmentPlanner.Lease,
        count: Int64,
        writes: Int = 10,
        seconds: Double,
        at: ContinuousClock.Instant,
        firstBytesAfter: Duration
    ) -> ContinuousClock.Instant {
        state.setActive(true, connection: id, now: at)
        var now = at + firstBytesAfter
        var cursor = lease.cursor
        for write in 0..<writes {
            if write > 0 { now = now + .microseconds(Int64(seconds * 1_000_000)) }
            let end = lease.cursor + count * Int64(write + 1) / Int64(writes)
            let allowed = state.withPlanner { $0.claim(lease.id, upTo: end) } ?? 0
            _ = state.written(cursor..<allowed, connection: id, now: now)
            cursor = allowed
        }
        return now
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// How long connection 1 waited for its first bytes, in milliseconds.
        var firstBytes: Double
        /// Seconds between connection 1's ten writes of 500 kB (connection 2 writes its 15 MB at the same speed).
        var seconds: Double
        /// Where connection 2's new lease begins, past connection 1's cursor; `nil`: no lease.
        var expectedCut: Int64?

        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(name: "a far, slow server: cut at the middle", firstBytes: 80, seconds: 0.5, expectedCut: 5_000_000),
        Case(
            name: "a near server read at the others' pace: past what the sockets hold",
            firstBytes: 0.5,
            seconds: 0.025,
            expectedCut: TransferState.nearLinkAhead
        ),
        Case(
            name: "a near, fast server with 0.05 s to go: not split",
            firstBytes: 0.5,
            seconds: 0.001,
            expectedCut: nil
        ),
    ]

    @Test("an idle connection takes the back of the other's lease, past what its server sent ahead", arguments: cases)
    func split(_ row: Case) throws {
        var state = Self.state()
        let now = Self.start
        let leases = (
            state.acquire(connection: 1, now: now, bufferSize: 1 << 18),
            state.acquire(connection: 2, now: now, bufferSize: 1 << 18)
        )
        let first = try #require(leases.0)
        let second = try #require(leases.1)
        #expect(first.remaining.count == 15_000_000 && second.remaining.count == 15_000_000)
        // Connection 2 fetches all of its lease; connection 1, as fast, 5 MB of its 15 MB, and asks for more.
        let firstBytes = Duration.microseconds(Int64(row.firstBytes * 1000))
        let ended = Self.fetch(
            &state,
            connection: 2,
            lease: second,
            count: 15_000_000,
            seconds: 3 * row.seconds,
            at: now,
            firstBytesAfter: firstBytes
        )
        state.release(second.id, connection: 2)
        state.setActive(false, connection: 2, now: ended)
        let later = Self.fetch(
            &state,
            connection: 1,
            lease: first,
            count: 5_000_000,
            seconds: row.seconds,
            at: now,
            firstBytesAfter: firstBytes
        )
        let taken = state.acquire(connection: 2, now: later, bufferSize: 1 << 18)
        let cursor = first.cursor + 5_000_000
        #expect(taken.map { $0.start - cursor } == row.expectedCut)
        if let taken {
            #expect(state.planner?.lease(first.id)?.end == taken.start, "the holder's lease ends where the new begins")
            #expect(taken.end == first.end)
        }
    }

    @Test("the bytes of a run: written, written twice, dropped; a new transfer forgets the connections")
    func bytes() throws {
        var state = Self.state()
        let now = Self.start
        let acquired = state.acquire(connection: 1, now: now, bufferSize: 1 << 18)
        let lease = try #require(acquired)
        state.setActive(true, connection: 1, now: now)
        #expect(state.mostActiveConnections == 1)
        let end = state.withPlanner { $0.claim(lease.id, upTo: lease.start + 1000) }
        #expect(end == lease.start + 1000)
        let firstWrite = state.written(lease.start..<lease.start + 1000, connection: 1, now: now + .milliseconds(2))
        #expect(!firstWrite)
        #expect(state.connections[1]?.quickestFirstBytes == .milliseconds(2))
        let rewrite = state.written(lease.start..<lease.start + 500, connection: 1, now: now + .milliseconds(3))
        #expect(rewrite, "bytes written before are a rewrite")
        state.droppedBytes += 100
        #expect(state.bytesThisRun == 1500)
        #expect(state.completedBytes == 1000)
        #expect(state.wastedBytes == 600)
        #expect(state.snapshot().requests == 1)
        let unused = state.forgetTransfer(mode: .stream(received: 0))
        #expect(unused.isEmpty)
        #expect(state.connections.isEmpty && state.mostActiveConnections == 0)
        #expect(state.bytesThisRun == 1500, "the bytes of the run stay counted")
    }

    @Test("a response taken on does not time the first bytes")
    func continuingResponse() {
        var state = Self.state()
        let now = Self.start
        state.setActive(true, connection: 1, continuing: true, now: now)
        _ = state.written(0..<1000, connection: 1, now: now + .seconds(1))
        #expect(state.connections[1]?.quickestFirstBytes == nil)
        state.setActive(true, connection: 1, now: now + .seconds(2))
        _ = state.written(1000..<2000, connection: 1, now: now + .seconds(2) + .milliseconds(40))
        #expect(state.connections[1]?.quickestFirstBytes == .milliseconds(40))
    }

    @Test("a paced connection's reading speed leaves out the wait for the head; its round trip is that wait")
    func readingPace() throws {
        var state = Self.state()
        let now = Self.start
        #expect(state.pace(ofConnection: 1).rate == nil)
        state.setActive(true, connection: 1, now: now)
        state.headArrived(connection: 1, now: now + .milliseconds(500))
        _ = state.written(0..<100_000, connection: 1, now: now + .milliseconds(600))
        let pace = state.pace(ofConnection: 1)
        #expect(abs(try #require(pace.rate) - 1_000_000) < 1)
        #expect(abs(try #require(pace.roundTrip) - 0.5) < 1e-9)
        // The next request's head came sooner: the quickest counts. Writes before a head (none here) count nothing.
        state.setActive(true, connection: 1, now: now + .seconds(1))
        _ = state.written(100_000..<150_000, connection: 1, now: now + .milliseconds(1100))
        #expect(abs(try #require(state.pace(ofConnection: 1).rate) - 1_000_000) < 1)
        state.headArrived(connection: 1, now: now + .milliseconds(1200))
        #expect(abs(try #require(state.pace(ofConnection: 1).roundTrip) - 0.2) < 1e-9)
    }
}
