import NIOCore
import NIOHTTP1

/// Serves one connection of a ``RangeTestServer``: asks ``ServerState`` what to answer, then streams the body.
///
/// The body goes out in slices of at most 64 KiB straight from the shared byte array. The next slice is written only
/// while the channel is writable (otherwise the handler waits for `channelWritabilityChanged`), so a large body
/// never piles up in memory; throttled connections also wait for the token-bucket deadline, and all of them while the
/// server holds bodies (``RangeTestServer/holdBodies()``). The handler sits behind
/// `HTTPServerPipelineHandler`, which holds pipelined requests back until the current response has ended.
final class RangeRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The largest body slice written at once.
    static let maximumSliceSize = 64 * 1024
    /// Slices written per event-loop tick before yielding to other connections.
    private static let slicesPerTick = 16

    /// A response body in progress.
    private struct BodyStream {
        var body: ResponseBody
        /// The request's place in the server's log, for the bytes it sent.
        var logIndex: Int
        /// The next byte of `body.bytes` to send.
        var next: Int
        /// Sending stops at this index of `body.bytes` (exclusive).
        var end: Int
        /// `false`: after the last byte, close the connection instead of ending the response (an injected fault).
        var endsResponse: Bool
        /// Close the connection once the response has ended (the client asked for it).
        var closeAfterEnd: Bool
        var startedAt: NIODeadline
        var sent = 0
        var lastWrite: EventLoopFuture<Void>
        var isWaitingForWritability = false
    }

    private let state: ServerState
    private let connectionID: Int
    private let bytesPerSecond: Int?
    private let sliceSize: Int
    private var pendingRequest: (head: HTTPRequestHead, receivedAt: ContinuousClock.Instant)?
    private var stream: BodyStream?
    private var scheduledPump: Scheduled<Void>?
    private var isOpen = true
    private var isPumping = false
    /// Responses started on this connection.
    private var responsesStarted = 0

    init(state: ServerState, connectionID: Int) {
        self.state = state
        self.connectionID = connectionID
        self.bytesPerSecond = state.planner.throttleRate(forConnection: connectionID)
        if let bytesPerSecond = self.bytesPerSecond {
            // Small slices keep a throttled stream smooth: about 20 per second.
            self.sliceSize = min(max(bytesPerSecond / 20, 1), Self.maximumSliceSize)
        } else {
            self.sliceSize = Self.maximumSliceSize
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            self.pendingRequest = (head, .now)
        case .body:
            break  // Request bodies are ignored.
        case .end:
            guard let (head, receivedAt) = self.pendingRequest else { return }
            self.pendingRequest = nil
            let plan = self.state.respond(
                to: head,
                connectionID: self.connectionID,
                receivedAt: receivedAt,
                onReusedConnection: self.responsesStarted > 0
            )
            self.responsesStarted += 1
            if plan.dropsConnection {
                // Injected fault: closed as if idle, the request unanswered.
                self.stop()
                context.close(promise: nil)
                return
            }
            // Start on a fresh tick: writing `.end` of the previous response may deliver this request re-entrantly.
            context.eventLoop.assumeIsolated().execute {
                self.startResponse(plan, to: head, context: context)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, self.stream?.isWaitingForWritability == true {
            self.stream?.isWaitingForWritability = false
            self.pump(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.stop()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Resets, parse errors (already answered with 400 by NIO) ...: the connection is done.
        self.stop()
        context.close(promise: nil)
    }

    private func stop() {
        self.isOpen = false
        self.stream = nil
        self.scheduledPump?.cancel()
        self.scheduledPump = nil
    }

    // MARK: - Sending

    private func startResponse(_ plan: ResponsePlan, to request: HTTPRequestHead, context: ChannelHandlerContext) {
        guard self.isOpen else { return }
        var headers = plan.headers
        let body = plan.body
        // A cut planned past the body's end sends the body whole, then closes: announced, so that the client does
        // not race the close by sending its next request on this connection.
        let cutsBody = plan.closeAfterBodyBytes.map { $0 < body.range.count } ?? false
        var closeAfterEnd = !request.isKeepAlive || (plan.closeAfterBodyBytes != nil && !cutsBody)
        if request.version == .http1_0, headers.contains(name: "Transfer-Encoding") {
            // HTTP/1.0 has no chunked coding: the end of the connection ends the body instead.
            headers.remove(name: "Transfer-Encoding")
            closeAfterEnd = true
        }
        if closeAfterEnd {
            headers.replaceOrAdd(name: "Connection", value: "close")
        }
        let head = HTTPResponseHead(version: request.version, status: plan.status, headers: headers)
        let headWritten = context.write(Self.wrapOutboundOut(.head(head)))

        let bodyBytes = min(plan.closeAfterBodyBytes ?? body.range.count, body.range.count)
        self.stream = BodyStream(
            body: body,
            logIndex: plan.logIndex,
            next: body.range.lowerBound,
            end: body.range.lowerBound + bodyBytes,
            endsResponse: !cutsBody,
            closeAfterEnd: closeAfterEnd,
            startedAt: .now(),
            lastWrite: headWritten
        )
        self.pump(context: context)
    }

    /// Writes slices while the channel takes them, then arranges to be called again (writability, throttle
    /// deadline or next tick), or finishes the response.
    private func pump(context: ChannelHandlerContext) {
        // A flush can report writability synchronously; the loop below already re-checks it.
        guard !self.isPumping else { return }
        self.isPumping = true
        defer { self.isPumping = false }
        var slicesWritten = 0
        while self.isOpen, var stream = self.stream {
            if stream.next >= stream.end {
                self.finish(context: context)
                return
            }
            if !context.channel.isWritable {
                // Unflushed slices count against the high-water mark: flush first, and wait only if the socket
                // really is full.
                context.flush()
                guard context.channel.isWritable else {
                    self.stream?.isWaitingForWritability = true
                    return
                }
                continue
            }
            // The bytes before a held tail still go.
            let heldFrom = self.state.heldTail.map { stream.body.bytes.count - $0 } ?? stream.end
            if self.state.shouldHoldBodies || stream.next >= heldFrom {
                context.flush()
                self.schedulePump(at: .now() + .milliseconds(5), context: context)
                return
            }
            if let bytesPerSecond = self.bytesPerSecond {
                let due = stream.startedAt + .nanoseconds(Int64(stream.sent) * 1_000_000_000 / Int64(bytesPerSecond))
                if due > .now() {
                    context.flush()
                    self.schedulePump(at: due, context: context)
                    return
                }
            }
            if slicesWritten == Self.slicesPerTick {
                context.flush()
                context.eventLoop.assumeIsolated().execute {
                    self.pump(context: context)
                }
                return
            }

            let count = min(self.sliceSize, stream.end - stream.next, heldFrom - stream.next)
            self.state.bodyBytesQueued(count)
            var slice = context.channel.allocator.buffer(bytes: stream.body.bytes[stream.next..<(stream.next + count)])
            if stream.body.invertsBytes {
                slice.withUnsafeMutableReadableBytes { bytes in
                    for index in bytes.indices { bytes[index] = ~bytes[index] }
                }
            }
            let sliceRange = stream.next..<(stream.next + count)
            for damaged in stream.body.corruptedRanges where damaged.overlaps(sliceRange) {
                let inside = damaged.clamped(to: sliceRange)
                let start = stream.next
                slice.withUnsafeMutableReadableBytes { bytes in
                    for offset in inside { bytes[offset - start] = ~bytes[offset - start] }
                }
            }
            stream.next += count
            stream.sent += count
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { [state, logIndex = stream.logIndex] in
                state.bodyBytesWritten(count, logIndex: logIndex)
            }
            stream.lastWrite = promise.futureResult
            self.stream = stream
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(slice))), promise: promise)
            slicesWritten += 1
        }
    }

    private func schedulePump(at deadline: NIODeadline, context: ChannelHandlerContext) {
        self.scheduledPump = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.scheduledPump = nil
            self.pump(context: context)
        }
    }

    private func finish(context: ChannelHandlerContext) {
        guard let stream = self.stream else { return }
        // Cleared first: writing `.end` lets the pipeline handler deliver the next request at once.
        self.stream = nil
        let channel = context.channel
        if stream.endsResponse {
            let ended = context.writeAndFlush(Self.wrapOutboundOut(.end(nil)))
            if stream.closeAfterEnd {
                ended.whenComplete { _ in channel.close(promise: nil) }
            }
        } else {
            // Injected fault: the promised body stops here and the connection goes away.
            context.flush()
            stream.lastWrite.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
