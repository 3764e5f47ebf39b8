import DownpourTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import Downpour

@Suite("SOCKS5 user-name/password handshake", .timeLimit(.minutes(10)))
struct SOCKS5HandshakeTests {
    @Test(
        "a client's greeting: complete, offering no authentication, or not",
        arguments: [
            ([], SOCKS5Handshake.Greeting.incomplete),
            ([5], .incomplete),
            ([5, 2, 0], .incomplete),
            ([5, 1, 0], .acceptable(length: 3)),
            ([5, 2, 2, 0], .acceptable(length: 4)),
            // The greeting's length, not the bytes behind it (a client that already sent its CONNECT).
            ([5, 1, 0, 5, 1, 0, 3], .acceptable(length: 3)),
            ([5, 1, 2], .unacceptable),
            ([5, 0], .unacceptable),
            ([4, 1, 0], .unacceptable),
        ] as [([UInt8], SOCKS5Handshake.Greeting)]
    )
    func greeting(_ bytes: [UInt8], _ expected: SOCKS5Handshake.Greeting) {
        #expect(SOCKS5Handshake.parseGreeting(bytes) == expected)
    }

    @Test(
        "the proxy's method selection: only user name and password lets the relay on",
        arguments: [
            ([], SOCKS5Handshake.Reply.incomplete),
            ([5], .incomplete),
            ([5, 2], .accepted),
            ([5, 0], .refused(.methodNotOffered(0))),
            ([5, 0xFF], .refused(.methodNotOffered(0xFF))),
            ([4, 2], .refused(.malformed)),
        ] as [([UInt8], SOCKS5Handshake.Reply)]
    )
    func methodSelection(_ bytes: [UInt8], _ expected: SOCKS5Handshake.Reply) {
        #expect(SOCKS5Handshake.parseMethodSelection(bytes) == expected)
    }

    @Test(
        "the proxy's verdict on the credentials: status 0 only",
        arguments: [
            ([1], SOCKS5Handshake.Reply.incomplete),
            ([1, 0], .accepted),
            ([5, 0], .accepted),
            ([1, 1], .refused(.credentialsRefused(1))),
            ([1, 0xFF], .refused(.credentialsRefused(0xFF))),
            ([2, 0], .refused(.malformed)),
        ] as [([UInt8], SOCKS5Handshake.Reply)]
    )
    func authenticationReply(_ bytes: [UInt8], _ expected: SOCKS5Handshake.Reply) {
        #expect(SOCKS5Handshake.parseAuthenticationReply(bytes) == expected)
    }

    @Test("RFC 1929's request carries each length in one byte, so 255 bytes at most")
    func authenticationRequest() {
        #expect(
            SOCKS5Handshake.authenticationRequest(username: "al", password: "pé")
                == [1, 2, 0x61, 0x6C, 3, 0x70, 0xC3, 0xA9]
        )
        #expect(SOCKS5Handshake.authenticationRequest(username: "u", password: "") == [1, 1, 0x75, 0])
        let long = String(repeating: "x", count: 255)
        #expect(SOCKS5Handshake.authenticationRequest(username: long, password: long)?.count == 3 + 510)
        #expect(SOCKS5Handshake.authenticationRequest(username: long + "x", password: "") == nil)
        #expect(SOCKS5Handshake.authenticationRequest(username: "u", password: long + "x") == nil)
    }

    /// Two sockets of one loopback connection and a listener, as `/proc/net/tcp` shows them.
    static let table = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 11 1 0 100 0 0 10 0
           1: 0100007F:D431 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001        0 12 1 0 20 4 30 10 -1
           2: 0100007F:9C40 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 13 1 0 20 4 30 10 -1
        """

    #if os(Linux)
    @Test("a loopback connection from this process is the current user's, read from /proc/net/tcp")
    func peerOwnerOfARealConnection() async throws {
        let accepted = NIOLockedValueBox<(local: SocketAddress?, remote: SocketAddress?)?>(nil)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0 = (channel.localAddress, channel.remoteAddress) }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let client = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: server.localAddress!.port!).get()
        // The server side's view of it, as the relay sees its connections (the child is set up on its loop).
        try await waitUntil("the server to take the connection") { accepted.withLockedValue { $0 } != nil }
        let seen = accepted.withLockedValue { $0 }
        #expect(PeerOwner.isCurrentUser(local: seen?.local, remote: seen?.remote))
        // A port nobody connected from is nobody's: refused.
        #expect(
            !PeerOwner.isCurrentUser(local: seen?.local, remote: try SocketAddress(ipAddress: "127.0.0.1", port: 1))
        )
        try await client.close()
        try await server.close()
    }
    #endif

    @Test("the relay finds the owner of the socket that connected to it")
    func peerOwner() {
        // Port 0xD431 = 54321 connected to the relay's 0x9C40 = 40000: its socket belongs to uid 1001.
        #expect(PeerOwner.owner(in: Self.table, localPort: 54321, remotePort: 40000) == 1001)
        #expect(PeerOwner.owner(in: Self.table, localPort: 40000, remotePort: 54321) == 1000)
        #expect(PeerOwner.owner(in: Self.table, localPort: 54322, remotePort: 40000) == nil)
    }
}
