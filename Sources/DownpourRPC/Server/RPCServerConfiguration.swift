/// How ``RPCServer`` listens and whom it answers; the defaults are aria2's, and safe to leave running.
public struct RPCServerConfiguration: Sendable, Hashable {
    /// The TCP port (`--rpc-listen-port`); 0 picks a free one (tests).
    public var port: Int
    /// Listen on every interface (`--rpc-listen-all`) instead of the loopback address only. Refused without a
    /// ``secret``: a download daemon open to the network with no secret lets anyone write files on this machine.
    public var listenAll: Bool
    /// The `--rpc-secret` every `aria2.*` call must carry as `token:SECRET`; `nil` or empty: no check, and then
    /// only processes of the daemon's own user are served (``ownUserOnlyWithoutSecret``).
    public var secret: String?
    /// Answer browsers of any origin (`--rpc-allow-origin-all`): `Access-Control-Allow-Origin: *` on every
    /// response, and CORS preflights answered. Refused without a ``secret``: any page could drive the daemon.
    public var allowOriginAll: Bool
    /// More `Host` names the daemon answers to (`--rpc-allow-host`): `name` for any port, `name:port`.
    public var allowedHosts: [String]
    /// Origins of pages that may call the daemon (`--rpc-allow-origin`), e.g. `https://ariang.example`.
    public var allowedOrigins: [String]
    /// Without a secret, refuse connections from other users' processes (Linux). Tests that cannot connect as
    /// another user leave it on; there is no reason to turn it off but a platform that cannot tell.
    public var ownUserOnlyWithoutSecret: Bool
    /// The largest request body or WebSocket message taken (`--rpc-max-request-size`, 2 MiB); a larger body is
    /// refused with 413 and the connection closed, before it is read (a chunked one once it passes the limit).
    public var maximumRequestSize: Int
    /// How long a reply to a call with a wrong token is held back (aria2: about a second, to slow guessing).
    /// Tests set it to zero.
    public var unauthorizedDelay: Duration
    /// Wrong tokens one address may send before its requests take turns, one per ``guessInterval``
    /// (``GuessLimit``).
    public var guessBurst: Int
    /// Once an address is guessing, the time between two of its requests being checked.
    public var guessInterval: Duration
    /// The most bytes the bodies of all requests not yet answered may hold together; past it the connection of
    /// the one stalled longest is closed. Nothing is reserved for what a `Content-Length` announces.
    public var maximumHeldBodies: Int
    /// The most connections open at once (`--rpc-max-connections`); past it the one stalled longest is closed.
    public var maximumConnections: Int
    /// A request's head and body must be in within this of its first byte; a new connection must send one
    /// within it (`--rpc-request-timeout`).
    public var requestTimeout: Duration
    /// A kept-alive connection with no request is closed after this (`--rpc-idle-timeout`).
    public var idleTimeout: Duration
    /// A WebSocket is pinged this often, and closed when the last ping has no answer by the next one.
    public var webSocketPingInterval: Duration

    public init(
        port: Int = 6800,
        listenAll: Bool = false,
        secret: String? = nil,
        allowOriginAll: Bool = false,
        allowedHosts: [String] = [],
        allowedOrigins: [String] = [],
        ownUserOnlyWithoutSecret: Bool = true,
        maximumRequestSize: Int = 2 * 1024 * 1024,
        unauthorizedDelay: Duration = .seconds(1),
        guessBurst: Int = 10,
        guessInterval: Duration = .seconds(1),
        maximumHeldBodies: Int = 64 * 1024 * 1024,
        maximumConnections: Int = 1024,
        requestTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60),
        webSocketPingInterval: Duration = .seconds(30)
    ) {
        self.port = port
        self.listenAll = listenAll
        self.secret = secret
        self.allowOriginAll = allowOriginAll
        self.allowedHosts = allowedHosts
        self.allowedOrigins = allowedOrigins
        self.ownUserOnlyWithoutSecret = ownUserOnlyWithoutSecret
        self.maximumRequestSize = maximumRequestSize
        self.unauthorizedDelay = unauthorizedDelay
        self.guessBurst = guessBurst
        self.guessInterval = guessInterval
        self.maximumHeldBodies = maximumHeldBodies
        self.maximumConnections = maximumConnections
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.webSocketPingInterval = webSocketPingInterval
    }

    /// The address the server binds: `0.0.0.0` with ``listenAll``, else `127.0.0.1`.
    public var bindAddress: String { self.listenAll ? "0.0.0.0" : "127.0.0.1" }

    /// Whether a secret is set.
    public var hasSecret: Bool { !(self.secret?.isEmpty ?? true) }

    /// The request policy for a server on `port` (the bound one, when ``port`` is 0) with the machine's own
    /// addresses (used with ``listenAll``).
    public func requestPolicy(port: Int, machineAddresses: [String] = []) -> RequestPolicy {
        RequestPolicy(
            port: port,
            allowedHosts: self.allowedHosts,
            machineAddresses: self.listenAll ? machineAddresses : [],
            allowedOrigins: self.allowedOrigins.map { WebOrigin($0) },
            allowsAnyOrigin: self.allowOriginAll,
            secretGates: self.hasSecret
        )
    }

    /// Checks the configuration.
    /// - Throws: ``RPCServerError`` `.listenAllWithoutSecret`, `.allowOriginAllWithoutSecret`, `.invalidPort`,
    ///   `.invalidHost`, `.invalidOrigin`, `.invalidLimit`.
    public func validate() throws(RPCServerError) {
        guard (0...65535).contains(self.port) else { throw RPCServerError.invalidPort(self.port) }
        if self.listenAll, !self.hasSecret { throw RPCServerError.listenAllWithoutSecret }
        if self.allowOriginAll, !self.hasSecret { throw RPCServerError.allowOriginAllWithoutSecret }
        for host in self.allowedHosts where Authority(host) == nil {
            throw RPCServerError.invalidHost(host)
        }
        for origin in self.allowedOrigins where !WebOrigin(origin).isTuple {
            throw RPCServerError.invalidOrigin(origin)
        }
        guard self.maximumConnections >= 1 else {
            throw RPCServerError.invalidLimit("maximum connections", "at least 1")
        }
        guard self.guessBurst >= 1 else { throw RPCServerError.invalidLimit("guesses before slowing", "at least 1") }
        guard self.maximumHeldBodies >= self.maximumRequestSize else {
            throw RPCServerError.invalidLimit("bytes held by request bodies", "at least the largest request")
        }
        for (name, value) in [
            ("request time-out", self.requestTimeout), ("idle time-out", self.idleTimeout),
            ("WebSocket ping interval", self.webSocketPingInterval), ("guess interval", self.guessInterval),
        ] where value <= .zero {
            throw RPCServerError.invalidLimit(name, "more than 0")
        }
    }
}
