import NIOConcurrencyHelpers

/// Sends each ``QueueEvent`` to every listener, each through an `AsyncStream` with a buffer of its own that keeps
/// the newest events: a listener that does not read loses its oldest events, and sending never waits.
public final class QueueEventBroadcaster: Sendable {
    /// How many events a listener's buffer keeps.
    public let bufferSize: Int
    private let listeners = NIOLockedValueBox(Listeners())

    private struct Listeners {
        var nextID = 0
        var continuations: [Int: AsyncStream<QueueEvent>.Continuation] = [:]
        var isFinished = false
    }

    public init(bufferSize: Int = 1024) {
        self.bufferSize = max(1, bufferSize)
    }

    /// A new listener: every event sent from now on, until ``finish()``.
    public func subscribe() -> AsyncStream<QueueEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: QueueEvent.self,
            bufferingPolicy: .bufferingNewest(self.bufferSize)
        )
        let id: Int? = self.listeners.withLockedValue { listeners in
            guard !listeners.isFinished else { return nil }
            defer { listeners.nextID += 1 }
            listeners.continuations[listeners.nextID] = continuation
            return listeners.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [listeners = self.listeners] _ in
            _ = listeners.withLockedValue { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// How many listeners there are now.
    var listenerCount: Int {
        self.listeners.withLockedValue { $0.continuations.count }
    }

    /// Sends `event` to every listener; never waits.
    public func send(_ event: QueueEvent) {
        let continuations = self.listeners.withLockedValue { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Ends every listener's stream; later listeners get an empty one.
    public func finish() {
        let continuations = self.listeners.withLockedValue { listeners in
            listeners.isFinished = true
            defer { listeners.continuations.removeAll() }
            return Array(listeners.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
