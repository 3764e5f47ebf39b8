/// Decides which byte ranges each connection fetches. A value type with no I/O: the engine asks it for work,
/// tells it what was written, and it answers with ranges.
///
/// Every byte of the file is in exactly one of three states:
/// - **done**: written to disk (``done``);
/// - **leased**: promised to one connection, from its cursor to its end;
/// - **free**: nobody's yet.
///
/// A connection asking for work (``acquire(takesOver:keeping:isWorthRacing:)``) gets the largest free range. When nothing is free it takes
/// the back half of what the busiest connection has left, provided both halves stay at least
/// ``minimumSplitSize`` long, so no connection idles while another still has a long way to go. When nothing
/// can be split any more it may *race* the connection with the most left: both fetch the same tail, the first
/// to finish wins and the other stops. The bytes are identical (every response is pinned to the same
/// validators), so writing them twice is harmless; a slow last connection no longer decides the finish.
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

        /// Leases racing for the same tail share a group; `nil` when not in a race.
        public internal(set) var raceGroup: Int?

        public var remaining: Range<Int64> { self.cursor..<self.end }
    }

    /// The file's length in bytes.
    public let length: Int64
    /// The smallest range a split may leave on either side.
    public let minimumSplitSize: Int64
    /// The smallest remainder worth racing another connection against; `nil` turns racing off.
    public let minimumRaceSize: Int64?
    /// When set, the missing bytes are cut into pieces of this size, handed out from the lowest offset on, so
    /// that the bytes on disk grow as one run from the start (what a digest computed as they arrive needs).
    /// `nil`: about one range per connection, the largest first.
    public let pieceSize: Int64?
    /// The most connections fetching one tail at once.
    public static let maximumRacers = 3
    /// The bytes written to disk.
    public private(set) var done: ByteRangeSet
    /// Unassigned ranges, not done; in no particular order.
    public private(set) var free: [Range<Int64>]
    /// The live leases.
    public private(set) var leases: [LeaseID: Lease] = [:]
    private var nextLeaseNumber = 0

    /// Plans a download of `length` bytes, of which `done` are on disk already, cutting what is missing into
    /// about `connections` ranges of equal size (none shorter than `minimumSplitSize`, unless the gap is), or
    /// into pieces of `pieceSize` handed out in order. A range `onItsWay` (a response that asked for it is
    /// streaming already) that starts a gap and carries most of a share (seven eighths) is a range of its own,
    /// ending where the response ends, when the rest of that gap can still be cut (at least a split long): its
    /// connection then needs no second request for the last bytes of its share.
    public init(
        length: Int64,
        connections: Int,
        minimumSplitSize: Int64,
        minimumRaceSize: Int64? = nil,
        done: ByteRangeSet = ByteRangeSet(),
        pieceSize: Int64? = nil,
        onItsWay: Range<Int64>? = nil
    ) {
        precondition(length >= 0, "length must not be negative")
        precondition(connections >= 1, "at least one connection")
        precondition(minimumSplitSize >= 1, "the minimum split size must be positive")
        precondition(minimumRaceSize.map { $0 >= 1 } ?? true, "the minimum race size must be positive")
        precondition(pieceSize.map { $0 >= 1 } ?? true, "the piece size must be positive")
        self.length = length
        self.minimumSplitSize = minimumSplitSize
        self.minimumRaceSize = minimumRaceSize
        self.pieceSize = pieceSize
        self.done = done
        let gaps = done.gaps(in: 0..<length)
        let missing = gaps.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) }
        let target =
            pieceSize.map { max(minimumSplitSize, $0) }
            ?? max(minimumSplitSize, (missing + Int64(connections) - 1) / Int64(connections))
        var pieces: [Range<Int64>] = []
        for gap in gaps {
            var start = gap.lowerBound
            // Only when the response carries most of a share: a shorter one's connection asks for the rest of
            // its share next, on the same connection, which keeps the shares even.
            if pieceSize == nil, let first = onItsWay, first.lowerBound == start,
                first.upperBound - start >= target - target / 8, gap.upperBound - first.upperBound >= minimumSplitSize
            {
                pieces.append(start..<first.upperBound)
                start = first.upperBound
            }
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

    /// Work for a connection with nothing to do: the largest free range (the first one, with ``pieceSize``),
    /// else the back of the lease that gives the most (the longest remaining one, unless `keeping` says otherwise), else (when racing is on) a race for the tail of the
    /// longest remaining lease that `isWorthRacing` accepts (the engine accepts only leases whose connection is
    /// much slower than the others: racing one as fast as the racer gains nothing and costs a request).
    ///
    /// A lease is split at its middle, or further on when `keeping` says its connection keeps more bytes past
    /// its cursor (the engine's estimate of what the server has sent ahead of what was read: a split before it
    /// would ask for those bytes again); `keeping` answers `nil` for a lease not to be split at all. Both parts
    /// must stay at least ``minimumSplitSize`` long. With `takesOver` false only a free range is handed out.
    /// `nil` when there is nothing left worth taking; the connection can stop.
    public mutating func acquire(
        takesOver: Bool = true,
        keeping: (Lease) -> Int64? = { _ in 0 },
        isWorthRacing: (Lease) -> Bool = { _ in true }
    ) -> Lease? {
        let next =
            self.pieceSize == nil
            ? self.free.indices.max { self.free[$0].count < self.free[$1].count }
            : self.free.indices.min { self.free[$0].lowerBound < self.free[$1].lowerBound }
        if let index = next {
            let range = self.free.remove(at: index)
            return self.makeLease(range)
        }
        guard takesOver else { return nil }
        // Leases in a race are never split: they are short by then, and several writers share the tail.
        let byRemaining: (Lease, Lease) -> Bool = { lhs, rhs in
            lhs.remaining.count != rhs.remaining.count
                ? lhs.remaining.count < rhs.remaining.count : lhs.id.rawValue > rhs.id.rawValue
        }
        // Of the leases that can be split, the one whose back part is longest (with `keeping` answering 0: the
        // longest remaining lease, halved).
        let splits = self.leases.values.filter {
            $0.raceGroup == nil && $0.remaining.count >= 2 * self.minimumSplitSize
        }
        .compactMap { lease -> (lease: Lease, cut: Int64)? in
            guard let kept = keeping(lease) else { return nil }
            let cut = lease.cursor + max((Int64(lease.remaining.count) + 1) / 2, kept)
            return lease.end - cut >= self.minimumSplitSize ? (lease, cut) : nil
        }
        let byTaken: ((lease: Lease, cut: Int64), (lease: Lease, cut: Int64)) -> Bool = { lhs, rhs in
            lhs.lease.end - lhs.cut != rhs.lease.end - rhs.cut
                ? lhs.lease.end - lhs.cut < rhs.lease.end - rhs.cut : byRemaining(lhs.lease, rhs.lease)
        }
        if let split = splits.max(by: byTaken) {
            self.leases[split.lease.id]!.end = split.cut
            return self.makeLease(split.cut..<split.lease.end)
        }
        guard let victim = self.raceCandidates().filter(isWorthRacing).max(by: byRemaining) else { return nil }
        let group = victim.raceGroup ?? victim.id.rawValue
        self.leases[victim.id]!.raceGroup = group
        var racer = self.makeLease(victim.remaining)
        racer.raceGroup = group
        self.leases[racer.id] = racer
        return racer
    }

    /// The free ranges that run on without a gap from `range`'s start, as one lease, until one reaches `range`'s
    /// end: the range a response already on its way carries is leased whole, however the plan cut it. `nil` when
    /// no free range starts there (its first bytes are done, or leased).
    public mutating func acquire(covering range: Range<Int64>) -> Lease? {
        var end = range.lowerBound
        while end < range.upperBound, let index = self.free.firstIndex(where: { $0.lowerBound == end }) {
            end = self.free.remove(at: index).upperBound
        }
        guard end > range.lowerBound else { return nil }
        return self.makeLease(range.lowerBound..<end)
    }

    /// The leases a racer could join now (racing on, enough left, not yet done, fewer than
    /// ``maximumRacers`` on that tail), whether or not the engine finds them worth it.
    public func raceCandidates() -> [Lease] {
        guard let minimumRaceSize = self.minimumRaceSize else { return [] }
        let groupSizes = Dictionary(grouping: self.leases.values.compactMap(\.raceGroup), by: { $0 }).mapValues(\.count)
        return self.leases.values.filter { lease in
            lease.remaining.count >= minimumRaceSize
                && lease.raceGroup.map { groupSizes[$0, default: 0] < Self.maximumRacers } ?? true
                && !self.done.contains(lease.remaining)
        }
    }

    /// The lease as it stands now (its end may have moved down since it was handed out).
    public func lease(_ id: LeaseID) -> Lease? {
        self.leases[id]
    }

    /// A connection is about to write bytes up to `offset`: moves the lease's cursor there and returns how far
    /// it may really write, which is less than `offset` when another connection has taken over the tail.
    public mutating func claim(_ id: LeaseID, upTo offset: Int64) -> Int64 {
        guard var lease = self.leases[id] else { return 0 }
        if !lease.remaining.isEmpty, self.done.contains(lease.remaining) {
            // Another side of a race got there first.
            lease.end = lease.cursor
            self.leases[id] = lease
            return lease.cursor
        }
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
    /// fetch it, except what the other sides of its race still cover.
    public mutating func release(_ id: LeaseID) {
        guard let lease = self.leases.removeValue(forKey: id) else { return }
        var covered: Range<Int64>?
        if let group = lease.raceGroup {
            let others = self.leases.values.filter { $0.raceGroup == group }
            // Every side of a race fetches a suffix of the same tail, so together they cover one range.
            if let start = others.map(\.cursor).min(), let end = others.map(\.end).max(), start < end {
                covered = start..<end
            }
            if others.count == 1 {
                self.leases[others[0].id]!.raceGroup = nil
            }
        }
        for gap in self.done.gaps(in: lease.start..<lease.end) {
            guard let covered, gap.overlaps(covered) else {
                self.free.append(gap)
                continue
            }
            if gap.lowerBound < covered.lowerBound { self.free.append(gap.lowerBound..<covered.lowerBound) }
            if gap.upperBound > covered.upperBound { self.free.append(covered.upperBound..<gap.upperBound) }
        }
    }

    private mutating func makeLease(_ range: Range<Int64>) -> Lease {
        let id = LeaseID(rawValue: self.nextLeaseNumber)
        self.nextLeaseNumber += 1
        let lease = Lease(id: id, start: range.lowerBound, cursor: range.lowerBound, end: range.upperBound)
        self.leases[id] = lease
        return lease
    }
}
