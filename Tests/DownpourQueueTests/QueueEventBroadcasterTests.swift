import Downpour
import Testing

@testable import DownpourQueue

@Suite("QueueEventBroadcaster")
struct QueueEventBroadcasterTests {
    static func collect(_ stream: AsyncStream<QueueEvent>) async -> [QueueEvent] {
        var events: [QueueEvent] = []
        for await event in stream { events.append(event) }
        return events
    }

    @Test("every listener gets every event; one that does not read keeps only the newest; finish ends them all")
    func fanOut() async {
        let broadcaster = QueueEventBroadcaster(bufferSize: 2)
        let first = broadcaster.subscribe()
        let second = broadcaster.subscribe()
        let events = (1...5 as ClosedRange<UInt64>).map { QueueEvent.added(DownloadID(value: $0)) }
        for event in events { broadcaster.send(event) }
        broadcaster.finish()
        #expect(await Self.collect(first) == Array(events.suffix(2)))
        #expect(await Self.collect(second) == Array(events.suffix(2)))
        #expect(await Self.collect(broadcaster.subscribe()) == [])
    }

    @Test("a listener that stops listening is dropped")
    func dropsEndedListeners() async {
        let broadcaster = QueueEventBroadcaster()
        let kept = broadcaster.subscribe()
        let stream = broadcaster.subscribe()
        #expect(broadcaster.listenerCount == 2)
        let task = Task { await Self.collect(stream) }
        task.cancel()
        _ = await task.value
        #expect(broadcaster.listenerCount == 1)
        broadcaster.send(.optionsChanged)
        broadcaster.finish()
        #expect(await Self.collect(kept) == [.optionsChanged])
    }
}
