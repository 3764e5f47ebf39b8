import Downpour
import DownpourQueue
import PostgresNIO

/// The changes a user asks through any node: made in the database for a download that waits or has stopped, and
/// asked of the node that runs an active one (its ``Request``, and a notification on ``wakeChannel``).
extension FleetQueue {
    /// The channel nodes listen on: the payload is a node's name (it has a request to carry out) or `*` (there is
    /// work to claim).
    public static let wakeChannel = "downpour_wake"

    /// How a change asked of one download was carried out.
    public enum Outcome: Sendable, Hashable {
        /// Made in the database.
        case done
        /// Asked of the node that runs it, named here.
        case asked(node: String)
        /// Nothing to do: the download is in no state the change applies to.
        case refused
    }

    /// The GIDs that start with `prefix` (lower-case hexadecimal), two at most: enough to tell a unique prefix.
    public func matching(_ prefix: String) async throws(FleetError) -> Set<DownloadID> {
        try await self.sql("looking up \(prefix)") {
            let rows = try await self.client.query(
                prefix.utf8.count == 16
                    ? "SELECT gid FROM downpour_downloads WHERE gid = \(prefix)"
                    : "SELECT gid FROM downpour_downloads WHERE gid LIKE \(prefix + "%") LIMIT 2",
                logger: self.logger
            )
            var gids: Set<DownloadID> = []
            for try await gid in rows.decode(String.self) { gids.insert(try Self.gid(gid)) }
            return gids
        }
    }

    /// Pauses a waiting download in place, or asks the node that runs an active one to pause it.
    public func pause(_ gid: DownloadID) async throws(FleetError) -> Outcome {
        let text = gid.description
        let paused = try await self.sql("pausing \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads SET state = 'paused' WHERE gid = \(text) AND state = 'waiting'
                RETURNING gid
                """
            )
        }
        if paused { return .done }
        return try await self.ask(gid, .pause, doing: "pausing")
    }

    /// A paused download waits again. Returns `false` when it was not paused.
    public func unpause(_ gid: DownloadID) async throws(FleetError) -> Bool {
        let text = gid.description
        return try await self.sql("unpausing \(text)") {
            try await self.changedOne(
                """
                WITH changed AS (
                    UPDATE downpour_downloads SET state = 'waiting' WHERE gid = \(text) AND state = 'paused'
                    RETURNING gid
                )
                SELECT gid, pg_notify(\(Self.wakeChannel), '*') FROM changed
                """
            )
        }
    }

    /// Removes a waiting or paused download (no result is left, as in aria2), or asks the node that runs an
    /// active one to remove it (a `removed` result).
    public func remove(_ gid: DownloadID) async throws(FleetError) -> Outcome {
        let text = gid.description
        let deleted = try await self.sql("removing \(text)") {
            try await self.changedOne(
                """
                DELETE FROM downpour_downloads WHERE gid = \(text) AND state IN ('waiting', 'paused')
                RETURNING gid
                """
            )
        }
        if deleted { return .done }
        return try await self.ask(gid, .remove, doing: "removing")
    }

    /// Pauses every waiting download, and asks the nodes that run active ones to pause them.
    public func pauseAll() async throws(FleetError) {
        try await self.sql("pausing every download") {
            try await self.client.withTransaction(logger: self.logger) { connection in
                for try await _ in try await connection.query(
                    "UPDATE downpour_downloads SET state = 'paused' WHERE state = 'waiting'",
                    logger: self.logger
                ) {}
                for try await _ in try await connection.query(
                    """
                    WITH asked AS (
                        UPDATE downpour_downloads SET request = 'pause'
                        WHERE state = 'active' AND request IS NULL
                        RETURNING node
                    )
                    SELECT pg_notify(\(Self.wakeChannel), node) FROM (SELECT DISTINCT node FROM asked) AS nodes
                    """,
                    logger: self.logger
                ) {}
            }
        }
    }

    /// Every paused download waits again.
    public func unpauseAll() async throws(FleetError) {
        try await self.sql("unpausing every download") {
            try await self.execute(
                """
                WITH changed AS (UPDATE downpour_downloads SET state = 'waiting' WHERE state = 'paused' RETURNING gid)
                SELECT pg_notify(\(Self.wakeChannel), '*') WHERE EXISTS (SELECT 1 FROM changed)
                """
            )
        }
    }

    /// Sets the options of a waiting or paused download. Returns `false` when it is in neither state.
    public func setOptions(_ gid: DownloadID, _ options: [QueueOption]) async throws(FleetError) -> Bool {
        let text = gid.description
        let encoded = try Self.encode(options)
        return try await self.sql("changing the options of \(text)") {
            try await self.changedOne(
                """
                UPDATE downpour_downloads SET options = \(encoded)
                WHERE gid = \(text) AND state IN ('waiting', 'paused')
                RETURNING gid
                """
            )
        }
    }

    /// Forgets one stopped result. Returns `false` when `gid` is not one.
    public func removeResult(_ gid: DownloadID) async throws(FleetError) -> Bool {
        let text = gid.description
        return try await self.sql("removing the result of \(text)") {
            try await self.changedOne(
                """
                DELETE FROM downpour_downloads WHERE gid = \(text) AND state IN ('complete', 'error', 'removed')
                RETURNING gid
                """
            )
        }
    }

    /// Forgets every stopped result.
    public func purgeResults() async throws(FleetError) {
        try await self.sql("removing the results") {
            try await self.execute("DELETE FROM downpour_downloads WHERE state IN ('complete', 'error', 'removed')")
        }
    }

    /// The requests asked of `node` for the downloads it runs, each with the fence of the lease it runs under.
    public func requests(for node: String) async throws(FleetError) -> [(DownloadID, fence: Int64, Request)] {
        try await self.sql("reading the requests for \(node)") {
            let rows = try await self.client.query(
                """
                SELECT gid, fence, request FROM downpour_downloads
                WHERE state = 'active' AND node = \(node) AND request IS NOT NULL
                """,
                logger: self.logger
            )
            var requests: [(DownloadID, fence: Int64, Request)] = []
            for try await (gid, fence, request) in rows.decode((String, Int64, String).self) {
                guard let request = Request(rawValue: request) else { continue }
                requests.append((try Self.gid(gid), fence, request))
            }
            return requests
        }
    }

    // MARK: - Internals

    /// Asks the node that runs `gid` to carry out `request`, and wakes it.
    private func ask(_ gid: DownloadID, _ request: Request, doing: String) async throws(FleetError) -> Outcome {
        let text = gid.description
        let kind = request.rawValue
        return try await self.sql("\(doing) \(text)") {
            let rows = try await self.client.query(
                """
                WITH asked AS (
                    UPDATE downpour_downloads SET request = \(kind)
                    WHERE gid = \(text) AND state = 'active' AND (\(kind) = 'remove' OR request IS NULL)
                    RETURNING node
                )
                SELECT node, pg_notify(\(Self.wakeChannel), node) FROM asked
                """,
                logger: self.logger
            )
            // The first column only: pg_notify's is void.
            for try await node in rows.decode(String.self) { return .asked(node: node) }
            return .refused
        }
    }
}
