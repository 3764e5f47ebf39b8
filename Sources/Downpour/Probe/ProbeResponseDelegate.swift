import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Takes in a probe's response on the event loop of its connection: the head, and the body up to a limit, with no
/// hop to the calling task for each body part (AsyncHTTPClient's async API hands the body over as an async
/// sequence, a hop per part). A body past the limit ends the request (``BodyTooLarge``), which closes the
/// connection; the head is kept (``head``).
final class ProbeResponseDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = ProbeResponse

    /// The body grew past the limit.
    struct BodyTooLarge: Error {}

    private struct State {
        var head: HTTPResponseHead?
        var body: ByteBuffer?
    }

    let bodyLimit: Int
    private let state = NIOLockedValueBox(State())

    init(bodyLimit: Int) {
        self.bodyLimit = bodyLimit
    }

    /// The response head, once it has come (also when the body failed afterwards).
    var head: HTTPResponseHead? {
        self.state.withLockedValue { $0.head }
    }

    func didReceiveHead(task: HTTPClient.Task<ProbeResponse>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.state.withLockedValue { $0.head = head }
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
