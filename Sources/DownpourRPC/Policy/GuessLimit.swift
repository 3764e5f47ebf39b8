import NIOCore

/// How fast one peer may guess the secret, as a value over an injected clock, tested as a table.
///
/// Each wrong token adds one to its peer's level, which drains by one every ``interval``. Until the peer has
/// ``burst`` failures not yet drained its requests are checked as they come. From then on (the level above
/// `burst - 1`) they take turns: one request of that peer is checked per ``interval``, the others wait (their bodies
/// are within the server's body budget). A peer that keeps guessing stays there; one that stops is served at once
/// again within an interval. A right token never
/// waits unless its peer is guessing, so a client on another address is never slowed by a page that guesses.
///
/// Peers are addresses, not ports: a page opens as many connections as it likes from one address (an IPv6 peer is
/// its /64, which one host can fill). Delaying only the wrong answers (aria2's one second) would not do: a guesser
/// that sends a thousand tokens at once gets the right one's answer at once. A batch or `system.multicall` counts
/// each wrong token it carries.
///
/// Turns are not handed out without end: a peer with ``burst`` turns waiting already gets none (`nil`), and its
/// request is refused at once, so a guesser cannot fill the server's connections with requests waiting for turns.
struct GuessLimit: Sendable, Hashable {
    /// Wrong tokens a peer may send before its requests take turns.
    let burst: Int
    /// The time between two turns, and the time one failure takes to drain.
    let interval: TimeAmount

    private struct Peer: Sendable, Hashable {
        var level: Double
        var updated: NIODeadline
        var nextTurn: NIODeadline
    }

    private var peers: [String: Peer] = [:]
    /// Peers tracked at most; past it the drained ones are forgotten (then, if still too many, the quietest).
    static let maximumPeers = 4096

    init(burst: Int = 10, interval: TimeAmount = .seconds(1)) {
        self.burst = max(1, burst)
        self.interval = max(.nanoseconds(1), interval)
    }

    /// When a request of `peer` that arrived `now` is checked: `now`, or its turn while the peer is guessing;
    /// `nil` when ``burst`` turns of the peer are waiting already. Each call while guessing takes a turn.
    mutating func turn(of peer: String, at now: NIODeadline) -> NIODeadline? {
        guard var state = self.peers[peer] else { return now }
        self.drain(&state, to: now)
        guard state.level > Double(self.burst - 1) else {
            self.peers[peer] = state
            return now
        }
        let turn = max(now, state.nextTurn)
        guard turn < now + self.interval * Int64(self.burst) else {
            self.peers[peer] = state
            return nil
        }
        state.nextTurn = turn + self.interval
        self.peers[peer] = state
        return turn
    }

    /// Requests of `peer` carried `count` wrong tokens.
    mutating func failed(_ peer: String, count: Int = 1, at now: NIODeadline) {
        var state = self.peers[peer] ?? Peer(level: 0, updated: now, nextTurn: now)
        self.drain(&state, to: now)
        state.level += Double(max(1, count))
        self.peers[peer] = state
        if self.peers.count > Self.maximumPeers { self.forgetQuiet(at: now) }
    }

    /// When `peer`'s next turn would be, while it is tracked (for tests and logs).
    func nextTurn(of peer: String) -> NIODeadline? {
        self.peers[peer]?.nextTurn
    }

    /// How many peers are tracked.
    var trackedPeers: Int { self.peers.count }

    private func drain(_ state: inout Peer, to now: NIODeadline) {
        guard now > state.updated else { return }
        let elapsed = Double((now - state.updated).nanoseconds) / Double(self.interval.nanoseconds)
        state.level = max(0, state.level - elapsed)
        state.updated = now
    }

    private mutating func forgetQuiet(at now: NIODeadline) {
        for (peer, var state) in self.peers {
            self.drain(&state, to: now)
            if state.level == 0, state.nextTurn <= now { self.peers[peer] = nil }
        }
        while self.peers.count > Self.maximumPeers,
            let quietest = self.peers.min(by: { $0.value.level < $1.value.level })?.key
        {
            self.peers[quietest] = nil
        }
    }
}
