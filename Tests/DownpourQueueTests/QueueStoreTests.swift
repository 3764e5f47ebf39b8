import Downpour
import DownpourTestSupport
import Foundation
import GRDB
import Testing

@testable import DownpourQueue

@Suite("QueueStore")
struct QueueStoreTests {
    static func gid(_ value: UInt64) -> DownloadID { DownloadID(value: value) }

    static func sampleQueue() throws -> DownloadQueue {
        var queue = DownloadQueue(maxConcurrentDownloads: 2, maxDownloadResult: 10)
        for value in 1...6 as ClosedRange<UInt64> {
            _ = try queue.add(
                QueueEntry(
                    gid: gid(value),
                    uris: ["http://example.com/\(value)", "http://mirror.example.com/\(value)"],
                    options: [
                        QueueOption(name: "split", value: "\(value)"), QueueOption(name: "header", value: "A: b"),
                    ]
                ),
                paused: value == 4
            )
        }
        // Active 1, 2; waiting 3, 4 (paused), 5, 6.
        queue.record(gid(1), path: "/downloads/one.bin", totalLength: 1000, completedLength: 300)
        _ = queue.finish(gid(2), outcome: .failed(code: .resourceNotFound, message: "Not found (404)."))
        // 3 started in 2's place; remove it: a removed result. 5 starts.
        _ = try queue.remove(gid(3))
        _ = try queue.pause(gid(1))
        // 6 started in 1's place; it completes. Nothing more to start: 1 and 4 are paused.
        _ = queue.finish(gid(6), outcome: .complete(path: "/downloads/six.bin", length: 66))
        return queue
    }

    static func expectSame(_ loaded: QueueStore.Contents, as queue: DownloadQueue) {
        #expect(loaded.active.map(\.entry.gid) == queue.active)
        #expect(loaded.waiting.map { WaitingItem(gid: $0.0.entry.gid, isPaused: $0.isPaused) } == queue.waiting)
        #expect(loaded.stopped == queue.stopped)
        #expect(loaded.stoppedTotal == queue.stoppedTotal)
        for download in loaded.active + loaded.waiting.map(\.0) {
            #expect(download == queue.downloads[download.entry.gid])
        }
    }

    @Test("a queue saved and loaded is the same queue, in a WAL-mode file")
    func roundTrip() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let queue = try Self.sampleQueue()
        #expect(queue.active == [Self.gid(5)])
        #expect(queue.waiting.map(\.isPaused) == [true, true])
        let options = [
            QueueOption(name: "max-concurrent-downloads", value: "2"), QueueOption(name: "header", value: "A: 1"),
            QueueOption(name: "dir", value: "/d"), QueueOption(name: "header", value: "B: 2"),
        ]

        let store = try QueueStore(directory: directory.path + "/state")
        try store.save(queue, options: options)
        let loaded = try store.load()
        Self.expectSame(loaded, as: queue)
        #expect(loaded.options == options)
        #expect(loaded.stopped.map(\.status) == [.error, .removed, .complete])
        #expect(loaded.waiting.first?.0.path == "/downloads/one.bin")
        #expect(loaded.waiting.first?.0.completedLength == 300)

        let mode = try DatabaseQueue(path: store.path).read { db in
            try String.fetchOne(db, sql: "PRAGMA journal_mode")
        }
        #expect(mode == "wal")
    }

    @Test("a reopened file gives back what was saved; later saves append and forget results")
    func reopen() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var queue = try Self.sampleQueue()
        do {
            let store = try QueueStore(directory: directory.path)
            try store.save(queue, options: [])
        }
        let reopened = try QueueStore(directory: directory.path)
        Self.expectSame(try reopened.load(), as: queue)

        _ = try queue.removeResult(Self.gid(3))
        _ = try queue.unpause(Self.gid(4))
        _ = try queue.changePosition(Self.gid(1), by: 0, from: .end)
        // An HLS video with its audio: the second file comes back too.
        let audio = AudioFile(path: "/downloads/five.audio.ts", length: 2)
        _ = queue.finish(Self.gid(5), outcome: .complete(path: "/downloads/five.ts", length: 5, audio: audio))
        try reopened.save(queue, options: [QueueOption(name: "max-download-result", value: "10")])
        let loaded = try QueueStore(directory: directory.path).load()
        Self.expectSame(loaded, as: queue)
        #expect(loaded.stopped.map(\.gid) == [Self.gid(2), Self.gid(6), Self.gid(5)])
        #expect(loaded.stoppedTotal == 4)
        #expect(loaded.stopped.last?.audio == audio)
    }

    @Test("a database of the first schema is migrated and keeps its rows")
    func migration() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file(QueueStore.fileName)
        do {
            let database = try DatabaseQueue(path: path)
            try QueueStore.migrator.migrate(database, upTo: "v1-queue")
            try database.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO entry (gid, uris, options, position, state, path, totalLength)
                        VALUES ('00000000000000aa', '["http://example.com/a"]', '[{"name":"out","value":"a.bin"}]',
                            0, 'paused', '/d/a.bin', 42)
                        """
                )
                try db.execute(sql: "UPDATE counter SET value = 7 WHERE name = 'stoppedTotal'")
            }
        }
        let store = try QueueStore(path: path)
        let loaded = try store.load()
        #expect(loaded.active.isEmpty)
        let (download, isPaused) = try #require(loaded.waiting.first)
        #expect(isPaused)
        #expect(download.entry.gid == DownloadID(value: 0xaa))
        #expect(download.entry.options == [QueueOption(name: "out", value: "a.bin")])
        #expect(download.path == "/d/a.bin")
        #expect(download.totalLength == 42)
        #expect(download.completedLength == 0)
        #expect(download.entry.following == nil && download.entry.followedBy.isEmpty)
        #expect(loaded.stoppedTotal == 7)
        let applied = try DatabaseQueue(path: path).read { db in try QueueStore.migrator.appliedMigrations(db) }
        // Every migration ran, in order, up to the last one.
        #expect(applied == QueueStore.migrator.migrations && applied.last == "v6-entry-audio")
    }

    @Test("a followed Metalink's links (followedBy, following) are stored row by row and whole")
    func followedMetalinkLinks() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file(QueueStore.fileName)
        let store = try QueueStore(path: path)
        var queue = DownloadQueue(maxConcurrentDownloads: 1)
        let document = QueueEntry(gid: Self.gid(1), uris: ["http://example.com/x.meta4"], options: [])
        _ = try queue.add(document)
        try store.apply(queue.changes)
        queue.acceptChanges()
        let files = [2, 3].map { QueueEntry(gid: Self.gid($0), uris: ["http://example.com/\($0)"], options: []) }
        _ = try queue.finish(Self.gid(1), path: "/d/x.meta4", length: 9, followedBy: files)
        try store.apply(queue.changes)
        queue.acceptChanges()

        func check(_ loaded: QueueStore.Contents) {
            #expect(loaded.stopped.map(\.entry.followedBy) == [[Self.gid(2), Self.gid(3)]])
            #expect(loaded.stopped.map(\.entry.following) == [nil])
            #expect(loaded.stopped.map(\.totalLength) == [9])
            #expect(loaded.active.map(\.entry.gid) == [Self.gid(2)])
            #expect(loaded.active.map(\.entry.following) == [Self.gid(1)])
            #expect(loaded.waiting.map(\.0.entry.following) == [Self.gid(1)])
        }
        check(try QueueStore(path: path).load())

        // The file that completes keeps its link in its result.
        _ = queue.finish(Self.gid(2), outcome: .complete(path: "/d/2", length: 2))
        try store.save(queue, options: [])
        let saved = try QueueStore(path: path).load()
        #expect(saved.stopped.map(\.entry.following) == [nil, Self.gid(1)])
        #expect(saved.stopped.first?.entry.followedBy == [Self.gid(2), Self.gid(3)])
        #expect(saved.active.map(\.entry.following) == [Self.gid(1)])
    }

    @Test("checkpoints run on their own thread every checkpointInterval commits, and move the log into the file")
    func checkpointsOffTheWriter() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.path + "/queue.sqlite"
        let store = try QueueStore(path: path, checkpointInterval: 8)
        func fileSize() -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
        }
        var queue = DownloadQueue(maxConcurrentDownloads: 2, maxDownloadResult: 10)
        for value in 1...7 as ClosedRange<UInt64> {
            _ = try queue.add(QueueEntry(gid: Self.gid(value), uris: ["http://example.com/\(value)"], options: []))
            try store.apply(queue.changes)
            queue.acceptChanges()
        }
        // SQLite's own checkpoint is off: seven commits leave the file as the migration's log left it.
        let before = fileSize()
        #expect(store.finishedCheckpoints == 0)
        _ = try queue.add(QueueEntry(gid: Self.gid(8), uris: ["http://example.com/8"], options: []))
        try store.apply(queue.changes)
        queue.acceptChanges()
        try await waitUntil("a checkpoint after the eighth commit") { store.finishedCheckpoints == 1 }
        #expect(fileSize() > before, "the checkpoint copied the log's pages into the database file")
        Self.expectSame(try store.load(), as: queue)
    }

    @Test("a file that is not a database is refused with a storage error")
    func notADatabase() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file(QueueStore.fileName)
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try QueueStore(path: path)
        } throws: { error in
            (error as? QueueError)?.reason == .storage
        }
    }
}
