import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

/// A manager that starts nothing by itself (a fleet node's): `run` starts a download it was told to, `forget`
/// drops one without a result and keeps its files, and a run whose write permit was withdrawn is an orphan until
/// it is forgotten or run again.
@Suite("DownloadManager: runs on another's word", .timeLimit(.minutes(10)))
struct DownloadManagerClaimsTests {
    static let content = makeTestContent(count: 512 * 1024, seed: 41)

    static func manager(
        in directory: ScratchDirectory,
        downloader: Downloader,
        permit: NIOLockedValueBox<Bool>
    ) throws -> DownloadManager {
        DownloadManager(
            downloader: downloader,
            store: try QueueStore(directory: directory.stateDirectory),
            defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
            logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() }),
            fillsFreeSlots: false,
            writePermit: { _ in { permit.withLockedValue { $0 } } }
        )
    }

    @Test("run starts at once what add left waiting; forget drops a run, keeping its files, with no result")
    func runAndForget() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.content) { server in
            server.holdBodies(afterSending: Self.content.count / 2)
            let manager = try Self.manager(in: directory, downloader: downloader, permit: NIOLockedValueBox(true))
            let log = EventLog(manager.events)
            try await manager.start()
            let gid = try await manager.add(uris: [server.url("/a.bin")], options: [], position: nil)
            #expect(await manager.activeDownloads().isEmpty)
            let entry = QueueEntry(gid: gid, uris: [server.url("/a.bin")], options: [])
            try await manager.run(entry)
            #expect(await manager.activeDownloads().map(\.gid) == [gid])
            try await waitUntil("a journal") {
                FileManager.default.fileExists(atPath: directory.file("a.bin.part.downpour"))
            }

            await manager.forget(gid)
            #expect(
                await manager.globalStat()
                    == GlobalStat(downloadSpeed: 0, numActive: 0, numWaiting: 0, numStopped: 0, numStoppedTotal: 0)
            )
            #expect(FileManager.default.fileExists(atPath: directory.file("a.bin.part")))
            #expect(log.count(of: .paused(gid)) == 0 && log.count(of: .stopped(gid)) == 0)

            // Run again, it resumes and completes.
            server.releaseBodies()
            try await manager.run(entry)
            try await log.wait(for: .completed(gid))
            #expect(try sha256Hex(ofFileAt: directory.file("a.bin")) == sha256Hex(Self.content))
            await manager.shutdown()
        }
        await downloader.shutdown()
    }

    @Test("a run whose permit was withdrawn leaves an orphan, no result; run starts it afresh")
    func orphans() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.content) { server in
            server.holdBodies(afterSending: Self.content.count / 2)
            let permit = NIOLockedValueBox(true)
            let manager = try Self.manager(in: directory, downloader: downloader, permit: permit)
            let log = EventLog(manager.events)
            try await manager.start()
            let entry = QueueEntry(gid: DownloadID(value: 7), uris: [server.url("/b.bin")], options: [])
            try await manager.run(entry)
            try await waitUntil("a journal") {
                FileManager.default.fileExists(atPath: directory.file("b.bin.part.downpour"))
            }
            #expect(await manager.orphans().isEmpty)

            // Withdrawn, then the bytes flow: the next journal save or the final name asks, and the run stops.
            permit.withLockedValue { $0 = false }
            server.releaseBodies()
            try await waitUntil("an orphan") { await manager.orphans() == [entry.gid] }
            #expect(!FileManager.default.fileExists(atPath: directory.file("b.bin")))
            #expect(await manager.stoppedDownloads(0..<10).isEmpty)
            #expect(log.count(of: .failed(entry.gid)) == 0)

            permit.withLockedValue { $0 = true }
            try await manager.run(entry)
            #expect(await manager.orphans().isEmpty)
            try await log.wait(for: .completed(entry.gid))
            #expect(try sha256Hex(ofFileAt: directory.file("b.bin")) == sha256Hex(Self.content))
            await manager.shutdown()
        }
        await downloader.shutdown()
    }
}
