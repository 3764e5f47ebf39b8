import Dispatch
import Downpour
import DownpourJSON
import Foundation
import GRDB
import NIOConcurrencyHelpers

/// The queue on disk: an SQLite database (`downpour.sqlite` in the state directory, WAL mode) that keeps the
/// downloads that have not stopped (in order, with their state, resolved path and lengths), the stopped results,
/// the queue's options and the count of stopped downloads.
///
/// ``apply(_:options:)`` writes the rows an operation changed (``DownloadQueue/changes``) in one transaction and
/// returns when it is committed, so an operation costs the rows it touched however long the queue;
/// ``save(_:options:)`` rewrites everything (for a store that fell behind). ``load()`` gives back the same GIDs in
/// the same order, paused ones paused, the ones that were running active.
///
/// ```swift
/// let store = try QueueStore(directory: "/var/lib/downpour")
/// let stored = try store.load()
/// ```
///
/// Writes block the calling thread for the length of one small transaction, which does not wait for the disk: in
/// WAL mode with `synchronous = NORMAL` a commit appends to the log, and the disk is waited for at checkpoints.
/// SQLite's automatic checkpoint would run inside the commit that crosses its threshold, on the caller's thread (the
/// manager's loop, which answers every client); it is off here, and every ``checkpointInterval`` commits a passive
/// checkpoint runs on a thread of its own, over a connection of its own, without holding up the writer.
public final class QueueStore: Sendable {
    /// What ``load()`` gives back.
    public struct Contents: Sendable {
        /// The downloads that were running, in the order they started.
        public var active: [QueuedDownload]
        /// The waiting queue, in order, each with whether it is paused.
        public var waiting: [(QueuedDownload, isPaused: Bool)]
        /// The stored position of every download in ``active`` and ``waiting`` (see ``QueueChange``).
        public var positions: [DownloadID: Double] = [:]
        /// The stopped results, the least recently stopped first.
        public var stopped: [StoppedResult]
        /// How many downloads ever stopped.
        public var stoppedTotal: Int
        /// The queue's options as last saved, in order (`max-concurrent-downloads`, defaults for new downloads ...);
        /// a name may repeat (`header`).
        public var options: [QueueOption]
    }

    /// The database file's name in the state directory.
    public static let fileName = "downpour.sqlite"

    /// The file's path.
    public let path: String
    private let database: DatabasePool
    /// The connection the checkpoints run on, off the writer's thread.
    private let checkpointer: DatabaseQueue
    /// How many commits may go by between two checkpoints.
    let checkpointInterval: Int
    private let beforeCommit: (@Sendable () -> Void)?
    /// The thread this store's writes are committed on, in the order they come.
    private let writerThread = DispatchQueue(label: "downpour.queue.writer")
    private let checkpoints = NIOLockedValueBox(Checkpoints())
    private static let checkpointThread = DispatchQueue(label: "downpour.queue.checkpoint", qos: .utility)

    /// The commits since the last checkpoint began, whether one runs, and how many ran.
    struct Checkpoints: Sendable {
        var commitsSince = 0
        var isRunning = false
        var finished = 0
    }

    /// How many checkpoints have finished (tests).
    var finishedCheckpoints: Int { self.checkpoints.withLockedValue { $0.finished } }

    /// Opens (creating it if need be) `downpour.sqlite` in `directory`, which is created too.
    ///
    /// - Throws: ``QueueError`` `storage` when the directory or the database cannot be opened or migrated.
    public convenience init(directory: String) throws(QueueError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw QueueError(
                .storage,
                message: "The state directory '\(directory)' cannot be created: \(error.localizedDescription)"
            )
        }
        try self.init(path: directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName)
    }

    /// Opens (creating it if need be) the database at `path` and brings its schema up to date.
    ///
    /// - Throws: ``QueueError`` `storage` when it cannot be opened or migrated.
    public convenience init(path: String) throws(QueueError) {
        try self.init(path: path, checkpointInterval: 256)
    }

    /// - Parameters:
    ///   - checkpointInterval: How many commits go by between two checkpoints.
    ///   - beforeCommit: Called on the writer thread before each ``commit(_:)`` (tests hold a commit there).
    init(
        path: String,
        checkpointInterval: Int,
        beforeCommit: (@Sendable () -> Void)? = nil
    ) throws(QueueError) {
        self.path = path
        self.beforeCommit = beforeCommit
        self.checkpointInterval = max(1, checkpointInterval)
        do {
            var configuration = Configuration()
            configuration.label = "downpour.queue"
            configuration.prepareDatabase { db in
                // In WAL mode NORMAL syncs at checkpoints, not at every commit: a committed transaction survives
                // the process being killed (`kill -9`, a crash), which is what the queue promises; only a power
                // loss or an OS crash may lose the last few. FULL would wait for the disk on every operation.
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Checkpoints run off the writer's thread (``checkpointIfDue()``).
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            }
            self.database = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(self.database)
            var checkpointing = Configuration()
            checkpointing.label = "downpour.queue.checkpoint"
            self.checkpointer = try DatabaseQueue(path: path, configuration: checkpointing)
        } catch {
            throw QueueError(
                .storage,
                message: "The queue database '\(path)' cannot be opened: \(error). Check the file and its directory."
            )
        }
    }

    /// The schema, one named migration per change. Never edit a migration that has shipped; add one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-queue") { db in
            try db.execute(
                sql: """
                    CREATE TABLE entry (
                        gid TEXT PRIMARY KEY NOT NULL,
                        uris TEXT NOT NULL,
                        options TEXT NOT NULL,
                        position INTEGER NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('active', 'waiting', 'paused')),
                        path TEXT,
                        totalLength INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE result (
                        sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                        gid TEXT NOT NULL UNIQUE,
                        uris TEXT NOT NULL,
                        options TEXT NOT NULL,
                        status TEXT NOT NULL,
                        errorCode INTEGER NOT NULL,
                        errorMessage TEXT NOT NULL,
                        path TEXT,
                        totalLength INTEGER NOT NULL,
                        completedLength INTEGER NOT NULL
                    );
                    CREATE TABLE queueOption (
                        position INTEGER PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        value TEXT NOT NULL
                    );
                    CREATE TABLE counter (
                        name TEXT PRIMARY KEY NOT NULL,
                        value INTEGER NOT NULL
                    );
                    INSERT INTO counter (name, value) VALUES ('stoppedTotal', 0);
                    """
            )
        }
        migrator.registerMigration("v2-entry-completed-length") { db in
            try db.execute(sql: "ALTER TABLE entry ADD COLUMN completedLength INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v3-entry-sparse-position") { db in
            // Positions become sparse reals (see QueueChange), so that an operation rewrites only its own row.
            // The old positions (0, 1, 2 ... over active then waiting) keep their order within each state.
            // Keyed by GID alone (WITHOUT ROWID): a write touches one b-tree, not a table and its GID index.
            try db.execute(
                sql: """
                    CREATE TABLE entry_v3 (
                        gid TEXT PRIMARY KEY NOT NULL,
                        uris TEXT NOT NULL,
                        options TEXT NOT NULL,
                        position REAL NOT NULL,
                        state TEXT NOT NULL CHECK (state IN ('active', 'waiting', 'paused')),
                        path TEXT,
                        totalLength INTEGER NOT NULL DEFAULT 0,
                        completedLength INTEGER NOT NULL DEFAULT 0
                    ) WITHOUT ROWID;
                    INSERT INTO entry_v3 (gid, uris, options, position, state, path, totalLength, completedLength)
                        SELECT gid, uris, options, position, state, path, totalLength, completedLength FROM entry;
                    DROP TABLE entry;
                    ALTER TABLE entry_v3 RENAME TO entry;
                    """
            )
        }
        migrator.registerMigration("v4-followed-metalink") { db in
            // A Metalink URL's download and the downloads of its files name each other (aria2's `followedBy`
            // and `following`): NULL, or a GID (`following`), or a JSON array of GIDs (`followedBy`).
            try db.execute(
                sql: """
                    ALTER TABLE entry ADD COLUMN following TEXT;
                    ALTER TABLE result ADD COLUMN following TEXT;
                    ALTER TABLE result ADD COLUMN followedBy TEXT;
                    """
            )
        }
        migrator.registerMigration("v5-hls-audio") { db in
            // The audio of an HLS video with a rendition of its own: its path (NULL without one) and length.
            try db.execute(
                sql: """
                    ALTER TABLE result ADD COLUMN audioPath TEXT;
                    ALTER TABLE result ADD COLUMN audioLength INTEGER NOT NULL DEFAULT 0;
                    """
            )
        }
        migrator.registerMigration("v6-entry-audio") { db in
            // The audio path a run of an HLS video named, kept while it waits or is paused (tellStatus's files[1]).
            try db.execute(sql: "ALTER TABLE entry ADD COLUMN audioPath TEXT")
        }
        return migrator
    }

    /// Reads the queue.
    ///
    /// - Throws: ``QueueError`` `storage` when the database cannot be read or holds what cannot be decoded.
    public func load() throws(QueueError) -> Contents {
        do {
            return try self.database.read { db in
                var active: [QueuedDownload] = []
                var waiting: [(QueuedDownload, isPaused: Bool)] = []
                var positions: [DownloadID: Double] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT * FROM entry ORDER BY position") {
                    let entry = QueueEntry(
                        gid: try Self.gid(row["gid"]),
                        uris: try Self.decode([String].self, row["uris"]),
                        options: try Self.decode([QueueOption].self, row["options"]),
                        following: try (row["following"] as String?).map(Self.gid)
                    )
                    let download = QueuedDownload(
                        entry: entry,
                        path: row["path"],
                        totalLength: row["totalLength"],
                        completedLength: row["completedLength"],
                        audioPath: row["audioPath"]
                    )
                    positions[entry.gid] = row["position"]
                    switch row["state"] as String {
                    case "active": active.append(download)
                    case "paused": waiting.append((download, isPaused: true))
                    default: waiting.append((download, isPaused: false))
                    }
                }
                let stopped = try Row.fetchAll(db, sql: "SELECT * FROM result ORDER BY sequence").map { row in
                    StoppedResult(
                        entry: QueueEntry(
                            gid: try Self.gid(row["gid"]),
                            uris: try Self.decode([String].self, row["uris"]),
                            options: try Self.decode([QueueOption].self, row["options"]),
                            following: try (row["following"] as String?).map(Self.gid),
                            followedBy: try (row["followedBy"] as String?).map {
                                try Self.decode([String].self, $0).map(Self.gid)
                            } ?? []
                        ),
                        errorCode: row["errorCode"],
                        errorMessage: row["errorMessage"],
                        path: row["path"],
                        totalLength: row["totalLength"],
                        completedLength: row["completedLength"],
                        audio: (row["audioPath"] as String?).map { AudioFile(path: $0, length: row["audioLength"]) }
                    )
                }
                let options = try Row.fetchAll(db, sql: "SELECT name, value FROM queueOption ORDER BY position").map {
                    QueueOption(name: $0["name"], value: $0["value"])
                }
                let stoppedTotal =
                    try Int.fetchOne(db, sql: "SELECT value FROM counter WHERE name = 'stoppedTotal'") ?? 0
                return Contents(
                    active: active,
                    waiting: waiting,
                    positions: positions,
                    stopped: stopped,
                    stoppedTotal: stoppedTotal,
                    options: options
                )
            }
        } catch {
            throw QueueError(.storage, message: "The queue database '\(self.path)' cannot be read: \(error).")
        }
    }

    /// Stores the whole of `queue` and `options` in one transaction: every download that has not stopped
    /// (replacing what was there), the results (new ones appended, forgotten ones deleted), the count of stopped
    /// downloads, and the options (replacing them all). Returns when the transaction is committed.
    ///
    /// This costs every row; an operation stores its ``DownloadQueue/changes`` with ``apply(_:options:)``
    /// instead. Use this to start a file afresh or to catch up after a change that could not be stored.
    ///
    /// - Throws: ``QueueError`` `storage` when the transaction fails; nothing is changed then.
    public func save(_ queue: DownloadQueue, options: [QueueOption]) throws(QueueError) {
        do {
            try self.database.write { db in
                try db.execute(sql: "DELETE FROM entry")
                func insert(_ gid: DownloadID, state: String) throws {
                    guard let download = queue.downloads[gid], let position = queue.position(of: gid) else { return }
                    try db.execute(
                        sql: """
                            INSERT INTO entry (gid, uris, options, position, state, path, totalLength, completedLength,
                                following, audioPath)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: [
                            gid.description, Self.encode(download.entry.uris),
                            Self.encode(download.entry.options), position, state, download.path,
                            download.totalLength, download.completedLength, download.entry.following?.description,
                            download.audioPath,
                        ]
                    )
                }
                for gid in queue.active { try insert(gid, state: "active") }
                for item in queue.waiting { try insert(item.gid, state: item.isPaused ? "paused" : "waiting") }

                let kept = Set(queue.stopped.map(\.gid.description))
                let stored = try String.fetchAll(db, sql: "SELECT gid FROM result")
                for gid in stored where !kept.contains(gid) {
                    try db.execute(sql: "DELETE FROM result WHERE gid = ?", arguments: [gid])
                }
                let storedSet = Set(stored)
                for result in queue.stopped where !storedSet.contains(result.gid.description) {
                    try Self.insert(result, in: db)
                }
                try db.execute(
                    sql: "UPDATE counter SET value = ? WHERE name = 'stoppedTotal'",
                    arguments: [queue.stoppedTotal]
                )
                try Self.replaceOptions(options, in: db)
            }
            self.checkpointIfDue()
        } catch {
            throw QueueError(
                .storage,
                message: "The queue database '\(self.path)' cannot be written: \(error). The change was not made."
            )
        }
    }

    /// What one transaction stores.
    public enum Write: Sendable {
        /// The rows an operation changed (``DownloadQueue/changes``), and the options when they changed.
        case changes([QueueChange], options: [QueueOption]?)
        /// Everything (for a store that fell behind), with the options.
        case whole(DownloadQueue, options: [QueueOption])
    }

    /// Commits `write` on the store's writer thread, so that the caller's thread (the manager's loop, which answers
    /// every client) goes on meanwhile; returns once it is committed.
    ///
    /// - Throws: ``QueueError`` `storage` when the transaction fails; nothing is changed then.
    public func commit(_ write: Write) async throws(QueueError) {
        try await self.onWriterThread { () throws(QueueError) in
            self.beforeCommit?()
            switch write {
            case .changes(let changes, let options): try self.apply(changes, options: options)
            case .whole(let queue, let options): try self.save(queue, options: options)
            }
        }
    }

    /// Reads everything stored (``load()``) on the store's writer thread, off the caller's.
    ///
    /// - Throws: ``QueueError`` `storage` when the database cannot be read.
    public func contents() async throws(QueueError) -> Contents {
        try await self.onWriterThread { () throws(QueueError) in try self.load() }
    }

    private func onWriterThread<Value: Sendable>(
        _ body: @escaping @Sendable () throws(QueueError) -> Value
    ) async throws(QueueError) -> Value {
        let outcome = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Value, QueueError>, Never>) in
            self.writerThread.async { continuation.resume(returning: Result(catching: body)) }
        }
        return try outcome.get()
    }

    /// Counts a commit; every ``checkpointInterval`` commits, starts a passive checkpoint on the checkpoint thread
    /// unless one runs. It copies what it can of the log into the database file and syncs it, while the writer goes
    /// on; a failure is left for the next one.
    private func checkpointIfDue() {
        let starts = self.checkpoints.withLockedValue { state in
            state.commitsSince += 1
            guard state.commitsSince >= self.checkpointInterval, !state.isRunning else { return false }
            state.commitsSince = 0
            state.isRunning = true
            return true
        }
        guard starts else { return }
        let (checkpointer, checkpoints) = (self.checkpointer, self.checkpoints)
        Self.checkpointThread.async {
            _ = try? checkpointer.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            checkpoints.withLockedValue { state in
                state.isRunning = false
                state.finished += 1
            }
        }
    }

    /// Writes `changes` (an operation's rows, ``DownloadQueue/changes``) and, when given, `options` (replacing
    /// them all) in one transaction; returns when it is committed. Nothing else is read or written, so the cost is
    /// that of the rows changed.
    ///
    /// - Throws: ``QueueError`` `storage` when the transaction fails; nothing is changed then.
    public func apply(_ changes: [QueueChange], options: [QueueOption]? = nil) throws(QueueError) {
        guard !changes.isEmpty || options != nil else { return }
        do {
            try self.database.write { db in
                for change in changes { try Self.apply(change, in: db) }
                if let options { try Self.replaceOptions(options, in: db) }
            }
            self.checkpointIfDue()
        } catch {
            throw QueueError(
                .storage,
                message: "The queue database '\(self.path)' cannot be written: \(error). The change was not made."
            )
        }
    }

    private static func apply(_ change: QueueChange, in db: Database) throws {
        switch change {
        case .insert(let download, let state, let position):
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO entry (gid, uris, options, position, state, path, totalLength,
                        completedLength, following, audioPath)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                download.entry.gid.description, Self.encode(download.entry.uris),
                Self.encode(download.entry.options), position, state.rawValue, download.path,
                download.totalLength, download.completedLength, download.entry.following?.description,
                download.audioPath,
            ])
        case .place(let gid, let state, let position):
            try db.cachedStatement(sql: "UPDATE entry SET state = ?, position = ? WHERE gid = ?")
                .execute(arguments: [state.rawValue, position, gid.description])
        case .update(let download):
            try db.cachedStatement(
                sql: """
                    UPDATE entry SET uris = ?, options = ?, path = ?, totalLength = ?, completedLength = ?,
                        audioPath = ?
                    WHERE gid = ?
                    """
            ).execute(arguments: [
                Self.encode(download.entry.uris), Self.encode(download.entry.options), download.path,
                download.totalLength, download.completedLength, download.audioPath, download.entry.gid.description,
            ])
        case .delete(let gid):
            try db.cachedStatement(sql: "DELETE FROM entry WHERE gid = ?").execute(arguments: [gid.description])
        case .appendResult(let result):
            try db.cachedStatement(sql: "DELETE FROM result WHERE gid = ?").execute(arguments: [result.gid.description])
            try Self.insert(result, in: db)
        case .deleteResult(let gid):
            try db.cachedStatement(sql: "DELETE FROM result WHERE gid = ?").execute(arguments: [gid.description])
        case .deleteAllResults:
            try db.execute(sql: "DELETE FROM result")
        case .stoppedTotal(let total):
            try db.cachedStatement(sql: "UPDATE counter SET value = ? WHERE name = 'stoppedTotal'")
                .execute(arguments: [total])
        }
    }

    private static func replaceOptions(_ options: [QueueOption], in db: Database) throws {
        try db.execute(sql: "DELETE FROM queueOption")
        for (position, option) in options.enumerated() {
            try db.execute(
                sql: "INSERT INTO queueOption (position, name, value) VALUES (?, ?, ?)",
                arguments: [position, option.name, option.value]
            )
        }
    }

    /// Adds `result` to the `result` table.
    private static func insert(_ result: StoppedResult, in db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO result (gid, uris, options, status, errorCode, errorMessage, path, totalLength,
                    completedLength, following, followedBy, audioPath, audioLength)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            result.gid.description, Self.encode(result.entry.uris), Self.encode(result.entry.options),
            result.status.rawValue, result.errorCode, result.errorMessage, result.path, result.totalLength,
            result.completedLength, result.entry.following?.description, Self.encodeFollowedBy(result.entry),
            result.audio?.path, result.audio?.length ?? 0,
        ])
    }

    /// `followedBy` as stored: `NULL` when empty, else a JSON array of GIDs.
    static func encodeFollowedBy(_ entry: QueueEntry) -> String? {
        entry.followedBy.isEmpty ? nil : Self.encode(entry.followedBy.map(\.description))
    }

    /// URIs as a JSON array of strings (what `JSONDecoder` reads back), by the RPC's own writer: a `JSONEncoder`
    /// per row was the largest cost of an add.
    static func encode(_ uris: [String]) -> String {
        JSONWriter.string(.array(uris.map { .string($0) }))
    }

    /// Options as a JSON array of `{"name": ..., "value": ...}` objects (what `JSONDecoder` reads back).
    static func encode(_ options: [QueueOption]) -> String {
        JSONWriter.string(.array(options.map { ["name": .string($0.name), "value": .string($0.value)] }))
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    private static func gid(_ text: String) throws -> DownloadID {
        guard let gid = DownloadID(text) else { throw StoredValueError(description: "'\(text)' is not a GID") }
        return gid
    }
}
