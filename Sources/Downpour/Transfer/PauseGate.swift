import NIOConcurrencyHelpers

/// The paused/running switch of one download: `pause()` and `resume()` flip it from any thread; the engine
/// awaits the flips.
final class PauseGate: Sendable {
    private struct State {
        var paused = false
        /// Waiters for a given value of `paused`.
        var waiters = Waiters<Bool>()
    }

    private let state = NIOLockedValueBox(State())

    var isPaused: Bool {
        self.state.withLockedValue { $0.paused }
    }

    func pause() {
        self.set(paused: true)
    }

    func resume() {
        self.set(paused: false)
    }

    private func set(paused: Bool) {
        self.state.withLockedValue { state in
            state.paused = paused
            return state.waiters.take { $0 == paused }
        }.resume()
    }

    /// Returns once the gate is paused, or the task is cancelled.
    func waitUntilPaused() async {
        await self.state.wait(in: \.waiters, tag: true) { $0.paused }
    }

    /// Returns once the gate is open again, or the task is cancelled.
    func waitUntilResumed() async {
        await self.state.wait(in: \.waiters, tag: false) { !$0.paused }
    }
}
