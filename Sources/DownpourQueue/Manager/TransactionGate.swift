import Downpour
import NIOConcurrencyHelpers

/// Lets one transaction at a time through, in the order they came. The manager stores a change off its loop and
/// answers other calls while it waits; no other change of the queue may begin until that one is stored or refused
/// (``DownloadQueue/revertChanges()`` takes back exactly one change).
final class TransactionGate: Sendable {
    private struct State {
        var isHeld = false
        var waiting = Waiters<Void>()
    }

    private let state = NIOLockedValueBox(State())

    /// Takes the gate when it is free: `false` when it is held.
    func tryEnter() -> Bool {
        self.state.withLockedValue { state in
            guard !state.isHeld else { return false }
            state.isHeld = true
            return true
        }
    }

    /// Waits for the gate and takes it. Not cancellable: a transaction that waits is let through in turn, the gate
    /// handed to it by ``leave()``.
    func enter() async {
        await self.state.wait(in: \.waiting, tag: (), cancellable: false) { state in
            guard !state.isHeld else { return false }
            state.isHeld = true
            return true
        }
    }

    /// How many wait for the gate now (for tests that line waiters up).
    var waiters: Int {
        self.state.withLockedValue { $0.waiting.count }
    }

    /// Lets the next one through, still held, or frees the gate.
    func leave() {
        self.state.withLockedValue { state in
            precondition(state.isHeld, "the transaction gate was left without being entered")
            let next = state.waiting.takeFirst()
            if next.isEmpty { state.isHeld = false }
            return next
        }.resume()
    }
}
