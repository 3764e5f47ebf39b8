import NIOConcurrencyHelpers

/// The paused/running switch of one download: `pause()` and `resume()` flip it from any thread; the engine
/// awaits the flips.
final class PauseGate: Sendable {
    private struct State {
        var paused = false
        var nextWaiter = 0
        /// Waiters for a given value of `paused`.
        var waiters: [Int: (wantsPaused: Bool, continuation: CheckedContinuation<Void, Never>)] = [:]
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
        let ready = self.state.withLockedValue { state in
            state.paused = paused
            let ready = state.waiters.filter { $0.value.wantsPaused == paused }
            for key in ready.keys { state.waiters.removeValue(forKey: key) }
            return ready.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once the gate is paused, or the task is cancelled.
    func waitUntilPaused() async {
        await self.wait(forPaused: true)
    }

    /// Returns once the gate is open again, or the task is cancelled.
    func waitUntilResumed() async {
        await self.wait(forPaused: false)
    }

    private func wait(forPaused wanted: Bool) async {
        let id = self.state.withLockedValue { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLockedValue { state in
                    if state.paused == wanted || Task.isCancelled { return true }
                    state.waiters[id] = (wanted, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = self.state.withLockedValue { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume()
        }
    }
}
