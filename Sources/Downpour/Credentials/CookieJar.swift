import Foundation

/// Cookies, read from and written to the Netscape `cookies.txt` format that curl, wget, aria2 and browser
/// extensions use, and updated by the servers' `Set-Cookie` headers.
///
/// A value type: ``DownloadConfiguration/cookies`` holds the jar a download starts from, and
/// ``Download/cookies`` the jar as the servers left it.
///
/// ```swift
/// var jar = CookieJar(netscapeFormat: try String(contentsOfFile: "cookies.txt", encoding: .utf8))
/// jar.cookieHeader(for: URL(string: "https://example.com/files/a.iso")!)  // "session=abc"
/// ```
public struct CookieJar: Sendable, Hashable, Codable {
    /// The cookies, oldest first.
    public var cookies: [Cookie]

    public init(cookies: [Cookie] = []) {
        self.cookies = []
        for cookie in cookies { self.insert(cookie) }
    }

    /// Reads a `cookies.txt` file: one cookie a line, seven fields separated by tabs (domain, whether
    /// subdomains match (`TRUE`/`FALSE`), path, secure (`TRUE`/`FALSE`), expiry in seconds since 1970 (`0`
    /// for a session cookie), name, value; a line of six fields has an empty value). A line starting with
    /// `#HttpOnly_` is an HTTP-only cookie; other lines starting with `#`, blank lines and malformed lines are
    /// passed over, as curl does.
    public init(netscapeFormat text: String) {
        self.init()
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            var httpOnly = false
            if line.hasPrefix("#HttpOnly_") {
                httpOnly = true
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") {
                continue
            }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 6 || fields.count == 7, !fields[0].isEmpty,
                let expiry = Int64(fields[4].trimmingCharacters(in: .whitespaces))
            else { continue }
            let path = fields[2].hasPrefix("/") ? String(fields[2]) : "/"
            self.insert(
                Cookie(
                    name: String(fields[5]),
                    value: fields.count == 7 ? String(fields[6]) : "",
                    domain: String(fields[0]),
                    includesSubdomains: fields[1].uppercased() == "TRUE",
                    path: path,
                    secure: fields[3].uppercased() == "TRUE",
                    httpOnly: httpOnly,
                    expires: expiry == 0 ? nil : Date(timeIntervalSince1970: Double(expiry))
                )
            )
        }
    }

    /// The jar as a `cookies.txt` file, without the cookies that have expired at `now`. Session cookies are
    /// kept, as curl keeps them.
    public func netscapeFormat(now: Date = Date()) -> String {
        var text =
            "# Netscape HTTP Cookie File\n# Written by downpour; one cookie a line, fields separated by tabs.\n\n"
        for cookie in self.cookies where !cookie.isExpired(at: now) {
            let expiry = cookie.expires.map { max(1, Int64($0.timeIntervalSince1970.rounded(.up))) } ?? 0
            let fields = [
                (cookie.httpOnly ? "#HttpOnly_" : "") + (cookie.includesSubdomains ? "." : "") + cookie.domain,
                cookie.includesSubdomains ? "TRUE" : "FALSE",
                cookie.path,
                cookie.secure ? "TRUE" : "FALSE",
                String(expiry),
                cookie.name,
                cookie.value,
            ]
            text += fields.joined(separator: "\t") + "\n"
        }
        return text
    }

    /// The cookies that go with a request for `url`: longer paths first, then oldest first (RFC 6265 §5.4).
    public func cookies(for url: URL, now: Date = Date()) -> [Cookie] {
        self.cookies.enumerated()
            .filter { $0.element.matches(url, now: now) }
            .sorted { ($1.element.path.count, $0.offset) < ($0.element.path.count, $1.offset) }
            .map(\.element)
    }

    /// The value of the `Cookie` header for a request for `url` (`name=value; name=value`); `nil` when no cookie
    /// goes with it.
    public func cookieHeader(for url: URL, now: Date = Date()) -> String? {
        let cookies = self.cookies(for: url, now: now)
        guard !cookies.isEmpty else { return nil }
        return cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Adds `cookie`, replacing the one with the same name, domain and path.
    public mutating func insert(_ cookie: Cookie) {
        if let index = self.cookies.firstIndex(where: { $0.isSameSlot(as: cookie) }) {
            self.cookies[index] = cookie
        } else {
            self.cookies.append(cookie)
        }
    }

    /// Adds every cookie of `other`, replacing those of this jar with the same name, domain and path.
    public mutating func merge(_ other: CookieJar) {
        for cookie in other.cookies { self.insert(cookie) }
    }

    /// Takes in one `Set-Cookie` header of a response to `url` (RFC 6265 §5.2 and §5.3): `name=value` with the
    /// attributes `Domain`, `Path`, `Secure`, `HttpOnly`, `Expires` and `Max-Age` (which wins over `Expires`).
    /// A cookie for a domain that `url`'s host is not in, or a `Secure` one sent over plain `http`, is refused;
    /// one that has already expired removes the cookie it names.
    public mutating func setCookie(_ header: String, from url: URL, now: Date = Date()) {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return }
        let parts = header.split(separator: ";", omittingEmptySubsequences: false)
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return }
        let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        let value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return }

        var expires: Date?
        var maximumAge: Date?
        var domain: String?
        var path: String?
        var secure = false
        var httpOnly = false
        for attribute in parts.dropFirst() {
            let key: String
            let attributeValue: String
            if let equals = attribute.firstIndex(of: "=") {
                key = attribute[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
                attributeValue = attribute[attribute.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            } else {
                key = attribute.trimmingCharacters(in: .whitespaces).lowercased()
                attributeValue = ""
            }
            switch key {
            case "expires":
                if let seconds = HTTPDate.parse(attributeValue) { expires = Date(timeIntervalSince1970: seconds) }
            case "max-age":
                guard let delta = Int64(attributeValue) else { continue }
                maximumAge =
                    delta <= 0 ? Date(timeIntervalSince1970: 0) : now.addingTimeInterval(Double(min(delta, 1 << 40)))
            case "domain":
                guard !attributeValue.isEmpty else { continue }
                var candidate = attributeValue.lowercased()
                if candidate.hasPrefix(".") { candidate.removeFirst() }
                domain = candidate
            case "path":
                path = attributeValue.hasPrefix("/") ? attributeValue : nil
            case "secure":
                secure = true
            case "httponly":
                httpOnly = true
            default:
                break
            }
        }
        if let domain {
            // Another site's cookie, or one for a whole top-level domain: refused.
            guard Cookie.domain(host, matches: domain), domain == host || domain.contains(".") else { return }
        }
        if secure && url.scheme?.lowercased() != "https" { return }
        let cookie = Cookie(
            name: name,
            value: value,
            domain: domain ?? host,
            includesSubdomains: domain != nil,
            path: path ?? Self.defaultPath(of: url),
            secure: secure,
            httpOnly: httpOnly,
            expires: maximumAge ?? expires
        )
        if cookie.isExpired(at: now) {
            self.cookies.removeAll { $0.isSameSlot(as: cookie) }
        } else {
            self.insert(cookie)
        }
    }

    /// RFC 6265 §5.1.4: the request path up to (not including) its last `/`, or `/`.
    static func defaultPath(of url: URL) -> String {
        let path = Cookie.requestPath(of: url)
        guard path.hasPrefix("/"), let lastSlash = path.lastIndex(of: "/"), lastSlash != path.startIndex else {
            return "/"
        }
        return String(path[..<lastSlash])
    }
}

extension Cookie {
    /// Whether `other` would replace this cookie: same name, domain and path (RFC 6265 §5.3).
    fileprivate func isSameSlot(as other: Cookie) -> Bool {
        self.name == other.name && self.domain == other.domain && self.path == other.path
    }
}
