import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The fleet's tables, made and changed by numbered migrations. Every node runs ``migrate(_:logger:)`` when it
/// starts; an advisory lock lets one node at a time look, so two nodes starting together apply each migration once.
public enum FleetSchema {
    /// The migrations in order; the database records the number of the last one applied. Append, never edit.
    static let migrations: [[PostgresQuery]] = [
        [
            // Every claim takes the next fence number: a node writes for a download only while the row still
            // carries the number its claim got.
            "CREATE SEQUENCE downpour_fence",
            // Where an appended download goes (next), where a released one goes (minus next: before every other),
            // and the order results stopped in.
            "CREATE SEQUENCE downpour_order",
            """
            CREATE TABLE downpour_downloads (
                gid text PRIMARY KEY CHECK (gid ~ '^[0-9a-f]{16}$'),
                uris text NOT NULL,
                options text NOT NULL,
                state text NOT NULL
                    CHECK (state IN ('waiting', 'paused', 'active', 'complete', 'error', 'removed')),
                position double precision NOT NULL,
                node text,
                lease_until timestamptz,
                fence bigint,
                path text,
                total_length bigint NOT NULL DEFAULT 0,
                completed_length bigint NOT NULL DEFAULT 0,
                error_code integer,
                error_message text,
                CHECK ((state = 'active') = (node IS NOT NULL AND lease_until IS NOT NULL AND fence IS NOT NULL))
            )
            """,
            "CREATE INDEX downpour_downloads_queue ON downpour_downloads (state, position)",
        ],
        [
            // The speed its node last recorded for an active download.
            "ALTER TABLE downpour_downloads ADD COLUMN download_speed bigint NOT NULL DEFAULT 0",
            // A change asked through another node, for the node that runs the download to carry out.
            "ALTER TABLE downpour_downloads ADD COLUMN request text CHECK (request IN ('pause', 'remove'))",
        ],
        [
            // The nodes, as each last told the others (every second or so while it runs; a node that stops
            // deletes its row).
            """
            CREATE TABLE downpour_nodes (
                name text PRIMARY KEY,
                address text NOT NULL,
                seen_at timestamptz NOT NULL,
                download_speed bigint NOT NULL DEFAULT 0,
                active integer NOT NULL DEFAULT 0
            )
            """
        ],
        [
            // An active download's URIs or options changed through another node: its node applies them.
            """
            ALTER TABLE downpour_downloads DROP CONSTRAINT downpour_downloads_request_check,
                ADD CONSTRAINT downpour_downloads_request_check CHECK (request IN ('pause', 'remove', 'change'))
            """
        ],
        [
            // The audio an HLS video's run writes beside it (a rendition of its own): its path once named, and its
            // length once written (tellStatus's files[1]).
            """
            ALTER TABLE downpour_downloads ADD COLUMN audio_path text,
                ADD COLUMN audio_length bigint NOT NULL DEFAULT 0
            """
        ],
    ]

    /// The number of the newest migration.
    public static var version: Int { self.migrations.count }

    /// Applies the migrations this database has not had, in one transaction; returns the version it has now. The
    /// first statement of a node may wait for its first connection: `timeout` allows for a server that is slow to
    /// answer at start.
    ///
    /// - Throws: ``FleetError`` when the database is newer than this program (a newer node migrated it), or the
    ///   server refuses.
    @discardableResult
    public static func migrate(
        _ client: PostgresClient,
        logger: Logger,
        timeout: Duration = .seconds(30)
    ) async throws(FleetError) -> Int {
        try await FleetSQL.run("migrating the fleet's tables", timeout: timeout) {
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext('downpour_schema'))", logger: logger)
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS downpour_schema (
                        version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """,
                    logger: logger
                )
                var current = 0
                for try await version in try await connection.query(
                    "SELECT coalesce(max(version), 0)::integer FROM downpour_schema",
                    logger: logger
                ).decode(Int.self) {
                    current = version
                }
                guard current <= Self.version else {
                    throw FleetError(
                        "The fleet's database is at version \(current) and this downpour knows \(Self.version): "
                            + "run the same downpour on every node."
                    )
                }
                for index in current..<Self.version {
                    for statement in Self.migrations[index] { try await connection.query(statement, logger: logger) }
                    let version = index + 1
                    try await connection.query(
                        "INSERT INTO downpour_schema (version) VALUES (\(version))",
                        logger: logger
                    )
                }
                return Self.version
            }
        }
    }
}

/// Runs SQL and turns what the server or the connection throws into a ``FleetError`` that says what was being
/// done.
enum FleetSQL {
    /// Runs `body`, which fails when it takes longer than `timeout`: PostgreSQL's client waits for a connection as
    /// long as the server cannot be reached, and a query sent on a connection that stops answering waits until TCP
    /// gives up; a node must go on (its runs, its reads) and say so instead. The answer does not wait for `body`:
    /// one that overran is cancelled and left to end in the background.
    static func run<Value: Sendable>(
        _ doing: String,
        timeout: Duration,
        _ body: @escaping @Sendable () async throws -> Value
    ) async throws(FleetError) -> Value {
        let outcome = NIOLockedValueBox<CheckedContinuation<Value, any Error>?>(nil)
        let finish = { @Sendable (result: Result<Value, any Error>) -> Bool in
            guard
                let continuation = outcome.withLockedValue({ box in
                    defer { box = nil }
                    return box
                })
            else {
                return false
            }
            continuation.resume(with: result)
            return true
        }
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                    outcome.withLockedValue { $0 = continuation }
                    let started = Task {
                        do {
                            _ = finish(.success(try await body()))
                        } catch {
                            _ = finish(.failure(error))
                        }
                    }
                    work = started
                    timer = Task {
                        try? await Task.sleep(for: timeout)
                        guard !Task.isCancelled else { return }
                        let late = FleetError(
                            "PostgreSQL did not answer within \(timeout.components.seconds) s while \(doing): it "
                                + "cannot be reached, or is overloaded."
                        )
                        if finish(.failure(late)) { started.cancel() }
                    }
                }
            } onCancel: {
                _ = finish(.failure(CancellationError()))
            }
        } catch {
            work?.cancel()
            throw Self.explained(error, doing: doing)
        }
    }

    /// What went wrong, in a sentence: a ``FleetError`` as it is, the server's own message, and for a transaction
    /// the error that ended it (its body's, or the `BEGIN`'s or `COMMIT`'s).
    static func explained(_ error: any Error, doing: String) -> FleetError {
        switch error {
        case let error as FleetError:
            return error
        case let error as PostgresTransactionError:
            if let cause = error.closureError ?? error.beginError ?? error.commitError {
                return Self.explained(cause, doing: doing)
            }
            return FleetError("PostgreSQL failed while \(doing): the transaction did not complete.")
        case let error as PSQLError:
            let detail = error.serverInfo?[.message] ?? "\(error.code)"
            return FleetError("PostgreSQL failed while \(doing): \(detail).")
        default:
            return FleetError("PostgreSQL failed while \(doing): \(error).")
        }
    }
}
