import Downpour
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The first handler of every connection to the daemon, on its raw bytes: it decides whether the peer may talk
/// at all, and how long it may take.
///
/// - **Peer**: with ``Configuration/ownUserOnly`` (no secret), a connection from another user's process is
///   answered `403` and closed before a byte of it is read (``PeerOwner``).
/// - **Time-outs**: ``ConnectionTimeline`` says when the connection is to be closed (a request not in within the
///   request time-out of its first byte, a new connection that sends nothing, an idle kept-alive one); one timer
///   per connection, moved only when the deadline comes sooner. Time is the event loop's (`EventLoop.now`), so a
///   test drives it with `EmbeddedEventLoop.advanceTime(by:)`. The request boundaries come from
///   ``RequestPolicyHandler`` and the WebSocket route as ``ConnectionEvent``s.
/// - **Cap**: the connection is entered in the server's ``ConnectionRegistry``, which closes the one stalled
///   longest when the cap is passed, and, when the bodies of unanswered requests hold more than the body budget,
///   the one of those stalled longest (``ConnectionEvent/bodyHeld(_:)``).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Configuration: Sendable {
        var requestTimeout: TimeAmount
        var idleTimeout: TimeAmount
        /// Serve only processes of the user the daemon runs as.
        var ownUserOnly: Bool
    }

    private let configuration: Configuration
    private let registry: ConnectionRegistry
    private var timeline: ConnectionTimeline?
    private var id: ConnectionRegistry.ID?
    private var stalledSince: NIODeadline?
    private var timer: (deadline: NIODeadline, task: Scheduled<Void>)?
    private var refused = false

    init(configuration: Configuration, registry: ConnectionRegistry) {
        self.configuration = configuration
        self.registry = registry
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard self.timeline == nil, !self.refused else { return }
        if self.configuration.ownUserOnly,
            !PeerOwner.isCurrentUser(local: context.channel.localAddress, remote: context.channel.remoteAddress)
        {
            self.refuse(context: context)
            return
        }
        let now = context.eventLoop.now
        self.timeline = ConnectionTimeline(
            openedAt: now,
            requestTimeout: self.configuration.requestTimeout,
            idleTimeout: self.configuration.idleTimeout
        )
        self.stalledSince = now
        let (id, victim) = self.registry.admit(context.channel, at: now)
        self.id = id
        victim?.close(promise: nil)
        self.rearm(context: context)
    }

    /// Another user's connection: one plain-text answer, then closed.
    private func refuse(context: ChannelHandlerContext) {
        self.refused = true
        let reason =
            "this daemon has no secret, so it serves only processes of its own user (uid \(getuid())); "
            + "start it with a secret to serve others\n"
        var buffer = context.channel.allocator.buffer(capacity: 160 + reason.utf8.count)
        buffer.writeString(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-cache\r\n"
                + "Connection: close\r\nContent-Length: \(reason.utf8.count)\r\n\r\n\(reason)"
        )
        context.writeAndFlush(self.wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused peer's bytes are never read on.
        guard !self.refused else { return }
        self.timeline?.bytesReceived(at: context.eventLoop.now)
        self.changed(context: context)
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.task.cancel()
        self.timer = nil
        if let id = self.id { self.registry.remove(id) }
        self.id = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.task.cancel()
        self.timer = nil
        if let id = self.id { self.registry.remove(id) }
        self.id = nil
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? ConnectionEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .requestReceived: self.timeline?.requestReceived()
        case .responseSent: self.timeline?.responseSent(at: context.eventLoop.now)
        case .webSocketOpened: self.timeline?.webSocketOpened()
        case .bodyHeld(let bytes):
            if let id = self.id {
                for victim in self.registry.hold(id, bytes: bytes) { victim.close(promise: nil) }
            }
            promise?.succeed(())
            return
        }
        self.changed(context: context)
        promise?.succeed(())
    }

    /// Tells the registry and the timer what the timeline now says.
    private func changed(context: ChannelHandlerContext) {
        guard let timeline = self.timeline else { return }
        let stalledSince = timeline.stalledSince
        if stalledSince != self.stalledSince, let id = self.id {
            self.stalledSince = stalledSince
            self.registry.update(id, stalledSince: stalledSince)
        }
        self.rearm(context: context)
    }

    /// Schedules the timer for the deadline, unless one is due sooner already: it looks again when it fires, so
    /// a request answered on a kept-alive connection moves no timer (no task scheduled or cancelled per request).
    private func rearm(context: ChannelHandlerContext) {
        guard let deadline = self.timeline?.deadline else { return }
        if let timer = self.timer, timer.deadline <= deadline { return }
        self.timer?.task.cancel()
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timerFired(context: context)
        }
        self.timer = (deadline, task)
    }

    private func timerFired(context: ChannelHandlerContext) {
        self.timer = nil
        guard let deadline = self.timeline?.deadline else { return }
        if deadline <= context.eventLoop.now {
            context.close(promise: nil)
        } else {
            self.rearm(context: context)
        }
    }
}
