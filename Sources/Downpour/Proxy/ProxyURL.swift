import Foundation

/// A proxy server: how to speak to it, where it is, and the credentials it wants.
///
/// Parse one from the form curl and aria2 take, `[SCHEME://][USER[:PASSWORD]@]HOST[:PORT]`:
///
/// ```swift
/// let proxy = try ProxyURL(parsing: "http://alice:s%40cret@proxy.example.com:3128")
/// // proxy.kind == .http, proxy.host == "proxy.example.com", proxy.port == 3128, proxy.password == "s@cret"
/// ```
///
/// - `http://` (also when no scheme is given): an HTTP proxy. Every request, `http` and `https` alike, goes
///   through a `CONNECT` tunnel, so the proxy sees only the host and port of an `https` request. A user name
///   and password are sent as `Proxy-Authorization: Basic`.
/// - `socks5h://`: a SOCKS5 proxy that resolves host names itself (the proxy's DNS).
/// - `socks5://`: a SOCKS5 proxy that is given an address resolved here (the local DNS), as curl does.
///
/// A SOCKS5 proxy's user name and password are sent with RFC 1929's user-name/password authentication (through a
/// relay on 127.0.0.1, see `SOCKS5AuthRelay`). Without a port, the port is 1080, as curl assumes. TLS to the
/// proxy itself (`https://`) and SOCKS4 are not supported and refused when parsing.
public struct ProxyURL: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How to speak to the proxy.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// An HTTP proxy, tunnelling every request with `CONNECT`.
        case http
        /// A SOCKS5 proxy, given an address resolved locally.
        case socks5
        /// A SOCKS5 proxy, given the host name to resolve.
        case socks5h
    }

    /// The port assumed when a proxy URL has none.
    public static let defaultPort = 1080

    public var kind: Kind
    /// The proxy's host name or IP address (an IPv6 address without brackets).
    public var host: String
    public var port: Int
    /// The user name for the proxy, percent-decoded; `nil` for none.
    public var username: String?
    /// The password for the proxy, percent-decoded; `nil` for none.
    public var password: String?

    public init(
        kind: Kind,
        host: String,
        port: Int = ProxyURL.defaultPort,
        username: String? = nil,
        password: String? = nil
    ) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Parses `[SCHEME://][USER[:PASSWORD]@]HOST[:PORT][/]`, the scheme being `http`, `socks5` or `socks5h`
    /// (any case), `http` when left out.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest``, saying what is wrong: an unsupported scheme (`https`,
    ///   `socks4`, …), a missing host, a bad port, SOCKS5 credentials longer than 255 bytes, a path.
    public init(parsing text: String) throws(DownloadError) {
        func bad(_ why: String) -> DownloadError {
            .invalidRequest("The proxy '\(ProxyURL.redacted(text))' \(why).")
        }
        var rest = Substring(text).trimmingSpaces()
        var kind = Kind.http
        if let separator = rest.range(of: "://") {
            let scheme = rest[..<separator.lowerBound].lowercased()
            switch scheme {
            case "http": kind = .http
            case "socks5": kind = .socks5
            case "socks5h": kind = .socks5h
            case "https":
                throw bad(
                    "uses TLS to the proxy itself, which is not supported; give an http:// proxy (https "
                        + "downloads still go through it encrypted, in a CONNECT tunnel)"
                )
            case "socks4", "socks4a", "socks":
                throw bad("is not SOCKS5; only socks5:// and socks5h:// SOCKS proxies are supported")
            default:
                throw bad("has the scheme '\(scheme)'; use http://, socks5:// or socks5h://")
            }
            rest = rest[separator.upperBound...]
        }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            guard rest[end...] == "/" else { throw bad("has a path or query; give only the host and port") }
            rest = rest[..<end]
        }
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            if let colon = userInfo.firstIndex(of: ":") {
                user = userInfo[..<colon]
                guard let decoded = String(userInfo[userInfo.index(after: colon)...]).removingPercentEncoding else {
                    throw bad("has a password with a broken percent-encoding")
                }
                password = decoded
            } else {
                user = userInfo
            }
            guard let decoded = String(user).removingPercentEncoding else {
                throw bad("has a user name with a broken percent-encoding")
            }
            username = decoded
            if password == nil { password = "" }
        }
        let host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("has an IPv6 address without its ']'") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("has something after its IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        let hostCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:%")
        guard !host.isEmpty, host.allSatisfy({ hostCharacters.contains($0) }) else {
            throw bad("has no valid host")
        }
        var port = Self.defaultPort
        if let portText, !portText.isEmpty {
            guard portText.allSatisfy(\.isASCII), let number = Int(portText), (1...65535).contains(number) else {
                throw bad("has the port '\(portText)'; a port is a number from 1 to 65535")
            }
            port = number
        }
        self.init(kind: kind, host: host.lowercased(), port: port, username: username, password: password)
        try self.validate()
    }

    /// Checks what ``init(parsing:)`` checks, for a value built otherwise.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest``.
    public func validate() throws(DownloadError) {
        guard !self.host.isEmpty else { throw .invalidRequest("The proxy \(self) has no host.") }
        guard (1...65535).contains(self.port) else {
            throw .invalidRequest("The proxy \(self) has the port \(self.port); a port is a number from 1 to 65535.")
        }
        if self.kind != .http, self.username != nil || self.password != nil {
            // RFC 1929: each is one length byte and at most 255 bytes; the user name is not empty.
            guard let username = self.username, !username.isEmpty else {
                throw .invalidRequest("The SOCKS5 proxy \(self) is given a password without a user name.")
            }
            guard username.utf8.count <= 255, (self.password ?? "").utf8.count <= 255 else {
                throw .invalidRequest(
                    "The SOCKS5 proxy \(self) is given a user name or password longer than 255 bytes, which SOCKS5 "
                        + "cannot carry."
                )
            }
        }
    }

    /// `KIND://[USER:***@]HOST:PORT`: the password is never shown.
    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        let credentials = self.username.map { "\($0)\(self.password.map { $0.isEmpty ? "" : ":***" } ?? "")@" } ?? ""
        return "\(self.kind.rawValue)://\(credentials)\(host):\(self.port)"
    }

    /// `text` with any password replaced by `***`, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://").map(\.upperBound) ?? text.startIndex
        guard start < at, let colon = text[start..<at].firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }
}
