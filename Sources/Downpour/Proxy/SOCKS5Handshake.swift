/// The bytes of SOCKS5's method negotiation (RFC 1928 §3) and of its user-name/password authentication
/// (RFC 1929), which ``SOCKS5AuthRelay`` speaks: a value type with no I/O, so every answer a proxy can give is
/// tested as a table.
///
/// The relay sits between AsyncHTTPClient (whose SOCKS client offers only "no authentication") and a proxy that
/// wants a user name and password: it reads the client's greeting, authenticates to the proxy, answers the
/// client, and from then on passes bytes through unchanged (the client's `CONNECT` and the proxy's reply too).
enum SOCKS5Handshake {
    /// Method numbers of RFC 1928.
    static let noAuthentication: UInt8 = 0x00
    static let userPassword: UInt8 = 0x02
    static let noAcceptableMethod: UInt8 = 0xFF

    /// What a client's greeting (`VER NMETHODS METHODS…`) says.
    enum Greeting: Equatable {
        /// More bytes are needed.
        case incomplete
        /// A SOCKS5 greeting of `length` bytes that offers "no authentication".
        case acceptable(length: Int)
        /// Not SOCKS5, or no method the relay can take.
        case unacceptable
    }

    static func parseGreeting(_ bytes: some Collection<UInt8>) -> Greeting {
        var iterator = bytes.makeIterator()
        guard let version = iterator.next() else { return .incomplete }
        guard version == 5 else { return .unacceptable }
        guard let count = iterator.next() else { return .incomplete }
        guard bytes.count >= 2 + Int(count) else { return .incomplete }
        let methods = bytes.dropFirst(2).prefix(Int(count))
        return methods.contains(Self.noAuthentication) ? .acceptable(length: 2 + Int(count)) : .unacceptable
    }

    /// The relay's greeting to the proxy: SOCKS5, one method, user name and password.
    static let proxyGreeting: [UInt8] = [5, 1, Self.userPassword]

    /// The answer to a client's greeting: `method` chosen.
    static func methodSelection(_ method: UInt8) -> [UInt8] {
        [5, method]
    }

    /// RFC 1929's request: `VER=1 ULEN USER PLEN PASSWD`. `nil` when either is longer than 255 bytes.
    static func authenticationRequest(username: String, password: String) -> [UInt8]? {
        let user = Array(username.utf8)
        let pass = Array(password.utf8)
        guard user.count <= 255, pass.count <= 255 else { return nil }
        return [1, UInt8(user.count)] + user + [UInt8(pass.count)] + pass
    }

    /// Why the proxy would not let the relay in.
    enum Refusal: Equatable, Sendable {
        /// It answered with another method than user name and password (`0xFF`: none of those offered).
        case methodNotOffered(UInt8)
        /// It refused the user name and password (RFC 1929 status, non-zero).
        case credentialsRefused(UInt8)
        /// It answered something that is not SOCKS5.
        case malformed
    }

    /// What two bytes from the proxy say, at one step of the relay's authentication.
    enum Reply: Equatable {
        case incomplete
        case accepted
        case refused(Refusal)
    }

    /// The proxy's method selection (`VER METHOD`): only user name and password is accepted.
    static func parseMethodSelection(_ bytes: some Collection<UInt8>) -> Reply {
        guard bytes.count >= 2 else { return .incomplete }
        let version = bytes[bytes.startIndex]
        let method = bytes[bytes.index(after: bytes.startIndex)]
        guard version == 5 else { return .refused(.malformed) }
        return method == Self.userPassword ? .accepted : .refused(.methodNotOffered(method))
    }

    /// The proxy's answer to the user name and password (`VER STATUS`, RFC 1929): status 0 lets the relay in.
    static func parseAuthenticationReply(_ bytes: some Collection<UInt8>) -> Reply {
        guard bytes.count >= 2 else { return .incomplete }
        let version = bytes[bytes.startIndex]
        let status = bytes[bytes.index(after: bytes.startIndex)]
        // RFC 1929 says version 1; some proxies answer with 5. Either way the status decides.
        guard version == 1 || version == 5 else { return .refused(.malformed) }
        return status == 0 ? .accepted : .refused(.credentialsRefused(status))
    }
}
