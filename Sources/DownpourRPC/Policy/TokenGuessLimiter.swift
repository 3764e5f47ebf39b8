import NIOConcurrencyHelpers
import NIOCore

/// The server's one ``GuessLimit``, shared by its connections and WebSocket sessions across event loops.
final class TokenGuessLimiter: Sendable {
    private let state: NIOLockedValueBox<GuessLimit>

    init(_ limit: GuessLimit) {
        self.state = NIOLockedValueBox(limit)
    }

    /// When a request of `peer` that arrived `now` is checked (``GuessLimit/turn(of:at:)``).
    func turn(of peer: String, at now: NIODeadline) -> NIODeadline {
        self.state.withLockedValue { $0.turn(of: peer, at: now) }
    }

    /// A request of `peer` carried a wrong token.
    func failed(_ peer: String, at now: NIODeadline) {
        self.state.withLockedValue { $0.failed(peer, at: now) }
    }

    /// Waits for the peer's turn (a WebSocket message, a `GET`), then returns.
    func waitForTurn(of peer: String) async {
        let now = NIODeadline.now()
        let turn = self.turn(of: peer, at: now)
        guard turn > now else { return }
        try? await Task.sleep(for: .nanoseconds((turn - now).nanoseconds))
    }

    /// A peer's key: its address without the port (`nil`: a Unix socket or unknown, all one peer).
    static func peer(of address: SocketAddress?) -> String {
        address?.ipAddress ?? "local"
    }
}
