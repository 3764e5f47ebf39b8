import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Takes in a probe's response on the event loop of its connection: the head, and the body up to a limit, with no
/// hop to the calling task for each body part (AsyncHTTPClient's async API hands the body over as an async
/// sequence, a hop per part). A body past the limit ends the request (``BodyTooLarge``), which closes the
/// connection; the head is kept (``head``). So does a `206` for a file of at least ``stopsAtHeadFrom`` bytes
/// (``StoppedAtHead``): its body is not waited for.
final class ProbeResponseDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = ProbeResponse

    /// The body grew past the limit.
    struct BodyTooLarge: Error {}
    /// The head said the file is long enough for the other connections to start at once.
    struct StoppedAtHead: Error {}

    private struct State {
        var head: HTTPResponseHead?
        var body: ByteBuffer?
    }

    let bodyLimit: Int
    /// The shortest file whose `206` ends the request at its head; `nil`: never.
    let stopsAtHeadFrom: Int64?
    private let state = NIOLockedValueBox(State())

    init(bodyLimit: Int, stopsAtHeadFrom: Int64? = nil) {
        self.bodyLimit = bodyLimit
        self.stopsAtHeadFrom = stopsAtHeadFrom
    }

    /// The response head, once it has come (also when the body failed afterwards).
    var head: HTTPResponseHead? {
        self.state.withLockedValue { $0.head }
    }

    func didReceiveHead(task: HTTPClient.Task<ProbeResponse>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.state.withLockedValue { $0.head = head }
        if let threshold = self.stopsAtHeadFrom, head.status == .partialContent,
            let total = head.headers.first(name: "Content-Range").flatMap(ContentRange.init)?.completeLength,
            total >= threshold
        {
            return task.eventLoop.makeFailedFuture(StoppedAtHead())
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<ProbeResponse>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let fits = self.state.withLockedValue { state in
            let count = (state.body?.readableBytes ?? 0) + buffer.readableBytes
            guard count <= self.bodyLimit else {
                state.body = nil
                return false
            }
            if state.body == nil {
                state.body = buffer
            } else {
                state.body!.writeImmutableBuffer(buffer)
            }
            return true
        }
        return fits ? task.eventLoop.makeSucceededVoidFuture() : task.eventLoop.makeFailedFuture(BodyTooLarge())
    }

    func didFinishRequest(task: HTTPClient.Task<ProbeResponse>) throws -> ProbeResponse {
        try self.state.withLockedValue { state in
            guard let head = state.head else { throw HTTPClientError.remoteConnectionClosed }
            return ProbeResponse(status: head.status, headers: head.headers, body: state.body ?? ByteBuffer())
        }
    }
}
