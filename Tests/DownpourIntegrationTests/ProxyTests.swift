import Downpour
import DownpourTestSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A proxy that records what a client asks of it and then refuses: the SOCKS5 address (its type and value), or
/// an HTTP proxy's request head. The real proxies (tinyproxy, microsocks) are in `scripts/interop/proxy-interop.sh`;
/// this one shows what goes over the wire.
final class RecordingProxy: Sendable {
    enum Kind { case socks5, http }

    struct SOCKSTarget: Equatable, Sendable {
        /// 1: IPv4 address, 3: host name, 4: IPv6 address.
        var addressType: UInt8
        var address: String
        var port: Int
    }

    let port: Int
    private let channel: any Channel
    private let recorded = Mutex<(socks: [SOCKSTarget], heads: [String], logins: [String])>(([], [], []))

    var socksTargets: [SOCKSTarget] { self.recorded.withLock { $0.socks } }
    var httpHeads: [String] { self.recorded.withLock { $0.heads } }
    /// The SOCKS5 user names and passwords it was given (RFC 1929), as `USER:PASSWORD`.
    var logins: [String] { self.recorded.withLock { $0.logins } }

    /// - Parameter login: for `.socks5`, the `USER:PASSWORD` it wants (RFC 1929); `nil` for no authentication.
    init(_ kind: Kind, login: String? = nil) async throws {
        let box = Box()
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(kind: kind, login: login, box: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.port = self.channel.localAddress?.port ?? 0
        box.proxy.withLock { $0 = self }
    }

    func shutdown() async throws {
        try await self.channel.close()
    }

    /// Lets handlers made before `init` ends reach the proxy.
    private final class Box: Sendable {
        let proxy = Mutex<RecordingProxy?>(nil)
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let kind: Kind
        let login: String?
        let box: Box
        var bytes: [UInt8] = []
        var greeted = false
        var authenticated = false

        init(kind: Kind, login: String?, box: Box) {
            self.kind = kind
            self.login = login
            self.authenticated = login == nil
            self.box = box
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = Self.unwrapInboundIn(data)
            self.bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
            switch self.kind {
            case .http:
                guard let head = String(bytes: self.bytes, encoding: .utf8), head.contains("\r\n\r\n") else { return }
                self.box.proxy.withLock { proxy in proxy?.recorded.withLock { $0.heads.append(head) } }
                let status = head.lowercased().contains("proxy-authorization") ? "403 Forbidden" : "407 Who Are You"
                self.reply(context, Array("HTTP/1.1 \(status)\r\nContent-Length: 0\r\n\r\n".utf8))
            case .socks5:
                if !self.greeted {
                    // VER NMETHODS METHODS…: take "no authentication", or user name and password (2) when it
                    // wants a login.
                    guard self.bytes.count >= 2, self.bytes.count >= 2 + Int(self.bytes[1]) else { return }
                    let methods = self.bytes[2..<(2 + Int(self.bytes[1]))]
                    let wanted: UInt8 = self.login == nil ? 0 : 2
                    self.bytes.removeFirst(2 + Int(self.bytes[1]))
                    guard methods.contains(wanted) else { return self.reply(context, [5, 0xFF]) }
                    self.greeted = true
                    context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: [5, wanted])), promise: nil)
                }
                if !self.authenticated {
                    // VER=1 ULEN USER PLEN PASSWORD
                    guard self.bytes.count >= 2, self.bytes.count >= 3 + Int(self.bytes[1]) else { return }
                    let userLength = Int(self.bytes[1])
                    let passwordLength = Int(self.bytes[2 + userLength])
                    guard self.bytes.count >= 3 + userLength + passwordLength else { return }
                    let user = String(decoding: self.bytes[2..<(2 + userLength)], as: UTF8.self)
                    let password = String(
                        decoding: self.bytes[(3 + userLength)..<(3 + userLength + passwordLength)],
                        as: UTF8.self
                    )
                    self.bytes.removeFirst(3 + userLength + passwordLength)
                    self.box.proxy.withLock { proxy in
                        proxy?.recorded.withLock { $0.logins.append("\(user):\(password)") }
                    }
                    guard "\(user):\(password)" == self.login else { return self.reply(context, [1, 1]) }
                    self.authenticated = true
                    context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: [1, 0])), promise: nil)
                }
                // VER CMD RSV ATYP ADDRESS PORT
                guard self.bytes.count >= 5 else { return }
                let type = self.bytes[3]
                let addressLength: Int
                switch type {
                case 1: addressLength = 4
                case 4: addressLength = 16
                default: addressLength = 1 + Int(self.bytes[4])
                }
                guard self.bytes.count >= 4 + addressLength + 2 else { return }
                let raw = Array(self.bytes[4..<(4 + addressLength)])
                let address: String
                switch type {
                case 1: address = raw.map(String.init).joined(separator: ".")
                case 4: address = raw.map { String($0, radix: 16) }.joined(separator: ":")
                default: address = String(decoding: raw.dropFirst(), as: UTF8.self)
                }
                let port = Int(self.bytes[4 + addressLength]) << 8 | Int(self.bytes[5 + addressLength])
                let target = SOCKSTarget(addressType: type, address: address, port: port)
                self.box.proxy.withLock { proxy in proxy?.recorded.withLock { $0.socks.append(target) } }
                // "Connection refused".
                self.reply(context, [5, 5, 0, 1, 0, 0, 0, 0, 0, 0])
            }
        }

        private func reply(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
            self.bytes = []
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: bytes))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}

@Suite("Proxies on the wire", .timeLimit(.minutes(10)))
struct ProxyTests {
    static func configuration(_ proxy: ProxySettings) -> DownloadConfiguration {
        var configuration = testConfiguration()
        configuration.retry.maximumTries = 1
        configuration.proxy = proxy
        // The connection through the in-process proxy ends with the proxy's answer, never a time-out: a machine busy
        // enough to take seconds for it (seen with the whole suite beside a release build) must not fail the test.
        configuration.timeouts.connect = .seconds(120)
        return configuration
    }

    static func run(_ url: String, _ proxy: ProxySettings) async throws -> DownloadError? {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let outcome = try await runDownload(
            url,
            to: .file(directory.file("x.bin")),
            configuration: Self.configuration(proxy)
        )
        #expect(directory.contents().isEmpty)
        return outcome.error
    }

    @Test("socks5h hands the proxy the host name; socks5 an address resolved here")
    func socksResolution() async throws {
        let proxy = try await RecordingProxy(.socks5)
        let url = "http://localhost:4321/file.bin"
        let remote = try await Self.run(
            url,
            ProxySettings(all: ProxyURL(kind: .socks5h, host: "127.0.0.1", port: proxy.port))
        )
        let local = try await Self.run(
            url,
            ProxySettings(all: ProxyURL(kind: .socks5, host: "127.0.0.1", port: proxy.port))
        )
        try await proxy.shutdown()
        #expect(remote?.code == .network)
        #expect(remote?.message.contains("SOCKS5 proxy socks5h://127.0.0.1:\(proxy.port)") == true, "\(remote!)")
        #expect(local?.code == .network)
        let targets = proxy.socksTargets
        try #require(targets.count == 2, "\(targets)")
        #expect(targets[0] == .init(addressType: 3, address: "localhost", port: 4321))
        #expect(targets[1].addressType == 1 || targets[1].addressType == 4, "an address, not a name: \(targets[1])")
        #expect(targets[1].address == "127.0.0.1" || targets[1].address == "0:0:0:0:0:0:0:1")
        #expect(targets[1].port == 4321)
    }

    @Test("a SOCKS5 proxy's user name and password go over RFC 1929; a refusal of them is named")
    func socksLogin() async throws {
        let proxy = try await RecordingProxy(.socks5, login: "alice:s3cr@t")
        let url = "http://localhost:4321/file.bin"
        let good = try await Self.run(
            url,
            ProxySettings(all: try ProxyURL(parsing: "socks5h://alice:s3cr%40t@127.0.0.1:\(proxy.port)"))
        )
        let wrong = try await Self.run(
            url,
            ProxySettings(all: try ProxyURL(parsing: "socks5h://alice:guess@127.0.0.1:\(proxy.port)"))
        )
        let none = try await Self.run(
            url,
            ProxySettings(all: ProxyURL(kind: .socks5h, host: "127.0.0.1", port: proxy.port))
        )
        try await proxy.shutdown()
        #expect(proxy.logins == ["alice:s3cr@t", "alice:guess"])
        // Let in, the proxy was asked for the host (and refused to connect to it).
        #expect(proxy.socksTargets == [.init(addressType: 3, address: "localhost", port: 4321)])
        #expect(good?.code == .network)
        #expect(good?.message.contains("could not connect to localhost") == true, "\(good!)")
        #expect(wrong?.code == .network)
        #expect(
            wrong?.message.contains("socks5h://alice:***@127.0.0.1:\(proxy.port) refused the user name and password")
                == true,
            "\(wrong!)"
        )
        #expect(wrong?.message.contains("guess") == false)
        #expect(none?.message.contains("requires authentication; give the user name and password") == true, "\(none!)")
    }

    @Test("an HTTP proxy gets a CONNECT with Proxy-Authorization; a refusal says what the proxy wanted")
    func httpConnect() async throws {
        let proxy = try await RecordingProxy(.http)
        let withCredentials = try await Self.run(
            "https://example.invalid:8443/a.iso",
            ProxySettings(https: try ProxyURL(parsing: "http://alice:p%40ss@127.0.0.1:\(proxy.port)"))
        )
        let without = try await Self.run(
            "http://example.invalid/a.iso",
            ProxySettings(all: try ProxyURL(parsing: "127.0.0.1:\(proxy.port)"))
        )
        try await proxy.shutdown()
        let heads = proxy.httpHeads
        try #require(heads.count == 2, "\(heads)")
        #expect(heads[0].hasPrefix("CONNECT example.invalid:8443 HTTP/1.1\r\n"))
        let credentials = Data("alice:p@ss".utf8).base64EncodedString()
        #expect(heads[0].lowercased().contains("proxy-authorization: basic \(credentials.lowercased())"), "\(heads[0])")
        #expect(heads[1].hasPrefix("CONNECT example.invalid:80 HTTP/1.1\r\n"))
        #expect(!heads[1].lowercased().contains("proxy-authorization"))
        #expect(withCredentials?.code == .network)
        #expect(withCredentials?.message.contains("refused to open a tunnel to example.invalid:8443") == true)
        #expect(withCredentials?.message.contains("check the user name and password") == true)
        #expect(withCredentials?.message.contains("p@ss") == false, "the password is never shown")
        #expect(without?.message.contains("asks for a user name and password (407)") == true, "\(without!)")
    }

    @Test("the proxy is chosen for each request: a redirect to another host takes that host's way")
    func redirectTakesTheNextHostsProxy() async throws {
        let proxy = try await RecordingProxy(.http)
        try await withServer(content: makeTestContent(count: 1024, seed: 5)) { server in
            let next = "http://localhost:\(server.port)/file.bin"
            let encoded = next.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let error = try await Self.run(
                server.url("/redirect-to?url=\(encoded)"),
                ProxySettings(all: ProxyURL(kind: .http, host: "127.0.0.1", port: proxy.port), noProxy: ["127.0.0.1"])
            )
            #expect(error?.code == .network)
            #expect(server.statistics().requests.count == 1, "the first request went straight to the server")
        }
        try await proxy.shutdown()
        #expect(proxy.httpHeads.count == 1)
        #expect(proxy.httpHeads.first?.hasPrefix("CONNECT localhost:") == true, "\(proxy.httpHeads)")
    }

    @Test("a host in the no-proxy list is reached directly")
    func bypass() async throws {
        let content = makeTestContent(count: 300 * 1024, seed: 9)
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: content) { server in
            let proxy = ProxySettings(all: ProxyURL(kind: .http, host: "127.0.0.1", port: 1), noProxy: ["127.0.0.0/8"])
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("x.bin")),
                configuration: Self.configuration(proxy)
            )
            _ = try outcome.value
            try expectFile(directory.file("x.bin"), equals: content, in: directory)
        }
    }
}
