import Downpour
import NIOConcurrencyHelpers

/// The open WebSocket sessions, and the frames pushed to them.
///
/// Sending never waits: each session has a buffer of its own (the newest ``bufferSize`` frames), so a session
/// that does not read loses old frames, never the queue's time or another session's frames.
public final class WebSocketHub: Sendable {
    /// A session's handle.
    public struct SessionID: Sendable, Hashable {
        let value: UInt64
    }

    private struct Session {
        var channels: Set<PushChannel>
        var continuation: AsyncStream<String>.Continuation
    }

    private struct State {
        var nextID: UInt64 = 0
        var sessions: [UInt64: Session] = [:]
        /// Tasks in ``waitForSubscriber(on:)``, by the channel they wait for.
        var waiters = Waiters<PushChannel>()
    }

    /// Frames kept for a session that is not reading.
    public let bufferSize: Int
    private let state = NIOLockedValueBox(State())

    public init(bufferSize: Int = 1024) {
        self.bufferSize = bufferSize
    }

    /// Opens a session subscribed to `channels`; the stream yields what is pushed to it until ``close(_:)``.
    public func open(channels: Set<PushChannel> = [.aria2Notifications]) -> (SessionID, AsyncStream<String>) {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(self.bufferSize))
        let (id, woken) = self.state.withLockedValue { state in
            state.nextID += 1
            state.sessions[state.nextID] = Session(channels: channels, continuation: continuation)
            return (state.nextID, state.waiters.take { channels.contains($0) })
        }
        woken.resume()
        return (SessionID(value: id), stream)
    }

    /// Adds a channel to a session's subscriptions.
    public func subscribe(_ session: SessionID, to channel: PushChannel) {
        self.state.withLockedValue { state in
            guard state.sessions[session.value]?.channels.insert(channel) != nil else { return Wakeups.none }
            return state.waiters.take { $0 == channel }
        }.resume()
    }

    /// Returns once a session is subscribed to `channel` (at once if one is), or when the task is cancelled: a
    /// push with nobody to push to waits here instead of waking up to find nobody.
    public func waitForSubscriber(on channel: PushChannel) async {
        await self.state.wait(in: \.waiters, tag: channel) { state in
            state.sessions.values.contains { $0.channels.contains(channel) }
        }
    }

    /// Ends a session's stream.
    public func close(_ session: SessionID) {
        let removed = self.state.withLockedValue { $0.sessions.removeValue(forKey: session.value) }
        removed?.continuation.finish()
    }

    /// Pushes a frame to every session subscribed to `channel`.
    public func broadcast(_ frame: String, on channel: PushChannel) {
        let receivers = self.state.withLockedValue { state in
            state.sessions.values.filter { $0.channels.contains(channel) }.map(\.continuation)
        }
        for receiver in receivers { receiver.yield(frame) }
    }

    /// Whether any session is subscribed to `channel`.
    public func hasSubscribers(on channel: PushChannel) -> Bool {
        self.state.withLockedValue { state in state.sessions.values.contains { $0.channels.contains(channel) } }
    }

    /// How many tasks wait in ``waitForSubscriber(on:)``.
    var waiterCount: Int { self.state.withLockedValue { $0.waiters.count } }

    /// How many sessions are open.
    public var sessionCount: Int { self.state.withLockedValue { $0.sessions.count } }
}
