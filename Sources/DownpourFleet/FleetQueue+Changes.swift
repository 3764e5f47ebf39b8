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
                        WHERE state = 'active' AND (request IS NULL OR request = 'change')
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

    /// Moves a waiting or paused download in the waiting queue as aria2's `changePosition` does
    /// (``DownloadQueue/destination(from:by:from:count:)``); returns its new index, or `nil` when it is not
    /// waiting or paused (it started or stopped meanwhile). Moves take turns (a transaction-level advisory lock),
    /// and only the moved row is changed: claims go on meanwhile.
    public func move(_ gid: DownloadID, by offset: Int, from origin: PositionOrigin) async throws(FleetError) -> Int? {
        let text = gid.description
        return try await self.sql("moving \(text)") {
            try await self.client.withTransaction(logger: self.logger) { connection -> Int? in
                for try await _ in try await connection.query(
                    "SELECT pg_advisory_xact_lock(hashtext('downpour-order'))",
                    logger: self.logger
                ) {}
                var queue: [(gid: String, position: Double)] = []
                for try await row in try await connection.query(
                    "SELECT gid, position FROM downpour_downloads WHERE state IN ('waiting', 'paused') ORDER BY position",
                    logger: self.logger
                ).decode((String, Double).self) {
                    queue.append(row)
                }
                guard let current = queue.firstIndex(where: { $0.gid == text }) else { return nil }
                let destination = DownloadQueue.destination(from: current, by: offset, from: origin, count: queue.count)
                guard destination != current else { return destination }
                queue.remove(at: current)
                var position = Self.position(at: destination, among: queue.map(\.position))
                if position == nil {
                    // No double between the neighbours (after many moves between the same two): 1, 2, 3, ...
                    // keeps the order, and appends (the order's next value) and give-backs (below zero) still go
                    // after and before every one.
                    for try await _ in try await connection.query(
                        """
                        UPDATE downpour_downloads AS d SET position = numbered.n
                        FROM (SELECT gid, row_number() OVER (ORDER BY position) AS n FROM downpour_downloads
                              WHERE state IN ('waiting', 'paused') AND gid <> \(text)) AS numbered
                        WHERE d.gid = numbered.gid
                        """,
                        logger: self.logger
                    ) {}
                    position = Self.position(at: destination, among: queue.indices.map { Double($0 + 1) })
                }
                var moved = false
                for try await _ in try await connection.query(
                    """
                    UPDATE downpour_downloads SET position = \(position ?? 0)
                    WHERE gid = \(text) AND state IN ('waiting', 'paused')
                    RETURNING gid
                    """,
                    logger: self.logger
                ) { moved = true }
                // Claimed meanwhile: it is no longer in the waiting queue.
                return moved ? destination : nil
            }
        }
    }

    /// A position between the ones at `index - 1` and `index` of `positions` (increasing), or `nil` when there is
    /// no double strictly between them.
    static func position(at index: Int, among positions: [Double]) -> Double? {
        let before = index > 0 ? positions[index - 1] : nil
        let after = index < positions.count ? positions[index] : nil
        let chosen: Double
        switch (before, after) {
        case (nil, nil): return 0
        case (let before?, nil): chosen = before + 1
        case (nil, let after?): chosen = after - 1
        case (let before?, let after?): chosen = before + (after - before) / 2
        }
        if let before, chosen <= before { return nil }
        if let after, chosen >= after { return nil }
        return chosen
    }

    /// Sets the URIs and options of a download that has not stopped, if they are still `old`'s: a waiting or
    /// paused one's are its own from now on (``Outcome/done``); an active one's are asked of the node that runs it
    /// (``Request/change``, unless a pause or a remove is asked already: the row keeps them for the next run).
    /// ``Outcome/refused`` when it stopped, or its URIs or options changed meanwhile (two changes at once never
    /// lose one silently).
    public func change(_ old: QueueEntry, uris: [String], options: [QueueOption]) async throws(FleetError) -> Outcome {
        let text = old.gid.description
        let (newURIs, newOptions) = (try Self.encode(uris), try Self.encode(options))
        let (oldURIs, oldOptions) = (try Self.encode(old.uris), try Self.encode(old.options))
        return try await self.sql("changing \(text)") {
            let rows = try await self.client.query(
                """
                WITH changed AS (
                    UPDATE downpour_downloads
                    SET uris = \(newURIs), options = \(newOptions),
                        request = CASE WHEN state = 'active' AND request IS NULL THEN 'change' ELSE request END
                    WHERE gid = \(text) AND state IN ('waiting', 'paused', 'active')
                        AND uris::jsonb = \(oldURIs)::jsonb AND options::jsonb = \(oldOptions)::jsonb
                    RETURNING node
                )
                SELECT node, pg_notify(\(Self.wakeChannel), coalesce(node, '')) FROM changed
                """,
                logger: self.logger
            )
            // The first column only: pg_notify's is void.
            for try await node in rows.decode(String?.self) { return node.map { .asked(node: $0) } ?? .done }
            return .refused
        }
    }

    /// The node that ran `gid` under `fence` applied `entry`: the change asked is done, unless the row changed
    /// again meanwhile (then it is still asked, with the newer entry).
    public func changed(_ gid: DownloadID, fence: Int64, to entry: QueueEntry) async throws(FleetError) {
        let text = gid.description
        let (uris, options) = (try Self.encode(entry.uris), try Self.encode(entry.options))
        try await self.sql("noting the change of \(text)") {
            try await self.execute(
                """
                UPDATE downpour_downloads SET request = NULL
                WHERE gid = \(text) AND fence = \(fence) AND request = 'change' AND uris::jsonb = \(uris)::jsonb
                    AND options::jsonb = \(options)::jsonb
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

    /// Forgets the oldest results beyond the newest `keep` (aria2's `max-download-result`); returns their GIDs.
    public func trimResults(keeping keep: Int) async throws(FleetError) -> [DownloadID] {
        try await self.sql("forgetting old results") {
            var gids: [DownloadID] = []
            for try await gid in try await self.client.query(
                """
                DELETE FROM downpour_downloads WHERE gid IN (
                    SELECT gid FROM downpour_downloads WHERE state IN ('complete', 'error', 'removed')
                    ORDER BY position DESC OFFSET \(max(0, keep))
                )
                RETURNING gid
                """,
                logger: self.logger
            ).decode(String.self) {
                gids.append(try Self.gid(gid))
            }
            return gids
        }
    }

    /// Forgets every stopped result.
    public func purgeResults() async throws(FleetError) {
        try await self.sql("removing the results") {
            try await self.execute("DELETE FROM downpour_downloads WHERE state IN ('complete', 'error', 'removed')")
        }
    }

    /// The requests asked of `node` for the downloads it runs, each with the fence of the lease it runs under and
    /// the download as the row has it now (for a ``Request/change``).
    public func requests(for node: String) async throws(FleetError) -> [(entry: QueueEntry, fence: Int64, Request)] {
        try await self.sql("reading the requests for \(node)") {
            let rows = try await self.client.query(
                """
                SELECT gid, uris, options, fence, request FROM downpour_downloads
                WHERE state = 'active' AND node = \(node) AND request IS NOT NULL
                """,
                logger: self.logger
            )
            var requests: [(entry: QueueEntry, fence: Int64, Request)] = []
            for try await (gid, uris, options, fence, request) in rows.decode(
                (String, String, String, Int64, String).self
            ) {
                guard let request = Request(rawValue: request) else { continue }
                requests.append((try Self.entry(gid, uris, options), fence, request))
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
                    WHERE gid = \(text) AND state = 'active'
                        AND (\(kind) = 'remove' OR request IS NULL OR request = 'change')
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
