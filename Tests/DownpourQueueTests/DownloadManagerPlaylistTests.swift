import Downpour
import DownpourTestSupport
import Foundation
import Logging
import Testing

@testable import DownpourQueue

/// An HLS playlist added to the queue by its URL: one download whose file is the video (and, with a separate audio
/// rendition, a second file), against ``RangeTestServer``. The tests wait for events and read the server's log.
@Suite("DownloadManager: HLS playlists", .timeLimit(.minutes(10)))
struct DownloadManagerPlaylistTests {
    /// The daemon's own defaults for following documents (``DownloadManager/Defaults/configuration``), over the
    /// manager tests' timings.
    static var configuration: DownloadConfiguration {
        var configuration = managerTestConfiguration()
        configuration.followsMetalink = DownloadManager.Defaults.configuration.followsMetalink
        configuration.followsPlaylists = DownloadManager.Defaults.configuration.followsPlaylists
        return configuration
    }

    static func gets(_ server: RangeTestServer, _ path: String) -> Int {
        server.statistics().requests.filter { $0.method == "GET" && $0.uri == path }.count
    }

    static func bytes(at path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test("a multivariant playlist is one download: the best variant's video and its audio, files[0] and files[1]")
    func videoAndAudio() async throws {
        try await withManager(content: [], configuration: Self.configuration) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            let low = HLSTestStream.serveSegments(server, prefix: "low", count: 3, seed: 10)
            let high = HLSTestStream.serveSegments(server, prefix: "high", count: 4, seed: 20)
            let audio = HLSTestStream.serveSegments(server, prefix: "aud", count: 4, packets: 10, seed: 30)
            let master = HLSTestStream.multivariantPlaylist(variants: ["low.m3u8", "high.m3u8"], audio: "aud.m3u8")
            server.serve("/show.m3u8", .init(text: master, contentType: HLSTestStream.mpegURL))

            let gid = try await manager.add(uris: [server.url("/show.m3u8")], options: [], position: nil)
            try await log.wait(for: .completed(gid))

            let video = high.flatMap { $0 }
            let sound = audio.flatMap { $0 }
            #expect(try Self.bytes(at: directory.file("show.ts")) == video)
            #expect(try Self.bytes(at: directory.file("show.audio.ts")) == sound)
            #expect(directory.contents() == ["show.audio.ts", "show.ts"])
            let status = try await manager.status(of: gid.description)
            #expect(status.status == .complete && status.errorCode == 0)
            #expect(status.path == directory.file("show.ts"))
            #expect(status.audio == AudioFile(path: directory.file("show.audio.ts"), length: Int64(sound.count)))
            #expect(status.totalLength == Int64(video.count + sound.count))
            #expect(status.completedLength == status.totalLength)
            // Each segment once; the other variant not at all.
            for index in 0..<4 {
                #expect(Self.gets(server, "/high-\(index).ts") == 1)
                #expect(Self.gets(server, "/aud-\(index).ts") == 1)
            }
            #expect((0..<low.count).allSatisfy { Self.gets(server, "/low-\($0).ts") == 0 })
            #expect(log.count(of: .started(gid)) == 1)
        }
    }

    @Test("media=file saves the playlist itself, as a file")
    func savedAsFile() async throws {
        try await withManager(content: [], configuration: Self.configuration) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            HLSTestStream.serveSegments(server, prefix: "v", count: 2)
            let gid = try await manager.add(
                uris: [server.url("/v.m3u8")],
                options: [QueueOption(name: "media", value: "file")],
                position: nil
            )
            try await log.wait(for: .completed(gid))
            #expect(directory.contents() == ["v.m3u8"])
            #expect(Self.gets(server, "/v-0.ts") == 0)
            #expect(try await manager.status(of: gid.description).audio == nil)
        }
    }

    @Test("pause while the segments come, unpause: the segments on disk are not fetched again, the video is whole")
    func pauseThenUnpause() async throws {
        try await withManager(content: [], configuration: Self.configuration) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            let segments = HLSTestStream.serveSegments(server, prefix: "p", count: 6, packets: 60)
            let playlist = HLSTestStream.mediaPlaylist((0..<6).map { "p-\($0).ts" })
            // The playlist and three whole segments go out, then nothing more until released.
            let firstThree = segments[0..<3].reduce(0) { $0 + $1.count }
            server.holdBodies(afterSending: playlist.utf8.count + firstThree + 100)
            // One segment at a time: the three are whole on disk when the bodies stop.
            let gid = try await manager.add(
                uris: [server.url("/p.m3u8")],
                options: [QueueOption(name: "split", value: "1")],
                position: nil
            )
            try await waitUntil("three segments on disk") {
                try await manager.status(of: gid.description).completedLength >= Int64(firstThree)
            }
            let running = try await manager.status(of: gid.description)
            #expect(running.path == directory.file("p.ts"))
            #expect(running.status == .active)
            #expect(try await manager.pause(gid.description, force: false) == gid)
            try await log.wait(for: .paused(gid))
            // The run ends: the segment in flight is cancelled (the server's keep-alive connections may stay).
            try await waitUntil("the run ended") { await manager.supervisor[gid] == nil }
            let paused = try await manager.status(of: gid.description)
            #expect(paused.status == .paused)
            #expect(paused.path == directory.file("p.ts"))
            #expect(paused.completedLength >= Int64(firstThree))
            #expect(!directory.contents().contains("p.ts"))
            #expect(FileManager.default.fileExists(atPath: directory.file("p.ts.hls/video/segment-2")))

            server.releaseBodies()
            #expect(try await manager.unpause(gid.description) == gid)
            try await log.wait(for: .completed(gid))
            #expect(try Self.bytes(at: directory.file("p.ts")) == segments.flatMap { $0 })
            #expect(directory.contents() == ["p.ts"])
            // The three whole ones once; the one cut by the pause twice at most; the rest once.
            #expect((0..<3).map { Self.gets(server, "/p-\($0).ts") } == [1, 1, 1])
            #expect(Self.gets(server, "/p-3.ts") <= 2)
            #expect((4..<6).map { Self.gets(server, "/p-\($0).ts") } == [1, 1])
            #expect(Self.gets(server, "/p.m3u8") == 2)
            let done = try await manager.status(of: gid.description)
            #expect(done.status == .complete && done.path == directory.file("p.ts") && done.audio == nil)
        }
    }

    @Test("paused, a video with its own audio still shows both files (files[0] and files[1]), also once stored")
    func pausedKeepsTheAudio() async throws {
        try await withManager(content: [], configuration: Self.configuration) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            let video = HLSTestStream.serveSegments(server, prefix: "vid", count: 3, seed: 40)
            let audio = HLSTestStream.serveSegments(server, prefix: "snd", count: 3, packets: 10, seed: 50)
            let master = HLSTestStream.multivariantPlaylist(variants: ["vid.m3u8"], audio: "snd.m3u8")
            server.serve("/m.m3u8", .init(text: master, contentType: HLSTestStream.mpegURL))
            // The three playlists go out, then nothing more until released: no segment can be whole.
            let playlists = [
                master, HLSTestStream.mediaPlaylist((0..<3).map { "vid-\($0).ts" }),
                HLSTestStream.mediaPlaylist((0..<3).map { "snd-\($0).ts" }),
            ]
            server.holdBodies(afterSending: HLSTestStream.length(of: playlists))
            let gid = try await manager.add(uris: [server.url("/m.m3u8")], options: [], position: nil)
            try await waitUntil("the outputs named") {
                try await manager.status(of: gid.description).audio != nil
            }
            #expect(try await manager.pause(gid.description, force: false) == gid)
            try await log.wait(for: .paused(gid))
            try await waitUntil("the run ended") { await manager.supervisor[gid] == nil }
            let paused = try await manager.status(of: gid.description)
            #expect(paused.status == .paused)
            #expect(paused.path == directory.file("m.ts"))
            #expect(paused.audio?.path == directory.file("m.audio.ts"), "\(paused)")
            // What a restarted daemon finds.
            let stored = try QueueStore(directory: try copyStoreAsKilled(directory)).load()
            let entry = try #require(stored.waiting.first { $0.0.entry.gid == gid }?.0)
            #expect(entry.audioPath == directory.file("m.audio.ts"))

            server.releaseBodies()
            #expect(try await manager.unpause(gid.description) == gid)
            try await log.wait(for: .completed(gid))
            let done = try await manager.status(of: gid.description)
            #expect(done.audio == AudioFile(path: directory.file("m.audio.ts"), length: Int64(audio.joined().count)))
            #expect(try Self.bytes(at: directory.file("m.ts")) == video.flatMap { $0 })
        }
    }

    @Test("remove while the segments come: a removed result, and nothing of it left on disk")
    func removeActive() async throws {
        try await withManager(content: [], configuration: Self.configuration) { fixture in
            let (manager, server, log, directory) = (fixture.manager, fixture.server, fixture.events, fixture.directory)
            let segments = HLSTestStream.serveSegments(server, prefix: "r", count: 5, packets: 60)
            let playlist = HLSTestStream.mediaPlaylist((0..<5).map { "r-\($0).ts" })
            server.holdBodies(afterSending: playlist.utf8.count + segments[0].count + segments[1].count + 100)
            let gid = try await manager.add(
                uris: [server.url("/r.m3u8")],
                options: [QueueOption(name: "split", value: "1")],
                position: nil
            )
            try await waitUntil("a segment on disk") {
                FileManager.default.fileExists(atPath: directory.file("r.ts.hls/video/segment-1"))
            }
            #expect(try await manager.remove(gid.description, force: false) == gid)
            try await log.wait(for: .stopped(gid))
            #expect(try await manager.status(of: gid.description).status == .removed)
            try await waitUntil("nothing left: \(directory.contents())") { directory.contents().isEmpty }
            server.releaseBodies()
        }
    }

    @Test("killed between the video's rename and the stored completion: run again, the video is taken as it is")
    func killedAfterTheVideoWasNamed() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        let (holding, holdingSignal) = AsyncStream<DownloadID>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let defaults = DownloadManager.Defaults(directory: directory.path, configuration: Self.configuration)
        try await RangeTestServer.withServer(content: []) { server in
            let segments = HLSTestStream.serveSegments(server, prefix: "k", count: 3)
            let first = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: directory.stateDirectory),
                defaults: defaults,
                logger: Logger(label: "first", factory: { _ in SwiftLogNoOpLogHandler() }),
                recordDelay: .milliseconds(100),
                runEnding: { gid in
                    holdingSignal.yield(gid)
                    for await _ in release { break }
                }
            )
            try await first.start()
            let gid = try await first.add(uris: [server.url("/k.m3u8")], options: [], position: nil)
            var holds = holding.makeAsyncIterator()
            #expect(await holds.next() == gid)
            #expect(try Self.bytes(at: directory.file("k.ts")) == segments.flatMap { $0 })
            // What kill -9 leaves now: the store as it is on disk, which the next daemon finds.
            let restarted = try copyStoreAsKilled(directory)
            let requestsBefore = server.statistics().requests.count
            let second = DownloadManager(
                downloader: downloader,
                store: try QueueStore(directory: restarted),
                defaults: defaults,
                logger: Logger(label: "second", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let log = EventLog(second.events)
            try await second.start()
            try await log.wait(for: .completed(gid))
            let status = try await second.status(of: gid.description)
            #expect(status.status == .complete && status.path == directory.file("k.ts"), "\(status)")
            #expect(status.totalLength == Int64(segments.flatMap { $0 }.count))
            #expect(try Self.bytes(at: directory.file("k.ts")) == segments.flatMap { $0 })
            // Nothing was asked for again, not even the playlist.
            #expect(server.statistics().requests.count == requestsBefore)
            #expect(!directory.contents().contains { $0.hasSuffix(".part") || $0.hasPrefix("k.1") })
            await second.shutdown()
            releaseSignal.finish()
            await first.shutdown()
        }
        await downloader.shutdown()
    }
}
