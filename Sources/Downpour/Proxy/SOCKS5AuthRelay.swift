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

/// Lets AsyncHTTPClient use a SOCKS5 proxy that wants a user name and password, which its SOCKS client cannot
/// give (it offers only "no authentication").
///
/// The relay listens on a port of 127.0.0.1 and the clients are pointed at it as their SOCKS5 proxy. For each
/// connection it connects to the real proxy, authenticates there (RFC 1929), and only then answers the client's
/// greeting with "no authentication"; from then on it passes bytes through unchanged both ways, the client's
/// `CONNECT` and the proxy's reply included, on one event loop, with back-pressure. When the proxy cannot be
/// reached or refuses the credentials, the client is refused and the reason is kept for the error message
/// (``takeFailure()``).
///
/// On Linux the relay serves only connections from processes of the same user (the owner of the connecting
/// socket, from `/proc/net/tcp`): another user on the machine cannot borrow the credentials through it.
final class SOCKS5AuthRelay: Sendable {
    /// Why the last connection through the relay failed before it reached the proxy's `CONNECT`.
    struct Failure: Error, Sendable {
        enum Reason: Sendable {
            /// Connecting to the proxy failed.
            case unreachable(any Error)
            /// The proxy refused the relay.
            case refused(SOCKS5Handshake.Refusal)
            /// The proxy closed the connection during the authentication.
            case closed
        }

        var reason: Reason
    }

    /// The real proxy, with its credentials.
    let upstream: ProxyURL
    /// The relay's port on 127.0.0.1.
    let port: Int
    private let channel: any Channel
    private let failure: NIOLockedValueBox<Failure?>

    private init(upstream: ProxyURL, channel: any Channel, failure: NIOLockedValueBox<Failure?>) {
        self.upstream = upstream
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.failure = failure
    }

    /// Starts a relay to `upstream` (a SOCKS5 proxy with a user name) on `eventLoop`.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when the user name or password is longer than SOCKS5
    ///   allows; ``DownloadError/Code/localIO`` when no port of 127.0.0.1 can be bound.
    static func start(
        upstream: ProxyURL,
        connectTimeout: Duration,
        on eventLoop: any EventLoop
    ) async throws(DownloadError) -> SOCKS5AuthRelay {
        guard
            let request = SOCKS5Handshake.authenticationRequest(
                username: upstream.username ?? "",
                password: upstream.password ?? ""
            )
        else {
            throw .invalidRequest("The user name or password of the SOCKS5 proxy \(upstream) is longer than 255 bytes.")
        }
        let failure = NIOLockedValueBox<Failure?>(nil)
        let settings = Settings(
            host: upstream.host,
            port: upstream.port,
            request: request,
            connectTimeout: TimeAmount(connectTimeout),
            failure: failure
        )
        do {
            let channel = try await ServerBootstrap(group: eventLoop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(FrontHandshakeHandler(settings: settings))
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
            return SOCKS5AuthRelay(upstream: upstream, channel: channel, failure: failure)
        } catch {
            throw DownloadError(
                code: .localIO,
                message: "Could not open a local port for the SOCKS5 proxy \(upstream) (\(error)).",
                underlying: error
            )
        }
    }

    /// The reason the last connection failed before the proxy let it through, once; `nil` when none did.
    func takeFailure() -> Failure? {
        self.failure.withLockedValue { failure in
            defer { failure = nil }
            return failure
        }
    }

    func close() async {
        try? await self.channel.close()
    }

    /// What every connection of one relay needs.
    fileprivate struct Settings: Sendable {
        var host: String
        var port: Int
        var request: [UInt8]
        var connectTimeout: TimeAmount
        var failure: NIOLockedValueBox<Failure?>

        func record(_ reason: Failure.Reason) {
            self.failure.withLockedValue { $0 = Failure(reason: reason) }
        }
    }
}

/// The client's side while the relay authenticates: takes the greeting, connects to the proxy, and once both are
/// done answers the client and glues the two connections together.
private final class FrontHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let settings: SOCKS5AuthRelay.Settings
    private var pending = ByteBuffer()
    private var greeted = false
    private var proxy: (channel: any Channel, handler: BackHandshakeHandler)?
    private var finished = false

    init(settings: SOCKS5AuthRelay.Settings) {
        self.settings = settings
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard PeerOwner.isCurrentUser(local: context.channel.localAddress, remote: context.channel.remoteAddress)
        else {
            self.finished = true
            context.close(promise: nil)
            return
        }
        let handler = BackHandshakeHandler(request: self.settings.request)
        let boundHandler = NIOLoopBound(handler, eventLoop: context.eventLoop)
        let boundSelf = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let settings = self.settings
        ClientBootstrap(group: context.eventLoop)
            .connectTimeout(settings.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(boundHandler.value)
                }
            }
            .connect(host: settings.host, port: settings.port)
            .flatMap { channel in
                boundHandler.value.authenticated.futureResult.map { channel }
            }
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    boundSelf.value.proxyReady(
                        context: boundContext.value,
                        channel: channel,
                        handler: boundHandler.value
                    )
                case .failure(let error):
                    if let failure = error as? SOCKS5AuthRelay.Failure {
                        settings.record(failure.reason)
                    } else {
                        settings.record(.unreachable(error))
                    }
                    boundSelf.value.refuse(context: boundContext.value)
                }
            }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        self.pending.writeBuffer(&buffer)
        guard !self.greeted else { return }
        switch SOCKS5Handshake.parseGreeting(self.pending.readableBytesView) {
        case .incomplete:
            return
        case .unacceptable:
            self.finished = true
            self.proxy?.channel.close(promise: nil)
            context.close(promise: nil)
        case .acceptable(let length):
            self.pending.moveReaderIndex(forwardBy: length)
            self.greeted = true
            self.glueIfReady(context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finished = true
        self.proxy?.channel.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.finished = true
        self.proxy?.channel.close(promise: nil)
        context.close(promise: nil)
    }

    private func proxyReady(context: ChannelHandlerContext, channel: any Channel, handler: BackHandshakeHandler) {
        guard !self.finished else {
            channel.close(promise: nil)
            return
        }
        self.proxy = (channel, handler)
        self.glueIfReady(context: context)
    }

    /// Tells the client no method is acceptable, then closes: its SOCKS client fails, and the engine reads the
    /// reason from the relay.
    private func refuse(context: ChannelHandlerContext) {
        guard !self.finished else { return }
        self.finished = true
        let answer = ByteBuffer(bytes: SOCKS5Handshake.methodSelection(SOCKS5Handshake.noAcceptableMethod))
        context.writeAndFlush(Self.wrapOutboundOut(answer)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func glueIfReady(context: ChannelHandlerContext) {
        guard self.greeted, !self.finished, let proxy = self.proxy else { return }
        self.finished = true
        do {
            let (front, back) = RelayGlueHandler.pair()
            // Both connections are on this loop, so every step below happens now, in this order.
            proxy.channel.pipeline.syncOperations.removeHandler(proxy.handler, promise: nil)
            try proxy.channel.pipeline.syncOperations.addHandler(back)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            try context.channel.pipeline.syncOperations.addHandler(front)
        } catch {
            proxy.channel.close(promise: nil)
            context.close(promise: nil)
            return
        }
        let answer = ByteBuffer(bytes: SOCKS5Handshake.methodSelection(SOCKS5Handshake.noAuthentication))
        context.channel.writeAndFlush(answer, promise: nil)
        if self.pending.readableBytes > 0 {
            proxy.channel.writeAndFlush(self.pending, promise: nil)
        }
    }
}

/// The proxy's side while the relay authenticates: offers user name and password, sends them, and completes
/// ``authenticated`` with the proxy's verdict.
private final class BackHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Step { case method, credentials, done }

    private let request: [UInt8]
    private var step = Step.method
    private var received: [UInt8] = []
    private(set) var authenticated: EventLoopPromise<Void>!

    init(request: [UInt8]) {
        self.request = request
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.authenticated = context.eventLoop.makePromise()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.fail(.closed)
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: SOCKS5Handshake.proxyGreeting)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        self.received += buffer.readBytes(length: buffer.readableBytes) ?? []
        let reply: SOCKS5Handshake.Reply
        switch self.step {
        case .method: reply = SOCKS5Handshake.parseMethodSelection(self.received)
        case .credentials: reply = SOCKS5Handshake.parseAuthenticationReply(self.received)
        case .done: return
        }
        switch reply {
        case .incomplete:
            return
        case .refused(let refusal):
            self.fail(.refused(refusal))
            context.close(promise: nil)
        case .accepted where self.step == .method:
            self.received.removeFirst(2)
            self.step = .credentials
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: self.request)), promise: nil)
        case .accepted:
            self.step = .done
            self.authenticated.succeed()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.fail(.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail(.unreachable(error))
        context.close(promise: nil)
    }

    private func fail(_ reason: SOCKS5AuthRelay.Failure.Reason) {
        guard self.step != .done else { return }
        self.step = .done
        self.authenticated?.fail(SOCKS5AuthRelay.Failure(reason: reason))
    }
}

/// One side of a glued pair: what one connection reads, the other writes; when one cannot take more, the other
/// stops reading; when one closes, so does the other.
private final class RelayGlueHandler: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: RelayGlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    static func pair() -> (RelayGlueHandler, RelayGlueHandler) {
        let first = RelayGlueHandler()
        let second = RelayGlueHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.partner = nil
    }

    private var isWritable: Bool { self.context?.channel.isWritable ?? false }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.partner?.context?.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.partner?.context?.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.partner?.context?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.partner?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.partner?.isWritable ?? true {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    private func resumeReading() {
        guard self.pendingRead, let context = self.context else { return }
        self.pendingRead = false
        context.read()
    }
}
