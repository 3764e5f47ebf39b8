import Downpour
import DownpourQueue
import Foundation
import Logging
import PostgresNIO

/// The fleet's queue in PostgreSQL: one row a download, shared by every node.
///
/// A node runs a download only while it holds the download's **lease**: it claims waiting downloads in queue order
/// (``claim(node:count:lease:)``, `FOR UPDATE SKIP LOCKED`, so two nodes never wait on or take the same row),
/// renews its leases every few seconds (``renew(node:fences:lease:)``), and gives a download back when it pauses
/// or stops (``release(_:fence:paused:)``) or records how it ended (``finish(_:fence:outcome:)``). A lease that is
/// not renewed runs out; the next claim takes that download first. Every claim takes a new **fence** number: a
/// node writes for a download (``holds(_:fence:)`` before a journal save and before the final rename; every
/// change here is made only where the fence still matches) only while the row carries the number its claim got,
/// so a node whose lease was taken writes nothing more. The database's clock is the fleet's: the nodes' clocks
/// need not agree.
public struct FleetQueue: Sendable {
    /// A download a node now holds.
    public struct Claim: Sendable, Hashable {
        public var entry: QueueEntry
        /// The fence number this claim got.
        public var fence: Int64
        /// The node that held the download before, when its lease ran out (or this node's own, taken back):
        /// whether its `.part` can be resumed depends on whether that node wrote to storage this one sees.
        public var previousNode: String?
    }

    /// A download as the fleet's queue shows it.
    public struct Row: Sendable, Hashable {
        public var gid: DownloadID
        public var status: QueueStatus
        /// The node whose lease it is (active ones only).
        public var node: String?
        public var fence: Int64?
        public var path: String?
        public var totalLength: Int64
        public var completedLength: Int64
        public var errorCode: Int?
        public var errorMessage: String?
    }

    public let client: PostgresClient
    public let logger: Logger

    /// A queue over `client`, which must be running (``PostgresClient/run()``) and migrated
    /// (``FleetSchema/migrate(_:logger:)``).
    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: - Adding

    /// Appends a download to the waiting queue (paused or not).
    ///
    /// - Throws: ``FleetError`` when the GID is taken, or the server refuses.
    public func add(_ entry: QueueEntry, paused: Bool = false) async throws(FleetError) {
        let gid = entry.gid.description
        let uris = try Self.encode(entry.uris)
        let options = try Self.encode(entry.options.map { [$0.name, $0.value] })
        let state = paused ? "paused" : "waiting"
        let inserted = try await FleetSQL.run("adding \(gid)") {
            let rows = try await self.client.query(
                """
                INSERT INTO downpour_downloads (gid, uris, options, state, position)
                VALUES (\(gid), \(uris), \(options), \(state), nextval('downpour_order'))
                ON CONFLICT (gid) DO NOTHING
                RETURNING gid
                """,
                logger: self.logger
            )
            var count = 0
            for try await _ in rows { count += 1 }
            return count
        }
        guard inserted == 1 else {
            throw FleetError("The GID \(gid) is in use already in the fleet; give another one or none.")
        }
    }

    // MARK: - Leases

    /// Claims up to `count` downloads for `node`, each with a lease of `lease`: first those whose lease ran out
    /// (they go back to the front of the queue), then waiting ones in queue order; paused ones never. Rows
    /// another node is claiming at this moment are passed over, not waited for.
    public func claim(node: String, count: Int, lease: Duration) async throws(FleetError) -> [Claim] {
        guard count > 0 else { return [] }
        return try await FleetSQL.run("claiming downloads for \(node)") {
            try await self.client.withConnection { connection in
                try await Self.claim(node: node, count: count, lease: lease, on: connection, logger: self.logger)
            }
        }
    }

    static func claim(
        node: String,
        count: Int,
        lease: Duration,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [Claim] {
        let seconds = Self.seconds(lease)
        let rows = try await connection.query(
            """
            WITH picked AS (
                SELECT gid, node AS previous_node, state = 'active' AS ran_out, position
                FROM downpour_downloads
                WHERE state = 'waiting' OR (state = 'active' AND lease_until <= now())
                ORDER BY state = 'active' DESC, position
                LIMIT \(count)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE downpour_downloads AS d
            SET state = 'active', node = \(node), lease_until = now() + make_interval(secs => \(seconds)),
                fence = nextval('downpour_fence')
            FROM picked
            WHERE d.gid = picked.gid
            RETURNING d.gid, d.uris, d.options, d.fence, picked.previous_node, picked.ran_out, picked.position
            """,
            logger: logger
        )
        var claims: [(claim: Claim, ranOut: Bool, position: Double)] = []
        for try await (gid, uris, options, fence, previous, ranOut, position) in rows.decode(
            (String, String, String, Int64, String?, Bool, Double).self
        ) {
            claims.append((try Self.claim(gid, uris, options, fence, previous), ranOut, position))
        }
        // RETURNING keeps no order: the claims in the order they were picked.
        claims.sort { ($0.ranOut ? 0 : 1, $0.position) < ($1.ranOut ? 0 : 1, $1.position) }
        return claims.map(\.claim)
    }

    /// Takes back, with new fences, every download whose lease is `node`'s (a node that restarts after a crash
    /// runs again what it ran, at once, without waiting for its leases to run out).
    public func reclaim(node: String, lease: Duration) async throws(FleetError) -> [Claim] {
        let seconds = Self.seconds(lease)
        return try await FleetSQL.run("taking back the downloads of \(node)") {
            let rows = try await self.client.query(
                """
                UPDATE downpour_downloads
                SET lease_until = now() + make_interval(secs => \(seconds)), fence = nextval('downpour_fence')
                WHERE state = 'active' AND node = \(node)
                RETURNING gid, uris, options, fence, node, position
                """,
                logger: self.logger
            )
            var claims: [(Claim, Double)] = []
            for try await (gid, uris, options, fence, previous, position) in rows.decode(
                (String, String, String, Int64, String?, Double).self
            ) {
                claims.append((try Self.claim(gid, uris, options, fence, previous), position))
            }
            return claims.sorted { $0.1 < $1.1 }.map(\.0)
        }
    }

    /// Renews `node`'s leases on the downloads it holds with these fences; returns the GIDs it still holds. A
    /// download missing from the answer was taken by another node after its lease ran out: stop it, write nothing.
    public func renew(
        node: String,
        fences: [DownloadID: Int64],
        lease: Duration
    ) async throws(FleetError) -> Set<DownloadID> {
        guard !fences.isEmpty else { return [] }
        let seconds = Self.seconds(lease)
        let numbers = Array(fences.values)
        return try await FleetSQL.run("renewing the leases of \(node)") {
            let rows = try await self.client.query(
                """
                UPDATE downpour_downloads SET lease_until = now() + make_interval(secs => \(seconds))
                WHERE state = 'active' AND node = \(node) AND fence = ANY(\(numbers))
                RETURNING gid
                """,
                logger: self.logger
            )
            var held: Set<DownloadID> = []
            for try await gid in rows.decode(String.self) { held.insert(try Self.gid(gid)) }
            return held
        }
    }

    /// Whether the claim with `fence` still holds `gid` and its lease has not run out: ask before a journal save
    /// and before the final rename.
    public func holds(_ gid: DownloadID, fence: Int64) async throws(FleetError) -> Bool {
        let text = gid.description
        return try await FleetSQL.run("checking the lease of \(text)") {
            let rows = try await self.client.query(
                """
                SELECT lease_until > now() FROM downpour_downloads
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                """,
                logger: self.logger
            )
            var live = false
            for try await value in rows.decode(Bool.self) { live = value }
            return live
        }
    }

    /// Records how the run with `fence` ended: a result, in the order results stopped. Returns `false`, and
    /// writes nothing, when that claim no longer holds the download.
    public func finish(_ gid: DownloadID, fence: Int64, outcome: DownloadOutcome) async throws(FleetError) -> Bool {
        let text = gid.description
        let state: String
        let code: Int
        let message: String?
        let path: String?
        let length: Int64?
        switch outcome {
        case .complete(let finalPath, let finalLength):
            (state, code, message, path, length) = (
                "complete", Aria2ErrorCode.finished.rawValue, nil, finalPath, finalLength
            )
        case .failed(let failure, let reason):
            (state, code, message, path, length) = ("error", failure.rawValue, reason, nil, nil)
        }
        return try await FleetSQL.run("recording the end of \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET state = \(state), node = NULL, lease_until = NULL, fence = NULL,
                    position = nextval('downpour_order'), error_code = \(code), error_message = \(message),
                    path = coalesce(\(path), path), total_length = coalesce(\(length), total_length),
                    completed_length = coalesce(\(length), completed_length)
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                RETURNING gid
                """
            )
        }
    }

    /// Gives a download back: it waits again (paused, with `paused`) at the front of the queue. Returns `false`,
    /// and changes nothing, when the claim with `fence` no longer holds it.
    public func release(_ gid: DownloadID, fence: Int64, paused: Bool) async throws(FleetError) -> Bool {
        let text = gid.description
        let state = paused ? "paused" : "waiting"
        return try await FleetSQL.run("giving back \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET state = \(state), node = NULL, lease_until = NULL, fence = NULL,
                    position = -nextval('downpour_order')
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                RETURNING gid
                """
            )
        }
    }

    /// Notes what the run with `fence` has learnt of its file. Returns `false` when that claim no longer holds it.
    public func record(
        _ gid: DownloadID,
        fence: Int64,
        path: String?,
        totalLength: Int64,
        completedLength: Int64
    ) async throws(FleetError) -> Bool {
        let text = gid.description
        return try await FleetSQL.run("recording the progress of \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET path = coalesce(\(path), path), total_length = \(totalLength),
                    completed_length = \(completedLength)
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                RETURNING gid
                """
            )
        }
    }

    // MARK: - Reading

    /// Every download of the fleet: active ones by GID's claim order, then waiting and paused ones in queue order,
    /// then results in the order they stopped.
    public func rows() async throws(FleetError) -> [Row] {
        try await FleetSQL.run("reading the queue") {
            let rows = try await self.client.query(
                """
                SELECT gid, state, node, fence, path, total_length, completed_length, error_code, error_message
                FROM downpour_downloads
                ORDER BY CASE state WHEN 'active' THEN 0 WHEN 'waiting' THEN 1 WHEN 'paused' THEN 1 ELSE 2 END,
                    CASE state WHEN 'active' THEN fence ELSE 0 END, position
                """,
                logger: self.logger
            )
            var result: [Row] = []
            for try await (gid, state, node, fence, path, total, completed, code, message) in rows.decode(
                (String, String, String?, Int64?, String?, Int64, Int64, Int?, String?).self
            ) {
                guard let status = QueueStatus(rawValue: state) else {
                    throw FleetError("The fleet's database holds a download in the unknown state '\(state)'.")
                }
                result.append(
                    Row(
                        gid: try Self.gid(gid),
                        status: status,
                        node: node,
                        fence: fence,
                        path: path,
                        totalLength: total,
                        completedLength: completed,
                        errorCode: code,
                        errorMessage: message
                    )
                )
            }
            return result
        }
    }

    // MARK: - Internals

    private func changedOne(_ query: PostgresQuery) async throws -> Bool {
        var count = 0
        for try await _ in try await self.client.query(query, logger: self.logger) { count += 1 }
        return count == 1
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return max(0, Double(seconds) + Double(attoseconds) / 1e18)
    }

    private static func claim(
        _ gid: String,
        _ uris: String,
        _ options: String,
        _ fence: Int64,
        _ previous: String?
    ) throws -> Claim {
        let pairs = try Self.decode([[String]].self, options)
        let entry = QueueEntry(
            gid: try Self.gid(gid),
            uris: try Self.decode([String].self, uris),
            options: try pairs.map { pair in
                guard pair.count == 2 else { throw FleetError("The fleet's database holds a malformed option.") }
                return QueueOption(name: pair[0], value: pair[1])
            }
        )
        return Claim(entry: entry, fence: fence, previousNode: previous)
    }

    private static func gid(_ text: String) throws(FleetError) -> DownloadID {
        guard let gid = DownloadID(text) else { throw FleetError("The fleet's database holds the bad GID '\(text)'.") }
        return gid
    }

    private static func encode<Value: Encodable>(_ value: Value) throws(FleetError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw FleetError("A download's URIs or options could not be written as JSON: \(error).")
        }
    }

    private static func decode<Value: Decodable>(_ type: Value.Type, _ text: String) throws(FleetError) -> Value {
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw FleetError("The fleet's database holds URIs or options that are not JSON: \(error).")
        }
    }
}
