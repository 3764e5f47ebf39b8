import Downpour
import DownpourQueue
import PostgresNIO

/// The nodes of the fleet (each tells the others how it stands, for the dashboard's list), and what each tells the
/// others' clients: aria2's notifications of the downloads it runs, and the changes made through it.
extension FleetQueue {
    /// The channel of ``Announcement``s: every node listens, and passes on those of the others to its clients.
    public static let eventChannel = "downpour_events"

    /// A change one node tells the others' clients of: `NODE` made `event` happen.
    public struct Announcement: Sendable, Hashable {
        public var node: String
        public var event: QueueEvent
        /// The node's count of its announcements: PostgreSQL delivers identical payloads of one transaction once,
        /// and `start X`, `pause X`, `start X` told together must arrive as three.
        public var serial: Int

        public init(node: String, event: QueueEvent, serial: Int = 0) {
            self.node = node
            self.event = event
            self.serial = serial
        }

        /// The notification's payload, `KIND GID SERIAL NODE` (the name last: it may hold spaces); `nil` for a
        /// change that concerns the node alone (its own options).
        var payload: String? {
            let (kind, gid): (String, String)
            switch self.event {
            case .started(let id): (kind, gid) = ("start", id.description)
            case .paused(let id): (kind, gid) = ("pause", id.description)
            case .stopped(let id): (kind, gid) = ("stop", id.description)
            case .completed(let id): (kind, gid) = ("complete", id.description)
            case .failed(let id): (kind, gid) = ("error", id.description)
            case .added(let id): (kind, gid) = ("add", id.description)
            case .changed(let id): (kind, gid) = ("change", id.description)
            case .resultsRemoved(let id): (kind, gid) = ("results", id?.description ?? "*")
            case .optionsChanged: return nil
            }
            return "\(kind) \(gid) \(self.serial) \(self.node)"
        }

        /// The announcement a payload carries; `nil` for one this program does not know (a newer node's).
        init?(payload: String) {
            let parts = payload.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
            guard parts.count == 4, let serial = Int(parts[2]) else { return nil }
            let gid = DownloadID(String(parts[1]))
            let event: QueueEvent
            switch (parts[0], gid) {
            case ("start", let id?): event = .started(id)
            case ("pause", let id?): event = .paused(id)
            case ("stop", let id?): event = .stopped(id)
            case ("complete", let id?): event = .completed(id)
            case ("error", let id?): event = .failed(id)
            case ("add", let id?): event = .added(id)
            case ("change", let id?): event = .changed(id)
            case ("results", let id): event = .resultsRemoved(id)
            default: return nil
            }
            if case .resultsRemoved(nil) = event, parts[1] != "*" { return nil }
            self.init(node: String(parts[3]), event: event, serial: serial)
        }
    }

    /// Tells every node (this one too: it ignores its own) of `announcements`, in one statement.
    public func announce(_ announcements: [Announcement]) async throws(FleetError) {
        let payloads = announcements.compactMap(\.payload)
        guard !payloads.isEmpty else { return }
        try await self.sql("telling the other nodes of \(payloads.count) changes") {
            try await self.execute(
                "SELECT pg_notify(\(Self.eventChannel), payload) FROM unnest(\(payloads)::text[]) AS payload"
            )
        }
    }

    /// Notes that `node` runs, where its RPC listens, and how it stands now; forgets nodes not seen for a day.
    public func heartbeat(node: String, address: String, downloadSpeed: Int64, active: Int) async throws(FleetError) {
        try await self.sql("telling the fleet how node \(node) stands") {
            try await self.execute(
                """
                WITH gone AS (DELETE FROM downpour_nodes WHERE seen_at < now() - interval '1 day')
                INSERT INTO downpour_nodes (name, address, seen_at, download_speed, active)
                VALUES (\(node), \(address), now(), \(downloadSpeed), \(active))
                ON CONFLICT (name) DO UPDATE
                SET address = excluded.address, seen_at = excluded.seen_at,
                    download_speed = excluded.download_speed, active = excluded.active
                """
            )
        }
    }

    /// A node that stops leaves the list.
    public func leave(node: String) async throws(FleetError) {
        try await self.sql("taking node \(node) off the list") {
            try await self.execute("DELETE FROM downpour_nodes WHERE name = \(node)")
        }
    }

    /// The nodes by name; one is up when it told the fleet how it stands within `upWithin`.
    public func nodes(upWithin: Duration = .seconds(5)) async throws(FleetError) -> [QueueNode] {
        let window = Self.seconds(upWithin)
        return try await self.sql("reading the nodes") {
            var nodes: [QueueNode] = []
            let rows = try await self.client.query(
                """
                SELECT name, address, download_speed, active,
                    greatest(extract(epoch FROM now() - seen_at), 0)::double precision
                FROM downpour_nodes ORDER BY name
                """,
                logger: self.logger
            )
            for try await (name, address, speed, active, age) in rows.decode((String, String, Int64, Int, Double).self)
            {
                nodes.append(
                    QueueNode(
                        name: name,
                        address: address,
                        downloadSpeed: speed,
                        numActive: active,
                        secondsSinceSeen: age,
                        isUp: age < window
                    )
                )
            }
            return nodes
        }
    }
}
