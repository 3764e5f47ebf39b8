import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Takes in a probe's response on the event loop of its connection: the head, and the body up to a limit, with no
/// hop to the calling task for each body part (AsyncHTTPClient's async API hands the body over as an async
/// sequence, a hop per part). A body past the limit ends the request (``BodyTooLarge``), which closes the
/// connection; the head is kept (``head``).
///
/// A `206` for a file longer than ``handsOverFrom`` bytes, or a `200` with a longer body (or one of unknown length),
/// is handed over at its head instead (``handedOver``, ``handsOver(_:from:)``): its body is not kept but goes on
/// streaming, into the sink a connection of the transfer stage attaches (``attach(_:)``), so the download's first
/// bytes are not asked for twice. Until then the first body part waits,
/// and the connection reads nothing more: TCP holds the server back.
final class ProbeResponseDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = ProbeResponse

    /// The body grew past the limit.
    struct BodyTooLarge: Error {}
    /// The request ended without being handed over.
    struct NotHandedOver: Error {}

    private struct State {
        var head: HTTPResponseHead?
        var body: ByteBuffer?
        var isHandedOver = false
        /// Nobody will take the body: every part fails (see ``abandon()``).
        var isAbandoned = false
        /// Where a handed-over body goes, once attached.
        var sink: FileBodyDelegate?
        /// The body part that came before the sink, and the promise that lets the next one come.
        var parked: (buffer: ByteBuffer, promise: EventLoopPromise<Void>)?
    }

    let bodyLimit: Int
    /// The longest file whose `206` is taken in whole; `nil`: every one is.
    let handsOverFrom: Int64?
    let eventLoop: any EventLoop
    private let handover: EventLoopPromise<HTTPResponseHead>
    private let state = NIOLockedValueBox(State())

    /// Opened when the request head has gone out: the probe's connection is up.
    let whenSent: ConnectAhead?
    /// The download's window of the resource, which the head is moved into before anything reads it.
    let window: (window: ResourceWindow, isHead: Bool, url: URL)?

    /// - Parameter eventLoop: the loop the request's callbacks run on.
    init(
        bodyLimit: Int,
        handsOverFrom: Int64? = nil,
        eventLoop: any EventLoop,
        whenSent: ConnectAhead? = nil,
        window: (window: ResourceWindow, isHead: Bool, url: URL)? = nil
    ) {
        self.bodyLimit = bodyLimit
        self.handsOverFrom = handsOverFrom
        self.eventLoop = eventLoop
        self.handover = eventLoop.makePromise()
        self.whenSent = whenSent
        self.window = window
    }

    func didSendRequestHead(task: HTTPClient.Task<ProbeResponse>, _ head: HTTPRequestHead) {
        self.whenSent?.open()
    }

    /// The response head, once it has come (also when the body failed afterwards).
    var head: HTTPResponseHead? {
        self.state.withLockedValue { $0.head }
    }

    /// Succeeds with the head when the response is handed over; fails with ``NotHandedOver`` when the request
    /// ended otherwise.
    var handedOver: EventLoopFuture<HTTPResponseHead> { self.handover.futureResult }

    /// Once the request has ended, however: a handover that did not happen, and a parked body part, are ended too.
    func requestEnded(_ result: Result<ProbeResponse, any Error>) {
        self.eventLoop.execute {
            let parked = self.state.withLockedValue { state in
                defer { state.parked = nil }
                return state.parked
            }
            self.handover.fail(NotHandedOver())
            if let parked {
                switch result {
                case .success: parked.promise.succeed()
                case .failure(let error): parked.promise.fail(error)
                }
            }
        }
    }

    /// Ends a handed-over response nobody will take: the part waiting, if any, and every later one fail. Cancelling
    /// the task is not enough: when the whole response is read while a part waits, AsyncHTTPClient fails a
    /// cancelled task only once that part's future completes.
    func abandon() {
        self.eventLoop.execute {
            let parked = self.state.withLockedValue { state in
                state.isAbandoned = true
                defer { state.parked = nil }
                return state.parked
            }
            parked?.promise.fail(HTTPClientError.cancelled)
        }
    }

    /// Sends the handed-over body to `sink` from now on, starting with the part waiting, if any. `sink` must run on
    /// ``eventLoop``.
    func attach(_ sink: FileBodyDelegate) {
        self.eventLoop.execute {
            let parked = self.state.withLockedValue { state in
                state.sink = sink
                defer { state.parked = nil }
                return state.parked
            }
            if let parked {
                sink.receiveBodyPart(parked.buffer).cascade(to: parked.promise)
            }
        }
    }

    func didReceiveHead(task: HTTPClient.Task<ProbeResponse>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        var head = head
        if let window = self.window {
            do {
                head = try window.window.view(head, isHead: window.isHead, url: window.url)
            } catch {
                return task.eventLoop.makeFailedFuture(ResourceWindow.Refusal(error: error))
            }
        }
        let handsOver = self.handsOverFrom.map { Self.handsOver(head, from: $0) } ?? false
        self.state.withLockedValue {
            $0.head = head
            $0.isHandedOver = handsOver
        }
        if handsOver { self.handover.succeed(head) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    /// Whether `head` is handed over: a `206` for a file longer than `threshold` bytes, or a `200` (a server
    /// without ranges sending the whole file) whose body is longer, or of unknown length. Either is the
    /// download's first bytes, which nobody should ask for again.
    static func handsOver(_ head: HTTPResponseHead, from threshold: Int64) -> Bool {
        switch head.status {
        case .partialContent:
            let length = head.headers.first(name: "Content-Range").flatMap(ContentRange.init)?.completeLength
            return length.map { $0 > threshold } ?? false
        case .ok:
            let length = head.headers.first(name: "Content-Length").flatMap { Int64(decimal: Substring($0)) }
            return length.map { $0 > threshold } ?? true
        default:
            return false
        }
    }

    func didReceiveBodyPart(task: HTTPClient.Task<ProbeResponse>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        enum Next {
            case taken
            case tooLarge
            case abandoned
            case park(EventLoopPromise<Void>)
            case forward(FileBodyDelegate)
        }
        let next: Next = self.state.withLockedValue { state in
            if state.isHandedOver {
                if state.isAbandoned { return .abandoned }
                if let sink = state.sink { return .forward(sink) }
                let promise = task.eventLoop.makePromise(of: Void.self)
                state.parked = (buffer, promise)
                return .park(promise)
            }
            let count = (state.body?.readableBytes ?? 0) + buffer.readableBytes
            guard count <= self.bodyLimit else {
                state.body = nil
                return .tooLarge
            }
            if state.body == nil {
                state.body = buffer
            } else {
                state.body!.writeImmutableBuffer(buffer)
            }
            return .taken
        }
        switch next {
        case .taken: return task.eventLoop.makeSucceededVoidFuture()
        case .tooLarge: return task.eventLoop.makeFailedFuture(BodyTooLarge())
        case .abandoned: return task.eventLoop.makeFailedFuture(HTTPClientError.cancelled)
        case .park(let promise): return promise.futureResult
        case .forward(let sink): return sink.receiveBodyPart(buffer)
        }
    }

    func didFinishRequest(task: HTTPClient.Task<ProbeResponse>) throws -> ProbeResponse {
        try self.state.withLockedValue { state in
            guard let head = state.head else { throw HTTPClientError.remoteConnectionClosed }
            return ProbeResponse(
                status: head.status,
                headers: head.headers,
                body: state.isHandedOver ? nil : (state.body ?? ByteBuffer())
            )
        }
    }
}

/// A probe's `206` or `200` handed over at its head (``ProbeResponseDelegate``), still streaming on the probe's
/// connection: bytes ``range`` of the file at ``url``. Connection 1 of the transfer stage takes a `206` on as its
/// first range, the stream worker a `200` as its first attempt (``stream(into:abort:)``), under the
/// connection-budget permit the probe held (``permit``); one nobody takes is ended (``end()``), which closes its
/// connection and gives the permit back.
struct RunningResponse: Sendable {
    let task: HTTPClient.Task<ProbeResponse>
    let delegate: ProbeResponseDelegate
    let url: URL
    /// The bytes it carries, from its `Content-Range`; set by the probe once it has checked them.
    var range: Range<Int64> = 0..<0
    /// A `200`: the whole file from its first byte, however long.
    var isWholeFile = false
    /// The probe's permit, kept for the connection that goes on with the response.
    var permit: ConnectionBudget.Permit? = nil

    /// The loop its callbacks run on, where the sink must live.
    var eventLoop: any EventLoop { self.delegate.eventLoop }

    /// Completes when the request has ended, however it ended.
    var ended: EventLoopFuture<Void> { self.task.futureResult.map { _ in } }

    /// Sends the rest of the body to `sink` and returns when the request has ended; cancelling the calling task
    /// cancels the request (and closes its connection). `abort` can end it from another task meanwhile.
    func stream(into sink: FileBodyDelegate, abort: RequestAbort?) async throws {
        abort?.attach(self.task)
        defer { abort?.detach() }
        self.delegate.attach(sink)
        try await withTaskCancellationHandler {
            _ = try await self.task.futureResult.get()
        } onCancel: {
            self.task.cancel()
        }
    }

    /// Ends the request, if it still runs, closing its connection; nobody will take its body.
    func cancel() {
        self.delegate.abandon()
        self.task.cancel()
    }

    /// Ends the request, if it still runs (as ``cancel()``), and gives the permit back, once: when the connection
    /// that took the response on is done, or when none took it.
    func end() {
        self.cancel()
        self.permit?.release()
    }
}
