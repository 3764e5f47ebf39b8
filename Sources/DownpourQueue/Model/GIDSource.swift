import Downpour
import Foundation

/// Makes the GIDs of new downloads: rising with time (the milliseconds since 1970 in the top 44 bits, random low
/// bits), and always above the last one made. The queue's table is keyed by GID, so rising GIDs are added at the
/// end of its b-tree, a few pages a commit, where random ones would touch a page each. Clients see 16 hex digits,
/// as aria2's; nothing depends on their order.
struct GIDSource: Sendable {
    private var last: UInt64 = 0
    private let now: @Sendable () -> UInt64

    /// - Parameter now: Milliseconds since 1970; the system clock unless a test injects its own.
    init(now: @escaping @Sendable () -> UInt64 = { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) }) {
        self.now = now
    }

    /// The next GID: never zero, and above every GID this source made before.
    mutating func next() -> DownloadID {
        var generator = SystemRandomNumberGenerator()
        let random = generator.next() & Self.lowMask
        var value = (self.now() << Self.lowBits) | random
        if value <= self.last { value = self.last &+ 1 + (random & 0xFF) }
        if value == 0 { value = 1 }
        self.last = value
        return DownloadID(value: value)
    }

    private static let lowBits: UInt64 = 20
    private static let lowMask: UInt64 = (1 << lowBits) - 1
}
