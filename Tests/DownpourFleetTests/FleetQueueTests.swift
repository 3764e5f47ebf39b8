import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import DownpourFleet

/// The fleet queue's SQL against a real PostgreSQL server: a throw-away cluster of the test's own
/// (``ThrowAwayPostgres``). Leases of 0 s have run out by the next statement and leases of an hour do not run out
/// during a test, so nothing here depends on how fast the machine is.
///
/// Without a PostgreSQL server installed these tests are skipped, and say so; `.ci/run` installs one and sets
/// `DOWNPOUR_REQUIRE_POSTGRES=1`, which turns a missing server into a failure.
@Suite(.enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"))
struct FleetQueueTests {
    static let logger = Logger(label: "downpour.fleet.tests", factory: { _ in SwiftLogNoOpLogHandler() })
    static let hour = Duration.seconds(3600)

    static func entry(_ value: UInt64) -> QueueEntry {
        QueueEntry(
            gid: DownloadID(value: value),
            uris: ["http://127.0.0.1/\(value)", "http://127.0.0.1/mirror/\(value)"],
            options: [QueueOption(name: "out", value: "file \(value)"), QueueOption(name: "header", value: "A: b")]
        )
    }

    /// A migrated queue on a fresh server, for the length of `body`.
    static func withQueue(_ body: (FleetQueue) async throws -> Void) async throws {
        try await ThrowAwayPostgres.with { server in
            let url = try FleetDatabaseURL(server.url)
            let client = PostgresClient(configuration: url.configuration, backgroundLogger: Self.logger)
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                // Long time-outs: they only guard against a hang, whatever the machine's load.
                try await FleetSchema.migrate(client, logger: Self.logger, timeout: Self.hour)
                try await body(FleetQueue(client: client, logger: Self.logger, statementTimeout: Self.hour))
                group.cancelAll()
            }
        }
    }

    @Test func migratingTwiceChangesNothing() async throws {
        try await Self.withQueue { queue in
            #expect(try await FleetSchema.migrate(queue.client, logger: Self.logger) == FleetSchema.version)
            var versions: [Int] = []
            for try await version in try await queue.client.query("SELECT version FROM downpour_schema").decode(
                Int.self
            ) {
                versions.append(version)
            }
            #expect(versions == Array(1...FleetSchema.version))
        }
    }

    @Test func aDatabaseMigratedByANewerDownpourIsRefusedWithAClearError() async throws {
        try await Self.withQueue { queue in
            try await queue.client.query("INSERT INTO downpour_schema (version) VALUES (99)")
            do throws(FleetError) {
                try await FleetSchema.migrate(queue.client, logger: Self.logger)
                Issue.record("a newer database was taken")
            } catch {
                #expect(error.message.hasPrefix("The fleet's database is at version 99"), "\(error.message)")
                #expect(error.message.contains("same downpour on every node"), "\(error.message)")
            }
        }
    }

    @Test func claimsTakeWaitingDownloadsInQueueOrderAndNeverPausedOnes() async throws {
        try await Self.withQueue { queue in
            for value in 1...5 as ClosedRange<UInt64> { try await queue.add(Self.entry(value), paused: value == 2) }
            let first = try await queue.claim(node: "a", count: 2, lease: Self.hour)
            #expect(first.map(\.entry.gid.value) == [1, 3])
            #expect(first[0].entry == Self.entry(1), "the URIs and options come back as they were added")
            #expect(first.allSatisfy { $0.previousNode == nil })
            let rest = try await queue.claim(node: "b", count: 10, lease: Self.hour)
            #expect(rest.map(\.entry.gid.value) == [4, 5])
            #expect(try await queue.claim(node: "c", count: 10, lease: Self.hour).isEmpty)
            let fences = (first + rest).map(\.fence)
            #expect(Set(fences).count == fences.count, "every claim has a fence of its own")
            let rows = try await queue.rows()
            #expect(rows.filter { $0.status == .active }.map(\.node) == ["a", "a", "b", "b"])
            #expect(rows.filter { $0.status == .paused }.map(\.gid.value) == [2])
        }
    }

    @Test func aSecondClaimerPassesOverRowsTheFirstIsClaimingInsteadOfWaiting() async throws {
        try await Self.withQueue { queue in
            for value in 1...4 as ClosedRange<UInt64> { try await queue.add(Self.entry(value)) }
            let (held, other) = try await queue.client.withTransaction(logger: Self.logger) { connection in
                // Claimed in a transaction that is still open: its rows are locked.
                let held = try await FleetQueue.claim(
                    node: "a",
                    count: 2,
                    lease: Self.hour,
                    on: connection,
                    logger: Self.logger
                )
                // Another connection claims meanwhile, and gets the next two at once.
                let other = try await queue.claim(node: "b", count: 4, lease: Self.hour)
                return (held, other)
            }
            #expect(held.map(\.entry.gid.value) == [1, 2])
            #expect(other.map(\.entry.gid.value) == [3, 4])
            let active = try await queue.rows().filter { $0.status == .active }
            #expect(
                Dictionary(uniqueKeysWithValues: active.map { ($0.gid.value, $0.node) }) == [
                    1: "a", 2: "a", 3: "b", 4: "b",
                ]
            )
        }
    }

    @Test func aLeaseThatRanOutGoesToTheNextClaimFirstAndFencesOutTheOldHolder() async throws {
        try await Self.withQueue { queue in
            for value in 1...3 as ClosedRange<UInt64> { try await queue.add(Self.entry(value)) }
            // Node a claims 3 with a lease that runs out at once (a node that stalled or died); 1 and 2, run and
            // given back by node x, wait in front of 3's old place.
            let ran = try await queue.claim(node: "x", count: 2, lease: Self.hour)
            let lost = try #require(try await queue.claim(node: "a", count: 1, lease: .zero).first)
            #expect(lost.entry.gid.value == 3)
            for claim in ran { #expect(try await queue.release(claim.entry.gid, fence: claim.fence, paused: false)) }
            #expect(try await queue.holds(lost.entry.gid, fence: lost.fence) == false, "its lease ran out")
            let taken = try await queue.claim(node: "b", count: 2, lease: Self.hour)
            #expect(taken.map(\.entry.gid.value) == [3, 2], "the download whose lease ran out comes first")
            #expect(taken[0].previousNode == "a")
            #expect(taken[1].previousNode == nil)
            #expect(taken[0].fence > lost.fence)
            // Node a, back from a stall, is fenced out: nothing it writes lands.
            #expect(try await queue.renew(node: "a", fences: [lost.entry.gid: lost.fence], lease: Self.hour).isEmpty)
            #expect(try await queue.holds(lost.entry.gid, fence: lost.fence) == false)
            #expect(
                try await queue.record(
                    lost.entry.gid,
                    fence: lost.fence,
                    path: "/a",
                    totalLength: 9,
                    completedLength: 9
                )
                    == false
            )
            #expect(
                try await queue.finish(lost.entry.gid, fence: lost.fence, outcome: .complete(path: "/a", length: 9))
                    == false
            )
            #expect(try await queue.release(lost.entry.gid, fence: lost.fence, paused: true) == false)
            let row = try #require(try await queue.rows().first { $0.gid == lost.entry.gid })
            #expect(row.status == .active)
            #expect(row.node == "b")
            #expect(row.path == nil)
            // Node b holds it and renews.
            #expect(try await queue.holds(taken[0].entry.gid, fence: taken[0].fence))
            #expect(
                try await queue.renew(node: "b", fences: [taken[0].entry.gid: taken[0].fence], lease: Self.hour)
                    == [taken[0].entry.gid]
            )
        }
    }

    @Test func aLiveLeaseIsNotTaken() async throws {
        try await Self.withQueue { queue in
            try await queue.add(Self.entry(1))
            let claim = try #require(try await queue.claim(node: "a", count: 1, lease: Self.hour).first)
            #expect(try await queue.claim(node: "b", count: 5, lease: Self.hour).isEmpty)
            // A renewal with a lease that runs out at once gives it up to the next claimer.
            #expect(try await queue.renew(node: "a", fences: [claim.entry.gid: claim.fence], lease: .zero).count == 1)
            #expect(try await queue.claim(node: "b", count: 5, lease: Self.hour).map(\.previousNode) == ["a"])
        }
    }

    @Test func aRestartedNodeTakesItsOwnLeasesBackAtOnceWithNewFences() async throws {
        try await Self.withQueue { queue in
            for value in 1...3 as ClosedRange<UInt64> { try await queue.add(Self.entry(value)) }
            let before = try await queue.claim(node: "a", count: 2, lease: Self.hour)
            _ = try await queue.claim(node: "b", count: 1, lease: Self.hour)
            let again = try await queue.reclaim(node: "a", lease: Self.hour)
            #expect(again.map(\.entry.gid.value) == [1, 2])
            #expect(again.map(\.previousNode) == ["a", "a"])
            for (old, new) in zip(before, again) {
                #expect(new.fence > old.fence)
                #expect(
                    try await queue.holds(old.entry.gid, fence: old.fence) == false,
                    "the crashed run is fenced out"
                )
                #expect(try await queue.holds(new.entry.gid, fence: new.fence))
            }
            #expect(try await queue.reclaim(node: "c", lease: Self.hour).isEmpty)
        }
    }

    @Test func endsAreRecordedOnlyByTheHolderAndResultsKeepTheirOrder() async throws {
        try await Self.withQueue { queue in
            for value in 1...4 as ClosedRange<UInt64> { try await queue.add(Self.entry(value)) }
            let claims = try await queue.claim(node: "a", count: 4, lease: Self.hour)
            #expect(
                try await queue.record(
                    claims[1].entry.gid,
                    fence: claims[1].fence,
                    path: "/d/2",
                    totalLength: 100,
                    completedLength: 40
                )
            )
            #expect(
                try await queue.finish(
                    claims[1].entry.gid,
                    fence: claims[1].fence,
                    outcome: .failed(code: .resourceNotFound, message: "404")
                )
            )
            #expect(
                try await queue.finish(
                    claims[0].entry.gid,
                    fence: claims[0].fence,
                    outcome: .complete(path: "/d/1", length: 7)
                )
            )
            // Paused: back at the front of the queue; 4 then waits again, before it.
            #expect(try await queue.release(claims[2].entry.gid, fence: claims[2].fence, paused: true))
            #expect(try await queue.release(claims[3].entry.gid, fence: claims[3].fence, paused: false))
            #expect(
                try await queue.finish(
                    claims[0].entry.gid,
                    fence: claims[0].fence,
                    outcome: .complete(path: "/d/1", length: 7)
                ) == false,
                "a run ends once"
            )
            let rows = try await queue.rows()
            #expect(rows.map(\.gid.value) == [4, 3, 2, 1])
            #expect(rows.map(\.status) == [.waiting, .paused, .error, .complete])
            #expect(rows[2].errorCode == Aria2ErrorCode.resourceNotFound.rawValue)
            #expect(rows[2].errorMessage == "404")
            #expect(rows[2].path == "/d/2")
            #expect(rows[2].completedLength == 40)
            #expect(rows[3].path == "/d/1")
            #expect(rows[3].totalLength == 7)
            #expect(rows.allSatisfy { $0.node == nil && $0.fence == nil })
            // The waiting one is claimed again; the paused one is not.
            #expect(try await queue.claim(node: "b", count: 5, lease: Self.hour).map(\.entry.gid.value) == [4])
        }
    }

    @Test func aTakenGIDIsRefused() async throws {
        try await Self.withQueue { queue in
            try await queue.add(Self.entry(1))
            await #expect(throws: FleetError.self) { try await queue.add(Self.entry(1)) }
            #expect(try await queue.rows().count == 1)
        }
    }

    @Test func aBatchIsAddedInItsOrderPassingOverTakenGIDs() async throws {
        try await Self.withQueue { queue in
            try await queue.add(Self.entry(1))
            let batch = [9, 1, 5, 9, 3, 7].map { (Self.entry(UInt64($0)), paused: $0 == 3) }
            #expect(try await queue.add(batch) == [true, false, true, false, true, true])
            let rows = try await queue.rows()
            #expect(rows.map(\.gid.value) == [1, 9, 5, 3, 7])
            #expect(rows.map(\.status) == [.waiting, .waiting, .waiting, .paused, .waiting])
            #expect(rows[1].entry == Self.entry(9))
        }
    }
}

/// Whether the PostgreSQL tests run: when a server is installed, or when one is required (then a missing one fails).
let postgresWanted =
    ThrowAwayPostgres.isInstalled || ProcessInfo.processInfo.environment["DOWNPOUR_REQUIRE_POSTGRES"] == "1"

/// URLs as people write them, and the errors for those that are not.
@Suite struct FleetDatabaseURLTests {
    @Test func readsUserPasswordHostPortAndDatabase() throws {
        let url = try FleetDatabaseURL("postgresql://fleet:s%40cret@db.example:6543/queue?sslmode=require")
        #expect(url.user == "fleet")
        #expect(url.password == "s@cret")
        #expect(url.host == "db.example")
        #expect(url.port == 6543)
        #expect(url.database == "queue")
        #expect(url.tls == .require)
        #expect(url.description == "postgresql://fleet@db.example:6543/queue", "no password in messages")
        let plain = try FleetDatabaseURL("postgres://me@127.0.0.1/d")
        #expect(plain.port == 5432)
        #expect(plain.tls == .prefer)
        #expect(plain.password == nil)
        #expect(try FleetDatabaseURL("postgresql://me@[::1]:7000/d").host == "::1")
    }

    @Test(
        arguments: [
            "http://me@host/d", "postgresql://host:5432/d", "postgresql://me@host:5432", "postgresql://me@host:0/d",
            "postgresql://me@host:x/d", "postgresql://me@host/d?sslmode=sometimes", "postgresql://me@host/d?x=1",
            "postgresql://me@/d",
        ]
    )
    func refusesWhatIsNotAURL(text: String) {
        #expect(throws: FleetError.self) { try FleetDatabaseURL(text) }
    }

    @Test func errorsDoNotShowThePassword() {
        do {
            _ = try FleetDatabaseURL("postgresql://me:hunter2@host:99999/d")
            Issue.record("a bad port was taken")
        } catch {
            #expect(!error.message.contains("hunter2"))
            #expect(error.message.contains("me:***@host"))
        }
    }
}
