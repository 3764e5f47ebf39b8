/// Which entries of a list `tellWaiting` and `tellStopped` return (aria2's
/// `AbstractPaginationRpcMethod::getPaginationRange`): a negative offset counts from the end (-1 is the last)
/// and the entries come newest first.
struct Pagination: Sendable, Hashable {
    /// The slice of the list, in list order.
    var range: Range<Int>
    /// Whether the slice is answered in reverse (the offset was negative).
    var isReversed: Bool

    /// - Precondition: `num >= 0` (the caller refuses a negative one).
    init(offset: Int64, num: Int64, size: Int) {
        self.isReversed = offset < 0
        let size = Int64(size)
        var num = num
        var start: Int64
        if offset < 0 {
            let last = offset.addingReportingOverflow(size)
            guard !last.overflow, last.partialValue >= 0, num > 0 else {
                self.range = 0..<0
                return
            }
            start = last.partialValue - (num - 1)
            if start < 0 {
                start = 0
                num = last.partialValue + 1
            }
        } else {
            guard offset < size else {
                self.range = 0..<0
                return
            }
            start = offset
        }
        let end = num > size - start ? size : start + num
        self.range = Int(start)..<Int(max(start, end))
    }
}
