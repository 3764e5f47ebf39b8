import Dispatch
import Downpour
import DownpourTestSupport
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import DownpourQueue

@Suite("Transactions")
struct TransactionTests {
    @Test("a change is stored on the store's thread: while its commit is held the loop answers, the next change waits")
    func commitOffTheLoop() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let holds = NIOLockedValueBox(false)
        let heldCommits = NIOLockedValueBox(0)
        let release = DispatchSemaphore(value: 0)
        let store = try QueueStore(path: directory.path + "/queue.sqlite", checkpointInterval: 256) {
            guard holds.withLockedValue({ $0 }) else { return }
            heldCommits.withLockedValue { $0 += 1 }
            release.wait()
        }
        let downloader = makeTestDownloader()
        let manager = DownloadManager(
            downloader: downloader,
            store: store,
            defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
            logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        try await manager.start()
        holds.withLockedValue { $0 = true }
        // Let go of a held commit however the test ends, so that no writer thread stays blocked.
        defer {
            holds.withLockedValue { $0 = false }
            release.signal()
        }
        let paused = [QueueOption(name: "pause", value: "true")]
        let finished = NIOLockedValueBox<[String]>([])
        let first = Task {
            let gid = try await manager.add(uris: ["http://127.0.0.1:9/a.bin"], options: paused, position: nil)
            finished.withLockedValue { $0.append("first") }
            return gid
        }
        try await waitUntil("the first add's commit held") { heldCommits.withLockedValue { $0 } == 1 }
        let second = Task {
            let gid = try await manager.add(uris: ["http://127.0.0.1:9/b.bin"], options: paused, position: nil)
            finished.withLockedValue { $0.append("second") }
            return gid
        }
        // The manager's loop is free while the commit waits on the store's thread: a read is answered.
        let stat = await manager.read { $0.globalStat() }
        #expect(stat.numActive == 0)
        #expect(finished.withLockedValue { $0 }.isEmpty)
        #expect(heldCommits.withLockedValue { $0 } == 1, "the second change waits for the first one's end")
        holds.withLockedValue { $0 = false }
        release.signal()
        let gids = [try await first.value, try await second.value]
        #expect(finished.withLockedValue { $0 } == ["first", "second"])
        #expect(try store.load().waiting.map(\.0.entry.gid) == gids)
        await manager.shutdown()
        await downloader.shutdown()
    }

    /// A store that counts its commits (`commits`) and holds the one `held` numbers until `release` is signalled,
    /// never past 150 s, however the test ends.
    static func storeHoldingACommit(
        in directory: ScratchDirectory
    ) throws -> (
        store: QueueStore, commits: NIOLockedValueBox<Int>, held: NIOLockedValueBox<Int>, release: DispatchSemaphore
    ) {
        let commits = NIOLockedValueBox(0)
        let held = NIOLockedValueBox(Int.max)
        let release = DispatchSemaphore(value: 0)
        let store = try QueueStore(path: directory.path + "/queue.sqlite", checkpointInterval: 256) {
            let count = commits.withLockedValue { count in
                count += 1
                return count
            }
            if count == held.withLockedValue({ $0 }) { _ = release.wait(timeout: .now() + .seconds(150)) }
        }
        return (store, commits, held, release)
    }

    /// The test defaults, with five downloads at once.
    static func fiveAtOnce(in directory: ScratchDirectory) -> DownloadManager.Defaults {
        .init(
            directory: directory.path,
            configuration: managerTestConfiguration(),
            options: [QueueOption(name: "max-concurrent-downloads", value: "5")]
        )
    }

    @Test("runs that end while a transaction stores are recorded together: one commit for all of them")
    func endsWaitingForTheGateShareACommit() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // The commit that `held` names (the first run's end) waits until the test lets it go.
        let (store, commits, held, release) = try Self.storeHoldingACommit(in: directory)
        defer { release.signal() }
        let downloader = makeTestDownloader()
        let manager = DownloadManager(
            downloader: downloader,
            store: store,
            defaults: Self.fiveAtOnce(in: directory),
            logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let events = EventLog(manager.events)
        let outcome: Result<Void, any Error>
        do {
            try await manager.start()
            // After the add's commit, the next is the first end's.
            let before = commits.withLockedValue { $0 }
            held.withLockedValue { $0 = before + 2 }
            // Five dead links (nothing listens on port 9): refused at once, not retried.
            let added = await manager.add(
                batch: (1...5).map { AddRequest(uris: ["http://127.0.0.1:9/\($0).bin"], options: [], position: nil) }
            )
            let gids = try added.map { try $0.get() }
            try await waitUntil("the first end's commit held") { commits.withLockedValue { $0 } >= before + 2 }
            // The held transaction took the ends that came before it had the gate; the runs still supervised are
            // the others, and they have all ended once each waits in `endedRuns` (which grows only, while held).
            try await waitUntil("every other run ended and waits for the gate") {
                let waiting = await manager.endedRuns.count
                return await waiting == manager.supervisor.runs.count
            }
            release.signal()
            for gid in gids {
                try await events.wait(for: .failed(gid))
            }
            // One at a time, the five ends would have taken five commits.
            #expect(commits.withLockedValue { $0 } <= before + 3, "the ends that waited were stored in one commit")
            let stopped = try store.load().stopped
            #expect(Set(stopped.map(\.gid)) == Set(gids))
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        release.signal()
        await manager.shutdown()
        await downloader.shutdown()
        try outcome.get()
    }

    @Test("runs that end while the gate is held wait in its line as one transaction, not one place each")
    func endsWaitingForTheGateHoldOnePlace() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // The commit that `held` names (the first run's end) waits until the test lets it go.
        let (store, commits, held, release) = try Self.storeHoldingACommit(in: directory)
        defer { release.signal() }
        // Each run waits, its download returned, until the test lets its end through to the manager.
        let arrived = NIOLockedValueBox(Set<DownloadID>())
        let letThrough = NIOLockedValueBox(Set<DownloadID>())
        let downloader = makeTestDownloader()
        let manager = DownloadManager(
            downloader: downloader,
            store: store,
            defaults: Self.fiveAtOnce(in: directory),
            logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() }),
            recordDelay: .seconds(60),
            runEnding: { gid in
                arrived.withLockedValue { _ = $0.insert(gid) }
                try? await waitUntil("the end of \(gid) let through") {
                    letThrough.withLockedValue { $0.contains(gid) }
                }
            }
        )
        let events = EventLog(manager.events)
        let outcome: Result<Void, any Error>
        do {
            try await manager.start()
            // Five dead links (nothing listens on port 9): refused at once, not retried.
            let gids = try await manager.add(
                batch: (1...5).map { AddRequest(uris: ["http://127.0.0.1:9/\($0).bin"], options: [], position: nil) }
            ).map { try $0.get() }
            try await waitUntil("every run's download returned") { arrived.withLockedValue { $0.count } == 5 }
            // The first end's transaction holds the gate: its commit waits.
            held.withLockedValue { $0 = commits.withLockedValue { $0 } + 1 }
            letThrough.withLockedValue { _ = $0.insert(gids[0]) }
            try await waitUntil("the first end's commit held") {
                commits.withLockedValue { $0 } >= held.withLockedValue { $0 }
            }
            // The other four end while it is held.
            letThrough.withLockedValue { $0.formUnion(gids[1...]) }
            try await waitUntil("the other ends wait") { await manager.endedRuns.count == 4 }
            try await waitUntil("their transaction waits for the gate") { manager.gate.waiters >= 1 }
            // One place in the line, not four: each would be a turn for a change that comes after them.
            #expect(manager.gate.waiters == 1, "the four ends wait for the gate as one transaction")
            release.signal()
            for gid in gids {
                try await events.wait(for: .failed(gid))
            }
            #expect(Set(try store.load().stopped.map(\.gid)) == Set(gids))
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        release.signal()
        letThrough.withLockedValue { $0.formUnion(arrived.withLockedValue { $0 }) }
        await manager.shutdown()
        await downloader.shutdown()
        try outcome.get()
    }
}
