import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DownpourFleet

/// An HLS playlist in a fleet: one download, as in a single daemon. The node that claims it fetches the segments
/// into `NAME.ts.hls/` beside the output, under its lease's write permit, and assembles them into `NAME.ts`; a node
/// that stops gives the download back with the whole segments on disk, and the node that takes it over fetches only
/// what is missing. The nodes are those of ``FleetFaultTests`` (one connection a download, a client each); the
/// playlist and its segments come from the test server, whose log tells how often each was fetched.
@Suite(.enabled(if: postgresWanted, "PostgreSQL is not installed (apt-get install postgresql)"))
struct FleetHLSTests {
    /// The GETs the server received for `path`.
    static func gets(_ server: RangeTestServer, _ path: String) -> Int {
        server.statistics().requests.filter { $0.method == "GET" && $0.uri == path }.count
    }

    static func bytes(at path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Whether `bytes` are MPEG-TS that plays as it is: whole 188-byte packets, each starting with the sync byte.
    static func isTransportStream(_ bytes: [UInt8]) -> Bool {
        !bytes.isEmpty && bytes.count % 188 == 0
            && stride(from: 0, to: bytes.count, by: 188).allSatisfy { bytes[$0] == 0x47 }
    }

    /// What is in the fleet's directory besides the nodes' own stores (`nodeN.sqlite` and its companions).
    static func files(in fleet: FleetFaultTests.Fleet) -> [String] {
        fleet.directory.contents().filter { !$0.hasPrefix("node") }
    }

    /// The sequence numbers of the video's segments that are whole in its work directory (`VIDEO.hls/video/`):
    /// a segment is there under its final name only once it is whole.
    static func wholeSegments(of video: String, in fleet: FleetFaultTests.Fleet) -> Set<Int> {
        let names =
            (try? FileManager.default.contentsOfDirectory(atPath: fleet.directory.file(video + ".hls/video"))) ?? []
        return Set(names.compactMap { $0.hasPrefix("segment-") ? Int($0.dropFirst("segment-".count)) : nil })
    }

    /// A playlist added to a fleet of two nodes is one download: the node that claims it fetches each segment once
    /// and writes them, one after another, as the video, and its audio rendition as a file beside it; every node
    /// shows both files (files[0] and files[1]) while it runs and once it is complete; the fleet records one
    /// completion, and nothing but the two files is left (no saved playlist, no work directory, no `.part`).
    @Test func aPlaylistIsOneDownloadWhoseFilesAreTheVideoAndItsAudio() async throws {
        let server = try await RangeTestServer.start(content: [])
        defer { Task { try? await server.shutdown() } }
        let segments = HLSTestStream.serveSegments(server, prefix: "vid", count: 4, seed: 60)
        let sounds = HLSTestStream.serveSegments(server, prefix: "aud", count: 4, packets: 10, seed: 70)
        let master = HLSTestStream.multivariantPlaylist(variants: ["vid.m3u8"], audio: "aud.m3u8")
        server.serve("/v.m3u8", .init(text: master, contentType: HLSTestStream.mpegURL))
        let video = segments.flatMap { $0 }
        let audio = sounds.flatMap { $0 }
        // The three playlists go out, then nothing more until released: the run is named, and cannot end.
        let playlists = [
            master, HLSTestStream.mediaPlaylist((0..<4).map { "vid-\($0).ts" }),
            HLSTestStream.mediaPlaylist((0..<4).map { "aud-\($0).ts" }),
        ]
        server.holdBodies(afterSending: HLSTestStream.length(of: playlists))
        try await FleetFaultTests.withFleet(leaseDuration: .seconds(3600)) { fleet in
            let members = [
                try fleet.node("node0", url: fleet.server.url, capacity: 1),
                try fleet.node("node1", url: fleet.server.url, capacity: 1),
            ]
            for member in members { try await member.node.start() }
            let gid = try await members[0].node.add(uris: [server.url("/v.m3u8")], options: [], position: nil)
            let audioPath = fleet.directory.file("v.audio.ts")
            // The node that runs it records both names; the other shows them from the database.
            try await fleet.waitForRows("the audio's name recorded") { rows in
                rows.count == 1 && rows[0].status == .active && rows[0].audio?.path == audioPath
            }
            let runner = try #require(try await fleet.rows().first?.node)
            let other = try #require(members.first { $0.node.name != runner })
            let running = try await other.node.status(of: gid.description)
            #expect(running.path == fleet.directory.file("v.ts") && running.audio?.path == audioPath, "\(running)")
            server.releaseBodies()
            try await fleet.waitForRows("the playlist complete") { rows in
                rows.count == 1 && rows[0].status == .complete
            }
            try await waitUntil("the completion told to a node's hooks") {
                members.contains { !$0.completions.withLockedValue { $0 }.isEmpty }
            }

            // The video, whole and playable, under the name a single daemon gives it; its audio beside it.
            let written = try Self.bytes(at: fleet.directory.file("v.ts"))
            #expect(written == video)
            #expect(Self.isTransportStream(written))
            #expect(try Self.bytes(at: audioPath) == audio)
            #expect(Self.files(in: fleet) == ["v.audio.ts", "v.ts"])
            // Each segment fetched once, by the one node that ran it.
            for index in segments.indices {
                #expect(Self.gets(server, "/vid-\(index).ts") == 1, "vid-\(index).ts")
                #expect(Self.gets(server, "/aud-\(index).ts") == 1, "aud-\(index).ts")
            }

            // One download, completed once, recorded with the video's name, both files' length, and the audio.
            let completions = members.flatMap { $0.completions.withLockedValue { $0 } }
            #expect(completions == [gid], "completions: \(completions)")
            let row = try #require(try await fleet.rows().first)
            #expect(row.gid == gid)
            #expect(row.path == fleet.directory.file("v.ts"))
            #expect(row.totalLength == Int64(video.count + audio.count))
            #expect(row.completedLength == row.totalLength)
            #expect(row.audio == AudioFile(path: audioPath, length: Int64(audio.count)))
            // Either node tells it as complete, with the video and the audio as its files.
            for member in members {
                let status = try await member.node.status(of: gid.description)
                #expect(status.status == .complete && status.errorCode == 0, "\(member.node.name): \(status)")
                #expect(status.path == fleet.directory.file("v.ts"), "\(member.node.name)")
                #expect(status.audio == row.audio, "\(member.node.name)")
                #expect(status.totalLength == row.totalLength, "\(member.node.name)")
                #expect(status.completedLength == status.totalLength, "\(member.node.name)")
            }
        }
    }

    /// The node fetching a playlist's segments stops halfway: it gives the download back with the whole segments
    /// in the work directory, and the other node takes it over and fetches only the segments that were not whole.
    /// The video is the segments one after another, completed once (by the second node), and nothing else is left.
    @Test func aNodeThatStopsMidSegmentsLeavesTheRestToAnother() async throws {
        let server = try await RangeTestServer.start(content: [])
        defer { Task { try? await server.shutdown() } }
        let segments = HLSTestStream.serveSegments(server, prefix: "p", count: 6, packets: 60)
        let video = segments.flatMap { $0 }
        let playlist = HLSTestStream.mediaPlaylist((0..<6).map { "p-\($0).ts" })
        // The playlist and three whole segments go out, then nothing more until released.
        let firstThree = segments[0..<3].reduce(0) { $0 + $1.count }
        server.holdBodies(afterSending: playlist.utf8.count + firstThree + 100)
        try await FleetFaultTests.withFleet(leaseDuration: .seconds(3600)) { fleet in
            let first = try fleet.node("node0", url: fleet.server.url, capacity: 1)
            try await first.node.start()
            // One segment at a time: the first three are whole on disk when the bodies stop.
            let gid = try await first.node.add(
                uris: [server.url("/p.m3u8")],
                options: [QueueOption(name: "split", value: "1")],
                position: nil
            )
            try await fleet.waitForRows("active on node0") { rows in
                rows.count == 1 && rows[0].status == .active && rows[0].node == "node0"
            }
            try await waitUntil("three segments whole on disk") {
                Self.wholeSegments(of: "p.ts", in: fleet).isSuperset(of: [0, 1, 2])
            }
            #expect(!FileManager.default.fileExists(atPath: fleet.directory.file("p.ts")))
            // The other node waits with room for one: it claims the download once node0 gives it back.
            let second = try fleet.node("node1", url: fleet.server.url, capacity: 1)
            try await second.node.start()

            await first.node.shutdown()
            // node0's run is over and the bodies are still held (node1 cannot have the playlist yet): what is in the
            // work directory now is what node0 left.
            let left = Self.wholeSegments(of: "p.ts", in: fleet)
            #expect(left.isSuperset(of: [0, 1, 2]) && left.count < segments.count, "whole at the stop: \(left)")
            #expect(try await fleet.rows().first?.node != "node0")

            server.releaseBodies()
            try await fleet.waitForRows("the playlist complete") { rows in
                rows.count == 1 && rows[0].status == .complete
            }
            try await waitUntil("the completion told to node1's hooks") {
                !second.completions.withLockedValue { $0 }.isEmpty
            }

            let written = try Self.bytes(at: fleet.directory.file("p.ts"))
            #expect(written == video)
            #expect(Self.isTransportStream(written))
            #expect(Self.files(in: fleet) == ["p.ts"])
            // The segments whole at the stop once; the one cut by the stop twice at most; none fetched by both
            // nodes but that one.
            let fetched = segments.indices.map { Self.gets(server, "/p-\($0).ts") }
            for index in left.sorted() {
                #expect(fetched[index] == 1, "p-\(index).ts, whole at the stop: \(fetched)")
            }
            #expect(fetched.allSatisfy { (1...2).contains($0) }, "\(fetched)")
            #expect(fetched.filter { $0 == 2 }.count <= 1, "\(fetched)")
            // Each run read the playlist once.
            #expect(Self.gets(server, "/p.m3u8") == 2)

            // Completed once, by node1; node0's hooks were told of no end.
            #expect(first.completions.withLockedValue { $0 }.isEmpty)
            #expect(second.completions.withLockedValue { $0 } == [gid])
            let row = try #require(try await fleet.rows().first)
            #expect(row.path == fleet.directory.file("p.ts"))
            #expect(row.totalLength == Int64(video.count))
            let status = try await second.node.status(of: gid.description)
            #expect(status.status == .complete && status.errorCode == 0, "\(status)")
            #expect(status.path == fleet.directory.file("p.ts"))
            #expect(status.completedLength == Int64(video.count))
        }
    }

    /// The node fetching a playlist's segments is cut off from the database: once its lease may have run out it
    /// stops fetching and writes nothing more (its write permit is withdrawn), leaving the whole segments; the other
    /// node takes the download over when the lease runs out in the database, fetches only what is missing and writes
    /// the video. Back, the first ends nothing.
    @Test func aNodeCutOffMidSegmentsStopsAndAnotherFinishesFromTheSegmentsLeft() async throws {
        let server = try await RangeTestServer.start(content: [])
        defer { Task { try? await server.shutdown() } }
        let segments = HLSTestStream.serveSegments(server, prefix: "c", count: 6, packets: 60)
        let video = segments.flatMap { $0 }
        let playlist = HLSTestStream.mediaPlaylist((0..<6).map { "c-\($0).ts" })
        let firstThree = segments[0..<3].reduce(0) { $0 + $1.count }
        server.holdBodies(afterSending: playlist.utf8.count + firstThree + 100)
        try await FleetFaultTests.withFleet(leaseDuration: .seconds(6)) { fleet in
            let route = try await fleet.server.cuttableRoute()
            let cut = try fleet.node("node0", url: route.url, capacity: 1)
            try await cut.node.start()
            let gid = try await cut.node.add(
                uris: [server.url("/c.m3u8")],
                options: [QueueOption(name: "split", value: "1")],
                position: nil
            )
            try await fleet.waitForRows("active on node0") { rows in
                rows.count == 1 && rows[0].status == .active && rows[0].node == "node0"
            }
            try await waitUntil("three segments whole on disk") {
                Self.wholeSegments(of: "c.ts", in: fleet).isSuperset(of: [0, 1, 2])
            }
            let other = try fleet.node("node1", url: fleet.server.url, capacity: 1)
            try await other.node.start()

            route.relay.cut()
            try await waitUntil("node0 finds the database lost") { await cut.node.databaseLost }
            try await waitUntil("node0 stops its run") { await cut.node.manager.activeDownloads().isEmpty }
            // node0 wrote its last: the bodies are still held, so node1 has fetched nothing yet.
            let left = Self.wholeSegments(of: "c.ts", in: fleet)
            #expect(left.isSuperset(of: [0, 1, 2]) && left.count < segments.count, "whole at the stop: \(left)")
            try await fleet.waitForRows("node1 runs it") { rows in
                rows.count == 1 && rows[0].status == .active && rows[0].node == "node1"
            }
            server.releaseBodies()
            try await fleet.waitForRows("the playlist complete") { rows in
                rows.count == 1 && rows[0].status == .complete
            }
            try await waitUntil("the completion told to node1's hooks") {
                !other.completions.withLockedValue { $0 }.isEmpty
            }
            route.relay.restore()
            try await waitUntil("node0 reaches the database again") { await !cut.node.databaseLost }

            #expect(try Self.bytes(at: fleet.directory.file("c.ts")) == video)
            #expect(Self.files(in: fleet) == ["c.ts"])
            let fetched = segments.indices.map { Self.gets(server, "/c-\($0).ts") }
            for index in left.sorted() {
                #expect(fetched[index] == 1, "c-\(index).ts, whole at the stop: \(fetched)")
            }
            #expect(fetched.allSatisfy { (1...2).contains($0) }, "\(fetched)")
            #expect(fetched.filter { $0 == 2 }.count <= 1, "\(fetched)")
            #expect(cut.completions.withLockedValue { $0 }.isEmpty)
            #expect(other.completions.withLockedValue { $0 } == [gid])
            #expect(try await fleet.rows().allSatisfy { $0.status == .complete })
            await route.relay.stop()
        }
    }
}
