import NIOCore
import NIOHTTP1

/// Answers every `POST /jsonrpc` (JSON-RPC) and `POST /rpc` (XML-RPC) right on the connection's event loop, ahead
/// of Hummingbird's router: every client polls `tellStatus` or `tellActive` several times a second, and the router's
/// async request and response streams cost more than the call itself. Any other request (other paths and methods,
/// the WebSocket upgrade, the dashboard) passes through unchanged to the router.
///
/// It works on NIO's own HTTP parts: ``RPCPostHandlerInstaller`` puts it ahead of the codec that converts them to
/// Swift HTTP Types' for the router. A request whose head says the connection ends with it (`Connection: close`,
/// or HTTP/1.0 without keep-alive) is answered with `Connection: close`, then the connection is closed.
///
/// **Memory follows the bytes that came.** The token sits in the body, so a body is read before anything is
/// checked, and nothing is sized from what a header promises:
/// - a `Content-Length` over the limit is answered `413` at once and the connection closed, the body unread; a
///   chunked body is refused the same way once it passes the limit;
/// - a body grows with the bytes that arrive (a buffer at most twice their size), never to its announced length;
/// - what the body holds is reported to the ``ConnectionGuard`` (``ConnectionEvent/bodyHeld(_:)``), which keeps the
///   bytes held by all unanswered requests within one budget (``ConnectionRegistry``).
///
/// **Guessing is slowed.** Before a body is checked, the ``TokenGuessLimiter`` says when the peer may have its turn:
/// at once, or, after a run of wrong tokens from its address, one request per interval.
///
/// `respond` is called on the loop with each body. Its reply is written at once when it has one (a call that only
/// reads, on the queue's own loop: ``RPCDispatcher/handleNow(body:)``), else when the task it names has made it.
///
/// HTTP/1.1 pipelining keeps its order: one request at a time is answered, by this handler or by the router, and
/// the parts of the next wait here until the answer to the one before has ended.
final class RPCPostHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// What to send for one request body.
    struct Reply: Sendable {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: ByteBuffer
        /// How long to hold the reply back (aria2 answers a wrong secret about a second late).
        var delay: TimeAmount = .zero
        /// How many of the body's calls failed their token check (a batch or `system.multicall` carries many):
        /// the peer's guesses are counted.
        var unauthorizedCalls = 0
        /// Runs once the reply has been written.
        var afterReply: (@Sendable () async -> Void)?
    }

    /// The reply to a body: made on the loop, or to be made in a task.
    enum Answer {
        case now(Reply)
        case later(@Sendable () async -> Reply)
    }

    /// Called on the loop with each request body and the endpoint it came to.
    typealias Respond = @Sendable (RPCPath, ByteBuffer) -> Answer

    private struct Collecting {
        var path: RPCPath
        var body: ByteBuffer
        var closeAfterReply: Bool
    }

    private enum State {
        case idle
        case collecting(Collecting)
        /// A whole body waits for its turn (``TokenGuessLimiter``), then is answered.
        case waitingForTurn(closeAfterReply: Bool)
        case answering(closeAfterReply: Bool)
        /// The router has the request: `requestEnded` once all of it went on, `responseEnded` once the router's
        /// answer has ended (it may answer before the body is in: a 404). Both, and the next request goes in.
        case passingThrough(requestEnded: Bool, responseEnded: Bool)
        /// A body over the limit, or a guesser with no turn left, was refused and the connection is closing:
        /// nothing more is read on.
        case refused
    }

    private let maximumBodySize: Int
    private let limiter: TokenGuessLimiter?
    private let respond: Respond
    private var state = State.idle
    /// The capacity last reported to the ``ConnectionGuard`` as held by a body.
    private var reportedHeld = 0
    /// The answer waiting for the peer's turn, with the body it holds: cancelled when the connection closes.
    private var turnTask: Scheduled<Void>?
    /// Parts that arrived while a reply was being made; handled once it is written.
    private var waiting: [HTTPServerRequestPart] = []
    /// A read asked for while an answer was being made and parts were already waiting: the socket is not read
    /// again until the answer is out, so a client that sends request after request without reading the answers
    /// fills its own socket, not memory here (at most one read's worth of parts waits). While nothing waits, reads
    /// go on: holding them would take the socket out of the loop's interest and put it back for every request
    /// (two `epoll_ctl` calls each, a third of the system calls of a `tellStatus`).
    private var readWaits = false

    /// - Parameters:
    ///   - maximumBodySize: the largest body taken (`--rpc-max-request-size`).
    ///   - limiter: slows a peer that keeps sending wrong tokens; `nil`: none.
    ///   - respond: the answer to a body.
    init(maximumBodySize: Int, limiter: TokenGuessLimiter? = nil, respond: @escaping Respond) {
        self.maximumBodySize = maximumBodySize
        self.limiter = limiter
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.handle(self.unwrapInboundIn(data), context: context)
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch (self.state, part) {
        case (.refused, _):
            return
        case (.answering, _), (.waitingForTurn, _), (.passingThrough(requestEnded: true, _), _):
            self.waiting.append(part)
        case (.idle, .head(let request)):
            guard request.method == .POST, let path = RPCPath(uri: request.uri) else {
                self.state = .passingThrough(requestEnded: false, responseEnded: false)
                context.fireChannelRead(self.wrapInboundOut(part))
                return
            }
            if let length = request.headers.first(name: "content-length").flatMap({ Int($0) }),
                length > self.maximumBodySize
            {
                self.refuseTooLarge(context: context)
                return
            }
            if request.version.major > 1 || request.version.minor >= 1,
                request.headers.first(name: "expect")?.lowercased() == "100-continue"
            {
                let head = HTTPResponseHead(version: request.version, status: .continue)
                context.writeAndFlush(self.wrapOutboundOut(.head(head)), promise: nil)
            }
            self.state = .collecting(
                Collecting(
                    path: path,
                    body: context.channel.allocator.buffer(capacity: 0),
                    closeAfterReply: !request.isKeepAlive
                )
            )
        case (.collecting(var collecting), .body(var bytes)):
            guard collecting.body.readableBytes + bytes.readableBytes <= self.maximumBodySize else {
                self.refuseTooLarge(context: context)
                return
            }
            // Grows with what came (NIO doubles a buffer's capacity): never to a length announced.
            collecting.body.writeBuffer(&bytes)
            self.state = .collecting(collecting)
            self.reportHeld(collecting.body.capacity, context: context)
        case (.collecting(let collecting), .end):
            self.state = .waitingForTurn(closeAfterReply: collecting.closeAfterReply)
            self.takeTurn(collecting, context: context)
        case (.passingThrough(requestEnded: false, let responseEnded), .end):
            context.fireChannelRead(self.wrapInboundOut(part))
            if responseEnded {
                // The router answered before the body was in; now both have ended.
                self.state = .idle
                context.eventLoop.assumeIsolated().execute { self.handleWaiting(context: context) }
            } else {
                self.state = .passingThrough(requestEnded: true, responseEnded: false)
            }
        case (.passingThrough(requestEnded: false, _), _):
            context.fireChannelRead(self.wrapInboundOut(part))
        case (.idle, _), (.collecting, .head):
            // A body without a head cannot come from NIO's decoder; the router reports what is left.
            self.state = .passingThrough(requestEnded: false, responseEnded: false)
            context.fireChannelRead(self.wrapInboundOut(part))
        }
    }

    func read(context: ChannelHandlerContext) {
        switch self.state {
        case .answering, .waitingForTurn, .passingThrough(requestEnded: true, _):
            if self.waiting.isEmpty {
                context.read()
            } else {
                self.readWaits = true
            }
        case .refused:
            break
        case .idle, .collecting, .passingThrough(requestEnded: false, _):
            context.read()
        }
    }

    /// The router's responses go out as they are; the end of one lets the next request in.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let requestEnded: Bool?
        if case .end = self.unwrapOutboundIn(data), case .passingThrough(let ended, false) = self.state {
            requestEnded = ended
        } else {
            requestEnded = nil
        }
        context.write(data, promise: promise)
        switch requestEnded {
        case true?:
            self.state = .idle
            // Not from inside the router's write: the next request goes in on the loop's next turn.
            context.eventLoop.assumeIsolated().execute { self.handleWaiting(context: context) }
        case false?:
            // Answered before its body was all in: the rest of the body still goes to the router.
            self.state = .passingThrough(requestEnded: false, responseEnded: true)
        case nil:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.dropTurn()
        self.reportHeld(0, context: context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.dropTurn()
    }

    /// Cancels an answer waiting for its turn, and lets its body go.
    private func dropTurn() {
        self.turnTask?.cancel()
        self.turnTask = nil
    }

    /// Handles the parts that waited. Parts handed on here come outside a read, so the read-complete that makes
    /// the router's channel deliver them follows them.
    private func handleWaiting(context: ChannelHandlerContext) {
        let waiting = self.waiting
        self.waiting = []
        var index = waiting.startIndex
        while index < waiting.endIndex {
            self.handle(waiting[index], context: context)
            index += 1
            switch self.state {
            case .idle, .collecting, .passingThrough(requestEnded: false, _):
                continue
            case .answering, .waitingForTurn, .passingThrough(requestEnded: true, _), .refused:
                // The rest waits for that answer.
                self.waiting = Array(waiting[index...]) + self.waiting
                index = waiting.endIndex
            }
        }
        context.fireChannelReadComplete()
        switch self.state {
        case .idle, .collecting, .passingThrough(requestEnded: false, _):
            if self.readWaits {
                self.readWaits = false
                context.read()
            }
        case .answering, .waitingForTurn, .passingThrough(requestEnded: true, _), .refused:
            break
        }
    }

    /// `413` and the connection closed: the rest of the body is never read.
    private func refuseTooLarge(context: ChannelHandlerContext) {
        self.refuse(.payloadTooLarge, context: context)
    }

    /// A status with no body, then the connection closed: nothing more of it is read.
    private func refuse(_ status: HTTPResponseStatus, context: ChannelHandlerContext) {
        self.state = .refused
        self.waiting = []
        self.reportHeld(0, context: context)
        var headers = HTTPHeaders()
        headers.add(name: "cache-control", value: "no-cache")
        headers.add(name: "content-length", value: "0")
        headers.add(name: "connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: headers)
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// Tells the ``ConnectionGuard`` how many bytes this connection's unanswered body holds now.
    private func reportHeld(_ bytes: Int, context: ChannelHandlerContext) {
        guard bytes != self.reportedHeld else { return }
        self.reportedHeld = bytes
        context.triggerUserOutboundEvent(ConnectionEvent.bodyHeld(bytes), promise: nil)
    }

    /// Answers a whole body now, or at the peer's turn when it has been guessing; a guesser with turns enough
    /// waiting already gets `429` and the connection closed.
    private func takeTurn(_ collecting: Collecting, context: ChannelHandlerContext) {
        let peer = TokenGuessLimiter.peer(of: context.channel.remoteAddress)
        let now = NIODeadline.now()
        guard let limiter = self.limiter else {
            self.answer(collecting, peer: peer, context: context)
            return
        }
        guard let turn = limiter.turn(of: peer, at: now) else {
            self.refuse(.tooManyRequests, context: context)
            return
        }
        guard turn > now else {
            self.answer(collecting, peer: peer, context: context)
            return
        }
        self.turnTask = context.eventLoop.assumeIsolated().scheduleTask(deadline: turn) {
            self.turnTask = nil
            guard case .waitingForTurn = self.state, context.channel.isActive else { return }
            self.answer(collecting, peer: peer, context: context)
        }
    }

    private func answer(_ collecting: Collecting, peer: String, context: ChannelHandlerContext) {
        guard case .waitingForTurn(let close) = self.state else { return }
        self.state = .answering(closeAfterReply: close)
        let answer = self.respond(collecting.path, collecting.body)
        // The body has been read into a request (or answered): it is no longer held.
        self.reportHeld(0, context: context)
        switch answer {
        case .now(let reply):
            self.send(reply, peer: peer, context: context)
        case .later(let respond):
            let loop = context.eventLoop
            let promise = loop.makePromise(of: Reply.self)
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
                Task(executorPreference: EventLoopTaskExecutor(loop)) { promise.succeed(await respond()) }
            } else {
                promise.completeWithTask { await respond() }
            }
            promise.futureResult.assumeIsolated().whenSuccess { reply in
                self.send(reply, peer: peer, context: context)
            }
        }
    }

    /// Writes the reply now, or after its delay; a wrong token is counted against the peer.
    private func send(_ reply: Reply, peer: String, context: ChannelHandlerContext) {
        if reply.unauthorizedCalls > 0 { self.limiter?.failed(peer, count: reply.unauthorizedCalls, at: .now()) }
        if reply.delay > .zero {
            context.eventLoop.assumeIsolated().scheduleTask(in: reply.delay) {
                self.write(reply, context: context)
            }
        } else {
            self.write(reply, context: context)
        }
    }

    private func write(_ reply: Reply, context: ChannelHandlerContext) {
        guard case .answering(let close) = self.state, context.channel.isActive else { return }
        var headers = reply.headers
        headers.add(name: "content-length", value: String(reply.body.readableBytes))
        if close { headers.add(name: "connection", value: "close") }
        context.write(
            self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: reply.status, headers: headers))),
            promise: nil
        )
        context.write(self.wrapOutboundOut(.body(.byteBuffer(reply.body))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: written)
        if let afterReply = reply.afterReply {
            written.futureResult.whenComplete { _ in Task { await afterReply() } }
        }
        self.state = .idle
        if close {
            // Once the answer is out: a close now would drop the writes still pending.
            self.state = .refused
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            return
        }
        self.handleWaiting(context: context)
    }
}
