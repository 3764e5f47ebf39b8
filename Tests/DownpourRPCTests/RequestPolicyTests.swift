import Testing

@testable import DownpourRPC

/// The request policy as tables: host, origin, `Sec-Fetch-Site`, what is asked, configuration → allow or refuse.
@Suite struct RequestPolicyTests {
    typealias Verdict = RequestPolicy.Verdict

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var host: String?
        var origin: String? = nil
        var fetchSite: String? = nil
        var resource: RequestPolicy.Resource = .rpc
        /// `nil`: allowed with no CORS header; a number: refused with that status.
        var refused: Int? = nil
        var crossOrigin: RequestPolicy.CrossOrigin = .none
        var testDescription: String { self.name }
    }

    static let plain = RequestPolicy(port: 6800)
    static let own = "http://127.0.0.1:6800"

    /// The default daemon: no allowed hosts or origins.
    static let defaults: [Row] = [
        // Clients that are not browsers send neither Origin nor Sec-Fetch-Site.
        Row(name: "aria2p: loopback address and port", host: "127.0.0.1:6800"),
        Row(name: "curl to localhost", host: "localhost:6800"),
        Row(name: "IPv6 loopback", host: "[::1]:6800"),
        Row(name: "a name in capitals", host: "LOCALHOST:6800"),
        Row(name: "HTTP/1.0 without Host", host: nil),
        Row(name: "empty Host", host: ""),
        // DNS rebinding: the page's own name resolves to 127.0.0.1.
        Row(name: "rebinding name", host: "evil.example:6800", refused: 421),
        Row(
            name: "rebinding name, same-origin fetch",
            host: "evil.example:6800",
            origin: "http://evil.example:6800",
            fetchSite: "same-origin",
            refused: 421
        ),
        Row(name: "rebinding for the dashboard too", host: "evil.example:6800", resource: .page, refused: 421),
        Row(name: "loopback name on another port", host: "localhost:7000", refused: 421),
        Row(name: "loopback name without a port (80)", host: "127.0.0.1", refused: 421),
        Row(name: "127.0.0.2 is not named", host: "127.0.0.2:6800", refused: 421),
        Row(name: "a LAN address without listen-all", host: "192.168.1.5:6800", refused: 421),
        Row(name: "localhost. with a dot", host: "localhost.:6800", refused: 421),
        Row(name: "not a host", host: "a b", refused: 400),
        Row(name: "user info in Host", host: "x@127.0.0.1:6800", refused: 400),
        // A page of another origin: POST (no-cors fetch, form), WebSocket, preflight.
        Row(
            name: "no-cors POST from a page",
            host: "127.0.0.1:6800",
            origin: "http://evil.example",
            fetchSite: "cross-site",
            refused: 403
        ),
        Row(name: "form POST, Origin only", host: "127.0.0.1:6800", origin: "http://evil.example", refused: 403),
        Row(name: "WebSocket from a page", host: "127.0.0.1:6800", origin: "https://evil.example", refused: 403),
        Row(
            name: "another local port's page",
            host: "127.0.0.1:6800",
            origin: "http://127.0.0.1:8080",
            fetchSite: "same-site",
            refused: 403
        ),
        Row(
            name: "opaque origin (sandbox, file:)",
            host: "127.0.0.1:6800",
            origin: "null",
            fetchSite: "cross-site",
            refused: 403
        ),
        Row(
            name: "preflight from a page",
            host: "127.0.0.1:6800",
            origin: "http://evil.example",
            resource: .preflight,
            refused: 403
        ),
        // A <script> tag or a link: no Origin, but the browser says where the request comes from.
        Row(name: "JSONP from a script tag", host: "127.0.0.1:6800", fetchSite: "cross-site", refused: 403),
        Row(name: "JSONP from a same-site page", host: "127.0.0.1:6800", fetchSite: "same-site", refused: 403),
        Row(name: "a WebSocket client's own ws:// origin", host: "127.0.0.1:6800", origin: "ws://127.0.0.1"),
        Row(name: "a WebSocket client's wss:// origin", host: "127.0.0.1:6800", origin: "wss://anything.example"),
        Row(name: "a typed URL", host: "127.0.0.1:6800", fetchSite: "none"),
        Row(name: "same-origin without Origin", host: "127.0.0.1:6800", fetchSite: "same-origin"),
        // The dashboard's own page.
        Row(name: "dashboard's POST", host: "127.0.0.1:6800", origin: own, fetchSite: "same-origin"),
        Row(name: "dashboard at localhost", host: "localhost:6800", origin: "http://localhost:6800"),
        Row(name: "dashboard at [::1]", host: "[::1]:6800", origin: "http://[::1]:6800"),
        Row(name: "dashboard origin with a trailing slash", host: "127.0.0.1:6800", origin: own + "/"),
        Row(name: "own origin while Host says localhost", host: "localhost:6800", origin: own),
        Row(
            name: "https is not the daemon's scheme on loopback",
            host: "127.0.0.1:7000",
            origin: "https://127.0.0.1:6800",
            refused: 421
        ),
        // The dashboard's files: Host only.
        Row(name: "dashboard opened from a link", host: "127.0.0.1:6800", fetchSite: "cross-site", resource: .page),
        Row(
            name: "dashboard's script from another page",
            host: "127.0.0.1:6800",
            origin: "http://evil.example",
            resource: .page
        ),
    ]

    @Test(arguments: defaults)
    func defaultDaemon(_ row: Row) {
        Self.check(row, Self.plain)
    }

    /// `--rpc-allow-host` and `--rpc-allow-origin`, `--rpc-listen-all`'s own addresses.
    static let configured = RequestPolicy(
        port: 6800,
        allowedHosts: ["downpour.lan", "proxy.example:8443"],
        machineAddresses: ["192.168.1.5", "fe80::1"],
        allowedOrigins: [WebOrigin("https://ariang.example"), WebOrigin("http://localhost:8080")]
    )
    static let configuredRows: [Row] = [
        Row(name: "allowed name, any port", host: "downpour.lan"),
        Row(name: "allowed name, another port", host: "downpour.lan:6800"),
        Row(name: "allowed name:port", host: "proxy.example:8443"),
        Row(name: "allowed name, wrong port", host: "proxy.example:443", refused: 421),
        Row(name: "machine address with the port", host: "192.168.1.5:6800"),
        Row(name: "machine IPv6 address", host: "[FE80::1]:6800"),
        Row(name: "machine address, other port", host: "192.168.1.5:80", refused: 421),
        Row(
            name: "allowed origin",
            host: "127.0.0.1:6800",
            origin: "https://ariang.example",
            fetchSite: "cross-site",
            crossOrigin: .origin("https://ariang.example")
        ),
        Row(
            name: "allowed origin with its default port",
            host: "127.0.0.1:6800",
            origin: "https://AriaNg.example:443",
            crossOrigin: .origin("https://ariang.example")
        ),
        Row(
            name: "allowed origin's preflight",
            host: "127.0.0.1:6800",
            origin: "https://ariang.example",
            resource: .preflight,
            crossOrigin: .origin("https://ariang.example")
        ),
        Row(
            name: "allowed origin over http is another origin",
            host: "127.0.0.1:6800",
            origin: "http://ariang.example",
            refused: 403
        ),
        Row(
            name: "a local dev server listed",
            host: "127.0.0.1:6800",
            origin: "http://localhost:8080",
            fetchSite: "cross-site",
            crossOrigin: .origin("http://localhost:8080")
        ),
        Row(
            name: "the proxy's own page (https, default port)",
            host: "downpour.lan",
            origin: "https://downpour.lan",
            fetchSite: "same-origin"
        ),
        Row(name: "the proxy's page on its port", host: "proxy.example:8443", origin: "https://proxy.example:8443"),
        Row(name: "a page on the machine address", host: "192.168.1.5:6800", origin: "http://192.168.1.5:6800"),
        Row(name: "another LAN page", host: "192.168.1.5:6800", origin: "http://192.168.1.9:6800", refused: 403),
        Row(name: "script tag, still refused", host: "downpour.lan", fetchSite: "cross-site", refused: 403),
        Row(name: "rebinding still refused", host: "evil.example:6800", origin: "https://ariang.example", refused: 421),
    ]

    @Test(arguments: configuredRows)
    func configuredDaemon(_ row: Row) {
        Self.check(row, Self.configured)
    }

    /// `--rpc-allow-origin-all` (only with a secret, which the server checks): every origin, `*`.
    static let anyOrigin = RequestPolicy(port: 6800, allowsAnyOrigin: true)
    static let anyOriginRows: [Row] = [
        Row(name: "any page", host: "127.0.0.1:6800", origin: "http://evil.example", crossOrigin: .any),
        Row(name: "a script tag", host: "127.0.0.1:6800", fetchSite: "cross-site", crossOrigin: .any),
        Row(name: "no browser", host: "127.0.0.1:6800", crossOrigin: .any),
        Row(name: "the dashboard's files carry none", host: "127.0.0.1:6800", resource: .page),
        Row(name: "Host is still checked", host: "evil.example:6800", origin: "http://evil.example", refused: 421),
    ]

    @Test(arguments: anyOriginRows)
    func anyOriginDaemon(_ row: Row) {
        Self.check(row, Self.anyOrigin)
    }

    /// With a secret the token is the gate (browser extensions, AriaNg from a file, reverse proxies): every `Host`
    /// and origin is served, and only allowed origins may read the answers.
    static let withSecret = RequestPolicy(
        port: 6800,
        allowedOrigins: [WebOrigin("https://ariang.example")],
        secretGates: true
    )
    static let withSecretRows: [Row] = [
        Row(name: "aria2p on loopback", host: "127.0.0.1:6800"),
        Row(name: "a reverse proxy's own Host", host: "aria2.example.com"),
        Row(name: "a reverse proxy's Host and port", host: "aria2.example.com:8443"),
        Row(name: "a rebinding name (the token still gates)", host: "evil.example:6800"),
        Row(name: "not a host is still refused", host: "a b", refused: 400),
        Row(
            name: "Chrome extension",
            host: "127.0.0.1:6800",
            origin: "chrome-extension://mpkodccbngfoacfalldjimigbofkhgjn"
        ),
        Row(
            name: "Firefox extension",
            host: "localhost:6800",
            origin: "moz-extension://0f2bd1f4-6b4e-4c6a-9ad2-3f0a1b2c3d4e",
            fetchSite: "cross-site"
        ),
        Row(name: "AriaNg from a file", host: "127.0.0.1:6800", origin: "null", fetchSite: "cross-site"),
        Row(
            name: "a page of another origin: served, its answers unreadable",
            host: "127.0.0.1:6800",
            origin: "http://evil.example"
        ),
        Row(
            name: "a page of another origin's preflight: leave to send",
            host: "127.0.0.1:6800",
            origin: "http://evil.example",
            resource: .preflight,
            crossOrigin: .origin("http://evil.example")
        ),
        Row(
            name: "an extension's preflight through a proxy",
            host: "aria2.example.com",
            origin: "chrome-extension://abc",
            resource: .preflight,
            crossOrigin: .origin("chrome-extension://abc")
        ),
        Row(
            name: "an allowed origin reads its answers",
            host: "aria2.example.com",
            origin: "https://ariang.example",
            crossOrigin: .origin("https://ariang.example")
        ),
        Row(name: "JSONP from a script tag", host: "127.0.0.1:6800", fetchSite: "cross-site"),
        Row(name: "the dashboard through a proxy", host: "aria2.example.com", resource: .page),
        Row(name: "the proxy's own page", host: "aria2.example.com", origin: "https://aria2.example.com"),
    ]

    @Test(arguments: withSecretRows)
    func daemonWithSecret(_ row: Row) {
        Self.check(row, Self.withSecret)
    }

    /// `--rpc-allow-origin-all` with its secret: `*` for everyone, any `Host`.
    static let anyOriginWithSecret = RequestPolicy(port: 6800, allowsAnyOrigin: true, secretGates: true)
    static let anyOriginWithSecretRows: [Row] = [
        Row(
            name: "AriaNg's public page",
            host: "127.0.0.1:6800",
            origin: "https://ariang.mayswind.net",
            crossOrigin: .any
        ),
        Row(name: "through a proxy", host: "aria2.example.com", origin: "null", crossOrigin: .any),
        Row(name: "a preflight", host: "aria2.example.com", origin: "null", resource: .preflight, crossOrigin: .any),
    ]

    @Test(arguments: anyOriginWithSecretRows)
    func anyOriginDaemonWithSecret(_ row: Row) {
        Self.check(row, Self.anyOriginWithSecret)
    }

    @Test("Without the secret's gate, the same policy refuses what only the secret admits")
    func withoutSecretIsTodaysPolicy() {
        let plain = Self.withSecret.withoutSecret
        #expect(!plain.secretGates)
        Self.check(Row(name: "proxy Host", host: "aria2.example.com", refused: 421), plain)
        Self.check(
            Row(name: "extension", host: "127.0.0.1:6800", origin: "chrome-extension://abc", refused: 403),
            plain
        )
    }

    static func check(_ row: Row, _ policy: RequestPolicy, sourceLocation: SourceLocation = #_sourceLocation) {
        let verdict = policy.evaluate(
            host: row.host,
            origin: row.origin,
            fetchSite: row.fetchSite,
            resource: row.resource
        )
        switch (verdict, row.refused) {
        case (.allow(let crossOrigin), nil):
            #expect(crossOrigin == row.crossOrigin, "\(row.name)", sourceLocation: sourceLocation)
        case (.refuse(let refusal), let status?):
            #expect(refusal.status == status, "\(row.name): \(refusal)", sourceLocation: sourceLocation)
            #expect(!refusal.reason.isEmpty && !refusal.reason.contains("\n"), sourceLocation: sourceLocation)
        default:
            Issue.record(
                "\(row.name): \(verdict), expected \(row.refused.map { "refused \($0)" } ?? "allowed")",
                sourceLocation: sourceLocation
            )
        }
    }

    @Test func originsCompareNormalised() {
        #expect(WebOrigin("HTTP://LocalHost:80") == WebOrigin("http://localhost"))
        #expect(WebOrigin("https://a.example:443/") == WebOrigin("https://a.example"))
        #expect(WebOrigin("https://a.example") != WebOrigin("http://a.example"))
        #expect(WebOrigin("null") == WebOrigin("null"))
        #expect(!WebOrigin("null").isTuple)
        #expect(!WebOrigin("ariang.example").isTuple)
        #expect(WebOrigin("https://a.example:8443").description == "https://a.example:8443")
        #expect(WebOrigin("https://a.example:443").description == "https://a.example")
    }

    @Test func configurationRefusesWhatItCannotKeepSafe() {
        #expect(throws: RPCServerError.allowOriginAllWithoutSecret) {
            try RPCServerConfiguration(allowOriginAll: true).validate()
        }
        #expect(throws: RPCServerError.allowOriginAllWithoutSecret) {
            try RPCServerConfiguration(secret: "", allowOriginAll: true).validate()
        }
        #expect(throws: Never.self) { try RPCServerConfiguration(secret: "s", allowOriginAll: true).validate() }
        #expect(throws: RPCServerError.invalidOrigin("ariang.example")) {
            try RPCServerConfiguration(allowedOrigins: ["ariang.example"]).validate()
        }
        #expect(throws: RPCServerError.invalidHost("a/b")) {
            try RPCServerConfiguration(allowedHosts: ["a/b"]).validate()
        }
        #expect(throws: RPCServerError.invalidLimit("maximum connections", "at least 1")) {
            try RPCServerConfiguration(maximumConnections: 0).validate()
        }
    }
}
