import NIOCore
import NIOHTTP1

/// Applies the ``RequestPolicy`` to every request head, ahead of ``RPCPostHandler`` and the router, so that a
/// refused request is answered before anything of it is parsed or run, and tells ``ConnectionGuard`` where each
/// request and answer ends.
///
/// - A refused request is answered with its status (421 or 403) and a one-line plain-text reason, then the
///   connection is closed; the rest of the request is never handed on. An answer still owed to an earlier
///   (pipelined) request goes out first.
/// - An allowed request from another origin gets its `Access-Control-Allow-Origin` on its answer (and, for a
///   preflight, the methods, headers and private-network permission asked for): the CORS headers live here only.
final class RequestPolicyHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// What an allowed request's answer gets.
    private struct Decoration {
        var crossOrigin: RequestPolicy.CrossOrigin
        /// A preflight's request headers (it asked what it may send).
        var preflight: HTTPHeaders?
    }

    private let policy: RequestPolicy
    /// Checks only the connection's first request, then leaves the pipeline (see ``GuardedChildChannel``).
    private let firstRequestOnly: Bool
    /// Whether the end of the next request is to be reported to the ``ConnectionGuard``: not the first one's when
    /// the first-request gate has reported it already.
    private var reportsNextRequest: Bool
    /// One per request handed on whose answer has not ended, oldest first.
    private var owed = CircularBuffer<Decoration>()
    /// A refusal waiting for the answers owed before it; once set, nothing more is read on.
    private var refusal: RequestPolicy.Refusal?
    /// The last head's policy inputs and verdict: a client sends the same `Host` (and `Origin`) on every request
    /// of a connection, so the verdict is worked out once per connection, not once per `tellStatus`.
    private var lastDecision: (inputs: Inputs, verdict: RequestPolicy.Verdict)?

    private struct Inputs: Equatable {
        var host: String?
        var origin: String?
        var fetchSite: String?
        var resource: RequestPolicy.Resource
    }

    /// - Parameters:
    ///   - policy: the policy, with the port the connection came in on.
    ///   - firstRequestOnly: check the first request only and leave the pipeline once it has passed: the gate
    ///     ahead of the WebSocket upgrade handler, which would otherwise answer a refused handshake itself with a
    ///     bare 400 (and after an upgrade no HTTP parts pass here). It reports the first request's end, so that
    ///     the time a handshake takes on the daemon's side is not counted against the client.
    ///   - reportsFirstRequest: report the first request's end (`false` behind such a gate).
    init(policy: RequestPolicy, firstRequestOnly: Bool = false, reportsFirstRequest: Bool = true) {
        self.policy = policy
        self.firstRequestOnly = firstRequestOnly
        self.reportsNextRequest = firstRequestOnly || reportsFirstRequest
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.refusal == nil else { return }
        let part = self.unwrapInboundIn(data)
        switch part {
        case .head(let head):
            let resource = Self.resource(of: head)
            let inputs = Inputs(
                host: head.headers.first(name: "host"),
                origin: head.headers.first(name: "origin"),
                fetchSite: head.headers.first(name: "sec-fetch-site"),
                resource: resource
            )
            let verdict: RequestPolicy.Verdict
            if let last = self.lastDecision, last.inputs == inputs {
                verdict = last.verdict
            } else {
                verdict = self.policy.evaluate(
                    host: inputs.host,
                    origin: inputs.origin,
                    fetchSite: inputs.fetchSite,
                    resource: resource
                )
                self.lastDecision = (inputs, verdict)
            }
            switch verdict {
            case .refuse(let refusal):
                self.refusal = refusal
                if self.owed.isEmpty { self.sendRefusal(context: context) }
                return
            case .allow where self.firstRequestOnly:
                break
            case .allow(let crossOrigin):
                let preflight = resource == .preflight && crossOrigin != .none ? head.headers : nil
                self.owed.append(Decoration(crossOrigin: crossOrigin, preflight: preflight))
            }
            context.fireChannelRead(data)
        case .body:
            context.fireChannelRead(data)
        case .end:
            if self.reportsNextRequest {
                context.triggerUserOutboundEvent(ConnectionEvent.requestReceived, promise: nil)
            }
            self.reportsNextRequest = true
            context.fireChannelRead(data)
            if self.firstRequestOnly {
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .head(var head):
            if let decoration = self.owed.first {
                Self.decorate(&head.headers, with: decoration)
            }
            context.write(self.wrapOutboundOut(.head(head)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            context.write(data, promise: promise)
            if !self.owed.isEmpty { self.owed.removeFirst() }
            context.triggerUserOutboundEvent(ConnectionEvent.responseSent, promise: nil)
            if self.refusal != nil, self.owed.isEmpty { self.sendRefusal(context: context) }
        }
    }

    private func sendRefusal(context: ChannelHandlerContext) {
        guard let refusal = self.refusal else { return }
        let body = ByteBuffer(string: refusal.reason + "\n")
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        headers.add(name: "cache-control", value: "no-cache")
        headers.add(name: "content-length", value: String(body.readableBytes))
        headers.add(name: "connection", value: "close")
        let status = HTTPResponseStatus(statusCode: refusal.status)
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: headers)
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    static func resource(of head: HTTPRequestHead) -> RequestPolicy.Resource {
        guard RPCPath(uri: head.uri) != nil else { return .page }
        return head.method == .OPTIONS ? .preflight : .rpc
    }

    private static func decorate(_ headers: inout HTTPHeaders, with decoration: Decoration) {
        switch decoration.crossOrigin {
        case .none:
            return
        case .any:
            headers.replaceOrAdd(name: "access-control-allow-origin", value: "*")
        case .origin(let origin):
            headers.replaceOrAdd(name: "access-control-allow-origin", value: origin)
            headers.add(name: "vary", value: "Origin")
        }
        guard let asked = decoration.preflight, asked.contains(name: "access-control-request-method") else { return }
        headers.replaceOrAdd(name: "access-control-allow-methods", value: "POST, GET, OPTIONS")
        headers.replaceOrAdd(name: "access-control-max-age", value: "1728000")
        if let requested = asked.first(name: "access-control-request-headers") {
            headers.replaceOrAdd(name: "access-control-allow-headers", value: requested)
        }
        if asked.first(name: "access-control-request-private-network")?.lowercased() == "true" {
            headers.replaceOrAdd(name: "access-control-allow-private-network", value: "true")
        }
    }
}
