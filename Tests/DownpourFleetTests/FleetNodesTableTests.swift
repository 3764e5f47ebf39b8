import Downpour
import DownpourQueue
import DownpourTestSupport
import PostgresNIO
import Testing

@testable import DownpourFleet

/// What a node tells the others: its changes on ``FleetQueue/eventChannel`` (their payloads), and how it stands
/// in `downpour_nodes`.
struct FleetAnnouncementTests {
    @Test(
        "every change a client is told of survives the payload; the node's name may hold spaces",
        arguments: [
            QueueEvent.started(DownloadID(value: 1)), .paused(DownloadID(value: 2)), .stopped(DownloadID(value: 3)),
            .completed(DownloadID(value: 0x2089_b05e_cca3_d829)), .failed(DownloadID(value: 5)),
            .added(DownloadID(value: 6)), .changed(DownloadID(value: 7)), .resultsRemoved(DownloadID(value: 8)),
            .resultsRemoved(nil),
        ]
    )
    func payloadRoundTrip(event: QueueEvent) throws {
        let announcement = FleetQueue.Announcement(node: "rack 2:6800", event: event, serial: 41)
        let payload = try #require(announcement.payload)
        #expect(FleetQueue.Announcement(payload: payload) == announcement)
    }

    @Test func aNodesOwnOptionsAreNotAnnouncedAndUnknownPayloadsAreIgnored() {
        #expect(FleetQueue.Announcement(node: "a", event: .optionsChanged).payload == nil)
        for payload in [
            "", "complete", "complete 2089b05ecca3d829", "complete 2089b05ecca3d829 a",
            "complete 2089b05ecca3d829 x a", "teleport 2089b05ecca3d829 1 a", "complete zz 1 a", "results 12 1 a",
        ] {
            #expect(FleetQueue.Announcement(payload: payload) == nil, "\(payload)")
        }
        #expect(
            FleetQueue.Announcement(payload: "complete 2089b05ecca3d829 7 ")
                == .init(node: "", event: .completed(DownloadID(value: 0x2089_b05e_cca3_d829)), serial: 7)
        )
    }
}

@Suite(.enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"))
struct FleetNodesTableTests {
    @Test func nodesAreListedByNameAsTheyLastToldAndLeaveWhenTheyStop() async throws {
        try await FleetQueueTests.withQueue { queue in
            #expect(try await queue.nodes().isEmpty)
            try await queue.heartbeat(node: "b", address: "127.0.0.1:6801", downloadSpeed: 10, active: 1)
            try await queue.heartbeat(node: "a", address: "127.0.0.1:6800", downloadSpeed: 0, active: 0)
            try await queue.heartbeat(node: "b", address: "host-b:6801", downloadSpeed: 2048, active: 3)
            let nodes = try await queue.nodes(upWithin: FleetQueueTests.hour)
            #expect(nodes.map(\.name) == ["a", "b"])
            #expect(nodes.map(\.address) == ["127.0.0.1:6800", "host-b:6801"])
            #expect(nodes.map(\.downloadSpeed) == [0, 2048])
            #expect(nodes.map(\.numActive) == [0, 3])
            #expect(nodes.allSatisfy { $0.isUp && $0.secondsSinceSeen >= 0 })
            // A node is up only while it told the fleet within the window.
            #expect(try await queue.nodes(upWithin: .zero).allSatisfy { !$0.isUp })
            try await queue.leave(node: "a")
            #expect(try await queue.nodes().map(\.name) == ["b"])
        }
    }

    @Test func nodesNotSeenForADayAreForgotten() async throws {
        try await FleetQueueTests.withQueue { queue in
            try await queue.heartbeat(node: "old", address: "", downloadSpeed: 0, active: 0)
            try await queue.client.query(
                "UPDATE downpour_nodes SET seen_at = now() - interval '25 hours' WHERE name = 'old'"
            )
            #expect(try await queue.nodes().map(\.name) == ["old"])
            try await queue.heartbeat(node: "new", address: "", downloadSpeed: 0, active: 0)
            #expect(try await queue.nodes().map(\.name) == ["new"])
        }
    }
}
