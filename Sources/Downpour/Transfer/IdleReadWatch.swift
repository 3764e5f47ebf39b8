import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The read time-out of one request, counting only the time Downpour waits for the server: from the request's end
/// going out, and from each response part Downpour has finished taking in, to the next part.
///
/// AsyncHTTPClient's own read time-out also counts the time a delegate holds a part back (its future not yet
/// complete): a probe's response parked until its connection takes it on, a bandwidth limit's pause, a slow disk.
/// The connection reads nothing then, so the server cannot send; when that wait outlasts the time-out the request
/// fails and its bytes are asked for again. So Downpour's clients have no read time-out of their own, and every
/// request's delegate is wrapped in ``IdleReadTimed``, whose watch is paused while a part is held.
///
/// Every call comes on ``eventLoop``, the request's delegate loop; the state is locked anyway, as the type is
/// `Sendable`.
final class IdleReadWatch: Sendable {
    private struct State {
        /// Set while a check is due; a part that comes does not move it (that would cost a timer a part), the check
        /// looks at ``lastProgress`` instead.
        var timer: Scheduled<Void>?
        /// Ends the request; set once its end has gone out.
        var fail: (@Sendable (any Error) -> Void)?
        /// Parts being taken in: no time counts while any is.
        var holds = 0
        var isEnded = false
        /// When Downpour last began to wait for the server: the request's end, or the last part taken in.
        var lastProgress = NIODeadline.uptimeNanoseconds(0)
    }

    let timeout: TimeAmount
    let eventLoop: any EventLoop
    private let state = NIOLockedValueBox(State())

    init(timeout: TimeAmount, eventLoop: any EventLoop) {
        self.timeout = timeout
        self.eventLoop = eventLoop
    }

    /// The request's end has gone out: the time counts from now, and `fail` ends the request when it runs out
    /// (with AsyncHTTPClient's `readTimeout`, so that it is told and retried as before).
    func start(failing fail: @escaping @Sendable (any Error) -> Void) {
        let now = self.eventLoop.now
        self.state.withLockedValue { state in
            state.fail = fail
            state.lastProgress = now
            self.scheduleCheck(&state)
        }
    }

    /// Takes a part in with `receive`: no time counts until the future it returns completes, and the time starts
    /// anew then.
    func hold<Value>(_ receive: () -> EventLoopFuture<Value>) -> EventLoopFuture<Value> {
        self.state.withLockedValue { $0.holds += 1 }
        let future = receive()
        future.whenComplete { _ in
            let now = self.eventLoop.now
            self.state.withLockedValue { state in
                state.holds -= 1
                state.lastProgress = now
                self.scheduleCheck(&state)
            }
        }
        return future
    }

    /// The request has ended, however: nothing more is counted.
    func end() {
        self.state.withLockedValue { state in
            state.isEnded = true
            // The closure holds the task: let it go with the request.
            state.fail = nil
            state.timer?.cancel()
            state.timer = nil
        }
    }

    /// Schedules the check for when the time runs out, unless one is due, a part is held, or the request has not
    /// gone out or has ended.
    private func scheduleCheck(_ state: inout State) {
        guard state.timer == nil, !state.isEnded, state.holds == 0, state.fail != nil else { return }
        state.timer = self.eventLoop.scheduleTask(deadline: state.lastProgress + self.timeout) { self.check() }
    }

    /// Ends the request when the time has run out; else checks again when it would.
    private func check() {
        let now = self.eventLoop.now
        let fail = self.state.withLockedValue { state -> (@Sendable (any Error) -> Void)? in
            state.timer = nil
            // A part held is checked again once taken in.
            guard !state.isEnded, state.holds == 0 else { return nil }
            guard now >= state.lastProgress + self.timeout else {
                self.scheduleCheck(&state)
                return nil
            }
            state.isEnded = true
            return state.fail
        }
        fail?(HTTPClientError.readTimeout)
    }
}

/// A request's delegate with its read time-out watched by an ``IdleReadWatch``: every callback goes on to
/// ``delegate`` unchanged, and the head and each body part are held while its future is pending.
final class IdleReadTimed<Delegate: HTTPClientResponseDelegate & Sendable>: HTTPClientResponseDelegate, Sendable {
    typealias Response = Delegate.Response

    let delegate: Delegate
    let watch: IdleReadWatch

    init(_ delegate: Delegate, timeout: TimeAmount, eventLoop: any EventLoop) {
        self.delegate = delegate
        self.watch = IdleReadWatch(timeout: timeout, eventLoop: eventLoop)
    }

    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        self.delegate.didSendRequestHead(task: task, head)
    }

    func didSendRequestPart(task: HTTPClient.Task<Response>, _ part: IOData) {
        self.delegate.didSendRequestPart(task: task, part)
    }

    func didSendRequest(task: HTTPClient.Task<Response>) {
        self.delegate.didSendRequest(task: task)
        self.watch.start { task.fail(reason: $0) }
    }

    func didVisitURL(task: HTTPClient.Task<Response>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        self.delegate.didVisitURL(task: task, request, head)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.watch.hold { self.delegate.didReceiveHead(task: task, head) }
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        self.watch.hold { self.delegate.didReceiveBodyPart(task: task, buffer) }
    }

    func didReceiveError(task: HTTPClient.Task<Response>, _ error: any Error) {
        self.watch.end()
        self.delegate.didReceiveError(task: task, error)
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        self.watch.end()
        return try self.delegate.didFinishRequest(task: task)
    }
}
