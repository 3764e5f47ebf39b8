import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A relay on a loopback port to another loopback port, that a test can cut: what a client reaches through it
/// (a fleet node's PostgreSQL, say) goes away at ``cut()`` as if the network between them failed, and comes back
/// at ``restore()``.
///
/// Cut, every relayed connection is closed both ways, and a new one is closed as soon as it is accepted (the
/// client sees its connection end before a byte is answered, as behind a router that resets it).
public final class TCPRelay: Sendable {
    private struct State {
        var isCut = false
        var pairs: [ObjectIdentifier: (any Channel, any Channel)] = [:]
    }

    /// The loopback port the relay listens on.
    public let port: Int
    private let listener: any Channel
    private let state: NIOLockedValueBox<State>

    private init(port: Int, listener: any Channel, state: NIOLockedValueBox<State>) {
        self.port = port
        self.listener = listener
        self.state = state
    }

    /// A relay from a free loopback port to `127.0.0.1:target`.
    public static func start(to target: Int) async throws -> TCPRelay {
        let state = NIOLockedValueBox(State())
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                guard !state.withLockedValue(\.isCut) else { return inbound.close() }
                return ClientBootstrap(group: inbound.eventLoop)
                    .connect(host: "127.0.0.1", port: target)
                    .flatMap { outbound in
                        let key = ObjectIdentifier(inbound)
                        let kept = state.withLockedValue { state in
                            guard !state.isCut else { return false }
                            state.pairs[key] = (inbound, outbound)
                            return true
                        }
                        guard kept else {
                            outbound.close(promise: nil)
                            return inbound.close()
                        }
                        let forget: @Sendable () -> Void = {
                            _ = state.withLockedValue { $0.pairs.removeValue(forKey: key) }
                        }
                        return outbound.pipeline.addHandler(Forwarder(partner: inbound, closed: forget)).flatMap {
                            inbound.pipeline.addHandler(Forwarder(partner: outbound, closed: forget))
                        }
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TCPRelay(port: listener.localAddress?.port ?? 0, listener: listener, state: state)
    }

    /// Closes every relayed connection, and every new one until ``restore()``.
    public func cut() {
        let pairs = self.state.withLockedValue { state in
            state.isCut = true
            defer { state.pairs = [:] }
            return Array(state.pairs.values)
        }
        for (inbound, outbound) in pairs {
            inbound.close(promise: nil)
            outbound.close(promise: nil)
        }
    }

    /// Relays new connections again.
    public func restore() {
        self.state.withLockedValue { $0.isCut = false }
    }

    /// Closes the listener and every relayed connection.
    public func stop() async {
        self.cut()
        try? await self.listener.close()
    }
}

/// Writes what one side of a relayed connection reads to the other, and closes the other when this one ends.
private final class Forwarder: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    let partner: any Channel
    let closed: @Sendable () -> Void

    init(partner: any Channel, closed: @escaping @Sendable () -> Void) {
        self.partner = partner
        self.closed = closed
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.partner.writeAndFlush(Self.unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed()
        self.partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
