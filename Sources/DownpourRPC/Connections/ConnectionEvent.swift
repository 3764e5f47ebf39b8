/// What the HTTP and WebSocket handlers tell ``ConnectionGuard`` at the head of the pipeline, as outbound user
/// events: the request boundaries it cannot see in raw bytes.
enum ConnectionEvent: Sendable, Hashable {
    /// A whole request has been read.
    case requestReceived
    /// The answer to the oldest request has been written.
    case responseSent
    /// The connection is now a WebSocket.
    case webSocketOpened
    /// The bytes an unanswered request's body holds now (0 once it is read into a call, answered or dropped).
    case bodyHeld(Int)
}
