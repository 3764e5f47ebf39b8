import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import DownpourRPC

/// The connection time-outs as tables over an injected clock, and the cap's choice of whom to close.
@Suite struct ConnectionTimelineTests {
    enum Step: Sendable, CustomStringConvertible {
        case bytes(at: Int64)
        case request
        case response(at: Int64)
        case webSocket
        /// The deadline and the stalled-since time after the steps so far (seconds), `nil` for none.
        case expect(deadline: Int64?, stalledSince: Int64?)

        var description: String {
            switch self {
            case .bytes(let at): "bytes at \(at)"
            case .request: "request"
            case .response(let at): "response at \(at)"
            case .webSocket: "webSocket"
            case .expect(let deadline, let stalled):
                "expect deadline \(String(describing: deadline)) stalled \(String(describing: stalled))"
            }
        }
    }

    /// Request time-out 30 s, idle time-out 60 s, opened at 0.
    static let tables: [(String, [Step])] = [
        (
            "a connection that never sends a byte is closed after the request time-out",
            [.expect(deadline: 30, stalledSince: 0)]
        ),
        (
            "half a request: the time-out runs from its first byte, more bytes do not extend it",
            [
                .bytes(at: 5), .expect(deadline: 35, stalledSince: 5), .bytes(at: 20), .bytes(at: 34),
                .expect(deadline: 35, stalledSince: 5),
            ]
        ),
        (
            "a whole request stops the clock while it is answered",
            [.bytes(at: 1), .request, .expect(deadline: nil, stalledSince: nil)]
        ),
        (
            "after the answer, the idle time-out of a kept-alive connection",
            [.bytes(at: 1), .request, .response(at: 2), .expect(deadline: 62, stalledSince: 2)]
        ),
        (
            "the next request on a kept-alive connection",
            [.bytes(at: 1), .request, .response(at: 2), .bytes(at: 50), .expect(deadline: 80, stalledSince: 50)]
        ),
        (
            "pipelined: two requests, answered one by one",
            [
                .bytes(at: 1), .request, .request, .response(at: 2), .expect(deadline: nil, stalledSince: nil),
                .response(at: 3), .expect(deadline: 63, stalledSince: 3),
            ]
        ),
        (
            "bytes of the next request while one is answered: its time-out starts at the answer",
            [.bytes(at: 1), .request, .bytes(at: 2), .response(at: 4), .expect(deadline: 34, stalledSince: 4)]
        ),
        (
            "a WebSocket has no time-out of its own (its pings watch it)",
            [
                .bytes(at: 1), .webSocket, .expect(deadline: nil, stalledSince: nil), .bytes(at: 100),
                .expect(deadline: nil, stalledSince: nil),
            ]
        ),
        (
            "a stray answer changes nothing",
            [.response(at: 3), .expect(deadline: 30, stalledSince: 0)]
        ),
    ]

    @Test(arguments: tables)
    func table(_ table: (String, [Step])) {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }
        var timeline = ConnectionTimeline(openedAt: start, requestTimeout: .seconds(30), idleTimeout: .seconds(60))
        for step in table.1 {
            switch step {
            case .bytes(let seconds): timeline.bytesReceived(at: at(seconds))
            case .request: timeline.requestReceived()
            case .response(let seconds): timeline.responseSent(at: at(seconds))
            case .webSocket: timeline.webSocketOpened()
            case .expect(let deadline, let stalled):
                #expect(timeline.deadline == deadline.map(at), "\(table.0): \(step)")
                #expect(timeline.stalledSince == stalled.map(at), "\(table.0): \(step)")
            }
        }
    }

    @Test("at the cap, the connection stalled longest is closed; one being answered never is")
    func capClosesTheLongestStalled() throws {
        let registry = ConnectionRegistry(capacity: 3)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        let channels = (0..<6).map { _ in EmbeddedChannel() }
        let a = registry.admit(channels[0], at: start)
        let b = registry.admit(channels[1], at: start + .seconds(1))
        let c = registry.admit(channels[2], at: start + .seconds(2))
        #expect(a.close == nil && b.close == nil && c.close == nil)
        // a is being answered: not stalled. The next one over the cap closes b, the longest stalled.
        registry.update(a.id, stalledSince: nil)
        let d = registry.admit(channels[3], at: start + .seconds(3))
        #expect(d.close === channels[1])
        #expect(registry.count == 3)
        // c became busy too: d (stalled since 3) goes for e.
        registry.update(c.id, stalledSince: nil)
        let e = registry.admit(channels[4], at: start + .seconds(4))
        #expect(e.close === channels[3])
        // All but the newest are busy: the newest itself is refused.
        registry.update(e.id, stalledSince: nil)
        let f = registry.admit(channels[5], at: start + .seconds(5))
        #expect(f.close === channels[5])
        #expect(registry.count == 3)
        registry.remove(a.id)
        registry.remove(c.id)
        registry.remove(e.id)
        #expect(registry.count == 0)
    }

    @Test("past the body budget, the holders stalled longest are closed; one waiting for its turn first")
    func bodyBudgetClosesTheLongestStalledHolders() throws {
        let registry = ConnectionRegistry(capacity: 10, bodyBudget: 100, trim: {})
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        let channels = (0..<4).map { _ in EmbeddedChannel() }
        let ids = channels.enumerated().map { registry.admit($1, at: start + .seconds(Int64($0))).id }
        #expect(registry.hold(ids[0], bytes: 40).isEmpty)
        #expect(registry.hold(ids[1], bytes: 40).isEmpty)
        // A connection that holds nothing is never closed for the budget, however long it stalled.
        #expect(registry.hold(ids[2], bytes: 40).map { $0 === channels[0] } == [true])
        #expect(registry.heldBytes == 80)
        // A body waiting for its turn (being answered: stalled since nil) goes before the stalled ones.
        registry.update(ids[3], stalledSince: nil)
        #expect(registry.hold(ids[3], bytes: 20).isEmpty)
        #expect(registry.hold(ids[3], bytes: 50).map { $0 === channels[3] } == [true])
        #expect(registry.heldBytes == 80)
        // Growing past the budget on its own: the oldest holder goes.
        #expect(registry.hold(ids[2], bytes: 70).map { $0 === channels[1] } == [true])
        #expect(registry.heldBytes == 70)
        registry.remove(ids[2])
        #expect(registry.heldBytes == 0)
    }

    @Test("memory is given back once a flood of connections or bodies has drained, once per flood")
    func trimsAfterAFlood() throws {
        let trims = NIOLockedValueBox(0)
        let registry = ConnectionRegistry(capacity: 1024, trim: { trims.withLockedValue { $0 += 1 } })
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        // Few connections: no flood, no trim.
        let few = (0..<10).map { _ in registry.admit(EmbeddedChannel(), at: start).id }
        for id in few { registry.remove(id) }
        #expect(trims.withLockedValue { $0 } == 0)
        // A flood of connections: one trim, once they are down to a few.
        let flood = (0..<MemoryTrim.floodConnections).map { _ in registry.admit(EmbeddedChannel(), at: start).id }
        let left = MemoryTrim.drained(MemoryTrim.floodConnections) + 1
        for id in flood.dropLast(left) { registry.remove(id) }
        #expect(trims.withLockedValue { $0 } == 0)
        for id in flood.suffix(left) { registry.remove(id) }
        #expect(trims.withLockedValue { $0 } == 1)
        // A flood of body bytes on a few connections: another trim once they are let go.
        let holders = (0..<2).map { _ in registry.admit(EmbeddedChannel(), at: start).id }
        _ = registry.hold(holders[0], bytes: MemoryTrim.floodBytes / 2)
        _ = registry.hold(holders[1], bytes: MemoryTrim.floodBytes / 2)
        _ = registry.hold(holders[0], bytes: 0)
        registry.remove(holders[1])
        #expect(trims.withLockedValue { $0 } == 2)
        registry.remove(holders[0])
        #expect(trims.withLockedValue { $0 } == 2)
    }
}
