import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import DownpourFleet

/// The fleet under faults: the database restarted under running downloads, and one node cut off from it. Each node
/// has a PostgreSQL client of its own (one through a route the test can cut), as separate daemons do; the files
/// come from the fault-injecting test server, whose log tells what each download cost it.
@Suite(
    .enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"),
    .timeLimit(.minutes(10))
)
struct FleetFaultTests {
    static let content = makeTestContent(count: 1 << 20, seed: 41)

    /// One connection a download: every byte the server sends is one a run asked for, so the bytes sent for a
    /// download are its runs' (a takeover, a restart), not the overlap of its connections.
    static var configuration: DownloadConfiguration {
        var configuration = FleetNodeTests.configuration
        configuration.connections = 1
        // Bytes are written (and counted) within this much of their arrival, also while a body is held.
        configuration.writeBufferSize = Self.writeBuffer
        return configuration
    }
    static let writeBuffer = 16 * 1024

    /// Whether a row's run has written all but its last write buffer of the half the server sends.
    static func hasHalf(_ row: FleetQueue.Row) -> Bool {
        row.completedLength >= Int64(Self.content.count / 2 - Self.writeBuffer)
    }

    /// A node with the completions its hooks were told of.
    struct Member {
        let node: FleetNode
        let completions: NIOLockedValueBox<[DownloadID]>
    }

    /// A database of the test's own, and nodes each with a client of its own, stopped at the end.
    final class Fleet: Sendable {
        let server: ThrowAwayPostgres
        let directory: ScratchDirectory
        let leaseDuration: Duration
        private let parts = NIOLockedValueBox<[(FleetNode, Downloader, Task<Void, Never>, Task<Void, Never>)]>([])

        init(server: ThrowAwayPostgres, directory: ScratchDirectory, leaseDuration: Duration) {
            self.server = server
            self.directory = directory
            self.leaseDuration = leaseDuration
        }

        /// A node (not started) whose client reaches the database at `url`.
        func node(_ name: String, url: String, capacity: Int) throws -> Member {
            let client = PostgresClient(
                configuration: try FleetDatabaseURL(url).configuration,
                backgroundLogger: FleetNodeTests.logger
            )
            let running = Task { await client.run() }
            let downloader = Downloader(
                configuration: .init(maximumConnections: 10_000, maximumConnectionsPerHost: 10_000)
            )
            let node = FleetNode(
                name: name,
                queue: FleetQueue(client: client, logger: FleetNodeTests.logger, statementTimeout: .seconds(5)),
                downloader: downloader,
                store: try QueueStore(path: self.directory.file("\(name).sqlite")),
                defaults: .init(
                    directory: self.directory.path,
                    configuration: FleetFaultTests.configuration,
                    options: [QueueOption(name: "max-concurrent-downloads", value: "\(capacity)")]
                ),
                logger: FleetNodeTests.logger,
                leaseDuration: self.leaseDuration,
                tick: .milliseconds(20)
            )
            let completions = NIOLockedValueBox<[DownloadID]>([])
            let events = node.events
            let listening = Task {
                for await event in events {
                    if case .completed(let gid) = event { completions.withLockedValue { $0.append(gid) } }
                }
            }
            self.parts.withLockedValue { $0.append((node, downloader, running, listening)) }
            return Member(node: node, completions: completions)
        }

        func rows() async throws -> [FleetQueue.Row] {
            try await self.withClient { client in
                try await FleetQueue(client: client, logger: FleetNodeTests.logger).rows()
            }
        }

        func waitForRows(_ what: String, _ condition: @escaping ([FleetQueue.Row]) -> Bool) async throws {
            try await waitUntil(what) { (try? await self.rows()).map(condition) ?? false }
        }

        /// Runs `body` with a client of the test's own, straight to the server.
        func withClient<Value: Sendable>(
            _ body: @Sendable (PostgresClient) async throws -> Value
        ) async throws -> Value {
            let client = PostgresClient(
                configuration: try FleetDatabaseURL(self.server.url).configuration,
                backgroundLogger: FleetNodeTests.logger
            )
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                return try await body(client)
            }
        }

        func tearDown() async {
            for (node, downloader, running, listening) in self.parts.withLockedValue({ $0 }) {
                await node.shutdown()
                await downloader.shutdown()
                running.cancel()
                // Its events end with its shutdown; a node that never started has none to end.
                listening.cancel()
                await listening.value
            }
        }
    }

    static func withFleet(leaseDuration: Duration, _ body: (Fleet) async throws -> Void) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await ThrowAwayPostgres.with { server in
            let fleet = Fleet(server: server, directory: directory, leaseDuration: leaseDuration)
            try await fleet.withClient { client in
                try await FleetSchema.migrate(client, logger: FleetNodeTests.logger, timeout: .seconds(3600))
            }
            do {
                try await body(fleet)
            } catch {
                await fleet.tearDown()
                throw error
            }
            await fleet.tearDown()
        }
    }

    /// Each file whole, each download completed once (told to one node's hooks once), and what the server sent
    /// for each within `allowance` of its length.
    static func expectEndedOnce(
        _ gids: [DownloadID],
        fleet: Fleet,
        members: [Member],
        server: RangeTestServer,
        allowance: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let completions = members.flatMap { $0.completions.withLockedValue { $0 } }
        #expect(
            completions.count == gids.count && Set(completions) == Set(gids),
            "completions: \(completions)",
            sourceLocation: sourceLocation
        )
        let statistics = server.statistics()
        for index in gids.indices {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file\(index).bin")))
            #expect(Array(bytes) == Self.content, "file\(index).bin", sourceLocation: sourceLocation)
            let sent = statistics.bodyBytesSent(for: "/file\(index).bin")
            #expect(
                (Self.content.count...(Self.content.count + allowance)).contains(sent),
                "file\(index).bin: \(sent) bytes sent for \(Self.content.count)",
                sourceLocation: sourceLocation
            )
        }
    }

    /// The database goes away under running downloads and comes back: the runs go on (their leases are long),
    /// a change asked meanwhile is refused with a clear error at once, reads answer from the last view, and the
    /// nodes reconnect by themselves. Nothing runs twice: each byte is sent once.
    @Test func theDatabaseRestartedUnderRunningDownloads() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        // The first half of each file, then nothing until released.
        server.holdBodies(lastBytes: Self.content.count / 2)
        try await Self.withFleet(leaseDuration: .seconds(3600)) { fleet in
            let members = [
                try fleet.node("node0", url: fleet.server.url, capacity: 2),
                try fleet.node("node1", url: fleet.server.url, capacity: 2),
            ]
            for member in members { try await member.node.start() }
            let gids = try await FleetNodeTests.add(4, through: members[0].node, server: server)
            try await fleet.waitForRows("all four active, on both nodes, half of each recorded") { rows in
                rows.count == 4 && Set(rows.compactMap(\.node)).count == 2
                    && rows.allSatisfy { $0.status == .active && Self.hasHalf($0) }
            }
            let running = try await members[1].node.status(of: gids[0].description)

            try await fleet.server.halt()
            await #expect {
                _ = try await members[1].node.add(uris: [server.url("/other.bin")], options: [], position: nil)
            } throws: { error in
                let error = try #require(error as? QueueError)
                return error.reason == .storage && error.message.contains("cannot be reached")
            }
            #expect(try await members[1].node.status(of: gids[0].description).status == running.status)
            // Lost now: the next change waits a second for the database, not a statement's time-out.
            #expect(await members[1].node.writeQueue.statementTimeout == FleetNode.lostStatementTimeout)
            #expect(FleetNode.lostStatementTimeout < members[1].node.queue.statementTimeout)
            await #expect(throws: QueueError.self) {
                _ = try await members[1].node.pause(gids[0].description, force: false)
            }
            try await fleet.server.resume()

            server.releaseBodies()
            try await fleet.waitForRows("all four complete") { rows in
                rows.count == 4 && rows.allSatisfy { $0.status == .complete }
            }
            // Both nodes reach the database again, on their own: a change through each is taken.
            for member in members {
                try await waitUntil("\(member.node.name) takes changes again") {
                    (try? await member.node.add(
                        uris: [server.url("/later.bin")],
                        options: [QueueOption(name: "pause", value: "true")],
                        position: nil
                    )) != nil
                }
            }
            try Self.expectEndedOnce(gids, fleet: fleet, members: members, server: server, allowance: 0)
        }
    }

    /// A node cut off from the database stops its runs once their leases may have run out; another node takes
    /// them over when the leases run out in the database, and resumes each from the journal the first left; back,
    /// the first takes nothing (its fences are stale) and ends nothing.
    @Test func aNodeCutOffFromTheDatabaseStopsAndAnotherResumesFromItsJournals() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        // The first half of each file, then nothing until released.
        server.holdBodies(lastBytes: Self.content.count / 2)
        try await Self.withFleet(leaseDuration: .seconds(6)) { fleet in
            let route = try await fleet.server.cuttableRoute()
            let cut = try fleet.node("node0", url: route.url, capacity: 2)
            try await cut.node.start()
            let gids = try await FleetNodeTests.add(2, through: cut.node, server: server)
            try await fleet.waitForRows("both active on node0") { rows in
                rows.count == 2 && rows.allSatisfy { $0.status == .active && $0.node == "node0" }
            }
            // What came was written and recorded: node0's progress in the database covers every byte sent.
            try await fleet.waitForRows("half of each recorded") { rows in
                rows.allSatisfy(Self.hasHalf)
            }
            let other = try fleet.node("node1", url: fleet.server.url, capacity: 2)
            try await other.node.start()

            route.relay.cut()
            try await waitUntil("node0 finds the database lost") { await cut.node.databaseLost }
            try await waitUntil("node0 stops its runs") { await cut.node.manager.activeDownloads().isEmpty }
            try await fleet.waitForRows("node1 runs both") { rows in
                rows.allSatisfy { $0.status == .active && $0.node == "node1" }
            }
            server.releaseBodies()
            try await fleet.waitForRows("both complete") { rows in rows.allSatisfy { $0.status == .complete } }

            route.relay.restore()
            try await waitUntil("node0 reaches the database again") { await !cut.node.databaseLost }
            let rows = try await fleet.rows()
            #expect(rows.allSatisfy { $0.status == .complete })
            // node1 fetched what node0's journals did not hold, and the resumed run's first 64 KiB (its probe).
            try Self.expectEndedOnce(
                gids,
                fleet: fleet,
                members: [cut, other],
                server: server,
                allowance: Self.content.count / 4
            )
            await route.relay.stop()
        }
    }
}
