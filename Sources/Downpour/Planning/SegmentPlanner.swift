/// Decides which byte ranges each connection fetches. A value type with no I/O: the engine asks it for work,
/// tells it what was written, and it answers with ranges.
///
/// Every byte of the file is in exactly one of three states:
/// - **done**: written to disk (``done``);
/// - **leased**: promised to one connection, from its cursor to its end;
/// - **free**: nobody's yet.
///
/// A connection asking for work (``acquire()``) gets the largest free range. When nothing is free it takes
/// the back half of what the busiest connection has left, provided both halves stay at least
/// ``minimumSplitSize`` long, so no connection idles while another still has a long way to go.
public struct SegmentPlanner: Sendable {
    /// Identifies one lease for as long as it lives.
    public struct LeaseID: Hashable, Sendable, CustomStringConvertible {
        let rawValue: Int
        public var description: String { "lease-\(self.rawValue)" }
    }

    /// A range promised to one connection: the bytes from ``cursor`` up to ``end`` are still to come.
    public struct Lease: Hashable, Sendable {
        public let id: LeaseID
        /// The first byte of the lease when it was handed out.
        public let start: Int64
        /// The first byte not yet claimed by the connection.
        public internal(set) var cursor: Int64
        /// One past the last byte this lease covers. Moves down when another connection takes over the tail.
        public internal(set) var end: Int64

        public var remaining: Range<Int64> { self.cursor..<self.end }
    }

    /// The file's length in bytes.
    public let length: Int64
    /// The smallest range a split may leave on either side.
    public let minimumSplitSize: Int64
    /// The bytes written to disk.
    public private(set) var done: ByteRangeSet
    /// Unassigned ranges, not done; in no particular order.
    public private(set) var free: [Range<Int64>]
    /// The live leases.
    public private(set) var leases: [LeaseID: Lease] = [:]
    private var nextLeaseNumber = 0

    /// Plans a download of `length` bytes, of which `done` are on disk already, cutting what is missing into
    /// about `connections` ranges of equal size (none shorter than `minimumSplitSize`, unless the gap is).
    public init(length: Int64, connections: Int, minimumSplitSize: Int64, done: ByteRangeSet = ByteRangeSet()) {
        precondition(length >= 0, "length must not be negative")
        precondition(connections >= 1, "at least one connection")
        precondition(minimumSplitSize >= 1, "the minimum split size must be positive")
        self.length = length
        self.minimumSplitSize = minimumSplitSize
        self.done = done
        let gaps = done.gaps(in: 0..<length)
        let missing = gaps.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) }
        let target = max(minimumSplitSize, (missing + Int64(connections) - 1) / Int64(connections))
        var pieces: [Range<Int64>] = []
        for gap in gaps {
            var start = gap.lowerBound
            // Cut whole pieces while the rest stays at least one minimum split long.
            while gap.upperBound - start >= target + minimumSplitSize {
                pieces.append(start..<(start + target))
                start += target
            }
            pieces.append(start..<gap.upperBound)
        }
        self.free = pieces
    }

    /// Whether every byte is done.
    public var isComplete: Bool {
        self.done.byteCount == self.length
    }

    /// Bytes written to disk.
    public var completedBytes: Int64 {
        self.done.byteCount
    }

    /// Work for a connection with nothing to do: the largest free range, or else the back half of the longest
    /// remaining lease. `nil` when there is nothing left worth splitting; the connection can stop.
    public mutating func acquire() -> Lease? {
        if let index = self.free.indices.max(by: { self.free[$0].count < self.free[$1].count }) {
            let range = self.free.remove(at: index)
            return self.makeLease(range)
        }
        guard
            let victim = self.leases.values.max(by: { lhs, rhs in
                lhs.remaining.count != rhs.remaining.count
                    ? lhs.remaining.count < rhs.remaining.count : lhs.id.rawValue > rhs.id.rawValue
            })
        else { return nil }
        let remaining = Int64(victim.remaining.count)
        guard remaining >= 2 * self.minimumSplitSize else { return nil }
        let middle = victim.cursor + (remaining + 1) / 2
        self.leases[victim.id]!.end = middle
        return self.makeLease(middle..<victim.end)
    }

    /// The lease as it stands now (its end may have moved down since it was handed out).
    public func lease(_ id: LeaseID) -> Lease? {
        self.leases[id]
    }

    /// A connection is about to write bytes up to `offset`: moves the lease's cursor there and returns how far
    /// it may really write, which is less than `offset` when another connection has taken over the tail.
    public mutating func claim(_ id: LeaseID, upTo offset: Int64) -> Int64 {
        guard var lease = self.leases[id] else { return 0 }
        let allowed = min(offset, lease.end)
        if allowed > lease.cursor {
            lease.cursor = allowed
            self.leases[id] = lease
        }
        return allowed
    }

    /// Records bytes that are on disk. `range` must have been claimed first.
    public mutating func markDone(_ range: Range<Int64>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= self.length, "range outside the file")
        self.done.insert(range)
    }

    /// Ends a lease. Whatever part of it is not done returns to the free list, so another connection can
    /// fetch it.
    public mutating func release(_ id: LeaseID) {
        guard let lease = self.leases.removeValue(forKey: id) else { return }
        self.free.append(contentsOf: self.done.gaps(in: lease.start..<lease.end))
    }

    private mutating func makeLease(_ range: Range<Int64>) -> Lease {
        let id = LeaseID(rawValue: self.nextLeaseNumber)
        self.nextLeaseNumber += 1
        let lease = Lease(id: id, start: range.lowerBound, cursor: range.lowerBound, end: range.upperBound)
        self.leases[id] = lease
        return lease
    }
}
