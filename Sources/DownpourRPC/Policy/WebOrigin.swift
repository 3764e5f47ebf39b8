/// A web origin as a browser's `Origin` header states it (`scheme://host[:port]`), normalised: lowercased, the
/// scheme's default port (80 for `http`, 443 for `https`) written out, so `http://LOCALHOST` and
/// `http://localhost:80` are the same origin. Anything else (`null`, a `file:` page) is kept as its lowercased
/// text, equal only to the same text.
public struct WebOrigin: Sendable, Hashable, CustomStringConvertible {
    /// `http`, `https`, … ; `nil` for an origin that is not `scheme://authority` (`null`).
    let scheme: String?
    /// The host and port (the default port filled in); `nil` with ``scheme``.
    let authority: Authority?
    /// The text as given, lowercased.
    let text: String

    /// Reads an `Origin` header's value, or an origin given on the command line (a trailing `/` is taken off).
    public init(_ value: some StringProtocol) {
        var text = value.trimmingWhitespace().lowercased()
        if text.hasSuffix("/") { text.removeLast() }
        self.text = text
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            self.scheme = nil
            self.authority = nil
            return
        }
        let scheme = String(text[..<colon])
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }),
            var authority = Authority(text[text.index(colon, offsetBy: 3)...])
        else {
            self.scheme = nil
            self.authority = nil
            return
        }
        if authority.port == nil {
            authority.port = Self.defaultPort(of: scheme)
        }
        self.scheme = scheme
        self.authority = authority
    }

    /// Whether this is `scheme://host[:port]` with a host (not `null`, not an opaque origin).
    public var isTuple: Bool { self.authority != nil }

    /// An origin no page has: `ws://` or `wss://`, sent by some WebSocket clients that are not browsers (a page's
    /// origin is its own `http`, `https`, or `null`).
    public var isNonBrowser: Bool { self.scheme == "ws" || self.scheme == "wss" }

    /// `scheme://host:port` with the default port left out, as browsers send it.
    public var description: String {
        guard let scheme, let authority else { return self.text }
        if authority.port == Self.defaultPort(of: scheme) { return "\(scheme)://\(authority.host)" }
        return "\(scheme)://\(authority)"
    }

    public static func == (lhs: WebOrigin, rhs: WebOrigin) -> Bool {
        if lhs.isTuple || rhs.isTuple {
            return lhs.scheme == rhs.scheme && lhs.authority == rhs.authority
        }
        return lhs.text == rhs.text
    }

    public func hash(into hasher: inout Hasher) {
        if self.isTuple {
            hasher.combine(self.scheme)
            hasher.combine(self.authority)
        } else {
            hasher.combine(self.text)
        }
    }

    static func defaultPort(of scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": return 80
        case "https", "wss": return 443
        default: return nil
        }
    }
}

extension StringProtocol {
    /// The text without spaces and tabs at either end.
    func trimmingWhitespace() -> Substring {
        let text = Substring(self)
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
        else { return text[text.endIndex...] }
        return text[start...last]
    }
}
