import Foundation

/// One cookie, as a `cookies.txt` line or a `Set-Cookie` header gives it.
public struct Cookie: Sendable, Hashable, Codable {
    public var name: String
    public var value: String
    /// The host (for a host-only cookie) or domain it belongs to: lowercased, without a leading dot.
    public var domain: String
    /// Whether it is also sent to the subdomains of ``domain`` (the second field of a `cookies.txt` line, or a
    /// `Domain` attribute); otherwise only to that very host.
    public var includesSubdomains: Bool
    /// Sent only for request paths at or under this one.
    public var path: String
    /// Sent only over `https`.
    public var secure: Bool
    /// Meant for HTTP only, not for scripts (`#HttpOnly_` in `cookies.txt`); kept and written back.
    public var httpOnly: Bool
    /// When it stops being sent; `nil` for a session cookie (an expiry of 0 in `cookies.txt`).
    public var expires: Date?

    public init(
        name: String,
        value: String,
        domain: String,
        includesSubdomains: Bool = false,
        path: String = "/",
        secure: Bool = false,
        httpOnly: Bool = false,
        expires: Date? = nil
    ) {
        var domain = domain.lowercased()
        if domain.hasPrefix(".") { domain.removeFirst() }
        self.name = name
        self.value = value
        self.domain = domain
        self.includesSubdomains = includesSubdomains
        self.path = path
        self.secure = secure
        self.httpOnly = httpOnly
        self.expires = expires
    }

    /// Whether this cookie goes with a request for `url` at `now`: domain, path, `secure` and expiry all allow
    /// it (RFC 6265 §5.4).
    public func matches(_ url: URL, now: Date = Date()) -> Bool {
        guard let host = url.host?.lowercased(), !self.isExpired(at: now) else { return false }
        if self.secure && url.scheme?.lowercased() != "https" { return false }
        let domainMatches =
            self.includesSubdomains ? Self.domain(host, matches: self.domain) : host == self.domain
        return domainMatches && Self.path(Self.requestPath(of: url), matches: self.path)
    }

    /// Whether it has expired at `now`; a session cookie never has.
    public func isExpired(at now: Date) -> Bool {
        guard let expires else { return false }
        return expires <= now
    }

    /// RFC 6265 §5.1.3: the host is the domain, or a name under it (never an IP address).
    static func domain(_ host: String, matches domain: String) -> Bool {
        if host == domain { return true }
        return host.hasSuffix("." + domain) && !Self.isIPAddress(host)
    }

    /// RFC 6265 §5.1.4: the cookie path is the request path, or a prefix of it that ends at a `/`.
    static func path(_ requestPath: String, matches cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).first == "/"
    }

    /// The path of `url` as it is sent, `/` when empty.
    static func requestPath(of url: URL) -> String {
        let path = url.path(percentEncoded: true)
        return path.isEmpty ? "/" : path
    }

    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }
}
