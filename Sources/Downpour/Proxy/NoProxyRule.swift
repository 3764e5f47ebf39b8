#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One entry of a no-proxy list, as curl reads `NO_PROXY` (plus ports and networks):
///
/// - `*`: every host.
/// - `example.com`, `.example.com`, `*.example.com`: that host and every host under it (`www.example.com`), never
///   `badexample.com`; case-insensitive, trailing dots ignored.
/// - `192.168.1.7`, `::1`, `[::1]`: that address, when the URL names it as an address.
/// - `10.0.0.0/8`, `fd00::/8`: every address of that network.
/// - Any of these with `:PORT` (`example.com:8080`, `[::1]:8080`): only URLs to that port (the scheme's
///   default port when the URL has none).
struct NoProxyRule: Hashable, Sendable {
    enum Pattern: Hashable, Sendable {
        case any
        case domain(String)
        case network(address: [UInt8], prefixLength: Int)
    }

    var pattern: Pattern
    var port: Int?

    /// `nil` for an entry that is not one of the forms above (an empty one, a bad port or network).
    init?(_ entry: String) {
        var text = Substring(entry.lowercased()).trimmingSpaces()
        guard !text.isEmpty else { return nil }
        var port: Int?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let after = text[text.index(after: close)...]
            var inside = text[text.index(after: text.startIndex)..<close]
            if after.hasPrefix(":") {
                guard let number = Self.port(after.dropFirst()) else { return nil }
                port = number
            } else if after.hasPrefix("/") {
                inside = text[text.index(after: text.startIndex)...].filter { $0 != "]" }[...]
            } else if !after.isEmpty {
                return nil
            }
            text = inside
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            guard let number = Self.port(text[text.index(after: colon)...]) else { return nil }
            port = number
            text = text[..<colon]
        }
        self.port = port
        if text == "*" {
            self.pattern = .any
        } else if let slash = text.firstIndex(of: "/") {
            guard let address = IPAddressBytes.parse(String(text[..<slash])),
                let prefixLength = Int(text[text.index(after: slash)...]),
                (0...(address.count * 8)).contains(prefixLength)
            else { return nil }
            self.pattern = .network(address: address, prefixLength: prefixLength)
        } else if let address = IPAddressBytes.parse(String(text)) {
            self.pattern = .network(address: address, prefixLength: address.count * 8)
        } else {
            while text.hasPrefix("*") || text.hasPrefix(".") { text = text.dropFirst() }
            while text.hasSuffix(".") { text = text.dropLast() }
            guard !text.isEmpty, text.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." })
            else { return nil }
            self.pattern = .domain(String(text))
        }
    }

    private static func port(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.allSatisfy(\.isASCII), let number = Int(text), (1...65535).contains(number) else {
            return nil
        }
        return number
    }

    /// Whether a request to `host` (a name, or an address with or without brackets) on `port` bypasses the proxy.
    func matches(host: String, port: Int) -> Bool {
        if let wanted = self.port, wanted != port { return false }
        switch self.pattern {
        case .any:
            return true
        case .domain(let domain):
            let host = Self.normalized(host)
            return host == domain || host.hasSuffix("." + domain)
        case .network(let network, let prefixLength):
            guard let address = IPAddressBytes.parse(Self.normalized(host)), address.count == network.count else {
                return false
            }
            var bits = prefixLength
            for (a, b) in zip(address, network) where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                guard a & mask == b & mask else { return false }
                bits -= 8
            }
            return true
        }
    }

    /// Lower case, without IPv6 brackets and trailing dots.
    static func normalized(_ host: String) -> String {
        var host = Substring(host.lowercased())
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        while host.hasSuffix(".") { host = host.dropLast() }
        return String(host)
    }
}

/// The bytes of an IPv4 (4) or IPv6 (16) address written as text.
enum IPAddressBytes {
    static func parse(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, text.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return nil }
        if text.contains(":") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
            return withUnsafeBytes(of: &address) { Array($0) }
        }
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}
