import NIOCore
import NIOHTTP1

/// Answers `POST /jsonrpc` with a `Content-Length` body within the limit right on the connection's event loop,
/// ahead of Hummingbird's router: every client polls `tellStatus` or `tellActive` several times a second, and the
/// router's async request and response streams cost more than the call itself. Any other request (other paths and
/// methods, a chunked or over-long body, `Expect: 100-continue`, the WebSocket upgrade) passes through unchanged
/// to the router, which answers it as before.
///
/// It works on NIO's own HTTP parts: ``JSONRPCPostHandlerInstaller`` puts it ahead of the codec that converts them
/// to Swift HTTP Types' for the router. A request whose head says the connection ends with it (`Connection: close`,
/// or HTTP/1.0 without keep-alive) is answered with `Connection: close`, then the connection is closed.
///
/// `respond` is called on the loop with each body. Its reply is written at once when it has one (a call that only
/// reads, on the queue's own loop: ``RPCDispatcher/handleNow(body:)``), else when the task it names has made it.
///
/// HTTP/1.1 pipelining keeps its order: one request at a time is answered, by this handler or by the router, and
/// the parts of the next wait here until the answer to the one before has ended.
final class JSONRPCPostHandler: ChannelDuplexHandler, RemovableChannelHandler {
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
        /// Runs once the reply has been written.
        var afterReply: (@Sendable () async -> Void)?
    }

    /// The reply to a body: made on the loop, or to be made in a task.
    enum Answer {
        case now(Reply)
        case later(@Sendable () async -> Reply)
    }

    /// Called on the loop with each request body.
    typealias Respond = @Sendable (ByteBuffer) -> Answer

    private enum State {
        case idle
        case collecting(body: ByteBuffer, closeAfterReply: Bool)
        case answering(closeAfterReply: Bool)
        /// The router has the request (`ended`: all of it) and has not finished its response.
        case passingThrough(ended: Bool)
    }

    private let maximumBodySize: Int
    private let respond: Respond
    private var state = State.idle
    /// Parts that arrived while a reply was being made; handled once it is written.
    private var waiting: [HTTPServerRequestPart] = []
    /// A read asked for while an answer was being made and parts were already waiting: the socket is not read
    /// again until the answer is out, so a client that sends request after request without reading the answers
    /// fills its own socket, not memory here (at most one read's worth of parts waits). While nothing waits, reads
    /// go on: holding them would take the socket out of the loop's interest and put it back for every request
    /// (two `epoll_ctl` calls each, a third of the system calls of a `tellStatus`).
    private var readWaits = false

    init(maximumBodySize: Int, respond: @escaping Respond) {
        self.maximumBodySize = maximumBodySize
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.handle(self.unwrapInboundIn(data), context: context)
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch (self.state, part) {
        case (.answering, _), (.passingThrough(ended: true), _):
            self.waiting.append(part)
        case (.idle, .head(let request)):
            if let length = self.answerableLength(request) {
                let close = !request.isKeepAlive
                self.state = .collecting(
                    body: context.channel.allocator.buffer(capacity: length),
                    closeAfterReply: close
                )
            } else {
                self.state = .passingThrough(ended: false)
                context.fireChannelRead(self.wrapInboundOut(part))
            }
        case (.collecting(var body, let close), .body(var bytes)):
            body.writeBuffer(&bytes)
            self.state = .collecting(body: body, closeAfterReply: close)
        case (.collecting(let body, let close), .end):
            self.state = .answering(closeAfterReply: close)
            self.answer(body, context: context)
        case (.passingThrough(ended: false), .end):
            self.state = .passingThrough(ended: true)
            context.fireChannelRead(self.wrapInboundOut(part))
        case (.passingThrough(ended: false), _), (.idle, _), (.collecting, .head):
            // A body without a head cannot come from NIO's decoder; the router reports what is left.
            self.state = .passingThrough(ended: false)
            context.fireChannelRead(self.wrapInboundOut(part))
        }
    }

    func read(context: ChannelHandlerContext) {
        switch self.state {
        case .answering, .passingThrough(ended: true):
            if self.waiting.isEmpty {
                context.read()
            } else {
                self.readWaits = true
            }
        case .idle, .collecting, .passingThrough(ended: false):
            context.read()
        }
    }

    /// The router's responses go out as they are; the end of one lets the next request in.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let ended: Bool
        if case .end = self.unwrapOutboundIn(data), case .passingThrough = self.state {
            ended = true
        } else {
            ended = false
        }
        context.write(data, promise: promise)
        if ended {
            self.state = .idle
            // Not from inside the router's write: the next request goes in on the loop's next turn.
            context.eventLoop.assumeIsolated().execute { self.handleWaiting(context: context) }
        }
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
            case .idle, .collecting, .passingThrough(ended: false):
                continue
            case .answering, .passingThrough(ended: true):
                // The rest waits for that answer.
                self.waiting = Array(waiting[index...]) + self.waiting
                index = waiting.endIndex
            }
        }
        context.fireChannelReadComplete()
        switch self.state {
        case .idle, .collecting, .passingThrough(ended: false):
            if self.readWaits {
                self.readWaits = false
                context.read()
            }
        case .answering, .passingThrough(ended: true):
            break
        }
    }

    /// The body length of a request this handler answers, else `nil`.
    private func answerableLength(_ request: HTTPRequestHead) -> Int? {
        guard request.method == .POST, request.uri == "/jsonrpc",
            !request.headers.contains(name: "transfer-encoding"), !request.headers.contains(name: "expect"),
            let length = request.headers.first(name: "content-length").flatMap({ Int($0) }),
            length >= 0, length <= self.maximumBodySize
        else { return nil }
        return length
    }

    private func answer(_ body: ByteBuffer, context: ChannelHandlerContext) {
        let loop = context.eventLoop
        switch self.respond(body) {
        case .now(let reply):
            self.send(reply, context: context)
        case .later(let respond):
            let promise = loop.makePromise(of: Reply.self)
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
                Task(executorPreference: EventLoopTaskExecutor(loop)) { promise.succeed(await respond()) }
            } else {
                promise.completeWithTask { await respond() }
            }
            promise.futureResult.assumeIsolated().whenSuccess { reply in
                self.send(reply, context: context)
            }
        }
    }

    /// Writes the reply now, or after its delay.
    private func send(_ reply: Reply, context: ChannelHandlerContext) {
        if reply.delay > .zero {
            context.eventLoop.assumeIsolated().scheduleTask(in: reply.delay) {
                self.write(reply, context: context)
            }
        } else {
            self.write(reply, context: context)
        }
    }

    private func write(_ reply: Reply, context: ChannelHandlerContext) {
        guard case .answering(let close) = self.state else { return }
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
            context.close(promise: nil)
            return
        }
        self.handleWaiting(context: context)
    }
}
