import Downpour
import NIOConcurrencyHelpers
import Testing

@testable import DownpourQueue

@Suite struct GIDSourceTests {
    @Test("GIDs rise with the clock, stay above the last one when the clock stands still or goes back, never zero")
    func gidsRise() {
        let clock = NIOLockedValueBox<UInt64>(1_700_000_000_000)
        var source = GIDSource(now: { clock.withLockedValue { $0 } })
        var last = source.next()
        #expect(last.value >> 20 == 1_700_000_000_000)
        for step in 0..<10_000 {
            // Still, forwards, and now and then backwards (a clock set back).
            clock.withLockedValue { $0 = step % 997 == 0 ? $0 - 5_000 : $0 + UInt64(step % 3) }
            let next = source.next()
            #expect(next.value > last.value)
            last = next
        }
        var zero = GIDSource(now: { 0 })
        #expect(zero.next().value != 0)
    }

    @Test("GIDs from the system clock are distinct, rising, and 16 hexadecimal digits")
    func systemClockGIDs() {
        var source = GIDSource()
        let ids = (0..<1000).map { _ in source.next() }
        #expect(ids.map(\.value) == ids.map(\.value).sorted())
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.description.count == 16 })
    }
}
