import Downpour
import DownpourTestSupport
import Foundation
import GRDB
import Testing

@testable import DownpourQueue

/// The store written change by change: after every operation only the rows it touched are written, and a store
/// opened afresh (as after a crash: the first one is never closed) gives back the same queue.
@Suite("QueueStore, incremental")
struct QueueStoreIncrementalTests {
    static func gid(_ value: UInt64) -> DownloadID { DownloadID(value: value) }

    static func entry(_ value: UInt64) -> QueueEntry {
        QueueEntry(gid: gid(value), uris: ["http://example.com/\(value)"], options: [])
    }

    /// A queue and its store, kept in step as the manager keeps them.
    struct Harness {
        let directory: ScratchDirectory
        let store: QueueStore
        var queue: DownloadQueue

        init(maxConcurrentDownloads: Int = 2, maxDownloadResult: Int = 3) throws {
            self.directory = try ScratchDirectory()
            self.store = try QueueStore(directory: self.directory.stateDirectory)
            self.queue = DownloadQueue(
                maxConcurrentDownloads: maxConcurrentDownloads,
                maxDownloadResult: maxDownloadResult
            )
        }

        /// Runs `operation`, stores its changes and returns them.
        @discardableResult
        mutating func run(_ operation: (inout DownloadQueue) throws(QueueError) -> Void) throws -> [QueueChange] {
            try operation(&self.queue)
            let changes = self.queue.changes
            try self.store.apply(changes)
            self.queue.acceptChanges()
            return changes
        }

        /// The queue as a new store on the same file reads it (the first store is left open, as after a crash).
        func reloaded() throws -> DownloadQueue {
            let contents = try QueueStore(directory: self.directory.stateDirectory).load()
            return DownloadQueue(
                active: contents.active,
                waiting: contents.waiting,
                stopped: contents.stopped,
                stoppedTotal: contents.stoppedTotal,
                maxConcurrentDownloads: self.queue.maxConcurrentDownloads,
                maxDownloadResult: self.queue.maxDownloadResult,
                positions: contents.positions
            )
        }

        func expectReloadedSame(sourceLocation: SourceLocation = #_sourceLocation) throws {
            let reloaded = try self.reloaded()
            #expect(reloaded == self.queue, sourceLocation: sourceLocation)
            #expect(reloaded.changes.isEmpty, "stored positions are in order", sourceLocation: sourceLocation)
        }
    }

    @Test("each operation writes only its own rows, and a reopened store gives back the same queue")
    func operationsRowByRow() throws {
        var harness = try Harness()
        defer { harness.directory.remove() }

        // Two run at once; the third waits.
        for value in 1...3 as ClosedRange<UInt64> {
            _ = try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(value)) }
        }
        // An add that does not start writes one row.
        let added = try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(4), paused: true) }
        #expect(added == [.insert(QueuedDownload(entry: Self.entry(4)), state: .paused, position: 2)])
        // At the front (before the first), in the middle (between the neighbours), at the end.
        let front = try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(5), paused: true, position: 0) }
        #expect(front == [.insert(QueuedDownload(entry: Self.entry(5)), state: .paused, position: 0)])
        let middle = try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(6), position: 2) }
        #expect(middle == [.insert(QueuedDownload(entry: Self.entry(6)), state: .waiting, position: 1.5)])
        #expect(harness.queue.waiting.map(\.gid) == [5, 3, 6, 4].map(Self.gid))
        try harness.expectReloadedSame()

        // Pausing an active one: its row moves to the front, paused; the freed slot starts 3: two rows.
        let paused = try harness.run { q throws(QueueError) in _ = try q.pause(Self.gid(1)) }
        #expect(
            paused == [
                .place(Self.gid(1), state: .paused, position: -1), .place(Self.gid(3), state: .active, position: 3),
            ]
        )
        // Pausing and unpausing a waiting one: one row each.
        #expect(try harness.run { q throws(QueueError) in _ = try q.pause(Self.gid(6)) }.count == 1)
        #expect(try harness.run { q throws(QueueError) in _ = try q.unpause(Self.gid(5)) }.count == 1)
        #expect(harness.queue.waiting.map(\.gid) == [1, 5, 6, 4].map(Self.gid))
        // A move: one row.
        let moved = try harness.run { q throws(QueueError) in _ = try q.changePosition(Self.gid(1), by: 0, from: .end) }
        #expect(moved == [.place(Self.gid(1), state: .paused, position: 3)])
        try harness.expectReloadedSame()

        // A finish: the entry leaves, its result and the count are written, the next unpaused one starts.
        let finished = try harness.run { q in
            _ = q.finish(Self.gid(2), outcome: .complete(path: "/d/2.bin", length: 2))
        }
        #expect(finished.count == 4)
        #expect(finished.first == .delete(Self.gid(2)))
        #expect(finished.last == .place(Self.gid(5), state: .active, position: 4))
        // What a run learnt of its file: one row.
        let recorded = try harness.run { q in
            q.record(Self.gid(3), path: "/d/3.bin", totalLength: 30, completedLength: 10)
        }
        #expect(recorded.count == 1)
        // Removing a waiting one deletes its row; an active one becomes a result.
        #expect(try harness.run { q throws(QueueError) in _ = try q.remove(Self.gid(4)) } == [.delete(Self.gid(4))])
        try harness.run { q throws(QueueError) in _ = try q.remove(Self.gid(3)) }
        try harness.run { q in
            _ = q.finish(Self.gid(5), outcome: .failed(code: .resourceNotFound, message: "Not found."))
        }
        // A fourth result pushes the first out (three are kept).
        try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(7)) }
        try harness.run { q in _ = q.finish(Self.gid(7), outcome: .complete(path: "/d/7.bin", length: 7)) }
        #expect(harness.queue.stopped.map(\.gid) == [3, 5, 7].map(Self.gid))
        #expect(harness.queue.stoppedTotal == 4)
        try harness.expectReloadedSame()

        try harness.run { q throws(QueueError) in _ = try q.removeResult(Self.gid(5)) }
        try harness.expectReloadedSame()
        try harness.run { q in _ = q.purgeResults() }
        try harness.run { q in _ = q.unpauseAll() }
        try harness.run { q in _ = q.pauseAll() }
        try harness.expectReloadedSame()
        #expect(try harness.reloaded().stoppedTotal == 4)
    }

    @Test("inserting again and again between two neighbours renumbers the waiting queue, keeping its order")
    func renumbering() throws {
        var harness = try Harness(maxConcurrentDownloads: 1)
        defer { harness.directory.remove() }
        // 50 takes the one slot; 1, 2, 3 wait, paused.
        try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(50)) }
        for value in 1...3 as ClosedRange<UInt64> {
            try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(value), paused: true) }
        }
        var expected = [1, 2, 3].map(Self.gid)
        var renumbered = false
        for value in 100..<200 as Range<UInt64> {
            let changes = try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(value), position: 1) }
            expected.insert(Self.gid(value), at: 1)
            // Most inserts write one row; the one that finds no room rewrites the positions of the others too.
            if changes.count > 1 { renumbered = true }
        }
        #expect(renumbered)
        #expect(harness.queue.active == [Self.gid(50)])
        #expect(harness.queue.waiting.map(\.gid) == expected)
        try harness.expectReloadedSame()
        // Moves land in the same place after a reload.
        try harness.run { q throws(QueueError) in _ = try q.changePosition(Self.gid(3), by: 0, from: .set) }
        try harness.run { q throws(QueueError) in _ = try q.changePosition(Self.gid(1), by: 5, from: .current) }
        try harness.expectReloadedSame()
    }

    @Test("a change the store refuses is reverted: the queue is as it was, and later changes store well")
    func revert() throws {
        var harness = try Harness()
        defer { harness.directory.remove() }
        for value in 1...4 as ClosedRange<UInt64> {
            try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(value), paused: value == 4) }
        }
        try harness.run { q in _ = q.finish(Self.gid(1), outcome: .complete(path: "/d/1.bin", length: 1)) }
        let before = harness.queue
        _ = try harness.queue.pause(Self.gid(2))
        _ = try harness.queue.add(Self.entry(9), position: 0)
        _ = harness.queue.finish(Self.gid(3), outcome: .failed(code: .resourceNotFound, message: "Not found."))
        _ = try harness.queue.removeResult(Self.gid(1))
        _ = harness.queue.setMaxConcurrentDownloads(5)
        harness.queue.revertChanges()
        #expect(harness.queue == before)
        #expect(harness.queue.changes.isEmpty)
        #expect(harness.queue.status(of: Self.gid(4)) == .paused)
        #expect(harness.queue.status(of: Self.gid(9)) == nil)
        try harness.expectReloadedSame()
        try harness.run { q throws(QueueError) in _ = try q.add(Self.entry(10), position: 0) }
        try harness.run { q throws(QueueError) in _ = try q.unpause(Self.gid(4)) }
        try harness.expectReloadedSame()
    }

    @Test("a database of the second schema is migrated to sparse positions and keeps its order")
    func migrationFromV2() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file(QueueStore.fileName)
        do {
            let database = try DatabaseQueue(path: path)
            try QueueStore.migrator.migrate(database, upTo: "v2-entry-completed-length")
            try database.write { db in
                for (position, gid, state) in [(0, "a1", "active"), (1, "b1", "paused"), (2, "b2", "waiting")] {
                    try db.execute(
                        sql: """
                            INSERT INTO entry (gid, uris, options, position, state, path, totalLength,
                                completedLength)
                            VALUES (?, '["http://example.com/x"]', '[]', ?, ?, NULL, 0, 5)
                            """,
                        arguments: ["00000000000000" + gid, position, state]
                    )
                }
            }
        }
        let store = try QueueStore(path: path)
        let loaded = try store.load()
        #expect(loaded.active.map(\.entry.gid) == [DownloadID(value: 0xa1)])
        #expect(loaded.waiting.map(\.0.entry.gid) == [DownloadID(value: 0xb1), DownloadID(value: 0xb2)])
        #expect(loaded.waiting.map(\.isPaused) == [true, false])
        #expect(loaded.waiting.map(\.0.completedLength) == [5, 5])
        var queue = DownloadQueue(
            active: loaded.active,
            waiting: loaded.waiting,
            stopped: loaded.stopped,
            stoppedTotal: loaded.stoppedTotal,
            positions: loaded.positions
        )
        #expect(queue.changes.isEmpty)
        // A position between two old whole numbers is stored as a real.
        _ = try queue.add(Self.entry(0xc1), paused: true, position: 1)
        #expect(queue.position(of: DownloadID(value: 0xc1)) == 1.5)
        try store.apply(queue.changes)
        let reloaded = try QueueStore(path: path).load()
        #expect(reloaded.waiting.map(\.0.entry.gid) == [0xb1, 0xc1].map { DownloadID(value: $0) })
        // b2, not paused, took a free slot after a1.
        #expect(reloaded.active.map(\.entry.gid) == [0xa1, 0xb2].map { DownloadID(value: $0) })
        let applied = try DatabaseQueue(path: path).read { db in try QueueStore.migrator.appliedMigrations(db) }
        // Every migration ran, in order, up to the last one.
        #expect(applied == QueueStore.migrator.migrations && applied.last == "v6-entry-audio")
    }

    @Test("URIs and options written by hand read back through JSONDecoder, whatever their characters")
    func jsonEncoding() throws {
        let texts = [
            "", "plain", "http://example.com/a b?c=d&e=\"f\"", "back\\slash", "line\nbreak\r\t",
            "control \u{01}\u{1f}", "é ü 日本 🎉", "</script>",
        ]
        let uris = try JSONDecoder().decode([String].self, from: Data(QueueStore.encode(texts).utf8))
        #expect(uris == texts)
        let options = texts.map { QueueOption(name: "header", value: $0) } + [QueueOption(name: "o\"ut", value: "x")]
        let decoded = try JSONDecoder().decode([QueueOption].self, from: Data(QueueStore.encode(options).utf8))
        #expect(decoded == options)
        #expect(QueueStore.encode([] as [QueueOption]) == "[]")
    }
}
