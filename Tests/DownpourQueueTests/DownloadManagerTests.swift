import Downpour
import DownpourAria2
import DownpourTestSupport
import Foundation
import GRDB
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import DownpourQueue

/// Real downloads through the queue, against ``RangeTestServer``. Nothing here measures time: the tests wait for
/// events and read the server's request log; `holdBodies` keeps downloads in flight where a test needs them to be.
@Suite("DownloadManager", .timeLimit(.minutes(10)))
struct DownloadManagerTests {
    static let small = makeTestContent(count: 300 * 1024 + 5, seed: 31)
    static let big = makeTestContent(count: 4 * 1024 * 1024 + 777, seed: 32)
    /// 4 connections at 256 KiB/s each: the big file takes about 4 s, long enough to stop it part way.
    static let throttle = RangeTestServer.Fault.throttle(bytesPerSecond: 256 * 1024)

    static func out(_ name: String) -> [QueueOption] { [QueueOption(name: "out", value: name)] }

    /// Waits until a download has `bytes` on disk.
    static func waitForBytes(_ manager: DownloadManager, _ gid: DownloadID, _ bytes: Int64) async throws {
        try await waitUntil("\(gid) has \(bytes) bytes") {
            let status = try await manager.status(of: gid.description)
            #expect(status.status == .active, "stopped before it was interrupted: \(status)")
            guard status.status == .active else { throw GaveUpWaiting(condition: "\(gid) active") }
            return status.completedLength >= bytes
        }
    }

    @Test("no more than max-concurrent-downloads run at once; the rest start as slots free up")
    func maxConcurrent() async throws {
        try await withManager(content: Self.small, options: [QueueOption(name: "max-concurrent-downloads", value: "2")])
        { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            server.holdBodies()
            var gids: [DownloadID] = []
            for index in 0..<4 {
                gids.append(
                    try await manager.add(
                        uris: [server.url("/f\(index).bin")],
                        options: Self.out("f\(index).bin"),
                        position: nil
                    )
                )
            }
            try await log.wait(for: .started(gids[1]))
            #expect(await manager.activeDownloads().map(\.gid) == Array(gids[0..<2]))
            #expect(await manager.waitingDownloads(0..<10).map(\.gid) == Array(gids[2..<4]))
            #expect(await manager.waitingDownloads(0..<10).map(\.status) == [.waiting, .waiting])
            #expect(log.count(of: .started(gids[2])) == 0)
            // Bodies held: the first two files are asked for, and only they.
            try await waitUntil("GETs of the first two files") {
                let gets = server.statistics().requests.filter { $0.method == "GET" }
                return Set(gets.map(\.uri)).isSuperset(of: ["/f0.bin", "/f1.bin"])
            }
            #expect(Set(server.statistics().requests.map(\.uri)) == ["/f0.bin", "/f1.bin"])
            #expect(await manager.activeDownloads().map(\.gid) == Array(gids[0..<2]))

            server.releaseBodies()
            for gid in gids { try await log.wait(for: .completed(gid)) }
            // At no point were more than two running: a start always followed a completion.
            var running = 0
            for event in log.events {
                if case .started = event { running += 1 }
                if case .completed = event { running -= 1 }
                #expect(running <= 2, "\(log.events)")
            }
            for index in 0..<4 {
                #expect(try sha256Hex(ofFileAt: directory.file("f\(index).bin")) == sha256Hex(Self.small))
            }
            let stat = await manager.globalStat()
            #expect(stat.numActive == 0 && stat.numWaiting == 0 && stat.numStopped == 4 && stat.numStoppedTotal == 4)
            #expect(await manager.stoppedDownloads(0..<10).map(\.errorCode) == [0, 0, 0, 0])
        }
    }

    @Test("changing max-concurrent-downloads starts more at once")
    func raiseMaxConcurrent() async throws {
        try await withManager(content: Self.small, options: [QueueOption(name: "max-concurrent-downloads", value: "1")])
        { fixture in
            let (manager, server, log) = (fixture.manager, fixture.server, fixture.events)
            server.holdBodies()
            var gids: [DownloadID] = []
            for index in 0..<3 {
                gids.append(
                    try await manager.add(
                        uris: [server.url("/g\(index).bin")],
                        options: Self.out("g\(index).bin"),
                        position: nil
                    )
                )
            }
            try await log.wait(for: .started(gids[0]))
            #expect(await manager.activeDownloads().map(\.gid) == [gids[0]])

            try await manager.changeGlobalOptions([QueueOption(name: "max-concurrent-downloads", value: "3")])
            // Still held: the two others started because of the option, not because the first finished.
            try await log.wait(for: .started(gids[2]))
            #expect(await manager.activeDownloads().map(\.gid) == gids)
            #expect(log.count(of: .completed(gids[0])) == 0)
            #expect(await manager.globalOptions().contains(QueueOption(name: "max-concurrent-downloads", value: "3")))

            server.releaseBodies()
            for gid in gids { try await log.wait(for: .completed(gid)) }
        }
    }

    @Test("pause an active download, unpause: only the missing bytes are fetched, the file is identical")
    func pauseThenUnpause() async throws {
        try await withManager(content: Self.big, faults: [Self.throttle]) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            // The server holds the bodies by itself past 2.5 MiB: the download cannot finish before the pause lands,
            // however late this test looks on a loaded machine.
            server.holdBodies(afterSending: 5 * 512 * 1024)
            let gid = try await manager.add(uris: [server.url("/big.bin")], options: Self.out("big.bin"), position: nil)
            try await Self.waitForBytes(manager, gid, 2 * 1024 * 1024)
            // Held, the download cannot finish before the pause lands.
            server.holdBodies()
            #expect(try await manager.pause(gid.description, force: false) == gid)
            try await log.wait(for: .paused(gid))
            let paused = try await manager.status(of: gid.description)
            #expect(paused.status == .paused)
            #expect(paused.path == directory.file("big.bin"))
            #expect(await manager.waitingDownloads(0..<5).map(\.gid) == [gid])
            try await waitUntil("the run let go of the file: \(directory.contents())") {
                directory.contents() == ["big.bin.part", "big.bin.part.downpour"]
                    && server.statistics().openConnections == 0
            }
            let done = try await manager.status(of: gid.description).completedLength
            #expect(done >= 2 * 1024 * 1024)
            let requestsBefore = server.statistics().requests.count

            server.releaseBodies()
            #expect(try await manager.unpause(gid.description) == gid)
            try await log.wait(for: .completed(gid))
            #expect(log.count(of: .started(gid)) == 2)
            #expect(try sha256Hex(ofFileAt: directory.file("big.bin")) == sha256Hex(Self.big))
            #expect(directory.contents() == ["big.bin"])
            // The second run asked for what was missing (and little more: tails cut by splits), not the whole file.
            let asked = requestedBytes(server, path: "/big.bin", from: requestsBefore, total: Self.big.count)
            #expect(asked <= Self.big.count - Int(done) + 1024 * 1024, "asked for \(asked) bytes, \(done) were done")
            let result = try await manager.status(of: gid.description)
            #expect(result.status == .complete && result.errorCode == 0 && result.totalLength == Int64(Self.big.count))
        }
    }

    @Test("remove an active download: a removed result (31), no .part left")
    func removeActive() async throws {
        try await withManager(content: Self.big) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            // The probe's first 64 KiB go out (the file is opened with them), then the server holds the rest.
            server.holdBodies(afterSending: 64 * 1024)
            let gid = try await manager.add(uris: [server.url("/r.bin")], options: Self.out("r.bin"), position: nil)
            try await waitUntil("the .part exists: \(directory.contents())") {
                directory.contents().contains("r.bin.part")
            }
            #expect(try await manager.remove(String(gid.description.prefix(8)).uppercased(), force: false) == gid)
            try await log.wait(for: .stopped(gid))
            let status = try await manager.status(of: gid.description)
            #expect(status.status == .removed)
            #expect(status.errorCode == 31)
            #expect(status.errorMessage == "")
            try await waitUntil("nothing left: \(directory.contents())") { directory.contents().isEmpty }
            #expect(await manager.globalStat().numStopped == 1)
            server.releaseBodies()
        }
    }

    @Test("remove a waiting download: it leaves the queue with no result")
    func removeWaiting() async throws {
        try await withManager(content: Self.small, options: [QueueOption(name: "max-concurrent-downloads", value: "1")])
        { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            server.holdBodies()
            let first = try await manager.add(uris: [server.url("/w0.bin")], options: Self.out("w0.bin"), position: nil)
            let second = try await manager.add(
                uris: [server.url("/w1.bin")],
                options: Self.out("w1.bin"),
                position: nil
            )
            let third = try await manager.add(
                uris: [server.url("/w2.bin")],
                options: Self.out("w2.bin") + [QueueOption(name: "pause", value: "true")],
                position: 0
            )
            #expect(await manager.waitingDownloads(0..<5).map(\.gid) == [third, second])
            #expect(await manager.waitingDownloads(0..<5).map(\.status) == [.paused, .waiting])
            // Before they start, the paths are the ones `out` asks for, as aria2 shows them.
            #expect(
                await manager.waitingDownloads(0..<5).map(\.path)
                    == [directory.path + "/w2.bin", directory.path + "/w1.bin"]
            )
            #expect(try await manager.remove(second.description, force: false) == second)
            #expect(try await manager.remove(third.description, force: true) == third)
            for gid in [second, third] {
                await #expect {
                    _ = try await manager.status(of: gid.description)
                } throws: { error in
                    (error as? QueueError)?.reason == .notFound
                }
            }
            let stat = await manager.globalStat()
            #expect(stat.numWaiting == 0 && stat.numStopped == 0 && stat.numStoppedTotal == 0)
            #expect(log.count(of: .stopped(second)) == 0)
            server.releaseBodies()
            try await log.wait(for: .completed(first))
            #expect(log.count(of: .started(second)) == 0)
            #expect(!server.statistics().requests.contains { $0.uri == "/w1.bin" || $0.uri == "/w2.bin" })
        }
    }

    @Test("remove a paused download: its .part and journal go too, also after a restart")
    func removePausedRemovesPartialFile() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try Data("keep".utf8).write(to: URL(fileURLWithPath: directory.file("keep.txt")))
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.big, faults: [Self.throttle]) { server in
            var gids: [DownloadID] = []
            do {
                let manager = try makeManager(in: directory, downloader: downloader)
                let log = EventLog(manager.events)
                try await manager.start()
                // One download at a time, each with a budget of 4 MiB of bodies (less than the file) before the
                // server holds them: neither file can be complete before its pause, and the first cannot take the
                // second's bytes, however loaded the machine.
                for name in ["p0.bin", "p1.bin"] {
                    server.releaseBodies()
                    server.holdBodies(afterSendingMore: 4 * 1024 * 1024)
                    let gid = try await manager.add(
                        uris: [server.url("/big.bin")],
                        options: Self.out(name),
                        position: nil
                    )
                    try await Self.waitForBytes(manager, gid, 256 * 1024)
                    #expect(try await manager.pause(gid.description, force: false) == gid)
                    try await log.wait(for: .paused(gid))
                    gids.append(gid)
                }
                server.holdBodies()
                // Removed while its run may still be letting go of the file: the file goes once it has.
                #expect(try await manager.remove(gids[0].description, force: false) == gids[0])
                try await waitUntil("p0's files gone: \(directory.contents())") {
                    !directory.contents().contains { $0.hasPrefix("p0.bin") }
                }
                await manager.shutdown()
            }
            #expect(directory.contents() == ["keep.txt", "p1.bin.part", "p1.bin.part.downpour"])
            server.releaseBodies()
            // A new process: the paused download's path is known from the store; no run holds the file.
            let manager = try makeManager(in: directory, downloader: downloader)
            try await manager.start()
            #expect(try await manager.status(of: gids[1].description).status == .paused)
            #expect(try await manager.remove(gids[1].description, force: false) == gids[1])
            #expect(directory.contents() == ["keep.txt"])
            await manager.shutdown()
        }
        await downloader.shutdown()
    }

    @Test("a manager that was never shut down (a crash) loses nothing it acknowledged")
    func crashLosesNothing() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let manager = try makeManager(in: directory, downloader: downloader)
        try await manager.start()
        let paused = [QueueOption(name: "pause", value: "true")]
        var gids: [DownloadID] = []
        for index in 0..<20 {
            let position = index % 3 == 0 ? 0 : index % 3 == 1 ? nil : gids.count / 2
            gids.append(
                try await manager.add(uris: ["http://127.0.0.1:9/\(index).bin"], options: paused, position: position)
            )
        }
        _ = try await manager.changePosition(gids[5].description, by: 0, from: .set)
        _ = try await manager.changePosition(gids[6].description, by: -3, from: .end)
        _ = try await manager.remove(gids[7].description, force: false)
        try await manager.changeOptions(gids[8].description, [QueueOption(name: "split", value: "3")])
        _ = try await manager.changeURIs(gids[9].description, remove: [], add: ["http://127.0.0.1:9/m"], position: 0)
        try await manager.changeGlobalOptions([QueueOption(name: "max-download-result", value: "7")])
        let expected = await manager.waitingDownloads(0..<100)
        #expect(expected.count == 19)
        #expect(expected.allSatisfy { $0.status == .paused })

        // No shutdown: a second manager opens the same file as after a crash.
        let reopened = try makeManager(in: directory, downloader: downloader)
        try await reopened.start()
        #expect(await reopened.waitingDownloads(0..<100) == expected)
        #expect(await reopened.globalOptions().contains(QueueOption(name: "max-download-result", value: "7")))
        await reopened.shutdown()
        await manager.shutdown()
        await downloader.shutdown()
    }

    @Test("a 404 becomes an error result with aria2's code 3")
    func notFound() async throws {
        try await withManager(content: Self.small) { fixture in
            let (manager, server, log) = (fixture.manager, fixture.server, fixture.events)
            let gid = try await manager.add(uris: [server.url("/status/404")], options: [], position: nil)
            try await log.wait(for: .failed(gid))
            let status = try await manager.status(of: gid.description)
            #expect(status.status == .error)
            #expect(status.errorCode == 3)
            #expect(status.errorMessage?.isEmpty == false)
            #expect(await manager.stoppedDownloads(0..<1).map(\.gid) == [gid])
            try await manager.removeResult(gid.description)
            #expect(await manager.globalStat().numStopped == 0)
            #expect(await manager.globalStat().numStoppedTotal == 1)
        }
    }

    @Test("a Metalink's piece digests and size ride as options of Downpour's own: a bad piece is fetched again")
    func pieceChecksums() async throws {
        let pieceLength = 64 * 1024
        let digests = stride(from: 0, to: Self.small.count, by: pieceLength).map {
            sha256Hex(Self.small[$0..<min(Self.small.count, $0 + pieceLength)])
        }
        let damaged = (2 * pieceLength + 10)..<(2 * pieceLength + 20)
        try await withManager(content: Self.small, faults: [.corrupt(damaged)]) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            let options = [
                QueueOption(name: "out", value: "p.bin"), QueueOption(name: "split", value: "1"),
                QueueOption(
                    name: "downpour-piece-checksums",
                    value: "sha-256:\(pieceLength):" + digests.joined(separator: ",")
                ),
                QueueOption(name: "downpour-length", value: "\(Self.small.count)"),
            ]
            let gid = try await manager.add(uris: [server.url("/p.bin")], options: options, position: nil)
            try await log.wait(for: .completed(gid))
            #expect(try sha256Hex(ofFileAt: directory.file("p.bin")) == sha256Hex(Self.small))
            let ranges = server.statistics().requests.filter { $0.method == "GET" }.map(\.requestedRange)
            #expect(ranges.last == (2 * pieceLength)..<(3 * pieceLength), "\(ranges)")
            // aria2's getOption shows aria2's options only.
            let answered = try await manager.options(of: gid.description)
            #expect(answered.contains(options[0]) && answered.contains(options[1]))
            #expect(!answered.contains { $0.name.hasPrefix("downpour-") })

            let wrongLength = [
                QueueOption(name: "out", value: "q.bin"), QueueOption(name: "downpour-length", value: "5"),
            ]
            let failing = try await manager.add(uris: [server.url("/q.bin")], options: wrongLength, position: nil)
            try await log.wait(for: .failed(failing))
            #expect(try await manager.status(of: failing.description).status == .error)
        }
    }

    @Test("options: unknown names are ignored, a bad value for a known one is refused and names it")
    func options() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let manager = try makeManager(in: directory, downloader: downloader)
        try await manager.start()
        let gid = try await manager.add(
            uris: ["http://127.0.0.1:9/x.bin"],
            options: [
                QueueOption(name: "pause", value: "true"), QueueOption(name: "bt-max-peers", value: "5"),
                QueueOption(name: "split", value: "2"), QueueOption(name: "gid", value: "00000000000000ab"),
            ],
            position: nil
        )
        #expect(gid == DownloadID(value: 0xab))
        #expect(try await manager.status(of: "00000000000000AB").status == .paused)
        // aria2's getOption: every option Downpour has, with the download's value, else the default; an unknown one
        // (BitTorrent's) is not answered, nor are `gid` and `pause`.
        let answered = try await manager.options(of: "00000000000000ab")
        #expect(answered.contains(QueueOption(name: "split", value: "2")))
        #expect(answered.contains { $0.name == "dir" })
        #expect(!answered.contains { ["bt-max-peers", "gid", "pause"].contains($0.name) })
        // aria2's keys Downpour has no setting for are answered with what it does, each once.
        for fixed in Aria2FixedOption.all where fixed.scope == .download {
            #expect(answered.filter { $0.name == fixed.name } == [QueueOption(name: fixed.name, value: fixed.value)])
        }
        #expect(answered.contains(QueueOption(name: "file-allocation", value: "falloc")))
        #expect(!answered.contains { $0.name == "disk-cache" })
        for (name, value) in [("split", "many"), ("gid", "xyz"), ("pause", "maybe"), ("out", "../escape")] {
            await #expect {
                _ = try await manager.add(
                    uris: ["http://127.0.0.1:9/y.bin"],
                    options: [QueueOption(name: name, value: value)],
                    position: nil
                )
            } throws: { error in
                let error = error as? QueueError
                return error?.reason == .invalidRequest && error?.option == name
            }
        }
        await #expect {
            _ = try await manager.add(
                uris: ["http://127.0.0.1:9/z.bin"],
                options: [QueueOption(name: "gid", value: "00000000000000ab")],
                position: nil
            )
        } throws: { error in
            (error as? QueueError)?.reason == .duplicateGID
        }
        await #expect {
            try await manager.changeGlobalOptions([QueueOption(name: "max-concurrent-downloads", value: "0")])
        } throws: { error in
            (error as? QueueError)?.option == "max-concurrent-downloads"
        }
        try await manager.changeGlobalOptions([
            QueueOption(name: "rpc-secret-thing", value: "x"), QueueOption(name: "split", value: "3"),
            QueueOption(name: "max-overall-download-limit", value: "1M"),
        ])
        let globals = await manager.globalOptions()
        #expect(globals.contains(QueueOption(name: "split", value: "3")))
        #expect(globals.contains(QueueOption(name: "dir", value: directory.path)))
        #expect(globals.contains(QueueOption(name: "max-overall-download-limit", value: "\(1024 * 1024)")))
        #expect(!globals.contains { $0.name == "rpc-secret-thing" })
        for fixed in Aria2FixedOption.all {
            #expect(globals.filter { $0.name == fixed.name }.map(\.value) == [fixed.currentValue])
        }
        #expect(globals.contains(QueueOption(name: "disk-cache", value: "0")))
        // The process's options nobody set are answered as aria2 answers them, with Downpour's truth.
        for name in ["conf-path", "no-conf", "netrc-path", "ca-certificate"] {
            #expect(globals.contains { $0.name == name }, "\(name)")
        }
        #expect(globals.contains { $0.name == "conf-path" && $0.value.hasSuffix("/downpour/downpour.conf") })
        #expect(Set(globals.map(\.name)).count == globals.count, "each key once")
        #expect(downloader.configuration.maximumOverallRate == Int64(1024 * 1024))
        await manager.shutdown()
        await downloader.shutdown()
    }

    @Test(
        "a new manager over the same file after shutdown keeps GIDs, order, paused and results, and finishes the interrupted download"
    )
    func restart() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let one = [QueueOption(name: "max-concurrent-downloads", value: "1")]
        try await RangeTestServer.withServer(content: Self.big, faults: [Self.throttle]) { server in
            let first = try makeManager(in: directory, downloader: downloader, options: one)
            let firstLog = EventLog(first.events)
            try await first.start()
            let failed = try await first.add(uris: [server.url("/status/404")], options: [], position: nil)
            try await firstLog.wait(for: .failed(failed))
            // Past 3 MiB the server holds the bodies: a.bin cannot finish before the shutdown lands.
            server.holdBodies(afterSending: server.statistics().bodyBytesSent + 3 * 1024 * 1024)
            let running = try await first.add(uris: [server.url("/a.bin")], options: Self.out("a.bin"), position: nil)
            let paused = try await first.add(
                uris: [server.url("/b.bin")],
                options: Self.out("b.bin") + [QueueOption(name: "pause", value: "true")],
                position: nil
            )
            let waiting = try await first.add(uris: [server.url("/c.bin")], options: Self.out("c.bin"), position: nil)
            try await Self.waitForBytes(first, running, 1024 * 1024)
            // Held, the download cannot finish before the shutdown lands.
            server.holdBodies()
            await first.shutdown()
            #expect(directory.contents() == ["a.bin.part", "a.bin.part.downpour"])
            await #expect {
                _ = try await first.add(uris: [server.url("/d.bin")], options: [], position: nil)
            } throws: { error in
                (error as? QueueError)?.reason == .storage
            }

            let stored = try QueueStore(directory: directory.stateDirectory).load()
            let interrupted = try #require(stored.active.first)
            #expect(interrupted.entry.gid == running)
            #expect(interrupted.path == directory.file("a.bin"))
            #expect(interrupted.completedLength >= 1024 * 1024)
            let requestsBefore = server.statistics().requests.count

            let second = try makeManager(in: directory, downloader: downloader, options: one)
            let secondLog = EventLog(second.events)
            try await second.start()
            #expect(await second.activeDownloads().map(\.gid) == [running])
            #expect(await second.waitingDownloads(0..<5).map(\.gid) == [paused, waiting])
            #expect(await second.waitingDownloads(0..<5).map(\.status) == [.paused, .waiting])
            let result = try await second.status(of: failed.description)
            #expect(result.status == .error && result.errorCode == 3)
            #expect(await second.globalStat().numStoppedTotal == 1)

            server.releaseBodies()
            try await secondLog.wait(for: .completed(running))
            try await secondLog.wait(for: .completed(waiting))
            #expect(try sha256Hex(ofFileAt: directory.file("a.bin")) == sha256Hex(Self.big))
            #expect(try sha256Hex(ofFileAt: directory.file("c.bin")) == sha256Hex(Self.big))
            let asked = requestedBytes(server, path: "/a.bin", from: requestsBefore, total: Self.big.count)
            let done = Int(interrupted.completedLength)
            #expect(asked <= Self.big.count - done + 1024 * 1024, "asked for \(asked) bytes, \(done) were done")
            #expect(try await second.status(of: paused.description).status == .paused)
            #expect(await second.stoppedDownloads(0..<5).map(\.gid) == [failed, running, waiting])
            await second.shutdown()
        }
        await downloader.shutdown()
    }
}

extension DownloadManagerTests {
    @Test("changing options of an active download restarts it keeping its bytes; max-download-limit does not restart")
    func changeOptionsRestarts() async throws {
        try await withManager(content: Self.big, faults: [Self.throttle]) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            // Past 3 MiB the server holds the bodies: the download cannot finish before the restart lands.
            server.holdBodies(afterSending: 3 * 1024 * 1024)
            let gid = try await manager.add(uris: [server.url("/o.bin")], options: Self.out("o.bin"), position: nil)
            try await Self.waitForBytes(manager, gid, 1024 * 1024)

            try await manager.changeOptions(gid.description, [QueueOption(name: "max-download-limit", value: "10M")])
            #expect(log.count(of: .started(gid)) == 1)

            // Held, the download cannot finish before the restart lands.
            server.holdBodies()
            try await manager.changeOptions(gid.description, [QueueOption(name: "split", value: "2")])
            try await log.wait(for: .started(gid), times: 2)
            #expect(log.count(of: .paused(gid)) == 0)
            #expect(try await manager.status(of: gid.description).status == .active)
            let done = try await manager.status(of: gid.description).completedLength
            let requestsBefore = server.statistics().requests.count
            server.releaseBodies()
            try await log.wait(for: .completed(gid))
            #expect(try sha256Hex(ofFileAt: directory.file("o.bin")) == sha256Hex(Self.big))
            let asked = requestedBytes(server, path: "/o.bin", from: requestsBefore, total: Self.big.count)
            #expect(asked <= Self.big.count - Int(done) + 1024 * 1024, "asked for \(asked) bytes, \(done) were done")
            // Written back as aria2 writes them: sizes in bytes.
            let answered = try await manager.options(of: gid.description)
            for option in [
                QueueOption(name: "out", value: "o.bin"), QueueOption(name: "max-download-limit", value: "10485760"),
                QueueOption(name: "split", value: "2"),
            ] {
                #expect(answered.contains(option), "\(option)")
            }
        }
    }
}

extension DownloadManagerTests {
    @Test("a change the store cannot write is not made")
    func storageFailure() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let manager = try makeManager(in: directory, downloader: downloader)
        try await manager.start()
        let paused = [QueueOption(name: "pause", value: "true")]
        let first = try await manager.add(uris: ["http://127.0.0.1:9/a.bin"], options: paused, position: nil)
        // Another connection makes every write of a queue row fail under the manager.
        try await DatabaseQueue(path: directory.stateDirectory + "/" + QueueStore.fileName).write { db in
            for event in ["INSERT", "UPDATE", "DELETE"] {
                try db.execute(
                    sql: "CREATE TRIGGER refuse\(event) BEFORE \(event) ON entry BEGIN SELECT RAISE(ABORT, 'no'); END"
                )
            }
        }
        await #expect {
            _ = try await manager.add(uris: ["http://127.0.0.1:9/b.bin"], options: paused, position: nil)
        } throws: { error in
            (error as? QueueError)?.reason == .storage
        }
        await #expect {
            _ = try await manager.remove(first.description, force: false)
        } throws: { error in
            (error as? QueueError)?.reason == .storage
        }
        #expect(await manager.waitingDownloads(0..<5).map(\.gid) == [first])
        #expect(try await manager.status(of: first.description).status == .paused)
        await manager.shutdown()
        await downloader.shutdown()
    }
}

@Suite("DownloadManager.add(batch:)")
struct DownloadManagerBatchTests {
    @Test("a batch: each its own result, the good ones stored together and in order, the bad one refused")
    func batch() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let paused = QueueOption(name: "pause", value: "true")
        let manager = try makeManager(in: directory, downloader: downloader)
        try await manager.start()
        let before = try await manager.add(uris: ["http://127.0.0.1:9/zero"], options: [paused], position: nil)
        let results = await manager.add(batch: [
            AddRequest(uris: ["http://127.0.0.1:9/a"], options: [paused], position: nil),
            AddRequest(
                uris: ["http://127.0.0.1:9/b"],
                options: [paused, QueueOption(name: "split", value: "x")],
                position: nil
            ),
            AddRequest(uris: [], options: [paused], position: nil),
            AddRequest(uris: ["http://127.0.0.1:9/c"], options: [paused], position: 0),
        ])
        try #require(results.count == 4)
        let a = try results[0].get()
        #expect(throws: QueueError.self) { try results[1].get() }
        if case .failure(let error) = results[1] { #expect(error.option == "split") }
        #expect(throws: QueueError.self) { try results[2].get() }
        let c = try results[3].get()
        let order = await manager.waitingDownloads(0..<10).map(\.gid)
        #expect(order == [c, before, a])
        await manager.shutdown()

        let reopened = try makeManager(in: directory, downloader: downloader)
        try await reopened.start()
        #expect(await reopened.waitingDownloads(0..<10).map(\.gid) == order)
        #expect(await reopened.waitingDownloads(0..<10).allSatisfy { $0.status == .paused })
        await reopened.shutdown()
        await downloader.shutdown()
    }
}

extension DownloadManagerTests {
    /// Runs `body` with a manager whose runs' records wait `recordDelay`, a second store on its database to read
    /// what was stored, and the GID of a download of the big file that has started and is held part way; then
    /// lets the download finish, checks the file and shuts down.
    static func withHeldRun(
        recordDelay: Duration,
        _ body: (DownloadManager, QueueStore, DownloadID, ScratchDirectory) async throws -> Void
    ) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.big, faults: [Self.throttle]) { server in
            let stored = try QueueStore(directory: directory.stateDirectory)
            let manager = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: directory.stateDirectory),
                defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
                logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() }),
                recordDelay: recordDelay
            )
            let log = EventLog(manager.events)
            try await manager.start()
            // Held part way: the run cannot end (and store its record that way) before `body` is done.
            server.holdBodies(afterSending: 1024 * 1024)
            let gid = try await manager.add(uris: [server.url("/big.bin")], options: Self.out("big.bin"), position: nil)
            try await body(manager, stored, gid, directory)
            server.releaseBodies()
            try await log.wait(for: .completed(gid))
            #expect(try sha256Hex(ofFileAt: directory.file("big.bin")) == sha256Hex(Self.big))
            await manager.shutdown()
        }
        await downloader.shutdown()
    }

    @Test("a run's record (path, length) waits for the next change; a change refused then does not take it back")
    func recordWaitsForTheNextChange() async throws {
        // A delay no test reaches: only a change stores the record.
        try await Self.withHeldRun(recordDelay: .seconds(3600)) { manager, stored, gid, directory in
            try await Self.waitForBytes(manager, gid, 512 * 1024)
            // Running, so its record is made, and not stored yet.
            let before = try #require(try stored.load().active.first)
            #expect(before.entry.gid == gid)
            #expect(before.path == nil)
            #expect(before.totalLength == 0)

            // An active download cannot be unpaused: the change is refused and taken back, the record is not.
            await #expect(throws: QueueError.self) { _ = try await manager.unpause(gid.description) }
            let after = try #require(try stored.load().active.first)
            #expect(after.path == directory.file("big.bin"))
            #expect(after.totalLength == Int64(Self.big.count))
        }
    }

    @Test("with no change to go with, a run's record is stored on its own once the delay is over")
    func recordStoredOnItsOwn() async throws {
        try await Self.withHeldRun(recordDelay: .milliseconds(1)) { manager, stored, gid, directory in
            try await waitUntil("the record is stored") {
                let active = try stored.load().active.first
                return active?.path == directory.file("big.bin") && active?.totalLength == Int64(Self.big.count)
            }
            #expect(try await manager.status(of: gid.description).status == .active)
        }
    }

    /// A change that stops an active download's run.
    enum StoppingChange: String, CaseIterable, CustomTestStringConvertible {
        case pause, pauseAll, restartingOptionChange

        var testDescription: String { self.rawValue }
    }

    /// Where a run past its point of no return is held: before its file is synced and renamed, or after its
    /// download has returned and before the manager hears of it.
    enum FinishingHold: String, CaseIterable, CustomTestStringConvertible {
        case beforeRename, beforeTheQueueHears

        var testDescription: String { self.rawValue }
    }

    @Test(
        "a pause, pause all or restarting option change past a run's point of no return waits, is refused, and it completes",
        arguments: FinishingHold.allCases,
        StoppingChange.allCases
    )
    func stoppingChangeOfAFinishingRun(held: FinishingHold, change: StoppingChange) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let record = LogRecord()
        let (holding, holdingSignal) = AsyncStream<DownloadID>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let hold: @Sendable (DownloadID) async -> Void = { gid in
            holdingSignal.yield(gid)
            for await _ in release { break }
        }
        try await RangeTestServer.withServer(content: Self.small) { server in
            let manager = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: directory.stateDirectory),
                defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
                logger: record.logger,
                recordDelay: .milliseconds(100),
                runFinishing: held == .beforeRename ? hold : nil,
                runEnding: held == .beforeTheQueueHears ? hold : nil
            )
            let log = EventLog(manager.events)
            try await manager.start()
            let gid = try await manager.add(
                uris: [server.url("/small.bin")],
                options: Self.out("small.bin"),
                position: nil
            )
            var holds = holding.makeAsyncIterator()
            #expect(await holds.next() == gid)
            switch held {
            case .beforeRename:
                #expect(!FileManager.default.fileExists(atPath: directory.file("small.bin")))
            case .beforeTheQueueHears:
                // The file is complete under its name; the queue has not heard yet and shows it active.
                #expect(try sha256Hex(ofFileAt: directory.file("small.bin")) == sha256Hex(Self.small))
                #expect(try await manager.status(of: gid.description).status == .active)
            }

            let answered = NIOLockedValueBox(false)
            let request = Task { () -> QueueError? in
                defer { answered.withLockedValue { $0 = true } }
                do throws(QueueError) {
                    switch change {
                    case .pause: _ = try await manager.pause(gid.description, force: false)
                    case .pauseAll: try await manager.pauseAll(force: false)
                    case .restartingOptionChange:
                        try await manager.changeOptions(gid.description, [QueueOption(name: "split", value: "2")])
                    }
                    return nil
                } catch {
                    return error
                }
            }
            try await waitUntil("the change waits or answers") {
                record.contains("waits for the run's end: its file is being finished")
                    || answered.withLockedValue { $0 }
            }
            // It must wait: an answer now would stop a download that completes a moment later.
            #expect(!answered.withLockedValue { $0 })
            releaseSignal.yield()
            let refusal = await request.value
            switch change {
            case .pause: #expect(refusal?.reason == .cannotPause)
            case .pauseAll: #expect(refusal == nil)  // Pausing all of nothing pauses nothing.
            case .restartingOptionChange: #expect(refusal?.reason == .cannotChangeOption)
            }
            try await log.wait(for: .completed(gid))
            #expect(try await manager.status(of: gid.description).status == .complete)
            #expect(try sha256Hex(ofFileAt: directory.file("small.bin")) == sha256Hex(Self.small))
            #expect(log.count(of: .paused(gid)) == 0)
            #expect(log.count(of: .started(gid)) == 1)
            await manager.shutdown()
        }
        await downloader.shutdown()
    }

    @Test(
        "killed between the rename and the stored completion: run again, the download takes its finished file as its own",
        arguments: [false, true]
    )
    func aRunKilledAfterItsRenameCompletesOnRestart(large: Bool) async throws {
        let content = large ? makeTestContent(count: 3 * 1024 * 1024 + 11, seed: 37) : Self.small
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let (holding, holdingSignal) = AsyncStream<DownloadID>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        try await RangeTestServer.withServer(content: content) { server in
            let first = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: directory.stateDirectory),
                defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
                logger: Logger(label: "first", factory: { _ in SwiftLogNoOpLogHandler() }),
                recordDelay: .milliseconds(100),
                runEnding: { gid in
                    holdingSignal.yield(gid)
                    for await _ in release { break }
                }
            )
            try await first.start()
            let gid = try await first.add(uris: [server.url("/f.bin")], options: Self.out("f.bin"), position: nil)
            var holds = holding.makeAsyncIterator()
            #expect(await holds.next() == gid)
            // The file is complete under its name; the queue has not stored that. What kill -9 leaves now is the
            // store as it is on disk: a copy of it is what the next daemon finds.
            #expect(try sha256Hex(ofFileAt: directory.file("f.bin")) == sha256Hex(content))
            let restarted = try copyStoreAsKilled(directory)
            let requestsBefore = server.statistics().requests.count
            let second = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: restarted),
                defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
                logger: Logger(label: "second", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let log = EventLog(second.events)
            try await second.start()
            try await log.wait(for: .completed(gid))
            let status = try await second.status(of: gid.description)
            #expect(status.status == .complete, "\(status)")
            #expect(try sha256Hex(ofFileAt: directory.file("f.bin")) == sha256Hex(content))
            // Only the probe was asked for again, not the file.
            #expect(server.statistics().requests.count - requestsBefore == 1)
            #expect(!directory.contents().contains { $0.hasSuffix(".part") || $0.hasPrefix("f.1") })
            await second.shutdown()
            releaseSignal.finish()
            await first.shutdown()
        }
        await downloader.shutdown()
    }

    @Test("a file in the way without the download's mark stays in the way: an error, the file untouched")
    func anUnmarkedFileStaysInTheWay() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let theirs = Array("someone else's file".utf8)
        FileManager.default.createFile(atPath: directory.file("f.bin"), contents: Data(theirs))
        try await RangeTestServer.withServer(content: Self.small) { server in
            let manager = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: directory.stateDirectory),
                defaults: .init(directory: directory.path, configuration: managerTestConfiguration()),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let log = EventLog(manager.events)
            try await manager.start()
            let gid = try await manager.add(uris: [server.url("/f.bin")], options: Self.out("f.bin"), position: nil)
            try await log.wait(for: .failed(gid))
            #expect(try await manager.status(of: gid.description).status == .error)
            #expect(FileManager.default.contents(atPath: directory.file("f.bin")) == Data(theirs))
            await manager.shutdown()
        }
        await downloader.shutdown()
    }
}
