import Downpour
import DownpourAria2
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import DownpourFleet

/// Nodes of a fleet in one process: each with its own manager, downloader and store, all on one PostgreSQL server
/// of the test's own and one download directory (storage every node sees), fetching from the fault-injecting test
/// server. The test server holds its bodies (``RangeTestServer/holdBodies()``) while a test needs downloads to
/// stay active, so that what a test sees never depends on how fast the machine is.
@Suite(.enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"))
struct FleetNodeTests {
    /// Silent, unless `FLEET_TEST_LOG` is set: then the nodes' logs, debug and up, go to standard error.
    static let logger: Logger = {
        guard ProcessInfo.processInfo.environment["FLEET_TEST_LOG"] != nil else {
            return Logger(label: "downpour.fleet.tests", factory: { _ in SwiftLogNoOpLogHandler() })
        }
        var logger = Logger(label: "downpour.fleet.tests", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .debug
        return logger
    }()
    static let content = makeTestContent(count: 1 << 20, seed: 28)

    struct Fleet {
        var server: ThrowAwayPostgres
        var queue: FleetQueue
        var nodes: [FleetNode]
        var directory: ScratchDirectory

        /// Another node on this fleet's queue and directory, not started.
        func node(_ name: String, downloader: Downloader, store: String) throws -> FleetNode {
            FleetNode(
                name: name,
                queue: self.queue,
                downloader: downloader,
                store: try QueueStore(path: self.directory.file(store)),
                defaults: .init(directory: self.directory.path, configuration: FleetNodeTests.configuration),
                logger: FleetNodeTests.logger,
                tick: .milliseconds(20)
            )
        }

        /// Waits until the fleet's rows satisfy `condition`.
        func waitForRows(
            _ what: @autoclosure () -> String,
            _ condition: ([FleetQueue.Row]) -> Bool
        ) async throws {
            try await waitUntil(what()) { (try? await self.queue.rows()).map(condition) ?? false }
        }
    }

    /// `count` started nodes (`node0`, `node1`, ...) running up to `capacity` downloads each, for `body`. The
    /// statements' time-out only guards against a hang, unless a test asks for the daemon's own.
    static func withFleet(
        nodes count: Int,
        capacity: Int,
        leaseDuration: Duration = .seconds(3600),
        statementTimeout: Duration = .seconds(3600),
        _ body: (Fleet) async throws -> Void
    ) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await ThrowAwayPostgres.with { server in
            let url = try FleetDatabaseURL(server.url)
            let client = PostgresClient(configuration: url.configuration, backgroundLogger: Self.logger)
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                try await FleetSchema.migrate(client, logger: Self.logger, timeout: .seconds(3600))
                let queue = FleetQueue(client: client, logger: Self.logger, statementTimeout: statementTimeout)
                var nodes: [FleetNode] = []
                var downloaders: [Downloader] = []
                for index in 0..<count {
                    let downloader = Downloader(
                        configuration: .init(maximumConnections: 10_000, maximumConnectionsPerHost: 10_000)
                    )
                    downloaders.append(downloader)
                    let node = FleetNode(
                        name: "node\(index)",
                        queue: queue,
                        downloader: downloader,
                        store: try QueueStore(path: directory.file("node\(index).sqlite")),
                        defaults: .init(
                            directory: directory.path,
                            configuration: Self.configuration,
                            options: [QueueOption(name: "max-concurrent-downloads", value: "\(capacity)")]
                        ),
                        logger: Self.logger,
                        leaseDuration: leaseDuration,
                        tick: .milliseconds(20)
                    )
                    try await node.start()
                    nodes.append(node)
                }
                do {
                    try await body(Fleet(server: server, queue: queue, nodes: nodes, directory: directory))
                } catch {
                    for node in nodes { await node.shutdown() }
                    for downloader in downloaders { await downloader.shutdown() }
                    throw error
                }
                for node in nodes { await node.shutdown() }
                for downloader in downloaders { await downloader.shutdown() }
                group.cancelAll()
            }
        }
    }

    static var configuration: DownloadConfiguration {
        var configuration = DownloadManager.Defaults.configuration
        configuration.connections = 2
        configuration.minimumSplitSize = 256 * 1024
        configuration.retry = .init(maximumTries: 5, wait: .milliseconds(10), maximumWait: .seconds(2))
        configuration.progressInterval = .milliseconds(20)
        configuration.journalInterval = .milliseconds(50)
        return configuration
    }

    static func add(_ count: Int, through node: FleetNode, server: RangeTestServer) async throws -> [DownloadID] {
        var gids: [DownloadID] = []
        for index in 0..<count {
            gids.append(
                try await node.add(
                    uris: [server.url("/file\(index).bin")],
                    options: [QueueOption(name: "out", value: "file\(index).bin")],
                    position: nil
                )
            )
        }
        return gids
    }

    @Test func downloadsAddedThroughOneNodeRunOnEveryNode() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 3, capacity: 2) { fleet in
            let gids = try await Self.add(6, through: fleet.nodes[0], server: server)
            // Six at once only when every node runs two: each claimed its share.
            try await fleet.waitForRows("six active downloads") { rows in
                rows.filter { $0.status == .active }.count == 6
            }
            let rows = try await fleet.queue.rows()
            #expect(Set(rows.compactMap(\.node)) == ["node0", "node1", "node2"])
            // Any node answers for the fleet, naming where each runs.
            let shown = await fleet.nodes[2].read { $0.activeDownloads() }
            #expect(Set(shown.map(\.gid)) == Set(gids))
            #expect(Set(shown.compactMap(\.node)) == ["node0", "node1", "node2"])
            #expect(await fleet.nodes[1].globalStat().numActive == 6)

            server.releaseBodies()
            try await fleet.waitForRows("every download complete") { rows in
                rows.count == 6 && rows.allSatisfy { $0.status == .complete }
            }
            for index in 0..<6 {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file\(index).bin")))
                #expect(Array(bytes) == Self.content, "file\(index).bin")
            }
            let stopped = await fleet.nodes[1].read { $0.stoppedDownloads(0..<100) }
            #expect(Set(stopped.map(\.gid)) == Set(gids))
            #expect(stopped.allSatisfy { $0.status == .complete && $0.node == nil })
        }
    }

    @Test func everyNodesClientsAreToldOfTheWholeFleetAndItsHooksOnlyOfItsOwnRuns() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        let hooksHeard = NIOLockedValueBox<Task<[QueueEvent], Never>?>(nil)
        let ranOnNode0 = NIOLockedValueBox<DownloadID?>(nil)
        try await Self.withFleet(nodes: 3, capacity: 1) { fleet in
            let node0 = fleet.nodes[0]
            let ownEvents = node0.events
            hooksHeard.withLockedValue { $0 = Task { await ownEvents.reduce(into: []) { $0.append($1) } } }
            let told = node0.announcements
            let gids = try await Self.add(3, through: fleet.nodes[1], server: server)
            try await fleet.waitForRows("three active") { rows in rows.filter { $0.status == .active }.count == 3 }
            let runner = Dictionary(uniqueKeysWithValues: try await fleet.queue.rows().map { ($0.gid, $0.node ?? "") })
            #expect(Set(runner.values) == ["node0", "node1", "node2"])
            ranOnNode0.withLockedValue { $0 = runner.first { $0.value == "node0" }?.key }

            // node0's clients hear of each add (made through node1), start and completion, wherever the download
            // ran; a client told of a completion reads it as complete at once, through node0.
            let listener = Task {
                var heard: [DownloadID: [String]] = [:]
                var readWhenTold: [DownloadID: QueueStatus] = [:]
                for await event in told {
                    switch event {
                    case .added(let gid): heard[gid, default: []].append("added")
                    case .started(let gid): heard[gid, default: []].append("started")
                    case .completed(let gid):
                        heard[gid, default: []].append("completed")
                        readWhenTold[gid] = try? await node0.status(of: gid.description).status
                    default: break
                    }
                    if readWhenTold.count == 3 { break }
                }
                return (heard, readWhenTold)
            }
            let watchdog = Task {
                try? await Task.sleep(for: .seconds(120))
                listener.cancel()
            }
            server.releaseBodies()
            let (heard, readWhenTold) = await listener.value
            watchdog.cancel()
            #expect(readWhenTold == Dictionary(uniqueKeysWithValues: gids.map { ($0, QueueStatus.complete) }))
            // (An add and a start come from different nodes, so either may be heard first.)
            for gid in gids {
                #expect(heard[gid]?.sorted() == ["added", "completed", "started"], "\(gid) on \(runner[gid]!)")
                #expect(heard[gid]?.last == "completed", "\(gid) on \(runner[gid]!)")
            }
        }
        // Hooks follow the events of node0's own runs only (the file is where the download ran).
        let own = await hooksHeard.withLockedValue { $0 }!.value
        let completed = own.compactMap { event -> DownloadID? in
            if case .completed(let gid) = event { return gid }
            return nil
        }
        #expect(completed == [ranOnNode0.withLockedValue { $0 }].compactMap { $0 })
        #expect(completed.count == 1)
    }

    @Test func everyNodeListsTheFleetsNodesWithWhereTheyListenAndWhatTheyRun() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 3, capacity: 1) { fleet in
            for (index, node) in fleet.nodes.enumerated() { await node.advertise(address: "127.0.0.1:\(6800 + index)") }
            _ = try await Self.add(2, through: fleet.nodes[2], server: server)
            try await fleet.waitForRows("two active") { rows in rows.filter { $0.status == .active }.count == 2 }
            try await waitUntil("every node told how it stands") {
                let nodes = await fleet.nodes[2].read { $0.nodes() }
                return nodes.map(\.address) == ["127.0.0.1:6800", "127.0.0.1:6801", "127.0.0.1:6802"]
                    && nodes.map(\.numActive).reduce(0, +) == 2
            }
            let nodes = await fleet.nodes[2].read { $0.nodes() }
            #expect(nodes.map(\.name) == ["node0", "node1", "node2"])
            #expect(nodes.allSatisfy { $0.isUp })
            // Each node's count is what the queue says it runs.
            let rows = try await fleet.queue.rows()
            for node in nodes {
                #expect(node.numActive == rows.filter { $0.node == node.name }.count, "\(node.name)")
            }

            // A node that stops leaves the list.
            await fleet.nodes[1].shutdown()
            try await waitUntil("node1 gone from the list") {
                await fleet.nodes[0].read { $0.nodes() }.map(\.name) == ["node0", "node2"]
            }
            server.releaseBodies()
        }
    }

    @Test func theWaitingQueueIsReorderedThroughAnyNodeAndSavedWholeAsAria2Would() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 2, capacity: 1) { fleet in
            var gids = try await Self.add(5, through: fleet.nodes[0], server: server)
            try await fleet.waitForRows("two active") { rows in rows.filter { $0.status == .active }.count == 2 }
            let active = Set(try await fleet.queue.rows().filter { $0.status == .active }.map(\.gid))
            #expect(active == Set(gids[0..<2]))
            func waiting(through node: FleetNode) async -> [DownloadID] {
                await node.read { $0.waitingDownloads(0..<100) }.map(\.gid)
            }

            // Moved through node1, seen through node0 once it was told of the change.
            #expect(try await fleet.nodes[1].changePosition(gids[4].description, by: 0, from: .set) == 0)
            try await waitUntil("node0 shows the move") {
                await waiting(through: fleet.nodes[0]) == [gids[4], gids[2], gids[3]]
            }
            #expect(try await fleet.nodes[0].changePosition(gids[2].description, by: 1, from: .current) == 2)
            try await waitUntil("node1 shows the move") {
                await waiting(through: fleet.nodes[1]) == [gids[4], gids[3], gids[2]]
            }
            // Added at a position, through node0.
            let inserted = try await fleet.nodes[0].add(
                uris: [server.url("/file5.bin")],
                options: [QueueOption(name: "out", value: "file5.bin")],
                position: 1
            )
            #expect(await waiting(through: fleet.nodes[0]) == [gids[4], inserted, gids[3], gids[2]])
            try await waitUntil("node1 shows the add in its place") {
                await waiting(through: fleet.nodes[1]) == [gids[4], inserted, gids[3], gids[2]]
            }
            gids.append(inserted)
            // An active download has no place in the waiting queue.
            await #expect(throws: QueueError.self) {
                try await fleet.nodes[1].changePosition(gids[0].description, by: 0, from: .set)
            }

            // A waiting download's URIs change through any node; no URI at all is refused.
            let mirror = server.url("/mirror/file3.bin")
            let changed = try await fleet.nodes[1].changeURIs(
                gids[3].description,
                remove: [server.url("/file3.bin")],
                add: [mirror],
                position: 0
            )
            #expect(changed == (1, 1))
            try await waitUntil("node0 shows the new URIs") {
                try await fleet.nodes[0].status(of: gids[3].description).uris == [mirror]
            }
            await #expect(throws: QueueError.self) {
                try await fleet.nodes[0].changeURIs(gids[3].description, remove: [mirror], add: [], position: nil)
            }

            // The session file: as aria2 without one set; with one, the whole fleet's queue in its order.
            await #expect(throws: QueueError.self) { try await fleet.nodes[1].saveSession() }
            let path = fleet.directory.file("fleet.session")
            try await fleet.nodes[1].changeGlobalOptions([QueueOption(name: "save-session", value: path)])
            try await fleet.nodes[1].saveSession()
            let saved = try InputFile(parsing: String(contentsOfFile: path, encoding: .utf8))
            let savedGIDs = saved.entries.compactMap { $0.value("gid") }
            #expect(Set(savedGIDs.prefix(2)) == Set(gids[0..<2].map(\.description)), "the active ones first")
            #expect(Array(savedGIDs.dropFirst(2)) == [gids[4], inserted, gids[3], gids[2]].map(\.description))
            server.releaseBodies()
        }
    }

    @Test func anActiveDownloadsOptionsAndURIsChangeThroughAnotherNode() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 2, capacity: 1) { fleet in
            // What each node's runs do from before the add until a completion: the runner's run starts once.
            let watchers = fleet.nodes.map { node in
                let events = node.events
                return Task { () -> [QueueEvent] in
                    var seen: [QueueEvent] = []
                    for await event in events {
                        seen.append(event)
                        if case .completed = event { break }
                    }
                    return seen
                }
            }
            let watchdog = Task {
                try? await Task.sleep(for: .seconds(120))
                for watcher in watchers { watcher.cancel() }
            }
            defer { watchdog.cancel() }
            let gid = try #require(try await Self.add(1, through: fleet.nodes[0], server: server).first)
            try await fleet.waitForRows("active") { rows in rows.first?.status == .active }
            let runner = try #require(try await fleet.queue.row(gid)?.node)
            let (running, other) =
                runner == "node0" ? (fleet.nodes[0], fleet.nodes[1]) : (fleet.nodes[1], fleet.nodes[0])
            let watched = watchers[runner == "node0" ? 0 : 1]
            watchers[runner == "node0" ? 1 : 0].cancel()
            try await other.changeOptions(gid.description, [QueueOption(name: "max-download-limit", value: "8M")])
            let mirror = server.url("/mirror/file0.bin")
            let changed = try await other.changeURIs(gid.description, remove: [], add: [mirror], position: nil)
            #expect(changed == (0, 1))
            // The running node applies both to its run, and the request is done.
            try await waitUntil("the run changed") {
                let status = try await running.manager.status(of: gid.description)
                return status.uris == [server.url("/file0.bin"), mirror]
                    && status.options.contains(QueueOption(name: "max-download-limit", value: "8M"))
            }
            try await waitUntil("the request done") { try await fleet.queue.row(gid)?.request == nil }
            // Any node shows the options in effect as a single daemon would.
            let limit = { @Sendable (options: [QueueOption]) in options.first { $0.name == "max-download-limit" } }
            let shown = limit(try await other.options(of: gid.description))
            let inEffect = limit(try await running.manager.options(of: gid.description))
            #expect(shown != nil && shown == inEffect)
            server.releaseBodies()
            try await fleet.waitForRows("complete") { rows in rows.first?.status == .complete }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file0.bin")))
            #expect(Array(bytes) == Self.content)
            // A speed limit and a mirror change a run live, as in a single daemon: it never restarted.
            let seen = await watched.value.filter {
                [.started(gid), .paused(gid), .stopped(gid), .completed(gid)].contains($0)
            }
            #expect(seen == [.started(gid), .completed(gid)], "\(seen)")
        }
    }

    @Test func aPauseOrRemoveThroughOneNodeReachesTheNodeThatRunsIt() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 2, capacity: 1) { fleet in
            let gids = try await Self.add(2, through: fleet.nodes[0], server: server)
            try await fleet.waitForRows("both active") { rows in rows.filter { $0.status == .active }.count == 2 }
            let rows = try await fleet.queue.rows()
            let onNode1 = try #require(rows.first { $0.node == "node1" }).gid
            let onNode0 = try #require(rows.first { $0.node == "node0" }).gid

            // Paused through node0, run by node1: node1 stops it and gives it back, paused.
            #expect(try await fleet.nodes[0].pause(onNode1.description, force: false) == onNode1)
            try await waitUntil("paused") { try await fleet.nodes[0].status(of: onNode1.description).status == .paused }
            #expect(await fleet.nodes[1].manager.activeDownloads().isEmpty)

            // Removed through node1, run by node0: a removed result, its partial file gone.
            #expect(try await fleet.nodes[1].remove(onNode0.description, force: false) == onNode0)
            try await waitUntil("removed") {
                try await fleet.nodes[1].status(of: onNode0.description).status == .removed
            }
            let removed = try await fleet.nodes[1].status(of: onNode0.description)
            #expect(removed.errorCode == Aria2ErrorCode.removed.rawValue)
            let index = gids.firstIndex(of: onNode0)!
            #expect(!FileManager.default.fileExists(atPath: fleet.directory.file("file\(index).bin.part")))

            // Unpaused: it runs again (on either node) and completes from what it had.
            _ = try await fleet.nodes[1].unpause(onNode1.description)
            server.releaseBodies()
            try await waitUntil("complete") {
                try await fleet.nodes[0].status(of: onNode1.description).status == .complete
            }
            let other = gids.firstIndex(of: onNode1)!
            let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file\(other).bin")))
            #expect(Array(bytes) == Self.content)
        }
    }

    /// A run whose lease another node took stops and writes nothing more; the download completes once it is
    /// given back, resumed from the `.part` file the first run left.
    @Test func aRunWhoseLeaseWasTakenStopsAndTheDownloadCompletesElsewhere() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies(afterSending: Self.content.count / 2)
        try await Self.withFleet(nodes: 1, capacity: 1, leaseDuration: .seconds(3)) { fleet in
            let gid = try #require(try await Self.add(1, through: fleet.nodes[0], server: server).first)
            try await fleet.waitForRows("active") { rows in rows.first?.status == .active }
            try await waitUntil("a journal on disk") {
                FileManager.default.fileExists(atPath: fleet.directory.file("file0.bin.part.downpour"))
            }
            // Another claimer takes it, with a fence of its own, as a claim after node0's lease ran out would.
            var taken: [(fence: Int64, previous: String?)] = []
            for try await row in try await fleet.queue.client.query(
                """
                UPDATE downpour_downloads AS d
                SET state = 'active', node = 'thief', fence = nextval('downpour_fence'),
                    lease_until = now() + interval '1 hour'
                FROM (SELECT gid, node FROM downpour_downloads) AS before
                WHERE d.gid = before.gid
                RETURNING d.fence, before.node
                """,
                logger: Self.logger
            ).decode((Int64, String?).self) { taken.append(row) }
            #expect(taken.count == 1 && taken.first?.previous == "node0")
            // node0's next renewal finds the lease gone: its run stops, keeping the files for the new holder.
            try await waitUntil("node0 dropped the run") { await fleet.nodes[0].manager.activeDownloads().isEmpty }
            #expect(FileManager.default.fileExists(atPath: fleet.directory.file("file0.bin.part")))
            #expect(try await fleet.queue.rows().first?.node == "thief")

            // Given back: node0 claims it again and finishes it.
            let thief = try #require(taken.first)
            #expect(try await fleet.queue.release(gid, fence: thief.fence, paused: false))
            server.releaseBodies()
            try await fleet.waitForRows("complete") { rows in rows.first?.status == .complete }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file0.bin")))
            #expect(Array(bytes) == Self.content)
        }
    }

    /// A node that stops gives its downloads back to the fleet, and a pause asked of it meanwhile stays asked.
    @Test func aNodeThatStopsGivesItsDownloadsBack() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 1, capacity: 2) { fleet in
            let gids = try await Self.add(2, through: fleet.nodes[0], server: server)
            try await fleet.waitForRows("both active") { rows in rows.filter { $0.status == .active }.count == 2 }
            // Asked through the database (as another node asks): carried out by the node, or kept at its stop.
            #expect(try await fleet.queue.pause(gids[0]) == .asked(node: "node0"))
            await fleet.nodes[0].shutdown()
            let rows = try await fleet.queue.rows()
            #expect(rows.first { $0.gid == gids[0] }?.status == .paused)
            #expect(rows.first { $0.gid == gids[1] }?.status == .waiting)
            #expect(rows.allSatisfy { $0.node == nil && $0.fence == nil && $0.request == nil })
        }
    }

    /// Two daemons with one name would each take the other's downloads as their own: the second is refused until
    /// the first stops, and then takes back what the first ran.
    @Test func aNodesNameIsItsOwnWhileItRuns() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        try await Self.withFleet(nodes: 1, capacity: 1) { fleet in
            let gid = try #require(try await Self.add(1, through: fleet.nodes[0], server: server).first)
            try await fleet.waitForRows("active") { rows in rows.first?.status == .active }
            let downloader = Downloader()
            let twin = try fleet.node("node0", downloader: downloader, store: "twin.sqlite")
            await #expect {
                try await twin.start()
            } throws: { error in
                (error as? QueueError)?.message.contains("runs already") == true
            }
            #expect(try await fleet.queue.rows().first?.node == "node0")

            // Stopped, the first gives it back; the next node0 takes it (and the name).
            await fleet.nodes[0].shutdown()
            let again = try fleet.node("node0", downloader: downloader, store: "again.sqlite")
            try await again.start()
            server.releaseBodies()
            try await fleet.waitForRows("complete") { rows in rows.first?.status == .complete }
            #expect(try await again.status(of: gid.description).status == .complete)
            await again.shutdown()
            await downloader.shutdown()
        }
    }

    /// A Metalink URL run by one node: the files it lists join the fleet's queue (and may run on any node).
    @Test func theFilesOfAMetalinkJoinTheFleetsQueue() async throws {
        let files = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await files.shutdown() } }
        let document = Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="one.bin"><size>\(Self.content.count)</size><url>\(files.url("/one.bin"))</url></file>
              <file name="two.bin"><size>\(Self.content.count)</size><url>\(files.url("/two.bin"))</url></file>
            </metalink>
            """.utf8
        )
        let server = try await RangeTestServer.start(content: document)
        defer { Task { try? await server.shutdown() } }
        try await Self.withFleet(nodes: 2, capacity: 1) { fleet in
            let gid = try await fleet.nodes[0].add(uris: [server.url("/release.meta4")], options: [], position: nil)
            try await fleet.waitForRows("three downloads complete") { rows in
                rows.count == 3 && rows.allSatisfy { $0.status == .complete }
            }
            let rows = try await fleet.queue.rows()
            #expect(
                Set(rows.filter { $0.gid != gid }.map(\.entry.uris)) == [
                    [files.url("/one.bin")], [files.url("/two.bin")],
                ]
            )
            for name in ["one.bin", "two.bin"] {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file(name)))
                #expect(Array(bytes) == Self.content, "\(name)")
            }
            // Nothing is left behind in the nodes' own queues.
            for node in fleet.nodes {
                #expect(await node.manager.read { $0.globalStat().numWaiting } == 0)
            }
        }
    }

    @Test func whileTheDatabaseIsLostChangesAreRefusedAndReadsShowTheLastState() async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        server.holdBodies()
        // The daemon's own time-out (5 s): a statement to a server that went away fails after it. The client's
        // connection is made before the node starts (by the migration), so the node's first statements need not
        // wait for one.
        try await Self.withFleet(nodes: 1, capacity: 1, statementTimeout: .seconds(5)) { fleet in
            let gid = try #require(try await Self.add(1, through: fleet.nodes[0], server: server).first)
            try await fleet.waitForRows("active") { rows in rows.first?.status == .active }
            _ = try await fleet.nodes[0].status(of: gid.description)

            try await fleet.server.halt()
            await #expect {
                _ = try await fleet.nodes[0].add(uris: [server.url("/other.bin")], options: [], position: nil)
            } throws: { error in
                let error = try #require(error as? QueueError)
                return error.reason == .storage && error.message.contains("cannot be reached")
            }
            // Reads answer with the fleet as it was; the run goes on meanwhile.
            #expect(try await fleet.nodes[0].status(of: gid.description).status == .active)
            #expect(await fleet.nodes[0].manager.activeDownloads().map(\.gid) == [gid])

            try await fleet.server.resume()
            server.releaseBodies()
            try await waitUntil("complete once the database is back") {
                (try? await fleet.queue.rows().first?.status) == .complete
            }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: fleet.directory.file("file0.bin")))
            #expect(Array(bytes) == Self.content)
        }
    }
}
