import DownpourTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import Downpour

/// ``Waiters``, the one primitive behind the pause gate, the WebSocket hub's wait and the queue's transaction gate.
@Suite struct WaitersTests {
    struct State {
        var value = 0
        var waiters = Waiters<Int>()
    }

    /// Parks a task that waits for `value == tag`, and returns it once it is parked.
    static func parked(
        _ box: NIOLockedValueBox<State>,
        _ tag: Int,
        cancellable: Bool = true,
        woken: NIOLockedValueBox<[Int]>
    ) async throws -> Task<Void, Never> {
        let before = box.withLockedValue { $0.waiters.count }
        let task = Task {
            await box.wait(in: \.waiters, tag: tag, cancellable: cancellable) { $0.value == tag }
            woken.withLockedValue { $0.append(tag) }
        }
        try await waitUntil("the waiter for \(tag) to park") { box.withLockedValue { $0.waiters.count } > before }
        return task
    }

    @Test("take(where:) wakes the waiters whose tag matches, in the order they came; takeFirst the oldest")
    func takingByTag() async throws {
        let box = NIOLockedValueBox(State())
        let woken = NIOLockedValueBox<[Int]>([])
        let tasks = [
            try await Self.parked(box, 1, woken: woken), try await Self.parked(box, 2, woken: woken),
            try await Self.parked(box, 1, woken: woken), try await Self.parked(box, 3, woken: woken),
        ]
        let ones = box.withLockedValue { state in
            state.value = 1
            return state.waiters.take { $0 == 1 }
        }
        #expect(ones.count == 2)
        #expect(box.withLockedValue { $0.waiters.count } == 2)
        ones.resume()
        await tasks[0].value
        await tasks[2].value
        #expect(woken.withLockedValue { $0 } == [1, 1])

        // takeFirst: the 2 came before the 3.
        let first = box.withLockedValue { state in
            state.value = 2
            return state.waiters.takeFirst()
        }
        #expect(first.count == 1)
        first.resume()
        await tasks[1].value
        #expect(woken.withLockedValue { $0 }.last == 2)
        #expect(box.withLockedValue { $0.waiters.count } == 1)
        tasks[3].cancel()
        await tasks[3].value
        #expect(box.withLockedValue { $0.waiters.takeFirst() }.isEmpty)
    }

    @Test("a wait whose condition holds returns at once, and may change the state under the lock")
    func readyAtOnce() async {
        let box = NIOLockedValueBox(State(value: 5))
        await box.wait(in: \.waiters, tag: 5) { state in
            guard state.value == 5 else { return false }
            state.value = 6
            return true
        }
        #expect(box.withLockedValue { $0.value } == 6)
        #expect(box.withLockedValue { $0.waiters.count } == 0)
    }

    @Test("a cancelled wait returns and leaves no waiter behind; one that is not cancellable waits to be taken")
    func cancellation() async throws {
        let box = NIOLockedValueBox(State())
        let woken = NIOLockedValueBox<[Int]>([])
        let cancellable = try await Self.parked(box, 7, woken: woken)
        cancellable.cancel()
        await cancellable.value
        #expect(box.withLockedValue { $0.waiters.count } == 0)
        #expect(box.withLockedValue { $0.waiters.take(id: 1) }.isEmpty)

        let patient = try await Self.parked(box, 8, cancellable: false, woken: woken)
        patient.cancel()
        // Still parked after the cancellation: only a take lets it go.
        try await waitUntil("the cancellation to have reached the task") { patient.isCancelled }
        #expect(box.withLockedValue { $0.waiters.count } == 1)
        box.withLockedValue { $0.waiters.takeFirst() }.resume()
        await patient.value
        #expect(woken.withLockedValue { $0 } == [7, 8])

        // Cancelled before it began: returns at once, nothing parked.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await box.wait(in: \.waiters, tag: 9) { _ in false }
        }
        await early.value
        #expect(box.withLockedValue { $0.waiters.count } == 0)
    }
}
