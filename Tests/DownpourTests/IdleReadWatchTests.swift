import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import Downpour

/// Every test is synchronous, on an `EmbeddedEventLoop` whose clock only moves when told.
@Suite("A request's read time-out counts only the waits for the server")
struct IdleReadWatchTests {
    static let timeout = TimeAmount.seconds(10)

    /// A watch on its own loop, noting the errors it ends its request with.
    struct Harness {
        let loop = EmbeddedEventLoop()
        let watch: IdleReadWatch
        let failures = NIOLockedValueBox<[any Error]>([])

        init() {
            self.watch = IdleReadWatch(timeout: IdleReadWatchTests.timeout, eventLoop: self.loop)
        }

        func start() {
            let failures = self.failures
            self.watch.start { error in failures.withLockedValue { $0.append(error) } }
        }

        var failureCount: Int { self.failures.withLockedValue { $0.count } }

        func advance(_ amount: TimeAmount) {
            self.loop.advanceTime(by: amount)
        }
    }

    @Test("nothing from the server for the whole time-out, counted from the request's end: read time-out, once")
    func expiresAfterTheTimeOut() throws {
        let harness = Harness()
        harness.advance(Self.timeout * 3)
        #expect(harness.failureCount == 0, "counted before the request went out")
        harness.start()
        harness.advance(Self.timeout - .nanoseconds(1))
        #expect(harness.failureCount == 0)
        harness.advance(.nanoseconds(1))
        let failures = harness.failures.withLockedValue { $0 }
        #expect(failures.count == 1)
        #expect((failures.first as? HTTPClientError) == .readTimeout)
        harness.advance(Self.timeout * 5)
        #expect(harness.failureCount == 1)
    }

    @Test("a part Downpour holds back counts nothing, however long; the time starts anew once it is taken")
    func heldPartCountsNothing() throws {
        let harness = Harness()
        harness.start()
        harness.advance(.seconds(5))
        let taken = harness.loop.makePromise(of: Void.self)
        let future = harness.watch.hold { taken.futureResult }
        // A probe's response parked until its connection takes it on, or a bandwidth limit's pause.
        harness.advance(Self.timeout * 100)
        #expect(harness.failureCount == 0)
        taken.succeed()
        #expect(throws: Never.self) { try result(of: future, on: harness.loop)?.get() }
        harness.advance(Self.timeout - .nanoseconds(1))
        #expect(harness.failureCount == 0, "the time before the hold was counted again")
        harness.advance(.nanoseconds(1))
        #expect(harness.failureCount == 1)
    }

    @Test("each part that comes starts the time anew; a failed part too")
    func everyPartRestarts() throws {
        let harness = Harness()
        harness.start()
        for index in 0..<20 {
            harness.advance(Self.timeout - .milliseconds(1))
            let future: EventLoopFuture<Void> = harness.watch.hold {
                index == 7
                    ? harness.loop.makeFailedFuture(HTTPClientError.cancelled) : harness.loop.makeSucceededVoidFuture()
            }
            _ = result(of: future, on: harness.loop)
        }
        #expect(harness.failureCount == 0)
        harness.advance(Self.timeout)
        #expect(harness.failureCount == 1)
    }

    @Test("once the request has ended, nothing is counted: no time-out after its end, nor after a part held at its end")
    func endStops() throws {
        let harness = Harness()
        harness.start()
        let taken = harness.loop.makePromise(of: Void.self)
        _ = harness.watch.hold { taken.futureResult }
        harness.watch.end()
        taken.succeed()
        harness.advance(Self.timeout * 10)
        #expect(harness.failureCount == 0)
    }

    @Test("parts that come before the request's end has gone out count nothing: the time starts with that end")
    func neverStarted() throws {
        let harness = Harness()
        let future: EventLoopFuture<Void> = harness.watch.hold { harness.loop.makeSucceededVoidFuture() }
        _ = result(of: future, on: harness.loop)
        harness.advance(Self.timeout * 10)
        #expect(harness.failureCount == 0)
    }
}
