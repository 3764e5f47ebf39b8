import NIOConcurrencyHelpers

/// Who may open a connection now: at most ``total`` connections at once across all downloads of a
/// ``Downloader``, and at most ``perHost`` to any one host. A pure value type; ``ConnectionBudget`` wraps it
/// for tasks that wait.
///
/// Waiters are served first come, first served, except that a waiter for a host that is full never holds up a
/// waiter for another host.
struct ConnectionBudgetState: Sendable, Hashable {
    private(set) var total: Int
    private(set) var perHost: Int
    private(set) var inUse: [String: Int] = [:]
    private(set) var inUseTotal = 0
    /// Waiting requests, oldest first.
    private(set) var waiting: [Waiter] = []

    struct Waiter: Sendable, Hashable {
        var id: Int
        var host: String
    }

    init(total: Int, perHost: Int) {
        self.total = max(1, total)
        self.perHost = max(1, perHost)
    }

    private func hasRoom(for host: String) -> Bool {
        self.inUseTotal < self.total && self.inUse[host, default: 0] < self.perHost
    }

    /// `true` when the permit is granted at once; else `id` waits until a ``release(host:)`` or
    /// ``setLimits(total:perHost:)`` hands it out.
    mutating func acquire(host: String, id: Int) -> Bool {
        if self.waiting.isEmpty || !self.waiting.contains(where: { $0.host == host }), self.hasRoom(for: host) {
            self.take(host)
            return true
        }
        self.waiting.append(Waiter(id: id, host: host))
        return false
    }

    /// Gives a permit back; returns the waiters that now hold one.
    mutating func release(host: String) -> [Int] {
        if let count = self.inUse[host], count > 0 {
            self.inUse[host] = count == 1 ? nil : count - 1
            self.inUseTotal -= 1
        }
        return self.grant()
    }

    /// Moves one permit held for `from` to `to` when `to` has room and nobody waits for it (the total stays);
    /// returns whether it moved, and the waiters that now hold a permit (for `from`, which has room now).
    mutating func move(from: String, to: String) -> (moved: Bool, granted: [Int]) {
        guard from != to else { return (true, []) }
        guard let count = self.inUse[from], count > 0, self.inUse[to, default: 0] < self.perHost,
            !self.waiting.contains(where: { $0.host == to })
        else { return (false, []) }
        self.inUse[from] = count == 1 ? nil : count - 1
        self.inUse[to, default: 0] += 1
        return (true, self.grant())
    }

    /// Stops waiting; `false` when `id` was not waiting (it holds a permit, or never asked).
    mutating func cancel(id: Int) -> Bool {
        guard let index = self.waiting.firstIndex(where: { $0.id == id }) else { return false }
        self.waiting.remove(at: index)
        return true
    }

    /// New limits from now on; connections already open stay open. Returns the waiters that now hold a permit.
    mutating func setLimits(total: Int, perHost: Int) -> [Int] {
        self.total = max(1, total)
        self.perHost = max(1, perHost)
        return self.grant()
    }

    private mutating func take(_ host: String) {
        self.inUse[host, default: 0] += 1
        self.inUseTotal += 1
    }

    private mutating func grant() -> [Int] {
        var granted: [Int] = []
        var index = 0
        while index < self.waiting.count, self.inUseTotal < self.total {
            let waiter = self.waiting[index]
            if self.hasRoom(for: waiter.host) {
                self.take(waiter.host)
                self.waiting.remove(at: index)
                granted.append(waiter.id)
            } else {
                index += 1
            }
        }
        return granted
    }
}

/// ``ConnectionBudgetState`` for tasks: ``acquire(host:)`` suspends until a permit is free.
final class ConnectionBudget: Sendable {
    private struct Box {
        var state: ConnectionBudgetState
        var nextID = 0
        var continuations: [Int: CheckedContinuation<Void, any Error>] = [:]
    }

    private let box: NIOLockedValueBox<Box>

    init(total: Int, perHost: Int) {
        self.box = NIOLockedValueBox(Box(state: ConnectionBudgetState(total: total, perHost: perHost)))
    }

    var state: ConnectionBudgetState {
        self.box.withLockedValue { $0.state }
    }

    /// Waits for a permit to open one connection to `host`; give it back with ``release(host:)``.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while waiting (it holds no permit then).
    func acquire(host: String) async throws {
        let id = self.box.withLockedValue { box in
            box.nextID += 1
            return box.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted: Bool? = self.box.withLockedValue { box in
                    if Task.isCancelled { return nil }
                    if box.state.acquire(host: host, id: id) { return true }
                    box.continuations[id] = continuation
                    return false
                }
                switch granted {
                case .some(true): continuation.resume()
                case .none: continuation.resume(throwing: CancellationError())
                case .some(false): break
                }
            }
        } onCancel: {
            let continuation = self.box.withLockedValue { box in
                box.state.cancel(id: id) ? box.continuations.removeValue(forKey: id) : nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    func release(host: String) {
        let ready = self.box.withLockedValue { box in
            box.state.release(host: host).compactMap { box.continuations.removeValue(forKey: $0) }
        }
        for continuation in ready { continuation.resume() }
    }

    /// See ``ConnectionBudgetState/move(from:to:)``.
    func move(from: String, to: String) -> Bool {
        let (moved, ready) = self.box.withLockedValue { box in
            let (moved, granted) = box.state.move(from: from, to: to)
            return (moved, granted.compactMap { box.continuations.removeValue(forKey: $0) })
        }
        for continuation in ready { continuation.resume() }
        return moved
    }

    func setLimits(total: Int, perHost: Int) {
        let ready = self.box.withLockedValue { box in
            box.state.setLimits(total: total, perHost: perHost).compactMap { box.continuations.removeValue(forKey: $0) }
        }
        for continuation in ready { continuation.resume() }
    }
}

extension ConnectionBudget {
    /// One permit held past the task that took it (the probe's, for the response connection 1 goes on with):
    /// given back once, by whoever ends first.
    final class Permit: Sendable {
        private let budget: ConnectionBudget
        /// The host it counts for while held; `nil` once given back.
        private let held: NIOLockedValueBox<String?>

        /// Takes over a permit already acquired for `host`.
        init(budget: ConnectionBudget, host: String) {
            self.budget = budget
            self.held = NIOLockedValueBox(host)
        }

        /// Counts the permit for `host` from now on (the host a redirect led to, or a mirror's), when that host has
        /// room and nobody waits for it; `false` otherwise, or when it was given back.
        func move(to host: String) -> Bool {
            self.held.withLockedValue { held in
                guard let from = held, self.budget.move(from: from, to: host) else { return false }
                held = host
                return true
            }
        }

        func release() {
            let host = self.held.withLockedValue { held in
                defer { held = nil }
                return held
            }
            if let host { self.budget.release(host: host) }
        }
    }
}
