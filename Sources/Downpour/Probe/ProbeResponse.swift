import NIOCore
import NIOHTTP1

/// A probe request's answer: its head, and its body when that was no larger than the probe asked for.
struct ProbeResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    /// The whole body (empty when there was none); `nil` when it was larger than the limit (the request was then
    /// cut short, closing its connection), failed after the head, or was handed over (``running``).
    var body: ByteBuffer?
    /// The response still streaming, when it was handed over at its head (``ProbeResponseDelegate``).
    var running: RunningResponse? = nil
}
