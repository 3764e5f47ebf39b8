/// A set of byte offsets stored as sorted, disjoint, non-adjacent half-open ranges.
///
/// Inserting a range merges it with any range it overlaps or touches, so a file downloaded
/// front to back by N connections stays at most N ranges long.
public struct ByteRangeSet: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The ranges, sorted by their lower bound, never empty, never overlapping or touching.
    public private(set) var ranges: [Range<Int64>]

    public init() {
        self.ranges = []
    }

    public init(_ ranges: some Sequence<Range<Int64>>) {
        self.ranges = []
        for range in ranges {
            self.insert(range)
        }
    }

    /// The number of bytes in the set.
    public var byteCount: Int64 {
        self.ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) }
    }

    public var isEmpty: Bool { self.ranges.isEmpty }

    /// Adds `range`, merging it with its neighbours.
    public mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        // First range whose upper bound reaches the new range (touching counts).
        var low = 0
        var high = self.ranges.count
        while low < high {
            let mid = (low + high) / 2
            if self.ranges[mid].upperBound < range.lowerBound {
                low = mid + 1
            } else {
                high = mid
            }
        }
        var merged = range
        var end = low
        while end < self.ranges.count, self.ranges[end].lowerBound <= merged.upperBound {
            merged =
                min(
                    merged.lowerBound,
                    self.ranges[end].lowerBound
                )..<max(merged.upperBound, self.ranges[end].upperBound)
            end += 1
        }
        self.ranges.replaceSubrange(low..<end, with: CollectionOfOne(merged))
    }

    /// Takes every byte of `range` out of the set, splitting a range that holds it in the middle.
    public mutating func remove(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        var result: [Range<Int64>] = []
        result.reserveCapacity(self.ranges.count + 1)
        for existing in self.ranges {
            guard existing.overlaps(range) else {
                result.append(existing)
                continue
            }
            if existing.lowerBound < range.lowerBound { result.append(existing.lowerBound..<range.lowerBound) }
            if range.upperBound < existing.upperBound { result.append(range.upperBound..<existing.upperBound) }
        }
        self.ranges = result
    }

    /// Whether every byte of `range` is in the set.
    public func contains(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return true }
        return self.ranges.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
    }

    /// Whether any byte of `range` is in the set.
    public func overlaps(_ range: Range<Int64>) -> Bool {
        self.ranges.contains { $0.overlaps(range) }
    }

    /// The parts of `whole` that are not in the set, in order.
    public func gaps(in whole: Range<Int64>) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        var cursor = whole.lowerBound
        for range in self.ranges where range.upperBound > whole.lowerBound {
            if range.lowerBound >= whole.upperBound { break }
            if range.lowerBound > cursor {
                result.append(cursor..<range.lowerBound)
            }
            cursor = max(cursor, range.upperBound)
        }
        if cursor < whole.upperBound {
            result.append(cursor..<whole.upperBound)
        }
        return result
    }

    public var description: String {
        "[" + self.ranges.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ", ") + "]"
    }
}
