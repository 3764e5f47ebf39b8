/// How ``RPCServer`` listens and whom it answers; the defaults are aria2's.
public struct RPCServerConfiguration: Sendable, Hashable {
    /// The TCP port (`--rpc-listen-port`); 0 picks a free one (tests).
    public var port: Int
    /// Listen on every interface (`--rpc-listen-all`) instead of the loopback address only. Refused without a
    /// ``secret``: a download daemon open to the network with no secret lets anyone write files on this machine.
    public var listenAll: Bool
    /// The `--rpc-secret` every `aria2.*` call must carry as `token:SECRET`; `nil` or empty: no check.
    public var secret: String?
    /// Answer browsers of any origin (`--rpc-allow-origin-all`): `Access-Control-Allow-Origin: *` on every
    /// response, and CORS preflights answered.
    public var allowOriginAll: Bool
    /// The largest request body or WebSocket message taken (`--rpc-max-request-size`, 2 MiB); a larger body is
    /// refused with 413 and the connection closed, before it is read.
    public var maximumRequestSize: Int
    /// How long a reply to a call with a wrong token is held back (aria2: about a second, to slow guessing).
    /// Tests set it to zero.
    public var unauthorizedDelay: Duration

    public init(
        port: Int = 6800,
        listenAll: Bool = false,
        secret: String? = nil,
        allowOriginAll: Bool = false,
        maximumRequestSize: Int = 2 * 1024 * 1024,
        unauthorizedDelay: Duration = .seconds(1)
    ) {
        self.port = port
        self.listenAll = listenAll
        self.secret = secret
        self.allowOriginAll = allowOriginAll
        self.maximumRequestSize = maximumRequestSize
        self.unauthorizedDelay = unauthorizedDelay
    }

    /// The address the server binds: `0.0.0.0` with ``listenAll``, else `127.0.0.1`.
    public var bindAddress: String { self.listenAll ? "0.0.0.0" : "127.0.0.1" }

    /// Checks the configuration.
    /// - Throws: ``RPCServerError`` `.listenAllWithoutSecret`, `.invalidPort`.
    public func validate() throws(RPCServerError) {
        guard (0...65535).contains(self.port) else { throw RPCServerError.invalidPort(self.port) }
        if self.listenAll, self.secret?.isEmpty ?? true { throw RPCServerError.listenAllWithoutSecret }
    }
}
