import NIOCore

/// What one connection is doing and until when it may: the time-outs of ``ConnectionGuard`` as a value, driven
/// by events and an injected clock, tested as a table.
///
/// - A new connection and a kept-alive one waiting for its next request are ``Phase-swift.enum/waiting``: closed
///   after ``requestTimeout`` (new: it has sent nothing) or ``idleTimeout`` (kept alive after an answer).
/// - Once a request's first byte arrives, the whole request (head and body) must be in within
///   ``requestTimeout`` of that byte; a client that trickles a byte now and then gains nothing.
/// - While the daemon answers, and on a WebSocket (whose pings tell whether the peer is there), no time-out runs.
struct ConnectionTimeline: Sendable, Hashable {
    enum Phase: Sendable, Hashable {
        /// Waiting for a request since `since`; `fresh`: nothing was ever received.
        case waiting(since: NIODeadline, fresh: Bool)
        /// A request's bytes have been arriving since `since`.
        case receiving(since: NIODeadline)
        /// `count` whole requests are being answered; `partial`: bytes of a following one arrived meanwhile.
        case answering(count: Int, partial: Bool)
        /// Upgraded: the WebSocket's own pings watch it.
        case webSocket
    }

    private(set) var phase: Phase
    let requestTimeout: TimeAmount
    let idleTimeout: TimeAmount

    init(openedAt: NIODeadline, requestTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.phase = .waiting(since: openedAt, fresh: true)
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
    }

    /// Bytes came in.
    mutating func bytesReceived(at now: NIODeadline) {
        switch self.phase {
        case .waiting:
            self.phase = .receiving(since: now)
        case .answering(let count, _):
            self.phase = .answering(count: count, partial: true)
        case .receiving, .webSocket:
            break
        }
    }

    /// A whole request (head, body, end) was read.
    mutating func requestReceived() {
        switch self.phase {
        case .waiting, .receiving:
            self.phase = .answering(count: 1, partial: false)
        case .answering(let count, _):
            self.phase = .answering(count: count + 1, partial: false)
        case .webSocket:
            break
        }
    }

    /// The answer to the oldest request has been written.
    mutating func responseSent(at now: NIODeadline) {
        guard case .answering(let count, let partial) = self.phase else { return }
        if count > 1 {
            self.phase = .answering(count: count - 1, partial: partial)
        } else {
            self.phase = partial ? .receiving(since: now) : .waiting(since: now, fresh: false)
        }
    }

    /// The connection became a WebSocket.
    mutating func webSocketOpened() {
        self.phase = .webSocket
    }

    /// When the connection is to be closed unless something happens first; `nil`: no time-out runs.
    var deadline: NIODeadline? {
        switch self.phase {
        case .waiting(let since, let fresh):
            return since + (fresh ? self.requestTimeout : self.idleTimeout)
        case .receiving(let since):
            return since + self.requestTimeout
        case .answering, .webSocket:
            return nil
        }
    }

    /// Since when the daemon has been waiting on the peer; `nil` while the daemon answers or on a WebSocket. At the
    /// cap on connections, the one stalled longest is closed to make room.
    var stalledSince: NIODeadline? {
        switch self.phase {
        case .waiting(let since, _), .receiving(let since):
            return since
        case .answering, .webSocket:
            return nil
        }
    }
}
