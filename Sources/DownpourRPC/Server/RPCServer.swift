import Downpour
import DownpourAria2
import DownpourJSON
import DownpourQueue
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOPosix
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// aria2's JSON-RPC over HTTP and WebSocket on `/jsonrpc`, for AriaNg, aria2p, Motrix and scripts (§1 of
/// `shared/aria2-rpc.md`): `POST` (any content type), `GET` with base64 `params` and JSONP, a WebSocket on the
/// same path that also pushes aria2's notifications, CORS when asked; and aria2's XML-RPC, `POST /rpc` (§10). A
/// `Service`: run it in a `ServiceGroup`, whose graceful shutdown stops it.
///
/// ```swift
/// let server = try RPCServer(
///     service: manager,
///     configuration: RPCServerConfiguration(port: 6800, secret: secret),
///     logger: logger,
///     onShutdown: { force in await stopDaemon(force: force) }
/// )
/// let group = ServiceGroup(services: [manager, server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
public struct RPCServer: Service {
    /// How it listens.
    public let configuration: RPCServerConfiguration
    /// The dispatcher every transport hands its requests to.
    public let dispatcher: RPCDispatcher
    /// The open WebSocket sessions.
    public let hub: WebSocketHub
    let service: any DownloadQueueService
    let logger: Logger
    /// The open connections, their cap and the budget for the bodies they hold.
    let connections: ConnectionRegistry
    /// Slows an address that keeps sending wrong tokens.
    let guesses: TokenGuessLimiter
    /// Counts the queue's changes, for the progress push's `queueVersion`.
    let queueVersion = NIOLockedValueBox(0)
    let onServerRunning: @Sendable (_ port: Int) async -> Void
    let beforeServerStarts: @Sendable () async throws -> Void
    let eventLoopGroup: any EventLoopGroup

    /// - Parameters:
    ///   - service: the queue.
    ///   - configuration: port, interfaces, secret, CORS, limits.
    ///   - logger: for the server's own messages (at info and below).
    ///   - onShutdown: called once the reply to `aria2.shutdown` / `aria2.forceShutdown` (`force`) has been
    ///     sent; the daemon then stops (e.g. with its service group's graceful shutdown).
    ///   - beforeServerStarts: awaited before the port opens (the queue started, a database migrated); an error
    ///     stops the server before it listens.
    ///   - onServerRunning: called with the bound port once the server listens.
    ///   - eventLoopGroup: the loops that carry the connections. Give the queue's own loop (a
    ///     ``DownloadManager``'s ``DownloadManager/eventLoop``) and every call that only reads is answered right
    ///     on it, as the request is read, with no task (``RPCDispatcher/handleNow(body:)``).
    /// - Throws: ``RPCServerError`` when the configuration is refused (``RPCServerConfiguration/validate()``).
    public init(
        service: any DownloadQueueService,
        configuration: RPCServerConfiguration = RPCServerConfiguration(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "downpour.rpc"),
        onShutdown: @escaping RPCDispatcher.ShutdownHandler = { _ in },
        beforeServerStarts: @escaping @Sendable () async throws -> Void = {},
        onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) throws(RPCServerError) {
        try configuration.validate()
        self.configuration = configuration
        self.service = service
        self.eventLoopGroup = eventLoopGroup
        self.dispatcher = RPCDispatcher(service: service, secret: configuration.secret, onShutdown: onShutdown)
        self.hub = WebSocketHub()
        self.connections = ConnectionRegistry(
            capacity: configuration.maximumConnections,
            bodyBudget: configuration.maximumHeldBodies
        )
        self.guesses = TokenGuessLimiter(
            GuessLimit(burst: configuration.guessBurst, interval: TimeAmount(configuration.guessInterval))
        )
        self.logger = logger
        self.onServerRunning = onServerRunning
        self.beforeServerStarts = beforeServerStarts
    }

    /// Listens until the service group shuts down gracefully (or the task is cancelled).
    /// - Throws: ``RPCServerError`` (the configuration), or the error binding the port.
    public func run() async throws {
        try self.configuration.validate()
        let events = self.service.announcements
        let policy = self.configuration.requestPolicy(
            port: self.configuration.port,
            machineAddresses: self.configuration.listenAll ? Self.machineAddresses() : []
        )
        var application = Application(
            router: self.router(),
            server: self.serverBuilder(policy: policy),
            configuration: ApplicationConfiguration(
                address: .hostname(self.configuration.bindAddress, port: self.configuration.port),
                serverName: nil
            ),
            onServerRunning: { [onServerRunning, logger, configuration] channel in
                let port = channel.localAddress?.port ?? configuration.port
                logger.info(
                    "JSON-RPC listening",
                    metadata: ["address": "\(configuration.bindAddress)", "port": "\(port)"]
                )
                await onServerRunning(port)
            },
            eventLoopGroupProvider: .shared(self.eventLoopGroup),
            logger: self.logger
        )
        application.beforeServerStarts(perform: self.beforeServerStarts)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await self.forwardNotifications(from: events)
            }
            group.addTask {
                await self.pushProgress()
            }
            try await application.run()
            group.cancelAll()
        }
    }

    /// Hummingbird's HTTP/1.1 server with the WebSocket upgrade, every connection watched by a ``ConnectionGuard``
    /// and every request head checked by a ``RequestPolicyHandler`` before it is parsed.
    private func serverBuilder(policy: RequestPolicy) -> HTTPServerBuilder {
        let webSocketResponder = self.webSocketRouter(policy: policy).buildResponder()
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(additionalChannelHandlers: [RPCPostHandlerInstaller(policy: policy, self.postHandler())]),
            ws: .init(
                maxFrameSize: self.configuration.maximumRequestSize,
                autoPing: .enabled(timePeriod: self.configuration.webSocketPingInterval)
            )
        )
        let guardConfiguration = ConnectionGuard.Configuration(
            requestTimeout: TimeAmount(self.configuration.requestTimeout),
            idleTimeout: TimeAmount(self.configuration.idleTimeout),
            ownUserOnly: !self.configuration.hasSecret && self.configuration.ownUserOnlyWithoutSecret
        )
        let registry = self.connections
        return HTTPServerBuilder { responder in
            GuardedChildChannel(
                base: HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: webSocketResponder,
                    configuration: configuration
                ),
                configuration: guardConfiguration,
                registry: registry,
                policy: policy
            )
        }
    }

    /// The addresses of this machine's interfaces, and its host name (also as `NAME.local`, its mDNS name), which
    /// a request's `Host` may name with ``RPCServerConfiguration/listenAll``. A page's DNS rebinding names the
    /// page's own domain, never these.
    static func machineAddresses() -> [String] {
        let devices = (try? System.enumerateDevices()) ?? []
        var names = devices.compactMap { $0.address?.ipAddress }
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count) == 0 {
            let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !name.isEmpty { names += [name, name.hasSuffix(".local") ? name : name + ".local"] }
        }
        return names
    }

    /// Turns the queue's events into aria2's notifications for every WebSocket session.
    func forwardNotifications(from events: AsyncStream<QueueEvent>) async {
        for await event in events {
            self.queueVersion.withLockedValue { $0 += 1 }
            guard let notification = RPCNotification(event) else { continue }
            self.hub.broadcast(String(decoding: notification.json, as: UTF8.self), on: .aria2Notifications)
        }
    }

    /// Sends ``ProgressPush`` frames to the sessions that asked for them, every ``ProgressPush/interval`` while
    /// one is there, until the task is cancelled. With none, it waits for one and does not wake.
    func pushProgress() async {
        while !Task.isCancelled {
            await self.hub.waitForSubscriber(on: .progress)
            try? await Task.sleep(for: ProgressPush.interval)
            guard self.hub.hasSubscribers(on: .progress) else { continue }
            let queueVersion = self.queueVersion.withLockedValue { $0 }
            let frame = await self.service.read { queue in
                ProgressPush.frame(
                    stat: queue.globalStat(),
                    maximumOverallRate: queue.globalOptions().last {
                        $0.name == Aria2Option.maxOverallDownloadLimit.name
                    }
                    .flatMap { Int64($0.value) } ?? 0,
                    queueVersion: queueVersion,
                    active: queue.activeDownloads(),
                    nodes: queue.nodes()
                )
            }
            self.hub.broadcast(frame, on: .progress)
        }
    }

    // MARK: HTTP

    func router() -> Router<RPCRequestContext> {
        let router = Router(context: RPCRequestContext.self)
        // POST /jsonrpc and POST /rpc never get here: the RPCPostHandler answers them on the loop.
        router.get("jsonrpc") { request, context in
            let peer = TokenGuessLimiter.peer(of: context.channel.remoteAddress)
            let reply = await self.throttled(peer) {
                await self.dispatcher.handle(query: Substring(request.uri.query ?? ""))
            }
            return self.response(for: reply)
        }
        for path in ["jsonrpc", "rpc"] {
            router.on(RouterPath(path), method: .options) { _, _ in
                // The request policy has let the preflight through and adds the CORS headers it earned.
                Response(status: .ok, headers: [.contentLength: "0"])
            }
        }
        for path in DashboardAssets.byPath.keys {
            router.get(RouterPath(path)) { _, _ in
                self.dashboard(path)
            }
        }
        return router
    }

    /// The handler that answers every `POST /jsonrpc` and `POST /rpc` on the event loop (see ``RPCPostHandler``).
    private func postHandler() -> RPCPostHandler {
        let common = HTTPHeaders(self.commonHeaders())
        let unauthorizedDelay = TimeAmount(self.configuration.unauthorizedDelay)
        let dispatcher = self.dispatcher
        @Sendable func reply(_ reply: RPCReply) -> RPCPostHandler.Reply {
            var headers = common
            headers.add(name: "content-type", value: reply.contentType)
            return RPCPostHandler.Reply(
                status: HTTPResponseStatus(statusCode: reply.httpStatus),
                headers: headers,
                body: ByteBuffer(bytes: reply.body),
                delay: reply.isUnauthorized ? unauthorizedDelay : .zero,
                unauthorizedCalls: reply.unauthorizedCalls,
                afterReply: reply.afterReply
            )
        }
        return RPCPostHandler(maximumBodySize: self.configuration.maximumRequestSize, limiter: self.guesses) {
            path,
            body in
            let immediate =
                switch path {
                case .jsonRPC: dispatcher.handleNow(body: body.readableBytesView)
                case .xmlRPC: dispatcher.handleNow(xml: body.readableBytesView)
                }
            switch immediate {
            case .answered(let answer):
                return .now(reply(answer))
            case .pending(let request):
                return .later { reply(await dispatcher.handle(parsed: request)) }
            }
        }
    }

    /// Makes a reply at `peer`'s turn (``TokenGuessLimiter``); a wrong token is counted and its reply held back
    /// (``RPCServerConfiguration/unauthorizedDelay``).
    /// An address with turns enough waiting already gets an error at once.
    func throttled(_ peer: String, _ makeReply: () async -> RPCReply) async -> RPCReply {
        guard await self.guesses.waitForTurn(of: peer) else {
            var writer = JSONWriter()
            RPCDispatcher.write(.init(id: .null, error: Self.tooManyGuesses), to: &writer)
            return RPCReply(body: writer.bytes, httpStatus: 429)
        }
        let reply = await makeReply()
        if reply.isUnauthorized {
            self.guesses.failed(peer, count: reply.unauthorizedCalls, at: .now())
            if self.configuration.unauthorizedDelay > .zero {
                try? await Task.sleep(for: self.configuration.unauthorizedDelay)
            }
        }
        return reply
    }

    /// The answer to an address that keeps sending wrong tokens and has turns enough waiting.
    static let tooManyGuesses = RPCError.method(
        "Too many requests with a wrong token from this address; try again later with the right one."
    )

    private func response(for reply: RPCReply) -> Response {
        var headers = self.commonHeaders()
        headers[.contentType] = reply.contentType
        let buffer = ByteBuffer(bytes: reply.body)
        let body: ResponseBody
        if let afterReply = reply.afterReply {
            body = ResponseBody(contentLength: buffer.readableBytes) { writer in
                try await writer.write(buffer)
                try await writer.finish(nil)
                Task { await afterReply() }
            }
        } else {
            body = ResponseBody(byteBuffer: buffer)
        }
        return Response(status: HTTPResponse.Status(code: reply.httpStatus), headers: headers, body: body)
    }

    private func commonHeaders() -> HTTPFields {
        var headers = HTTPFields()
        headers[.cacheControl] = "no-cache"
        return headers
    }

    /// A file of the dashboard. It holds no data, so it is served without the secret; the page asks for it.
    private func dashboard(_ path: String) -> Response {
        guard let asset = DashboardAssets.byPath[path] else { return Response(status: .notFound) }
        var headers = HTTPFields()
        headers[.contentType] = asset.contentType
        headers[.cacheControl] = "no-cache"
        headers[Self.contentTypeOptions] = "nosniff"
        // Another site must not frame the page's buttons; a <meta> policy cannot say this.
        headers[.contentSecurityPolicy] = "frame-ancestors 'none'"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }

    static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!

    // MARK: WebSocket

    /// The WebSocket handshake on `/jsonrpc`, upgraded only when the request policy allows it (a refused one is
    /// answered by the ``RequestPolicyHandler`` of the plain HTTP path, with its reason). A session that only the
    /// secret admits (a page of another origin, a reverse proxy's `Host`) gets no notification until one of its
    /// calls has carried the right token.
    func webSocketRouter(policy: RequestPolicy) -> Router<RPCRequestContext> {
        let router = Router(context: RPCRequestContext.self)
        @Sendable func verdict(
            _ request: Request,
            _ context: RPCRequestContext,
            _ policy: RequestPolicy
        )
            -> RequestPolicy.Verdict
        {
            var policy = policy
            if let port = context.channel.localAddress?.port { policy.port = port }
            return policy.evaluate(
                host: request.head.authority,
                origin: request.headers[.origin],
                fetchSite: request.headers[Self.secFetchSite],
                resource: .rpc
            )
        }
        router.ws(
            "jsonrpc",
            shouldUpgrade: { request, context in
                guard case .allow = verdict(request, context, policy) else { return .dontUpgrade }
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, context in
                let channel = context.requestContext.channel
                channel.triggerUserOutboundEvent(ConnectionEvent.webSocketOpened, promise: nil)
                let admittedBySecretOnly: Bool
                if case .refuse = verdict(context.request, context.requestContext, policy.withoutSecret) {
                    admittedBySecretOnly = true
                } else {
                    admittedBySecretOnly = false
                }
                try await self.serveWebSocket(
                    inbound: inbound,
                    outbound: outbound,
                    peer: TokenGuessLimiter.peer(of: channel.remoteAddress),
                    muted: admittedBySecretOnly
                )
            }
        )
        return router
    }

    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!

    /// One WebSocket session: each text frame a request or batch, answered in order with one text frame; pushed
    /// frames from the hub in between (for a `muted` session, only once a call has carried the right token).
    private func serveWebSocket(
        inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter,
        peer: String,
        muted: Bool
    ) async throws {
        let (session, pushed) = self.hub.open(channels: muted ? [] : [.aria2Notifications])
        defer { self.hub.close(session) }
        var muted = muted
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await frame in pushed {
                    try await outbound.write(.text(frame))
                }
            }
            for try await message in inbound.messages(maxSize: self.configuration.maximumRequestSize) {
                guard case .text(let text) = message else { continue }
                let reply = await self.throttled(peer) {
                    if text.contains(RPCDispatcher.subscribeMethod),
                        case .object(let request)? = try? JSONParser.parse(text),
                        request["method"] == .string(RPCDispatcher.subscribeMethod)
                    {
                        let answer = self.dispatcher.subscribe(request)
                        if answer.subscribed { self.hub.subscribe(session, to: .progress) }
                        return answer.reply
                    }
                    return await self.dispatcher.handle(body: text.utf8)
                }
                if muted, reply.provesToken {
                    muted = false
                    self.hub.subscribe(session, to: .aria2Notifications)
                }
                try await outbound.write(.text(String(decoding: reply.body, as: UTF8.self)))
                if let afterReply = reply.afterReply {
                    Task { await afterReply() }
                }
            }
            group.cancelAll()
        }
    }
}
