/// What a WebSocket session is sent besides its replies.
///
/// Every session gets aria2's notifications, as aria2 does. Frames aria2 clients do not know must never reach
/// them, so a later push (a dashboard's progress) is a new case here that a session subscribes to explicitly
/// (``WebSocketHub/subscribe(_:to:)``), e.g. through a Downpour-only method; nothing else changes.
public enum PushChannel: Sendable, Hashable {
    /// `aria2.onDownloadStart` and the other notifications of aria2.
    case aria2Notifications
    /// `downpour.onProgress`: the dashboard's push, to sessions that called `downpour.subscribe` only.
    case progress
}
