/// Whom the daemon answers, decided from a request's head before anything of it is parsed or run.
///
/// A web page the user merely opens can send requests to `127.0.0.1`: a `text/plain` or form `POST` and a
/// `<script>` `GET` go out without a preflight, a WebSocket handshake from any page is allowed by the browser, and a
/// page whose own name resolves to `127.0.0.1` (DNS rebinding) can read the answers. aria2 answers all of them
/// (`shared/aria2-rpc.md` §9). The policy refuses them by what the browser itself says about the request:
///
/// 1. **`Host`** must name the daemon: `127.0.0.1`, `localhost` or `[::1]` with its port, one of
///    ``machineAddresses`` with its port (listening on every interface), or one of ``allowedHosts`` (a name alone
///    allows any port, `name:port` that port only). Anything else is answered `421` (DNS rebinding sends the
///    page's own name). A request without `Host` (HTTP/1.0) comes from no browser and passes.
/// 2. **`Origin`**, which browsers send on cross-origin `POST`s, on every WebSocket handshake and on preflights,
///    must be the daemon's own (`http://127.0.0.1:PORT`, `http://localhost:PORT`, `http://[::1]:PORT`, or the
///    scheme with the very host and port of the request's `Host`), or one of ``allowedOrigins``, or any with
///    ``allowsAnyOrigin``. Else `403`.
/// 3. **`Sec-Fetch-Site`** `cross-site` or `same-site` with no allowed `Origin` is refused (`403`): that is a
///    `<script>` tag or a link, which send no `Origin`.
///
/// Clients that are not browsers (aria2p, curl, scripts) send neither `Origin` nor `Sec-Fetch-Site` and pass; some
/// WebSocket clients send an `Origin` of their own, `ws://` or `wss://`, which no page can have, and pass too.
/// The dashboard's files (``Resource/page``) are checked for their `Host` only: they hold no data, and a link to
/// the dashboard from another site must open it.
///
/// **With a secret** (``secretGates``) the token every call carries is the gate, as with aria2: browser extensions
/// (`chrome-extension://…`, `moz-extension://…`), AriaNg from a file (`Origin: null`) and reverse proxies (their
/// own `Host`) rely on that. Every `Host` and every origin is served, and a call without the right token gets
/// aria2's `Unauthorized`. What the browser lets a page *read* is still the policy's: an answer carries
/// `Access-Control-Allow-Origin` only for an allowed origin (or `*` with ``allowsAnyOrigin``). A preflight from
/// any origin is answered with leave to send (it carries no token and grants nothing: the call itself is checked),
/// so a page that holds the secret can call.
///
/// ```swift
/// let policy = RequestPolicy(port: 6800, allowedOrigins: [WebOrigin("https://ariang.example")])
/// policy.evaluate(host: "evil.example:6800", origin: nil, fetchSite: nil, resource: .rpc)
/// // .refuse(Refusal(status: 421, reason: "…"))
/// ```
public struct RequestPolicy: Sendable, Hashable {
    /// What a request asks for.
    public enum Resource: Sendable, Hashable {
        /// `/jsonrpc`: a `POST`, a `GET` (JSONP) or a WebSocket handshake.
        case rpc
        /// A CORS preflight (`OPTIONS /jsonrpc`).
        case preflight
        /// One of the dashboard's files.
        case page
    }

    /// The `Access-Control-Allow-Origin` an allowed request's response carries.
    public enum CrossOrigin: Sendable, Hashable {
        /// None: the request is same-origin, or from no browser.
        case none
        /// `*` (``RequestPolicy/allowsAnyOrigin``, as aria2's `--rpc-allow-origin-all`).
        case any
        /// This origin, listed in ``RequestPolicy/allowedOrigins``, echoed with `Vary: Origin`.
        case origin(String)
    }

    /// Why a request is not served: the status and a one-line reason for the person who sees it.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// 421 (the `Host` names another server) or 403 (the page may not call the daemon).
        public var status: Int
        /// One line, no newline.
        public var reason: String
        public var description: String { "\(self.status) \(self.reason)" }
    }

    /// The decision on one request.
    public enum Verdict: Sendable, Hashable {
        case allow(CrossOrigin)
        case refuse(Refusal)
    }

    /// The port the daemon listens on.
    public var port: Int
    /// More names the daemon answers to (`--rpc-allow-host`): `name` for any port (a reverse proxy forwards its
    /// own), `name:port` for that port only.
    public var allowedHosts: [String]
    /// The machine's own addresses and host name, answered with ``port`` when the daemon listens on every
    /// interface.
    public var machineAddresses: [String]
    /// Origins of pages that may call the daemon (`--rpc-allow-origin`), such as AriaNg served from elsewhere.
    public var allowedOrigins: [WebOrigin]
    /// Every origin may call (`--rpc-allow-origin-all`); the server refuses this without a secret.
    public var allowsAnyOrigin: Bool
    /// A secret is set: the token in each call is the gate, so no `Host` or origin is refused (the answers are still
    /// readable only by allowed origins).
    public var secretGates: Bool

    public init(
        port: Int,
        allowedHosts: [String] = [],
        machineAddresses: [String] = [],
        allowedOrigins: [WebOrigin] = [],
        allowsAnyOrigin: Bool = false,
        secretGates: Bool = false
    ) {
        self.port = port
        self.allowedHosts = allowedHosts
        self.machineAddresses = machineAddresses
        self.allowedOrigins = allowedOrigins
        self.allowsAnyOrigin = allowsAnyOrigin
        self.secretGates = secretGates
    }

    /// The same policy without the secret's gate: what a request would get from a daemon with no secret. A
    /// WebSocket this refuses but ``evaluate(host:origin:fetchSite:resource:)`` allows (a page of another origin,
    /// a reverse proxy) is served only once it has sent the right token: until then it gets no notification.
    public var withoutSecret: RequestPolicy {
        var policy = self
        policy.secretGates = false
        return policy
    }

    /// The names that need no option: the loopback addresses and `localhost`.
    static let loopbackNames = ["127.0.0.1", "localhost", "[::1]"]

    /// Decides on a request from its head.
    /// - Parameters:
    ///   - host: the `Host` header, `nil` when absent.
    ///   - origin: the `Origin` header, `nil` when absent.
    ///   - fetchSite: the `Sec-Fetch-Site` header, `nil` when absent.
    ///   - resource: what the request asks for.
    public func evaluate(host: String?, origin: String?, fetchSite: String?, resource: Resource) -> Verdict {
        let requestAuthority: Authority?
        switch self.checkHost(host) {
        case .failure(let refusal) where refusal.status == 421 && self.secretGates:
            requestAuthority = nil
        case .failure(let refusal): return .refuse(refusal)
        case .success(let authority): requestAuthority = authority
        }
        if resource == .page { return .allow(.none) }
        if self.allowsAnyOrigin { return .allow(.any) }
        if self.secretGates { return .allow(self.crossOriginWithSecret(origin, requestAuthority, resource)) }
        if let origin = origin.map({ WebOrigin($0) }), !origin.isNonBrowser {
            if self.isOwn(origin, requestAuthority: requestAuthority) { return .allow(.none) }
            if self.allowedOrigins.contains(origin) { return .allow(.origin(origin.description)) }
            return .refuse(
                Refusal(
                    status: 403,
                    reason: "a page from \(origin) may not call this daemon (allow it with rpc-allow-origin)"
                )
            )
        }
        switch fetchSite?.trimmingWhitespace().lowercased() {
        case "cross-site", "same-site":
            return .refuse(
                Refusal(
                    status: 403,
                    reason: "a request made by another site's page (Sec-Fetch-Site: \(fetchSite ?? "")) is not served"
                )
            )
        default:
            return .allow(.none)
        }
    }

    /// What an answer may say to the browser when the secret is the gate: an allowed origin may read it; any
    /// other may send a preflighted call (and read nothing).
    private func crossOriginWithSecret(
        _ origin: String?,
        _ requestAuthority: Authority?,
        _ resource: Resource
    ) -> CrossOrigin {
        guard let origin = origin.map({ WebOrigin($0) }), !origin.isNonBrowser else { return .none }
        if self.isOwn(origin, requestAuthority: requestAuthority) { return .none }
        if self.allowedOrigins.contains(origin) || resource == .preflight { return .origin(origin.description) }
        return .none
    }

    private func checkHost(_ host: String?) -> Result<Authority?, Refusal> {
        guard let host = host?.trimmingWhitespace(), !host.isEmpty else { return .success(nil) }
        guard var authority = Authority(host) else {
            return .failure(Refusal(status: 400, reason: "the Host header '\(host)' is not a host name"))
        }
        if authority.port == nil { authority.port = 80 }
        let port = authority.port
        if port == self.port, Self.loopbackNames.contains(authority.host) { return .success(authority) }
        if port == self.port, self.machineAddresses.contains(where: { Self.hostText($0) == authority.host }) {
            return .success(authority)
        }
        for allowed in self.allowedHosts {
            guard let name = Authority(allowed), name.host == authority.host else { continue }
            if name.port == nil || name.port == port { return .success(authority) }
        }
        return .failure(
            Refusal(
                status: 421,
                reason: "this daemon answers to 127.0.0.1:\(self.port), localhost:\(self.port) and the names it is "
                    + "given (rpc-allow-host), not to \(host)"
            )
        )
    }

    /// An address as a `Host` header writes it: an IPv6 address in brackets, lowercased.
    static func hostText(_ address: String) -> String {
        let address = address.lowercased()
        return address.contains(":") && !address.hasPrefix("[") ? "[\(address)]" : address
    }

    /// The daemon's own origins: a loopback name with its port, or the scheme with the request's own `Host`
    /// (which has passed the host check: the daemon's page, or a proxy's in front of it).
    private func isOwn(_ origin: WebOrigin, requestAuthority: Authority?) -> Bool {
        guard let scheme = origin.scheme, let authority = origin.authority else { return false }
        if scheme == "http", authority.port == self.port, Self.loopbackNames.contains(authority.host) { return true }
        if let requestAuthority, scheme == "http" || scheme == "https" {
            if authority.host == requestAuthority.host {
                // A Host without a port names the scheme's default port.
                let requestPort = requestAuthority.port
                return authority.port == requestPort
                    || (requestPort == 80 && authority.port == WebOrigin.defaultPort(of: scheme))
            }
        }
        return false
    }
}
