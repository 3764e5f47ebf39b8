import NIOConcurrencyHelpers

/// Tasks parked until what they wait for holds, each with a tag that says what that is: the one primitive behind
/// a download's pause gate, the WebSocket hub's wait for a subscriber and the queue's transaction gate.
///
/// A `Waiters` lives in the state its owner guards with a lock (an `NIOLockedValueBox`), so "is it ready?" and
/// "then park" happen under one lock and no wake-up falls between them
/// (``NIOConcurrencyHelpers/NIOLockedValueBox/wait(in:tag:cancellable:until:)``). The owner takes the waiters to
/// wake under the lock and resumes them once it has let go of it (``Wakeups/resume()``).
package struct Waiters<Tag: Sendable>: Sendable {
    private struct Parked: Sendable {
        var id: Int
        var tag: Tag
        var continuation: CheckedContinuation<Void, Never>
    }

    private var nextID = 0
    /// In the order they came.
    private var parked: [Parked] = []

    package init() {}

    /// How many are parked.
    package var count: Int { self.parked.count }

    /// A number for a waiter about to park, by which a cancelled one is taken out again.
    package mutating func makeID() -> Int {
        self.nextID += 1
        return self.nextID
    }

    /// Parks a waiter.
    package mutating func park(_ id: Int, tag: Tag, _ continuation: CheckedContinuation<Void, Never>) {
        self.parked.append(Parked(id: id, tag: tag, continuation: continuation))
    }

    /// Takes out every waiter whose tag matches, in the order they came.
    package mutating func take(where matches: (Tag) -> Bool) -> Wakeups {
        var taken: [CheckedContinuation<Void, Never>] = []
        self.parked.removeAll { waiter in
            guard matches(waiter.tag) else { return false }
            taken.append(waiter.continuation)
            return true
        }
        return Wakeups(continuations: taken)
    }

    /// Takes out the waiter that has waited longest, if any.
    package mutating func takeFirst() -> Wakeups {
        guard !self.parked.isEmpty else { return .none }
        return Wakeups(continuations: [self.parked.removeFirst().continuation])
    }

    /// Takes out the waiter with this number (a cancelled one); none when it was woken already.
    package mutating func take(id: Int) -> Wakeups {
        guard let index = self.parked.firstIndex(where: { $0.id == id }) else { return .none }
        return Wakeups(continuations: [self.parked.remove(at: index).continuation])
    }
}

/// Waiters taken out of ``Waiters``, to be resumed once the lock is let go of.
package struct Wakeups: Sendable {
    fileprivate let continuations: [CheckedContinuation<Void, Never>]

    /// Nobody to wake.
    package static let none = Wakeups(continuations: [])

    /// Whether nobody was taken.
    package var isEmpty: Bool { self.continuations.isEmpty }

    /// How many were taken.
    package var count: Int { self.continuations.count }

    /// Wakes them.
    package func resume() {
        for continuation in self.continuations { continuation.resume() }
    }
}

extension NIOLockedValueBox where Value: Sendable {
    /// Returns at once when `isReady` holds of the state; otherwise parks the task among the state's `waiters` with
    /// `tag` until the owner takes it out (``Waiters/take(where:)``, ``Waiters/takeFirst()``).
    ///
    /// `isReady` runs under the lock and may change the state (take a gate it finds free, say). A `cancellable`
    /// wait also returns when the task is cancelled, and the caller looks again at what it waited for; a wait that
    /// is not cancellable returns only when taken out, for an owner that hands something over with the wake-up.
    package func wait<Tag: Sendable>(
        in waiters: any WritableKeyPath<Value, Waiters<Tag>> & Sendable,
        tag: Tag,
        cancellable: Bool = true,
        until isReady: (inout Value) -> Bool
    ) async {
        let id = self.withLockedValue { $0[keyPath: waiters].makeID() }
        func parkUnlessReady(_ continuation: CheckedContinuation<Void, Never>) {
            let now = self.withLockedValue { state in
                if (cancellable && Task.isCancelled) || isReady(&state) { return true }
                state[keyPath: waiters].park(id, tag: tag, continuation)
                return false
            }
            if now { continuation.resume() }
        }
        guard cancellable else { return await withCheckedContinuation(parkUnlessReady) }
        await withTaskCancellationHandler {
            await withCheckedContinuation(parkUnlessReady)
        } onCancel: {
            self.withLockedValue { $0[keyPath: waiters].take(id: id) }.resume()
        }
    }
}
