import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Pause and resume", .timeLimit(.minutes(10)))
struct ResumeTests {
    static let content = makeTestContent(count: 4 * 1024 * 1024 + 777, seed: 21)
    /// 4 connections at 1 MiB/s each: the 4 MiB file takes about a second, long enough to interrupt.
    static let throttle = RangeTestServer.Fault.throttle(bytesPerSecond: 1024 * 1024)

    static func configuration() -> DownloadConfiguration {
        var configuration = testConfiguration(connections: 4, minimumSplitSize: 256 * 1024)
        configuration.journalInterval = .milliseconds(100)
        return configuration
    }

    /// Starts a download of `urlPath` on `server` and cancels it once `bytes` are on disk. Returns the error and
    /// the events.
    static func interrupted(
        _ server: RangeTestServer,
        _ urlPath: String = "/file.bin",
        path: String,
        after bytes: Int64,
        configuration: DownloadConfiguration = configuration()
    ) async throws -> (DownloadError?, [DownloadEvent]) {
        // The server holds the file's last 64 KiB by itself, so the download cannot finish however late the events
        // reach a loaded test, while every byte before them still arrives (a hold after a count of bytes sent would
        // count the bytes a response cut short brought past its cut, never written).
        server.holdBodies(lastBytes: 64 * 1024)
        let download = testDownloader.download(
            try DownloadRequest(url: server.url(urlPath), destination: .file(path), configuration: configuration)
        )
        let task = Task { try await download.run() }
        var events: [DownloadEvent] = []
        for await event in download.events {
            events.append(event)
            if case .progress(let progress) = event, progress.completedBytes >= bytes, !task.isCancelled {
                task.cancel()
            }
        }
        server.releaseBodies()
        guard case .failure(let error) = await task.result else {
            Issue.record("the download finished before it was cancelled")
            return (nil, events)
        }
        let downloadError = error as? DownloadError
        #expect(downloadError?.code == .cancelled, "\(error)")
        return (downloadError, events)
    }

    static func resumedBytes(_ events: [DownloadEvent]) -> Int64? {
        for case .started(let start) in events { return start.resumedBytes }
        return nil
    }

    static func notices(_ events: [DownloadEvent]) -> [String] {
        events.compactMap { if case .notice(let text) = $0 { text } else { nil } }
    }

    @Test("a cancelled download keeps its bytes; the same request fetches only what is missing")
    func cancelThenResume() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let path = directory.file("big.bin")
            let (error, _) = try await Self.interrupted(server, path: path, after: 2 * 1024 * 1024)
            #expect(error?.code == .cancelled)
            #expect(error?.resumable == true)
            #expect(directory.contents() == ["big.bin.part", "big.bin.part.downpour"])
            let sentBefore = server.statistics().bodyBytesSent

            let outcome = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
            let result = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let resumed = try #require(Self.resumedBytes(outcome.events))
            #expect(resumed >= 1024 * 1024, "resumed only \(resumed) bytes")
            #expect(result.downloadedBytes >= Int64(Self.content.count) - resumed)
            #expect(result.downloadedBytes <= Int64(Self.content.count) - resumed + 4 * 2 * 256 * 1024)
            // The second run fetched what was missing and little more (tails of connections cut by splits).
            let sentAfter = server.statistics().bodyBytesSent - sentBefore
            #expect(sentAfter <= Self.content.count - Int(resumed) + 4 * 256 * 1024)
            // Progress counts what was on disk already.
            let firstProgress = outcome.events.compactMap { if case .progress(let p) = $0 { p } else { nil } }.first
            #expect((firstProgress?.completedBytes ?? 0) >= resumed)
        }
    }

    @Test("pause() stops all traffic and saves the journal; resume() finishes the same file")
    func pauseAndResumeInProcess() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let path = directory.file("paused.bin")
            // Held by the server at 1.5 MiB, no request can end before the pause lands (and leave its connection
            // open in the pool), however late the test looks on a loaded machine: every request asks for 2 MiB or
            // more (the probe asks for one split).
            server.holdBodies(afterSending: 3 * 512 * 1024)
            var configuration = Self.configuration()
            configuration.minimumSplitSize = 2 * 1024 * 1024
            let download = testDownloader.download(
                try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            )
            let task = Task { try await download.run() }
            var sawPaused = false
            var sawResumed = false
            var pausedOnce = false
            for await event in download.events {
                switch event {
                case .progress(let progress) where !pausedOnce && progress.completedBytes > 1024 * 1024:
                    pausedOnce = true
                    download.pause()
                case .paused:
                    sawPaused = true
                    #expect(FileManager.default.fileExists(atPath: path + ".part.downpour"))
                    let requestsAtPause = server.statistics().requests.count
                    // Paused, the download keeps no connection that carried a request open: nothing can flow until
                    // it resumes. (A connection opened ahead that no range needed, the file being short for its
                    // connections, waits idle in the pool until its time-out, having carried nothing.) Within the
                    // suite's limit, so that a connection left open says which requests it served.
                    try await waitUntil(
                        "no connection that served a request is open: "
                            + "\(describe(server.statistics().getRequestsRecorded))",
                        limit: .seconds(30)
                    ) {
                        let statistics = server.statistics()
                        return statistics.requests.allSatisfy {
                            !statistics.openConnectionIDs.contains($0.connectionID)
                        }
                    }
                    #expect(server.statistics().requests.count == requestsAtPause, "requests while paused")
                    server.releaseBodies()
                    download.resume()
                case .resumed:
                    sawResumed = true
                default:
                    break
                }
            }
            let result = try await task.value
            #expect(sawPaused && sawResumed)
            #expect(result.downloadedBytes >= Int64(Self.content.count))
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("a remote file that changed between runs is downloaded again from zero, never spliced")
    func changedBetweenRuns() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("v.bin")
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let (error, _) = try await Self.interrupted(server, path: path, after: 1024 * 1024)
            #expect(error?.resumable == true)
        }
        let newContent = makeTestContent(count: Self.content.count, seed: 77)
        try await withServer(content: newContent, etag: "\"downpour-test-v2\"") { server in
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
            _ = try outcome.value
            #expect(Self.resumedBytes(outcome.events) == 0)
            #expect(Self.notices(outcome.events).contains { $0.contains("changed") }, "\(Self.notices(outcome.events))")
            try expectFile(path, equals: newContent, in: directory)
        }
    }

    @Test("a corrupt journal is not trusted: start over, with a message")
    func corruptJournal() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let path = directory.file("c.bin")
            _ = try await Self.interrupted(server, path: path, after: 1024 * 1024)
            let journalPath = path + ".part.downpour"
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: journalPath)))
            bytes[bytes.count / 2] ^= 0x20
            try Data(bytes).write(to: URL(fileURLWithPath: journalPath))

            let outcome = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
            _ = try outcome.value
            #expect(Self.resumedBytes(outcome.events) == 0)
            #expect(Self.notices(outcome.events).contains { $0.contains("cannot be trusted") })
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("no validators: resume for the same length, with a warning; resume = false starts over")
    func noValidators() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle, .noValidators]) { server in
            let path = directory.file("nv.bin")
            _ = try await Self.interrupted(server, path: path, after: 1024 * 1024)
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
            _ = try outcome.value
            #expect((Self.resumedBytes(outcome.events) ?? 0) > 0)
            #expect(Self.notices(outcome.events).contains { $0.contains("cannot be proven") })
            try expectFile(path, equals: Self.content, in: directory)

            try FileManager.default.removeItem(atPath: path)
            _ = try await Self.interrupted(server, path: path, after: 1024 * 1024)
            var fresh = Self.configuration()
            fresh.resume = false
            let again = try await runDownload(server.url(), to: .file(path), configuration: fresh)
            _ = try again.value
            #expect(Self.resumedBytes(again.events) == 0)
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("resuming from the output path alone, through another URL with the same file")
    func resumeFromPath() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let path = directory.file("p.bin")
            _ = try await Self.interrupted(server, "/first/p.bin", path: path, after: 1024 * 1024)
            let outcome = try await retryingWhileLocked {
                let download = try Download.resuming(
                    path: path,
                    configuration: Self.configuration(),
                    downloader: testDownloader
                )
                #expect(download.request.url.absoluteString == server.url("/first/p.bin"))
                return await collect(download)
            }
            #expect(try outcome.value.downloadedBytes < Int64(Self.content.count))
            try expectFile(path, equals: Self.content, in: directory)

            // Another URL (a fresh link, a mirror) serving the same bytes and validators continues the same file.
            try FileManager.default.removeItem(atPath: path)
            _ = try await Self.interrupted(server, "/first/p.bin", path: path, after: 1024 * 1024)
            let mirror = try await runDownload(
                server.url("/mirror/p.bin"),
                to: .file(path),
                configuration: Self.configuration()
            )
            _ = try mirror.value
            #expect((Self.resumedBytes(mirror.events) ?? 0) > 0)
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("two downloads to one output: the second refuses at once")
    func lockHeld() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [Self.throttle]) { server in
            let path = directory.file("l.bin")
            let first = testDownloader.download(
                try DownloadRequest(url: server.url(), destination: .file(path), configuration: Self.configuration())
            )
            // Held by the server after 1 MiB, the first cannot finish before it is paused.
            server.holdBodies(afterSending: 1024 * 1024)
            let task = Task { try await first.run() }
            for await event in first.events {
                if case .progress = event { first.pause() }
                if case .paused = event { break }
            }
            // Paused, the first still owns its file (and cannot finish); the second's probe gets its bytes.
            server.releaseBodies()
            let second = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(),
                retriesWhileLocked: false
            )
            #expect(second.error?.code == .alreadyRunning, "\(String(describing: second.error))")
            first.resume()
            _ = try await task.value
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test(
        "a full disk pauses with the journal intact; once space is freed the same request completes",
        .enabled(if: TemporaryMount.isPermitted, "mounting a tmpfs is not permitted here (needs root or CAP_SYS_ADMIN)")
    )
    func diskFull() async throws {
        let mount = try #require(try TemporaryMount(megabytes: 8))
        defer { mount.remove() }
        let content = makeTestContent(count: 6 * 1024 * 1024, seed: 31)
        try await withServer(content: content, faults: [Self.throttle]) { server in
            let path = mount.path + "/full.bin"
            let download = testDownloader.download(
                try DownloadRequest(url: server.url(), destination: .file(path), configuration: Self.configuration())
            )
            // With its last 64 KiB held, the download cannot finish before it runs into the full disk.
            server.holdBodies(lastBytes: 64 * 1024)
            let task = Task { try await download.run() }
            var filling: Task<Void, Never>?
            for await event in download.events {
                if case .progress(let progress) = event, filling == nil, progress.completedBytes > 3 * 512 * 1024 {
                    // Two journal saves later, one has started after the hold: the journal records what had
                    // arrived by then.
                    try await waitForSaves(of: path + ".part.downpour", count: 2)
                    // Kept full, as by another program writing: a save that was halfway (its temporary file
                    // written, not yet renamed over the old journal) when the disk filled frees a block after.
                    filling = Task {
                        while !Task.isCancelled {
                            mount.fill()
                            try? await Task.sleep(for: .milliseconds(20))
                        }
                    }
                }
            }
            filling?.cancel()
            await filling?.value
            server.releaseBodies()
            let failure = await task.result
            guard case .failure(let thrown) = failure, let error = thrown as? DownloadError else {
                Issue.record("the download succeeded on a full disk")
                return
            }
            #expect(error.code == .localIO)
            #expect(error.resumable)
            #expect(error.message.contains("No space left"), "\(error.message)")
            #expect(FileManager.default.fileExists(atPath: path + ".part"))
            #expect(FileManager.default.fileExists(atPath: path + ".part.downpour"))

            mount.unfill()
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
            _ = try outcome.value
            #expect((Self.resumedBytes(outcome.events) ?? 0) > 512 * 1024)
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(content))
        }
    }
}

/// A small tmpfs mounted for one test, so "no space left on device" can be produced for real.
struct TemporaryMount {
    let path: String

    /// Whether this environment lets a test mount a tmpfs (tried once, with a 1 MiB one).
    static let isPermitted: Bool = {
        guard let probe = try? TemporaryMount(megabytes: 1) else { return false }
        probe.remove()
        return true
    }()

    /// `nil` when mounting is not permitted.
    init?(megabytes: Int) throws {
        let directory = try ScratchDirectory()
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", directory.path]) == 0 else {
            directory.remove()
            return nil
        }
        self.path = directory.path
    }

    /// Takes every free byte with a filler file.
    func fill() {
        _ = Self.run("/bin/sh", ["-c", "cat /dev/zero > '\(self.path)/filler' 2>/dev/null; true"])
    }

    func unfill() {
        try? FileManager.default.removeItem(atPath: self.path + "/filler")
    }

    func remove() {
        _ = Self.run("/bin/umount", [self.path])
        try? FileManager.default.removeItem(atPath: self.path)
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> Int32 {
        guard let child = try? ChildProcess(executable: executable, arguments: arguments) else { return -1 }
        return child.waitBlocking()
    }
}
