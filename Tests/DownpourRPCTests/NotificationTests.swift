import Downpour
import DownpourQueue
import DownpourTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import DownpourRPC

/// §1.7: aria2's notification frames.
@Suite struct NotificationTests {
    @Test func mapsQueueEvents() {
        let gid = DownloadID(value: 0x2089_b05e_cca3_d829)
        #expect(RPCNotification(.started(gid))?.method == "aria2.onDownloadStart")
        #expect(RPCNotification(.paused(gid))?.method == "aria2.onDownloadPause")
        #expect(RPCNotification(.stopped(gid))?.method == "aria2.onDownloadStop")
        #expect(RPCNotification(.completed(gid))?.method == "aria2.onDownloadComplete")
        #expect(RPCNotification(.failed(gid))?.method == "aria2.onDownloadError")
        #expect(RPCNotification(.added(gid)) == nil)
        #expect(RPCNotification(.changed(gid)) == nil)
        #expect(RPCNotification(.resultsRemoved(nil)) == nil)
        #expect(RPCNotification(.resultsRemoved(gid)) == nil)
        #expect(RPCNotification(.optionsChanged) == nil)
    }

    @Test func frameHasNoIDResultOrError() throws {
        let frame = try #require(RPCNotification(.started(DownloadID(value: 0x2089_b05e_cca3_d829)))).json
        #expect(
            String(decoding: frame, as: UTF8.self)
                == #"{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"2089b05ecca3d829"}]}"#
        )
    }

    @Test func hubPushesToSubscribedSessions() async {
        let hub = WebSocketHub(bufferSize: 2)
        let (first, firstStream) = hub.open()
        let (second, secondStream) = hub.open(channels: [])
        hub.broadcast("a", on: .aria2Notifications)
        hub.broadcast("b", on: .aria2Notifications)
        hub.broadcast("c", on: .aria2Notifications)
        hub.subscribe(second, to: .aria2Notifications)
        hub.broadcast("d", on: .aria2Notifications)
        #expect(hub.sessionCount == 2)
        hub.close(first)
        hub.close(second)
        #expect(hub.sessionCount == 0)
        var received: [String] = []
        for await frame in firstStream { received.append(frame) }
        #expect(received == ["c", "d"])
        received = []
        for await frame in secondStream { received.append(frame) }
        #expect(received == ["d"])
    }

    @Test("waiting for a subscriber: returns once one subscribes to that channel, at once if one is, or on cancel")
    func waitForSubscriber() async throws {
        let hub = WebSocketHub()
        let (session, _) = hub.open()
        let done = NIOLockedValueBox(false)
        let waiting = Task {
            await hub.waitForSubscriber(on: .progress)
            done.withLockedValue { $0 = true }
        }
        try await waitUntil("the wait to begin") { hub.waiterCount > 0 || done.withLockedValue { $0 } }
        // The session listens to aria2's notifications only: the wait goes on until it subscribes to progress.
        hub.broadcast("x", on: .aria2Notifications)
        hub.subscribe(session, to: .aria2Notifications)
        #expect(hub.waiterCount == 1)
        #expect(!done.withLockedValue { $0 })
        hub.subscribe(session, to: .progress)
        await waiting.value
        #expect(done.withLockedValue { $0 })
        #expect(hub.waiterCount == 0)
        // Subscribed already: no wait.
        await hub.waitForSubscriber(on: .progress)
        hub.close(session)

        // A session opened with the channel ends the wait too.
        let opened = Task { await hub.waitForSubscriber(on: .progress) }
        try await waitUntil("the wait to begin") { hub.waiterCount > 0 }
        let (late, _) = hub.open(channels: [.aria2Notifications, .progress])
        await opened.value
        #expect(hub.waiterCount == 0)
        hub.close(late)

        // Nobody subscribes: cancelling ends the wait, before or after it began.
        let stopped = NIOLockedValueBox(false)
        let cancelled = Task {
            await hub.waitForSubscriber(on: .progress)
            stopped.withLockedValue { $0 = true }
        }
        try await waitUntil("the wait to begin") { hub.waiterCount > 0 || stopped.withLockedValue { $0 } }
        #expect(!stopped.withLockedValue { $0 })
        cancelled.cancel()
        await cancelled.value
        #expect(hub.waiterCount == 0)
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await hub.waitForSubscriber(on: .progress)
        }
        await early.value
        #expect(!hub.hasSubscribers(on: .progress))
    }
}
