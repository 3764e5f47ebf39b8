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
        public var entry: QueueEntry
        public var gid: DownloadID { self.entry.gid }
        public var status: QueueStatus
        /// The node whose lease it is (active ones only).
        public var node: String?
        public var fence: Int64?
        public var path: String?
        public var totalLength: Int64
        public var completedLength: Int64
        public var errorCode: Int?
        public var errorMessage: String?
        /// Bytes per second, as its node last recorded (active ones only).
        public var downloadSpeed: Int64
        /// A change asked through another node that the running node has not carried out yet.
        public var request: Request?
        /// The audio an HLS video's run writes beside it, once named; its length once complete.
        public var audio: AudioFile?
    }

    /// A change asked for a download that runs on some node, for that node to carry out.
    public enum Request: String, Sendable, Hashable {
        case pause, remove
        /// Its URIs or options changed (in the row): the node applies them to its run.
        case change
    }

    public let client: PostgresClient
    public let logger: Logger
    /// How long a statement may take before it counts as failed (``FleetSQL/run(_:timeout:_:)``).
    public let statementTimeout: Duration

    /// A queue over `client`, which must be running (``PostgresClient/run()``) and migrated
    /// (``FleetSchema/migrate(_:logger:timeout:)``). A statement that takes longer than `statementTimeout` fails
    /// with a ``FleetError`` that says the database cannot be reached (PostgreSQL's client itself waits for as long
    /// as the server is away).
    public init(client: PostgresClient, logger: Logger, statementTimeout: Duration = .seconds(5)) {
        self.client = client
        self.logger = logger
        self.statementTimeout = statementTimeout
    }

    /// This queue, its statements given `timeout` instead.
    public func withStatementTimeout(_ timeout: Duration) -> FleetQueue {
        FleetQueue(client: self.client, logger: self.logger, statementTimeout: timeout)
    }

    func sql<Value: Sendable>(
        _ doing: String,
        _ body: @escaping @Sendable () async throws -> Value
    ) async throws(FleetError) -> Value {
        try await FleetSQL.run(doing, timeout: self.statementTimeout, body)
    }

    // MARK: - Adding

    /// Appends a download to the waiting queue (paused or not), and wakes the nodes.
    ///
    /// - Throws: ``FleetError`` when the GID is taken (``FleetError/isGIDTaken``), or the server refuses.
    public func add(_ entry: QueueEntry, paused: Bool = false) async throws(FleetError) {
        guard try await self.add([(entry, paused)]) == [true] else {
            throw FleetError(
                "The GID \(entry.gid) is in use already in the fleet; give another one or none.",
                isGIDTaken: true
            )
        }
    }

    /// Appends downloads in their order, in one transaction, and wakes the nodes once. Returns for each whether it
    /// was added: `false` when its GID is taken.
    ///
    /// - Throws: ``FleetError`` when the server refuses; then none is added.
    public func add(_ entries: [(QueueEntry, paused: Bool)]) async throws(FleetError) -> [Bool] {
        guard !entries.isEmpty else { return [] }
        var gids: [String] = []
        var uris: [String] = []
        var options: [String] = []
        var states: [String] = []
        for (entry, paused) in entries {
            gids.append(entry.gid.description)
            uris.append(try Self.encode(entry.uris))
            options.append(try Self.encode(entry.options))
            states.append(paused ? "paused" : "waiting")
        }
        let (gidList, uriList, optionList, stateList) = (gids, uris, options, states)
        // One statement for the lot, in their order (the subquery keeps it for nextval); a GID taken already, or
        // twice in the batch, is passed over.
        let inserted = try await self.sql("adding \(entries.count == 1 ? gids[0] : "\(entries.count) downloads")") {
            var inserted: Set<String> = []
            for try await gid in try await self.client.query(
                """
                WITH added AS (
                    INSERT INTO downpour_downloads (gid, uris, options, state, position)
                    SELECT gid, uris, options, state, nextval('downpour_order')
                    FROM (
                        SELECT DISTINCT ON (gid) gid, uris, options, state, n
                        FROM unnest(\(gidList)::text[], \(uriList)::text[], \(optionList)::text[], \(stateList)::text[])
                            WITH ORDINALITY AS input(gid, uris, options, state, n)
                        ORDER BY gid, n
                    ) AS firsts
                    ORDER BY n
                    ON CONFLICT (gid) DO NOTHING
                    RETURNING gid
                )
                SELECT gid, pg_notify(\(Self.wakeChannel), '*') FROM added
                """,
                logger: self.logger
            ).decode(String.self) { inserted.insert(gid) }
            return inserted
        }
        var seen: Set<String> = []
        return gids.map { gid in inserted.contains(gid) && seen.insert(gid).inserted }
    }

    // MARK: - Leases

    /// Claims up to `count` downloads for `node`, each with a lease of `lease`: first those whose lease ran out
    /// (they go back to the front of the queue), then waiting ones in queue order; paused ones never. Rows
    /// another node is claiming at this moment are passed over, not waited for.
    public func claim(node: String, count: Int, lease: Duration) async throws(FleetError) -> [Claim] {
        guard count > 0 else { return [] }
        return try await self.sql("claiming downloads for \(node)") {
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
        return try await self.sql("taking back the downloads of \(node)") {
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
        return try await self.sql("renewing the leases of \(node)") {
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
        return try await self.sql("checking the lease of \(text)") {
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
        var audio: AudioFile?
        switch outcome {
        case .complete(let finalPath, let finalLength, let finalAudio):
            (state, code, message, path, length) = (
                "complete", Aria2ErrorCode.finished.rawValue, nil, finalPath, finalLength
            )
            audio = finalAudio
        case .failed(let failure, let reason):
            (state, code, message, path, length) = (
                failure == .removed ? "removed" : "error", failure.rawValue, reason, nil, nil
            )
        }
        // A result without a file has no audio either.
        let (audioPath, audioLength) = (audio?.path, audio?.length ?? 0)
        return try await self.sql("recording the end of \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET state = \(state), node = NULL, lease_until = NULL, fence = NULL, download_speed = 0,
                    request = NULL, position = nextval('downpour_order'), error_code = \(code), error_message = \(message),
                    path = coalesce(\(path), path), total_length = coalesce(\(length), total_length),
                    completed_length = coalesce(\(length), completed_length),
                    audio_path = \(audioPath), audio_length = \(audioLength)
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                RETURNING gid
                """
            )
        }
    }

    /// Gives a download back: it waits again (paused, with `paused`) at the front of the queue. Returns `false`,
    /// and changes nothing, when the claim with `fence` no longer holds it.
    ///
    /// A pause asked through another node makes it paused; a remove asked stays asked, for the node that claims it
    /// next.
    public func release(_ gid: DownloadID, fence: Int64, paused: Bool) async throws(FleetError) -> Bool {
        let text = gid.description
        let state = paused ? "paused" : "waiting"
        return try await self.sql("giving back \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET state = CASE WHEN request = 'pause' THEN 'paused' ELSE \(state) END,
                    request = CASE WHEN request IN ('pause', 'change') THEN NULL ELSE request END,
                    node = NULL, lease_until = NULL, fence = NULL, download_speed = 0,
                    position = -nextval('downpour_order')
                WHERE gid = \(text) AND fence = \(fence) AND state = 'active'
                RETURNING gid
                """
            )
        }
    }

    /// Gives back every download held with one of `fences`, in one statement, as ``release(_:fence:paused:)``
    /// does (not paused); returns how many it gave back.
    public func release(_ fences: [Int64]) async throws(FleetError) -> Int {
        guard !fences.isEmpty else { return 0 }
        return try await self.sql("giving back \(fences.count) downloads") {
            var count = 0
            for try await _ in try await self.client.query(
                """
                UPDATE downpour_downloads
                SET state = CASE WHEN request = 'pause' THEN 'paused' ELSE 'waiting' END,
                    request = CASE WHEN request IN ('pause', 'change') THEN NULL ELSE request END,
                    node = NULL, lease_until = NULL, fence = NULL, download_speed = 0,
                    position = -nextval('downpour_order')
                WHERE fence = ANY(\(fences)) AND state = 'active'
                RETURNING gid
                """,
                logger: self.logger
            ) { count += 1 }
            return count
        }
    }

    /// Notes what the run with `fence` has learnt of its file. Returns `false` when that claim no longer holds it.
    public func record(
        _ gid: DownloadID,
        fence: Int64,
        path: String?,
        totalLength: Int64,
        completedLength: Int64,
        downloadSpeed: Int64 = 0,
        audioPath: String? = nil
    ) async throws(FleetError) -> Bool {
        let text = gid.description
        return try await self.sql("recording the progress of \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads
                SET path = coalesce(\(path), path), total_length = \(totalLength),
                    completed_length = \(completedLength), download_speed = \(downloadSpeed),
                    audio_path = \(audioPath)
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
        try await self.rows(gid: nil)
    }

    /// The row of one download, as it is now.
    public func row(_ gid: DownloadID) async throws(FleetError) -> Row? {
        try await self.rows(gid: gid.description).first
    }

    private func rows(gid: String?) async throws(FleetError) -> [Row] {
        try await self.sql(gid.map { "reading \($0)" } ?? "reading the queue") {
            let rows = try await self.client.query(
                """
                SELECT gid, uris, options, state, node, fence, path, total_length, completed_length, error_code,
                    error_message, download_speed, request, audio_path, audio_length
                FROM downpour_downloads
                WHERE \(gid)::text IS NULL OR gid = \(gid)::text
                ORDER BY CASE state WHEN 'active' THEN 0 WHEN 'waiting' THEN 1 WHEN 'paused' THEN 1 ELSE 2 END,
                    CASE state WHEN 'active' THEN fence ELSE 0 END, position
                """,
                logger: self.logger
            )
            var result: [Row] = []
            for try await (
                gid, uris, options, state, node, fence, path, total, completed, code, message, speed, request,
                audioPath, audioLength
            )
                in rows.decode(
                    (
                        String, String, String, String, String?, Int64?, String?, Int64, Int64, Int?, String?, Int64,
                        String?, String?, Int64
                    ).self
                )
            {
                guard let status = QueueStatus(rawValue: state) else {
                    throw FleetError("The fleet's database holds a download in the unknown state '\(state)'.")
                }
                result.append(
                    Row(
                        entry: try Self.entry(gid, uris, options),
                        status: status,
                        node: node,
                        fence: fence,
                        path: path,
                        totalLength: total,
                        completedLength: completed,
                        errorCode: code,
                        errorMessage: message,
                        downloadSpeed: speed,
                        request: request.flatMap(Request.init(rawValue:)),
                        audio: audioPath.map { AudioFile(path: $0, length: audioLength) }
                    )
                )
            }
            return result
        }
    }

    // MARK: - Internals

    /// Runs a statement and reads its rows to the end.
    func execute(_ query: PostgresQuery) async throws {
        for try await _ in try await self.client.query(query, logger: self.logger) {}
    }

    func changedOne(_ query: PostgresQuery) async throws -> Bool {
        var count = 0
        for try await _ in try await self.client.query(query, logger: self.logger) { count += 1 }
        return count == 1
    }

    static func seconds(_ duration: Duration) -> Double {
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
        Claim(entry: try Self.entry(gid, uris, options), fence: fence, previousNode: previous)
    }

    static func entry(_ gid: String, _ uris: String, _ options: String) throws(FleetError) -> QueueEntry {
        let pairs = try Self.decode([[String]].self, options)
        return QueueEntry(
            gid: try Self.gid(gid),
            uris: try Self.decode([String].self, uris),
            options: try pairs.map { pair throws(FleetError) in
                guard pair.count == 2 else { throw FleetError("The fleet's database holds a malformed option.") }
                return QueueOption(name: pair[0], value: pair[1])
            }
        )
    }

    static func encode(_ options: [QueueOption]) throws(FleetError) -> String {
        try Self.encode(options.map { [$0.name, $0.value] })
    }

    static func gid(_ text: String) throws(FleetError) -> DownloadID {
        guard let gid = DownloadID(text) else { throw FleetError("The fleet's database holds the bad GID '\(text)'.") }
        return gid
    }

    static func encode<Value: Encodable>(_ value: Value) throws(FleetError) -> String {
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
