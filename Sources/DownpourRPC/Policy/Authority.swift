/// A host and port as a `Host` header or an origin names them, lowercased: `127.0.0.1:6800`, `[::1]:6800`,
/// `localhost:80`. IPv6 addresses keep their brackets, so the text compares as written.
struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address, lowercased; an IPv6 address in brackets.
    var host: String
    /// The port; `nil` when none was written.
    var port: Int?

    /// Parses `host`, `host:port`, `[v6]` or `[v6]:port`; `nil` for anything else (a path, user info, spaces, an
    /// empty host, a port that is not a number from 0 to 65535).
    init?(_ text: some StringProtocol) {
        let text = text.lowercased()
        guard !text.isEmpty,
            !text.contains(where: { $0 == "/" || $0 == "@" || $0 == " " || $0 == "\t" || $0 == "?" || $0 == "#" })
        else { return nil }
        let hostPart: Substring
        let portPart: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            hostPart = text[...close]
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                portPart = nil
            } else {
                guard rest.hasPrefix(":") else { return nil }
                portPart = rest.dropFirst()
            }
        } else if let colon = text.firstIndex(of: ":") {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        } else {
            hostPart = text[...]
            portPart = nil
        }
        guard !hostPart.isEmpty, hostPart != "[]" else { return nil }
        self.host = String(hostPart)
        if let portPart {
            guard !portPart.isEmpty, portPart.allSatisfy(\.isASCII), let port = Int(portPart),
                (0...65535).contains(port)
            else { return nil }
            self.port = port
        } else {
            self.port = nil
        }
    }

    init(host: String, port: Int?) {
        self.host = host.lowercased()
        self.port = port
    }

    var description: String { self.port.map { "\(self.host):\($0)" } ?? self.host }
}
