import NIOCore
import NIOEmbedded
import Testing

@testable import DownpourRPC

/// ``ConnectionGuard`` on an `EmbeddedChannel` whose loop's clock the test moves: what closes a connection and
/// what keeps it open, as a table of steps.
@Suite struct ConnectionGuardTests {
    enum Step: Sendable, CustomStringConvertible {
        /// Moves the loop's clock on.
        case wait(milliseconds: Int64)
        /// Bytes arrive from the peer.
        case bytes
        /// A boundary the HTTP handlers report.
        case event(ConnectionEvent)

        var description: String {
            switch self {
            case .wait(let milliseconds): "wait \(milliseconds) ms"
            case .bytes: "bytes"
            case .event(let event): "\(event)"
            }
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        /// Each step, and whether the connection is open after it.
        var steps: [(Step, open: Bool)]
        var testDescription: String { self.name }
    }

    /// Request time-out 30 s, idle time-out 60 s.
    static let rows: [Row] = [
        Row(
            name: "a new connection that sends nothing is closed at the request time-out",
            steps: [(.wait(milliseconds: 29_999), true), (.wait(milliseconds: 1), false)]
        ),
        Row(
            name: "a request trickled a byte at a time has the request time-out from its first byte",
            steps: [
                (.wait(milliseconds: 10_000), true), (.bytes, true), (.wait(milliseconds: 29_999), true),
                (.bytes, true), (.wait(milliseconds: 1), false),
            ]
        ),
        Row(
            name: "no time-out while the daemon answers; then the idle time-out of a kept-alive connection",
            steps: [
                (.bytes, true), (.event(.requestReceived), true), (.wait(milliseconds: 1_000_000), true),
                (.event(.responseSent), true), (.wait(milliseconds: 59_999), true), (.wait(milliseconds: 1), false),
            ]
        ),
        Row(
            name: "bytes of the next request during an answer: its request time-out runs from the answer",
            steps: [
                (.bytes, true), (.event(.requestReceived), true), (.bytes, true), (.wait(milliseconds: 100_000), true),
                (.event(.responseSent), true), (.wait(milliseconds: 29_999), true), (.wait(milliseconds: 1), false),
            ]
        ),
        Row(
            name: "a WebSocket is never closed by the guard",
            steps: [
                (.bytes, true), (.event(.requestReceived), true), (.event(.webSocketOpened), true),
                (.wait(milliseconds: 10_000_000), true),
            ]
        ),
        Row(
            name: "a body held is the registry's matter, not a time-out's",
            steps: [(.bytes, true), (.event(.bodyHeld(1024)), true), (.wait(milliseconds: 29_999), true)]
        ),
    ]

    static func connected(
        ownUserOnly: Bool = false,
        registry: ConnectionRegistry,
        loop: EmbeddedEventLoop = EmbeddedEventLoop()
    ) throws -> EmbeddedChannel {
        let handler = ConnectionGuard(
            configuration: .init(requestTimeout: .seconds(30), idleTimeout: .seconds(60), ownUserOnly: ownUserOnly),
            registry: registry
        )
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 6800)).wait()
        return channel
    }

    @Test(arguments: rows)
    func timeOuts(_ row: Row) throws {
        let registry = ConnectionRegistry(capacity: 16, trim: {})
        let channel = try Self.connected(registry: registry)
        #expect(registry.count == 1)
        for (index, (step, open)) in row.steps.enumerated() {
            switch step {
            case .wait(let milliseconds):
                channel.embeddedEventLoop.advanceTime(by: .milliseconds(milliseconds))
            case .bytes:
                try channel.writeInbound(channel.allocator.buffer(string: "GET / HTTP/1.1\r\n"))
                // Passed on to the HTTP handlers.
                #expect(try channel.readInbound(as: ByteBuffer.self) != nil, "step \(index): \(step)")
            case .event(let event):
                try channel.pipeline.triggerUserOutboundEvent(event).wait()
            }
            #expect(channel.isActive == open, "step \(index): \(step)")
        }
        if channel.isActive { _ = try channel.finish() }
        // Closed or finished: the registry has let go of it.
        #expect(registry.count == 0)
    }

    @Test("with ownUserOnly, a peer that is not the daemon's user gets a 403 and a close, and nothing it sends is read")
    func anotherUsersPeer() throws {
        let registry = ConnectionRegistry(capacity: 16, trim: {})
        // An embedded channel has no socket whose owner could be the daemon's user.
        let channel = try Self.connected(ownUserOnly: true, registry: registry)
        let answer = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: answer).hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(String(buffer: answer).contains("Connection: close"))
        #expect(!channel.isActive)
        #expect(registry.count == 0)
        try? channel.writeInbound(channel.allocator.buffer(string: "GET / HTTP/1.1\r\n"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
    }

    @Test("at the cap, a new connection closes the one stalled longest")
    func cap() throws {
        let registry = ConnectionRegistry(capacity: 1, trim: {})
        let loop = EmbeddedEventLoop()
        let first = try Self.connected(registry: registry, loop: loop)
        loop.advanceTime(by: .seconds(1))
        let second = try Self.connected(registry: registry, loop: loop)
        #expect(!first.isActive)
        #expect(second.isActive)
        #expect(registry.count == 1)
        _ = try second.finish()
    }
}
