import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxy one request goes through, in the terms of AsyncHTTPClient, whose clients take one proxy each.
///
/// - An HTTP proxy tunnels every request, `http` ones too, with `CONNECT` (AsyncHTTPClient never sends an
///   absolute-form `GET` to a proxy); TLS to an `https` origin runs inside the tunnel, checked against the
///   origin's name.
/// - `socks5h`: the proxy is given the host name (AsyncHTTPClient's SOCKS client sends names as they are).
/// - `socks5`: the host name is resolved here and the proxy is given the address, as curl does; the client's
///   DNS override keeps the name for the `Host` header, SNI and the certificate check.
struct ProxyRoute: Hashable, Sendable {
    var proxy: ProxyURL
    /// For `socks5`: the origin's host name and the address it resolved to here.
    var resolvedHost: String?
    var resolvedAddress: String?

    /// AsyncHTTPClient's form of the proxy.
    var clientProxy: HTTPClient.Configuration.Proxy {
        switch self.proxy.kind {
        case .http:
            let authorization = self.proxy.username.map {
                HTTPClient.Authorization.basic(username: $0, password: self.proxy.password ?? "")
            }
            return .server(host: self.proxy.host, port: self.proxy.port, authorization: authorization)
        case .socks5, .socks5h:
            return .socksServer(host: self.proxy.host, port: self.proxy.port)
        }
    }

    /// Whether the clients reach the proxy through a ``SOCKS5AuthRelay``: a SOCKS5 proxy with a user name, which
    /// AsyncHTTPClient's SOCKS client cannot give.
    var needsRelay: Bool {
        self.proxy.kind != .http && self.proxy.username != nil
    }

    /// The host names the client connects to by another address (the `socks5` resolution).
    var dnsOverride: [String: String] {
        guard let host = self.resolvedHost, let address = self.resolvedAddress else { return [:] }
        return [host: address]
    }
}

/// Picks the ``ProxyRoute`` of each request of one download, resolving `socks5` host names here once per host.
final class ProxyRouter: Sendable {
    private let settings: ProxySettings
    private let addresses = NIOLockedValueBox<[String: String]>([:])

    init(settings: ProxySettings) {
        self.settings = settings
    }

    /// The route for a request to `url`; `nil` to go straight to the server.
    ///
    /// - Throws: ``DownloadError/Code/network`` when a `socks5` proxy is to be given an address and the host
    ///   name does not resolve.
    func route(for url: URL) async throws(DownloadError) -> ProxyRoute? {
        guard let proxy = self.settings.proxy(for: url) else { return nil }
        guard proxy.kind == .socks5, let host = url.host.map(NoProxyRule.normalized),
            IPAddressBytes.parse(host) == nil
        else {
            return ProxyRoute(proxy: proxy)
        }
        if let address = self.addresses.withLockedValue({ $0[host] }) {
            return ProxyRoute(proxy: proxy, resolvedHost: host, resolvedAddress: address)
        }
        let address = try await BlockingIO.run { () throws(DownloadError) in try Self.resolve(host) }
        self.addresses.withLockedValue { $0[host] = address }
        return ProxyRoute(proxy: proxy, resolvedHost: host, resolvedAddress: address)
    }

    /// The first address `getaddrinfo` gives for `host`, as text.
    static func resolve(_ host: String) throws(DownloadError) -> String {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        var entry = list
        while status == 0, let current = entry {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            if let address = current.pointee.ai_addr {
                let family = current.pointee.ai_family
                let text: UnsafePointer<CChar>?
                if family == AF_INET {
                    text = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                        var raw = sin.pointee.sin_addr
                        return inet_ntop(AF_INET, &raw, &buffer, socklen_t(buffer.count))
                    }
                } else if family == AF_INET6 {
                    text = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                        var raw = sin6.pointee.sin6_addr
                        return inet_ntop(AF_INET6, &raw, &buffer, socklen_t(buffer.count))
                    }
                } else {
                    text = nil
                }
                if text != nil {
                    return String(
                        decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) },
                        as: UTF8.self
                    )
                }
            }
            entry = current.pointee.ai_next
        }
        let reason = status == 0 ? "no address" : String(cString: gai_strerror(status))
        throw DownloadError(
            code: .network,
            message: "Network error: the host name '\(host)' could not be resolved (\(reason)), so the SOCKS5 "
                + "proxy cannot be given its address; check the URL and the network, or let the proxy resolve "
                + "names (socks5h)."
        )
    }
}

/// A failure to reach the origin through a proxy: connecting to the proxy, or the proxy's refusal.
struct ProxyConnectionError: Error, CustomStringConvertible {
    var proxy: ProxyURL
    var underlying: any Error

    /// Wraps `error` when it is one of establishing a connection through `route`; otherwise `error` itself.
    /// Through a `relay`, the reason it kept (the proxy unreachable, or refusing the credentials) is what went
    /// wrong: the client saw only a refusal from the relay.
    static func wrapping(_ error: any Error, route: ProxyRoute?, relay: SOCKS5AuthRelay? = nil) -> any Error {
        guard let route else { return error }
        if let failure = relay?.takeFailure() {
            return ProxyConnectionError(proxy: route.proxy, underlying: failure)
        }
        guard Self.isConnectionError(error) else { return error }
        return ProxyConnectionError(proxy: route.proxy, underlying: error)
    }

    private static func isConnectionError(_ error: any Error) -> Bool {
        switch error {
        case is NIOConnectionError:
            return true
        case let error as IOError:
            return error.errnoCode == ECONNREFUSED
        case let error as HTTPClientError:
            return [
                .connectTimeout, .proxyAuthenticationRequired, .invalidProxyResponse, .httpProxyHandshakeTimeout,
                .socksHandshakeTimeout,
            ].contains(error)
        default:
            // NIOSOCKS's errors; Downpour does not import that module for its error types alone.
            return String(reflecting: type(of: error)).hasPrefix("NIOSOCKS.")
        }
    }

    /// What went wrong, for a message about reaching `target`.
    func reason(target: String) -> String {
        let typeName = String(reflecting: type(of: self.underlying))
        switch self.underlying {
        case let failure as SOCKS5AuthRelay.Failure:
            switch failure.reason {
            case .unreachable(let error):
                return ProxyConnectionError(proxy: self.proxy, underlying: error).reason(target: target)
            case .refused(.credentialsRefused(let status)):
                return "the SOCKS5 proxy \(self.proxy) refused the user name and password (status \(status))"
            case .refused(.methodNotOffered(let method)):
                return "the SOCKS5 proxy \(self.proxy) does not take a user name and password ("
                    + (method == SOCKS5Handshake.noAcceptableMethod
                        ? "it accepts none of the methods offered" : "it chose method \(method)")
                    + "); leave them out of the proxy URL if it needs none"
            case .refused(.malformed):
                return "the proxy \(self.proxy) did not answer as a SOCKS5 proxy"
            case .closed:
                return "the SOCKS5 proxy \(self.proxy) closed the connection while checking the user name and password"
            }
        case let error as HTTPClientError where error == .proxyAuthenticationRequired:
            return self.proxy.username == nil
                ? "the proxy \(self.proxy) asks for a user name and password (407); give them in the proxy URL"
                : "the proxy \(self.proxy) refused the user name and password (407)"
        case let error as HTTPClientError where error == .invalidProxyResponse:
            // tinyproxy, for one, answers wrong credentials with 401, which AsyncHTTPClient does not tell apart.
            return "the proxy \(self.proxy) refused to open a tunnel to \(target)"
                + (self.proxy.username == nil ? "" : "; check the user name and password")
        case let error as HTTPClientError
        where error == .httpProxyHandshakeTimeout || error == .socksHandshakeTimeout || error == .connectTimeout:
            return "the proxy \(self.proxy) did not connect to \(target) in time"
        case _
        where typeName.hasSuffix("NoValidAuthenticationMethod")
            || typeName.hasSuffix("InvalidAuthenticationSelection"):
            return "the SOCKS5 proxy \(self.proxy) requires authentication; give the user name and password in "
                + "the proxy URL (socks5h://USER:PASSWORD@HOST:PORT)"
        case _ where typeName.hasSuffix("ConnectionFailed"):
            return "the SOCKS5 proxy \(self.proxy) could not connect to \(target) (\(self.underlying))"
        case let error as NIOConnectionError:
            return "could not connect to the proxy \(self.proxy)"
                + (error.connectionErrors.first.map { " (\($0.error))" } ?? " (its name does not resolve)")
        case let error as IOError where error.errnoCode == ECONNREFUSED:
            return "the proxy \(self.proxy) refused the connection (no proxy is listening on that port)"
        default:
            return "going through the proxy \(self.proxy) to \(target) failed: \(self.underlying)"
        }
    }

    var description: String {
        "ProxyConnectionError(\(self.proxy): \(self.underlying))"
    }
}
