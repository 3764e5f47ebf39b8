import NIOConcurrencyHelpers
import NIOCore

/// The server's one ``GuessLimit``, shared by its connections and WebSocket sessions across event loops.
final class TokenGuessLimiter: Sendable {
    private let state: NIOLockedValueBox<GuessLimit>

    init(_ limit: GuessLimit) {
        self.state = NIOLockedValueBox(limit)
    }

    /// When a request of `peer` that arrived `now` is checked, or `nil` (``GuessLimit/turn(of:at:)``).
    func turn(of peer: String, at now: NIODeadline) -> NIODeadline? {
        self.state.withLockedValue { $0.turn(of: peer, at: now) }
    }

    /// When `peer`'s next turn would be, while it is tracked.
    func nextTurn(of peer: String) -> NIODeadline? {
        self.state.withLockedValue { $0.nextTurn(of: peer) }
    }

    /// Requests of `peer` carried `count` wrong tokens.
    func failed(_ peer: String, count: Int = 1, at now: NIODeadline) {
        self.state.withLockedValue { $0.failed(peer, count: count, at: now) }
    }

    /// Waits for the peer's turn (a WebSocket message, a `GET`); `false` when it gets none.
    func waitForTurn(of peer: String) async -> Bool {
        let now = NIODeadline.now()
        guard let turn = self.turn(of: peer, at: now) else { return false }
        if turn > now { try? await Task.sleep(for: .nanoseconds((turn - now).nanoseconds)) }
        return true
    }

    /// A peer's key: its IPv4 address without the port, the /64 of an IPv6 one (one host may hold all of it), or
    /// `local` (a Unix socket, unknown).
    static func peer(of address: SocketAddress?) -> String {
        guard let address, let text = address.ipAddress else { return "local" }
        guard case .v6 = address, !text.hasPrefix("::ffff:") else { return text }
        var groups = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        if let gap = groups.firstIndex(of: ""), text.contains("::") {
            let present = groups.filter { !$0.isEmpty }
            groups.replaceSubrange(gap...gap, with: Array(repeating: "0", count: 8 - present.count))
            groups = groups.filter { !$0.isEmpty }
        }
        return groups.prefix(4).joined(separator: ":") + "::/64"
    }
}
