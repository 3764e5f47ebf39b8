import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import Testing

/// aria2's `addUri` of a Metalink URL: the document's download completes, one download per file it lists joins
/// the queue, and the two name each other (`followedBy`, `following`).
@Suite("DownloadManager: Metalink URLs", .timeLimit(.minutes(10)))
struct DownloadManagerMetalinkTests {
    static let content = makeTestContent(count: 200 * 1024 + 9, seed: 33)

    static func document(url: String) -> [UInt8] {
        Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="linked.bin">
                <size>\(content.count)</size>
                <hash type="sha-256">\(sha256Hex(content))</hash>
                <url priority="1">\(url)</url>
              </file>
            </metalink>
            """.utf8
        )
    }

    @Test("addUri of a .meta4 URL: its file is downloaded, the GIDs name each other, also after a restart")
    func followed() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.content) { files in
            try await RangeTestServer.withServer(content: Self.document(url: files.url("/linked.bin"))) { server in
                let manager = try makeManager(
                    in: directory,
                    downloader: downloader,
                    options: [QueueOption(name: "follow-metalink", value: "true")]
                )
                let log = EventLog(manager.events)
                try await manager.start()
                let gid = try await manager.add(uris: [server.url("/release.meta4")], options: [], position: nil)
                try await log.wait(for: .completed(gid))
                let status = try await manager.status(of: gid.description)
                #expect(status.status == .complete)
                // As aria2 shows a metadata download: the document's length, all of it done.
                let length = Int64(Self.document(url: files.url("/linked.bin")).count)
                #expect(status.totalLength == length && status.completedLength == length)
                let followers = status.followedBy
                try #require(followers.count == 1)
                let file = followers[0]
                try await log.wait(for: .completed(file))
                #expect(try await manager.status(of: file.description).following == gid)
                #expect(try sha256Hex(ofFileAt: directory.file("linked.bin")) == sha256Hex(Self.content))
                #expect(!FileManager.default.fileExists(atPath: directory.file("release.meta4")))
                // aria2's notifications: the document's download completes, then the file's starts.
                let completed = try #require(log.events.firstIndex(of: .completed(gid)))
                let started = try #require(log.events.firstIndex(of: .started(file)))
                #expect(completed < started, "\(log.events)")
                // The file is added as addMetalink adds it: its name and digests.
                let options = try await manager.options(of: file.description)
                #expect(options.contains(QueueOption(name: "out", value: "linked.bin")), "\(options)")
                #expect(options.contains { $0.name == "checksum" }, "\(options)")
                await manager.shutdown()

                let reopened = try makeManager(in: directory, downloader: downloader)
                try await reopened.start()
                #expect(try await reopened.status(of: gid.description).followedBy == [file])
                #expect(try await reopened.status(of: file.description).following == gid)
                #expect(try await reopened.status(of: file.description).status == .complete)
                await reopened.shutdown()
            }
        }
        await downloader.shutdown()
    }

    @Test("follow-metalink=false: the document is saved as a file, and nothing is added")
    func notFollowed() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let downloader = makeTestDownloader()
        try await RangeTestServer.withServer(content: Self.content) { files in
            let document = Self.document(url: files.url("/linked.bin"))
            try await RangeTestServer.withServer(content: document) { server in
                let manager = try makeManager(
                    in: directory,
                    downloader: downloader,
                    options: [QueueOption(name: "follow-metalink", value: "true")]
                )
                let log = EventLog(manager.events)
                try await manager.start()
                let gid = try await manager.add(
                    uris: [server.url("/release.meta4")],
                    options: [QueueOption(name: "follow-metalink", value: "false")],
                    position: nil
                )
                try await log.wait(for: .completed(gid))
                let status = try await manager.status(of: gid.description)
                #expect(status.followedBy.isEmpty)
                #expect(try sha256Hex(ofFileAt: directory.file("release.meta4")) == sha256Hex(document))
                #expect(await manager.globalStat().numWaiting == 0)
                #expect(await manager.activeDownloads().isEmpty)
                #expect(files.statistics().requests.isEmpty)
                await manager.shutdown()
            }
        }
        await downloader.shutdown()
    }

    @Test("the manager's defaults follow Metalinks, as aria2 does")
    func followsByDefault() {
        #expect(DownloadManager.Defaults().configuration.followsMetalink)
    }
}
