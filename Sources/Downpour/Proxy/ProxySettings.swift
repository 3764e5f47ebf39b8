import Foundation

/// Which proxy each request goes through, chosen by its URL as curl chooses.
///
/// ```swift
/// var proxy = ProxySettings(all: try ProxyURL(parsing: "socks5h://127.0.0.1:1080"))
/// proxy.https = try ProxyURL(parsing: "http://proxy.example.com:3128")
/// proxy.noProxy = ["localhost", ".internal.example.com", "10.0.0.0/8"]
/// proxy.proxy(for: URL(string: "https://example.com/a.iso")!)   // the HTTP proxy
/// proxy.proxy(for: URL(string: "http://example.com/a.iso")!)    // the SOCKS5 proxy
/// proxy.proxy(for: URL(string: "http://build.internal.example.com/x")!)  // nil: straight to the server
/// ```
///
/// The library never reads the environment by itself; ``fromEnvironment(_:)`` turns the variables curl honours
/// into settings for a program that wants them. The proxy is chosen for each request, so a redirect to
/// another host takes the proxy (or the direct way) that host calls for.
public struct ProxySettings: Sendable, Hashable, Codable {
    /// The proxy for every URL whose scheme has none of its own (`ALL_PROXY`).
    public var all: ProxyURL?
    /// The proxy for `http` URLs (`http_proxy`); takes precedence over ``all``.
    public var http: ProxyURL?
    /// The proxy for `https` URLs (`https_proxy`); takes precedence over ``all``.
    public var https: ProxyURL?
    /// Hosts reached directly, without a proxy (`NO_PROXY`): `*` for all; host names, which take their
    /// subdomains along (`example.com` and `.example.com` both cover `www.example.com`); IP addresses and
    /// networks (`10.0.0.0/8`); each optionally with `:PORT`. Case does not matter.
    public var noProxy: [String]

    public init(all: ProxyURL? = nil, http: ProxyURL? = nil, https: ProxyURL? = nil, noProxy: [String] = []) {
        self.all = all
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// Whether any proxy is set.
    public var isEmpty: Bool {
        self.all == nil && self.http == nil && self.https == nil
    }

    /// The proxy a request to `url` goes through; `nil` to go straight to the server. The scheme's own proxy
    /// comes before ``all``; a host that ``noProxy`` names has none.
    public func proxy(for url: URL) -> ProxyURL? {
        let scheme = url.scheme?.lowercased() ?? ""
        let proxy: ProxyURL?
        switch scheme {
        case "http": proxy = self.http ?? self.all
        case "https": proxy = self.https ?? self.all
        default: proxy = self.all
        }
        guard let proxy else { return nil }
        let host = url.host ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        for entry in self.noProxy {
            if let rule = NoProxyRule(entry), rule.matches(host: host, port: port) { return nil }
        }
        return proxy
    }

    /// Checks the proxies and the no-proxy entries.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` naming the bad value.
    public func validate() throws(DownloadError) {
        for proxy in [self.all, self.http, self.https].compactMap({ $0 }) {
            try proxy.validate()
        }
        for entry in self.noProxy where NoProxyRule(entry) == nil {
            throw .invalidRequest(
                "'\(entry)' is not a no-proxy entry; give '*', a host name, a domain, an IP address or a network "
                    + "such as 10.0.0.0/8, each optionally with ':PORT'."
            )
        }
    }

    /// The entries of a no-proxy list as the `NO_PROXY` variable writes it: separated by commas or spaces.
    public static func noProxyEntries(_ list: String) -> [String] {
        list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" || $0 == "\n" }).map(String.init)
    }

    /// The settings curl takes from the environment:
    ///
    /// | field | variables, first set one wins |
    /// | --- | --- |
    /// | ``http`` | `http_proxy` only (a CGI program gets a request's `Proxy:` header as `HTTP_PROXY`) |
    /// | ``https`` | `https_proxy`, `HTTPS_PROXY` |
    /// | ``all`` | `all_proxy`, `ALL_PROXY` |
    /// | ``noProxy`` | `no_proxy`, `NO_PROXY` |
    ///
    /// An empty variable counts as unset, as for curl, and no-proxy entries that are none of the forms
    /// ``noProxy`` takes are passed over.
    ///
    /// ```swift
    /// let proxy = try ProxySettings.fromEnvironment(ProcessInfo.processInfo.environment)
    /// ```
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when a variable holds no usable proxy URL; the message
    ///   names the variable.
    public static func fromEnvironment(_ environment: [String: String]) throws(DownloadError) -> ProxySettings {
        func value(_ names: [String]) -> (name: String, value: String)? {
            for name in names {
                if let value = environment[name], !value.isEmpty { return (name, value) }
            }
            return nil
        }
        func proxy(_ names: [String]) throws(DownloadError) -> ProxyURL? {
            guard let found = value(names) else { return nil }
            do {
                return try ProxyURL(parsing: found.value)
            } catch {
                throw DownloadError(
                    code: .invalidRequest,
                    message: "The environment variable \(found.name): \(error.message)"
                )
            }
        }
        var settings = ProxySettings()
        settings.http = try proxy(["http_proxy"])
        settings.https = try proxy(["https_proxy", "HTTPS_PROXY"])
        settings.all = try proxy(["all_proxy", "ALL_PROXY"])
        if let list = value(["no_proxy", "NO_PROXY"]) {
            // As curl does, entries it cannot read are passed over rather than failing every download.
            settings.noProxy = Self.noProxyEntries(list.value).filter { NoProxyRule($0) != nil }
        }
        return settings
    }
}
