import Crypto
import Downpour
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import _CryptoExtras

@testable import DownpourHLS

/// ``HLSDownload`` against the test server: playlists made here, segments of known bytes, the output compared byte
/// for byte, and the server's request log read for what was fetched and how often.
@Suite struct HLSDownloadTests {
    static func encrypted(_ plain: [UInt8], key: [UInt8], iv: [UInt8]) throws -> [UInt8] {
        [UInt8](try AES._CBC.encrypt(plain, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: iv)))
    }

    /// Reads the playlist at `path` as the engine does, then fetches its video into `directory`.
    static func fetchVideo(
        _ server: RangeTestServer,
        _ path: String,
        into directory: ScratchDirectory,
        options: HLSDownload.Options = .init(),
        configure: (inout DownloadConfiguration) -> Void = { _ in }
    ) async throws -> HLSDownload.Result {
        var configuration = testConfiguration()
        configuration.followsPlaylists = true
        configure(&configuration)
        let request = try DownloadRequest(
            url: server.url(path),
            destination: .directory(directory.path),
            configuration: configuration
        )
        let result = try await Download(request).run()
        let playlist = try #require(result.playlist)
        return try await HLSDownload(playlist, request: request, downloader: .shared, options: options).run()
    }

    static func gets(_ server: RangeTestServer, _ path: String) -> Int {
        server.statistics().requests.filter { $0.method == "GET" && $0.uri == path }.count
    }

    @Test("a media playlist of MPEG-TS segments becomes one .ts file, each segment fetched once")
    func transportStreamSegments() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "clip", count: 12)
            let result = try await Self.fetchVideo(
                server,
                "/clip.m3u8",
                into: directory,
                options: .init(concurrentSegments: 4)
            )
            #expect(result.path == directory.file("clip.ts"))
            #expect(result.segments == 12)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            for index in 0..<12 {
                #expect(Self.gets(server, "/clip-\(index).ts") == 1)
                #expect(server.statistics().bodyBytesSent(for: "/clip-\(index).ts") == segments[index].count)
            }
            // Nothing is left beside the video: no .part, no segments directory.
            #expect(directory.contents() == ["clip.ts"])
        }
    }

    @Test("the engine recognises a playlist by its media type, by .m3u8, or by #EXTM3U; --media=file saves it")
    func recognition() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let text = HLSTestStream.mediaPlaylist(["a.ts"])
            server.serve("/by-type", .init(text: text, contentType: "application/x-mpegURL; charset=utf-8"))
            server.serve("/by-path.m3u8", .init(text: text, contentType: "application/octet-stream"))
            server.serve("/by-body", .init(text: text, contentType: "text/plain"))
            server.serve("/not-a-playlist", .init(text: "#EXTINF but not a playlist\n", contentType: "text/plain"))
            // An ordinary extended M3U list (a radio's), with a playlist's name and media type: saved as it is.
            let radio = "#EXTM3U\n#EXTINF:-1,Radio\nhttp://radio.example/stream\n"
            server.serve("/radio.m3u8", .init(text: radio, contentType: "audio/x-mpegurl"))
            for path in ["/by-type", "/by-path.m3u8", "/by-body", "/not-a-playlist", "/radio.m3u8"] {
                var configuration = testConfiguration()
                configuration.followsPlaylists = true
                let request = try DownloadRequest(
                    url: server.url(path),
                    destination: .directory(directory.path),
                    configuration: configuration
                )
                let result = try await Download(request).run()
                if path == "/not-a-playlist" || path == "/radio.m3u8" {
                    #expect(result.playlist == nil)
                    #expect(FileManager.default.fileExists(atPath: result.path))
                } else {
                    #expect(result.playlist?.data == Data(text.utf8), "\(path)")
                    #expect(result.playlist?.url.absoluteString == server.url(path))
                }
            }
            // Read, not saved.
            #expect(directory.contents() == ["not-a-playlist", "radio.m3u8"])
            #expect(try String(contentsOfFile: directory.file("radio.m3u8"), encoding: .utf8) == radio)
            let saved = try await Download(
                DownloadRequest(
                    url: server.url("/by-type"),
                    destination: .directory(directory.path),
                    configuration: testConfiguration()
                )
            ).run()
            #expect(saved.playlist == nil)
            #expect(try String(contentsOfFile: saved.path, encoding: .utf8) == text)
        }
    }

    @Test("a multivariant playlist: the variant asked for, and its audio rendition into a file of its own")
    func variantsAndAudio() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let high = HLSTestStream.serveSegments(server, prefix: "high", count: 3, seed: 10)
            let low = HLSTestStream.serveSegments(server, prefix: "low", count: 3, seed: 20)
            let audio = HLSTestStream.serveSegments(server, prefix: "audio", count: 3, seed: 30)
            let master = """
                #EXTM3U
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="audio.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2",AUDIO="aac"
                low.m3u8
                #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,CODECS="avc1.640028,mp4a.40.2",AUDIO="aac"
                high.m3u8

                """
            server.serve("/show.m3u8", .init(text: master, contentType: HLSTestStream.mpegURL))
            let best = try await Self.fetchVideo(server, "/show.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: best.path))) == high.flatMap { $0 })
            let audioPath = try #require(best.audioPath)
            #expect(audioPath == directory.file("show.audio.ts"))
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: audioPath))) == audio.flatMap { $0 })
            #expect(Self.gets(server, "/low-0.ts") == 0)

            try FileManager.default.removeItem(atPath: best.path)
            try FileManager.default.removeItem(atPath: audioPath)
            let worst = try await Self.fetchVideo(
                server,
                "/show.m3u8",
                into: directory,
                options: .init(video: .worst, audio: false)
            )
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: worst.path))) == low.flatMap { $0 })
            #expect(worst.audioPath == nil)
            #expect(Self.gets(server, "/audio-0.ts") == 1)
        }
    }

    @Test("subtitles: the languages asked for, each one WebVTT file beside the video; none unless asked")
    func subtitles() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let video = HLSTestStream.serveSegments(server, prefix: "v", count: 2)
            for language in ["en", "de"] {
                for index in 0..<2 {
                    let cue = "00:00:0\(index * 2).000 --> 00:00:0\(index * 2 + 1).500\n\(language) line \(index)"
                    let text = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n\(cue)\n"
                    server.serve("/\(language)-\(index).vtt", .init(text: text, contentType: "text/vtt"))
                }
                server.serve(
                    "/\(language).m3u8",
                    .init(
                        text: HLSTestStream.mediaPlaylist(["\(language)-0.vtt", "\(language)-1.vtt"]),
                        contentType: HLSTestStream.mpegURL
                    )
                )
            }
            let master = """
                #EXTM3U
                #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="en.m3u8"
                #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="Deutsch",LANGUAGE="de-DE",URI="de.m3u8"
                #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,SUBTITLES="subs"
                v.m3u8

                """
            server.serve("/show.m3u8", .init(text: master, contentType: HLSTestStream.mpegURL))

            let plain = try await Self.fetchVideo(server, "/show.m3u8", into: directory)
            #expect(plain.subtitlesPaths.isEmpty)
            #expect(Self.gets(server, "/en.m3u8") == 0 && Self.gets(server, "/de.m3u8") == 0)
            try FileManager.default.removeItem(atPath: plain.path)

            let german = try await Self.fetchVideo(
                server,
                "/show.m3u8",
                into: directory,
                options: .init(subtitles: .languages(["de"]))
            )
            #expect(german.subtitlesPaths == [directory.file("show.de-DE.vtt")])
            let merged = try String(contentsOfFile: directory.file("show.de-DE.vtt"), encoding: .utf8)
            #expect(
                merged == """
                    WEBVTT
                    X-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000

                    00:00:00.000 --> 00:00:01.500
                    de line 0

                    00:00:02.000 --> 00:00:03.500
                    de line 1

                    """
            )
            #expect(Self.gets(server, "/en-0.vtt") == 0)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: german.path))) == video.flatMap { $0 })
            #expect(directory.contents() == ["show.de-DE.vtt", "show.ts"])
            try FileManager.default.removeItem(atPath: german.path)
            try FileManager.default.removeItem(atPath: german.subtitlesPaths[0])

            let all = try await Self.fetchVideo(server, "/show.m3u8", into: directory, options: .init(subtitles: .all))
            #expect(all.subtitlesPaths == [directory.file("show.en.vtt"), directory.file("show.de-DE.vtt")])
            #expect(directory.contents() == ["show.de-DE.vtt", "show.en.vtt", "show.ts"])
        }
    }

    @Test("fMP4: the initialisation section first, then the fragments, into one .mp4 file")
    func fragmentedMP4() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let initSection = makeTestContent(count: 1_000, seed: 5)
            let fragments = (0..<4).map { makeTestContent(count: 30_000 + $0, seed: 50 + UInt64($0)) }
            server.serve("/v/init.mp4", .init(initSection))
            for (index, bytes) in fragments.enumerated() { server.serve("/v/f\(index).m4s", .init(bytes)) }
            let playlist = HLSTestStream.mediaPlaylist(
                (0..<4).map { "f\($0).m4s" },
                header: ["#EXT-X-MAP:URI=\"init.mp4\""]
            )
            server.serve("/v/movie.m3u8", .init(text: playlist, contentType: HLSTestStream.mpegURL))
            let result = try await Self.fetchVideo(server, "/v/movie.m3u8", into: directory)
            #expect(result.path == directory.file("movie.mp4"))
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == initSection
                    + fragments.flatMap { $0 }
            )
            #expect(Self.gets(server, "/v/init.mp4") == 1)
        }
    }

    @Test("fMP4 under AES-128: the initialisation section is decrypted too, with its key's IV")
    func encryptedInitialisationSection() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let key = Array(makeTestContent(count: 16, seed: 12))
            let iv = [UInt8](repeating: 0x2A, count: 16)
            let initSection = makeTestContent(count: 1_000, seed: 13)
            let fragments = (0..<3).map { makeTestContent(count: 20_000 + $0, seed: 14 + UInt64($0)) }
            server.serve("/e/key.bin", .init(key))
            server.serve("/e/init.mp4", .init(try Self.encrypted(initSection, key: key, iv: iv)))
            for (index, bytes) in fragments.enumerated() {
                server.serve("/e/f\(index).m4s", .init(try Self.encrypted(bytes, key: key, iv: iv)))
            }
            let keyLine = "#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\",IV=0x" + String(repeating: "2a", count: 16)
            let playlist = HLSTestStream.mediaPlaylist(
                (0..<3).map { "f\($0).m4s" },
                header: [keyLine, "#EXT-X-MAP:URI=\"init.mp4\""]
            )
            server.serve("/e/movie.m3u8", .init(text: playlist, contentType: HLSTestStream.mpegURL))
            let result = try await Self.fetchVideo(server, "/e/movie.m3u8", into: directory)
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path)))
                    == initSection + fragments.flatMap { $0 }
            )
            #expect(Self.gets(server, "/e/key.bin") == 1)

            // Without an IV, an encrypted section cannot be decrypted (RFC 8216, 4.3.2.5): refused, naming why.
            let noIV = playlist.replacingOccurrences(of: ",IV=0x" + String(repeating: "2a", count: 16), with: "")
            server.serve("/e/no-iv.m3u8", .init(text: noIV, contentType: HLSTestStream.mpegURL))
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/e/no-iv.m3u8", into: directory)
            }
            #expect(error?.message.contains("needs the IV") == true, "\(error?.message ?? "")")
        }
    }

    @Test("AES-128: the key fetched once, the IV from the playlist or the sequence number")
    func aes128() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let key = Array(makeTestContent(count: 16, seed: 99))
            let explicitIV: [UInt8] = Array(0x30..<0x40)
            server.serve("/k/key.bin", .init(key))
            for (name, iv) in [("explicit", explicitIV as [UInt8]?), ("sequence", nil)] {
                let plain = (0..<4).map { HLSTestStream.transportStream(packets: 30 + $0, seed: 70 + UInt64($0)) }
                for (index, bytes) in plain.enumerated() {
                    let ivBytes =
                        iv
                        ?? HLSMediaPlaylist.Key(method: .aes128, url: URL(string: "x:")!, iv: nil, keyFormat: nil)
                        .iv(forSequence: 100 + index)
                    server.serve("/k/\(name)-\(index).ts", .init(try Self.encrypted(bytes, key: key, iv: ivBytes)))
                }
                let keyLine =
                    "#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\""
                    + (iv.map { ",IV=0x" + $0.map { String(format: "%02x", $0) }.joined() } ?? "")
                let text = HLSTestStream.mediaPlaylist((0..<4).map { "\(name)-\($0).ts" }, header: [keyLine])
                    .replacingOccurrences(of: "#EXT-X-MEDIA-SEQUENCE:0", with: "#EXT-X-MEDIA-SEQUENCE:100")
                server.serve("/k/\(name).m3u8", .init(text: text, contentType: HLSTestStream.mpegURL))
                let result = try await Self.fetchVideo(server, "/k/\(name).m3u8", into: directory)
                #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == plain.flatMap { $0 })
            }
            #expect(Self.gets(server, "/k/key.bin") == 2)  // once per download
        }
    }

    @Test("a wrong key is refused, and no file is named")
    func wrongKey() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let key = Array(makeTestContent(count: 16, seed: 1))
            let wrong = Array(makeTestContent(count: 16, seed: 2))
            server.serve("/key.bin", .init(wrong))
            // Packets of zeros after the sync byte, so that a wrong key's padding check alone may not catch it.
            let plain: [UInt8] = (0..<32).flatMap { _ in [0x47] + [UInt8](repeating: 0, count: 187) }
            server.serve("/w-0.ts", .init(try Self.encrypted(plain, key: key, iv: [UInt8](repeating: 0, count: 16))))
            let text = HLSTestStream.mediaPlaylist(
                ["w-0.ts"],
                header: ["#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\",IV=0x" + String(repeating: "0", count: 32)]
            )
            server.serve("/w.m3u8", .init(text: text, contentType: HLSTestStream.mpegURL))
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/w.m3u8", into: directory)
            }
            #expect(error?.code == .remoteMisbehaved)
            #expect(error?.message.contains(server.url("/w-0.ts")) == true)
            #expect(!FileManager.default.fileExists(atPath: directory.file("w.ts")))
            // The key and the segment that did not decrypt are not kept: with the right key, the next run works.
            server.serve("/key.bin", .init(key))
            let result = try await Self.fetchVideo(server, "/w.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == plain)
            #expect(Self.gets(server, "/key.bin") == 2)
            #expect(Self.gets(server, "/w-0.ts") == 2)
        }
    }

    @Test("encrypted packed audio (.aac) has no sync bytes to check; a segment longer than a chunk decrypts whole")
    func encryptedAudioAndLongSegments() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let key = Array(makeTestContent(count: 16, seed: 3))
            let iv = [UInt8](repeating: 7, count: 16)
            server.serve("/a/key.bin", .init(key))
            let audio = (0..<3).map { makeTestContent(count: 5_000 + $0, seed: 30 + UInt64($0)) }
            for (index, bytes) in audio.enumerated() {
                server.serve("/a/s\(index).aac", .init(try Self.encrypted(bytes, key: key, iv: iv)))
            }
            let ivText = ",IV=0x" + String(repeating: "07", count: 16)
            let audioList = HLSTestStream.mediaPlaylist(
                (0..<3).map { "s\($0).aac" },
                header: ["#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\"" + ivText]
            )
            server.serve("/a/audio.m3u8", .init(text: audioList, contentType: HLSTestStream.mpegURL))
            let sound = try await Self.fetchVideo(server, "/a/audio.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: sound.path))) == audio.flatMap { $0 })

            // 2.5 chunks of MPEG-TS: decrypted chunk by chunk, each chunk's IV the last block of the one before.
            let long = HLSTestStream.transportStream(packets: (HLSDownload.chunkSize * 5 / 2) / 188, seed: 9)
            server.serve("/a/long.ts", .init(try Self.encrypted(long, key: key, iv: iv)))
            let longList = HLSTestStream.mediaPlaylist(
                ["long.ts"],
                header: ["#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\"" + ivText]
            )
            server.serve("/a/long.m3u8", .init(text: longList, contentType: HLSTestStream.mpegURL))
            let video = try await Self.fetchVideo(server, "/a/long.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: video.path))) == long)
        }
    }

    @Test("credentials go to the playlist's origin only: a key and segments on another host get none")
    func credentialsStayHome() async throws {
        try await RangeTestServer.withServer(content: []) { home in
            try await RangeTestServer.withServer(content: []) { other in
                let directory = try ScratchDirectory()
                defer { directory.remove() }
                let key = Array(makeTestContent(count: 16, seed: 4))
                let iv = [UInt8](repeating: 1, count: 16)
                other.serve("/key.bin", .init(key))
                let segments = (0..<2).map { HLSTestStream.transportStream(packets: 20, seed: 40 + UInt64($0)) }
                home.serve("/s0.ts", .init(try Self.encrypted(segments[0], key: key, iv: iv)))
                other.serve("/s1.ts", .init(try Self.encrypted(segments[1], key: key, iv: iv)))
                let list = HLSTestStream.mediaPlaylist(
                    ["s0.ts", other.url("/s1.ts")],
                    header: [
                        "#EXT-X-KEY:METHOD=AES-128,URI=\"\(other.url("/key.bin"))\",IV=0x"
                            + String(repeating: "01", count: 16)
                    ]
                )
                home.serve("/show.m3u8", .init(text: list, contentType: HLSTestStream.mpegURL))
                let result = try await Self.fetchVideo(home, "/show.m3u8", into: directory) { configuration in
                    configuration.credentials = Credentials(user: "alice", password: "secret")
                    configuration.headers = [
                        HTTPHeaderField(name: "Cookie", value: "session=1"),
                        HTTPHeaderField(name: "X-Client", value: "tests"),
                    ]
                }
                #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
                let away = other.statistics().requests
                #expect(!away.isEmpty)
                #expect(away.allSatisfy { $0.header("Authorization") == nil && $0.header("Cookie") == nil })
                #expect(away.allSatisfy { $0.header("X-Client") == "tests" })
                let segment = try #require(
                    home.statistics().requests.first { $0.uri == "/s0.ts" && $0.method == "GET" }
                )
                #expect(segment.header("Authorization") != nil)
                #expect(segment.header("Cookie") == "session=1")

                // A playlist redirected to the other host: its segments there get no credentials either.
                other.serve(
                    "/moved.m3u8",
                    .init(text: HLSTestStream.mediaPlaylist(["s1.ts"]), contentType: HLSTestStream.mpegURL)
                )
                let before = other.statistics().requests.count
                let target = other.url("/moved.m3u8").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let moved = try await Self.fetchVideo(home, "/redirect-to?url=\(target)", into: directory) {
                    configuration in
                    configuration.credentials = Credentials(user: "alice", password: "secret")
                    configuration.overwrite = true
                }
                // (No key in this playlist: the segment as it is.)
                #expect(
                    try [UInt8](Data(contentsOf: URL(fileURLWithPath: moved.path)))
                        == Self.encrypted(segments[1], key: key, iv: iv)
                )
                let redirected = other.statistics().requests.dropFirst(before)
                #expect(redirected.contains { $0.uri == "/s1.ts" })
                #expect(redirected.allSatisfy { $0.header("Authorization") == nil })
            }
        }
    }

    @Test("a second run of the same name stops at once instead of mixing its segments in")
    func sameNameTwice() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            _ = HLSTestStream.serveSegments(server, prefix: "index", count: 2)
            // Another run holds the output's .part file.
            let holder = try AssembledFile(locking: directory.file("index.ts.part"))
            defer { holder.close() }
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/index.m3u8", into: directory)
            }
            #expect(error?.code == .alreadyRunning)
            #expect(Self.gets(server, "/index-0.ts") == 0)
            #expect(!FileManager.default.fileExists(atPath: directory.file("index.ts.hls")))
        }
    }

    @Test("byte ranges of one resource: each run of them fetched once and cut, never the bytes between or after")
    func byteRanges() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let whole = makeTestContent(count: 90_000, seed: 8)
            server.serve("/r/all.mp4", .init(whole))
            let ranged = """
                #EXTM3U
                #EXT-X-VERSION:7
                #EXT-X-TARGETDURATION:2
                #EXT-X-MAP:URI="all.mp4",BYTERANGE="1000@0"
                #EXTINF:2.0,
                #EXT-X-BYTERANGE:40000@1000
                all.mp4
                #EXTINF:2.0,
                #EXT-X-BYTERANGE:49000
                all.mp4
                #EXT-X-ENDLIST

                """
            server.serve("/r/ranged.m3u8", .init(text: ranged, contentType: HLSTestStream.mpegURL))
            let result = try await Self.fetchVideo(server, "/r/ranged.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == whole)
            #expect(server.statistics().bodyBytesSent(for: "/r/all.mp4") == whole.count)

            // A gap after the initialisation section and unused bytes at the end: two runs, 0..<1000 and
            // 2000..<72000, and nothing else asked or sent.
            let gaps = """
                #EXTM3U
                #EXT-X-VERSION:7
                #EXT-X-TARGETDURATION:2
                #EXT-X-MAP:URI="gaps.mp4",BYTERANGE="1000@0"
                #EXTINF:2.0,
                #EXT-X-BYTERANGE:40000@2000
                gaps.mp4
                #EXTINF:2.0,
                #EXT-X-BYTERANGE:30000
                gaps.mp4
                #EXT-X-ENDLIST

                """
            server.serve("/r/gaps.mp4", .init(whole))
            server.serve("/r/gaps.m3u8", .init(text: gaps, contentType: HLSTestStream.mpegURL))
            let cut = try await Self.fetchVideo(server, "/r/gaps.m3u8", into: directory)
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: cut.path)))
                    == Array(whole[0..<1000] + whole[2000..<72000])
            )
            let requests = server.statistics().requests.filter { $0.uri == "/r/gaps.mp4" }
            #expect(requests.reduce(0) { $0 + $1.bodyBytesSent } == 71_000)
            for request in requests {
                let asked = try #require(request.requestedRange, "every request is ranged: \(request.headers)")
                #expect(
                    asked.clamped(to: 0..<1000) == asked || asked.clamped(to: 2000..<72_000) == asked,
                    "bytes \(asked) are outside both runs"
                )
            }
        }
    }

    @Test("byte ranges a server cannot give are refused, naming what was asked: no ranges, a shorter resource")
    func byteRangesRefused() async throws {
        // The server's main content ignores ranges: a 200 with the whole resource answers every range.
        let content = makeTestContent(count: 50_000, seed: 9)
        try await RangeTestServer.withServer(content: content, faults: [.ignoreRange]) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let playlist = """
                #EXTM3U
                #EXT-X-VERSION:4
                #EXT-X-TARGETDURATION:2
                #EXTINF:2.0,
                #EXT-X-BYTERANGE:10000@5000
                body.ts
                #EXT-X-ENDLIST

                """
            server.serve("/p/norange.m3u8", .init(text: playlist, contentType: HLSTestStream.mpegURL))
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/p/norange.m3u8", into: directory)
            }
            #expect(error?.code == .remoteMisbehaved)
            #expect(error?.message.contains("bytes 5000-14999 of") == true)
            #expect(error?.message.contains("does not serve byte ranges") == true)

            server.serve("/p/short.ts", .init(Array(content[0..<8000])))
            let past = playlist.replacingOccurrences(of: "body.ts", with: "short.ts")
            server.serve("/p/short.m3u8", .init(text: past, contentType: HLSTestStream.mpegURL))
            let short = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/p/short.m3u8", into: directory)
            }
            #expect(short?.code == .remoteMisbehaved)
            #expect(short?.message.contains("ends before the range does") == true)
        }
    }

    @Test("a segment that fails twice then works is retried; a 404 segment fails naming it")
    func segmentFaults() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "flaky", count: 4)
            server.serve("/flaky-2.ts", .init(segments[2], failures: 2))
            let result = try await Self.fetchVideo(server, "/flaky.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect(Self.gets(server, "/flaky-2.ts") == 3)

            let text = HLSTestStream.mediaPlaylist(["flaky-0.ts", "flaky-1.ts", "status/404", "flaky-3.ts"])
            server.serve("/missing.m3u8", .init(text: text, contentType: HLSTestStream.mpegURL))
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/missing.m3u8", into: directory)
            }
            #expect(error?.httpStatus == 404)
            #expect(error?.message.contains("segment 3 of 4") == true)
            #expect(error?.message.contains(server.url("/status/404")) == true)
            #expect(!FileManager.default.fileExists(atPath: directory.file("missing.ts")))
        }
    }

    @Test("the names: a playlist's own name gives the video's stem; each output has a work directory of its own")
    func names() {
        let recorded = HLSDownload.Names(fixed: "/d/show.m3u8")
        #expect(recorded.output(fragmentedMP4: false) == "/d/show.ts")
        #expect(HLSDownload.Names(fixed: "/d/show.ts").output(fragmentedMP4: true) == "/d/show.ts")
        #expect(
            HLSDownload.Names(fixed: "/d/clip").audioOutput(fragmentedMP4: true, url: URL(string: "http://a/x")!)
                == "/d/clip.audio.m4a"
        )
        #expect(HLSDownload.workDirectory(for: "/d/a.ts") != HLSDownload.workDirectory(for: "/d/a.mp4"))
        // A language given twice gets a name of its own each time, however long (the tag is cut before the number).
        let long = String(repeating: "x", count: 60)
        let names = (1...3).map { recorded.subtitlesOutput(language: long, index: 0, attempt: $0) }
        #expect(Set(names).count == 3 && names.allSatisfy { $0.hasPrefix("/d/show.") && $0.hasSuffix(".vtt") })
        #expect(recorded.subtitlesOutput(language: "../../etc", index: 1) == "/d/show.etc.vtt")
        #expect(recorded.subtitlesOutput(language: nil, index: 1, attempt: 2) == "/d/show.subtitles-2-2.vtt")
    }

    @Test("a video is taken as finished only with its download's mark, and no .part beside it")
    func finishedEarlier() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var request = try DownloadRequest(
            url: "http://127.0.0.1:1/show.m3u8",
            destination: .named("show.ts", in: directory.path)
        )
        request.finishMark = "00000000000000aa"
        // Someone's file of that name, without the mark: not the download's.
        FileManager.default.createFile(atPath: directory.file("show.ts"), contents: Data("theirs".utf8))
        #expect(await HLSDownload.finishedEarlier(request) == nil)
        try FileManager.default.removeItem(atPath: directory.file("show.ts"))
        // Another download's mark: not this one's either.
        for (mark, taken) in [
            ("00000000000000bb hls", false), ("00000000000000aa", false), ("00000000000000aa hls", true),
        ] {
            let file = try AssembledFile(locking: directory.file("show.ts.part"))
            try file.append(Array("video".utf8))
            try file.commit(to: directory.file("show.ts"), replacing: true, mark: mark)
            let found = await HLSDownload.finishedEarlier(request)
            #expect((found != nil) == taken, "\(mark)")
            #expect(found.map { $0.length == 5 && $0.path == directory.file("show.ts") } ?? !taken)
            #expect(found?.audioPath == nil)
        }
        // Its audio, named with the same mark before the video, comes with it; another's does not.
        for (mark, taken) in [("00000000000000bb hls", false), ("00000000000000aa hls", true)] {
            let audio = try AssembledFile(locking: directory.file("show.audio.m4a.part"))
            try audio.append(Array("sound!".utf8))
            try audio.commit(to: directory.file("show.audio.m4a"), replacing: true, mark: mark)
            let found = try #require(await HLSDownload.finishedEarlier(request))
            #expect(found.audioPath == (taken ? directory.file("show.audio.m4a") : nil), "\(mark)")
            #expect(found.audioLength == (taken ? 6 : 0), "\(mark)")
        }
        try FileManager.default.removeItem(atPath: directory.file("show.audio.m4a"))
        FileManager.default.createFile(atPath: directory.file("show.ts.part"), contents: Data())
        #expect(await HLSDownload.finishedEarlier(request) == nil)
    }

    @Test("a run started again fetches only the missing segments; a changed playlist starts over")
    func resume() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "part", count: 6)
            server.serve("/part-4.ts", .init(segments[4], failures: 100))
            // One segment at a time: the four before the failing one are whole on disk when it fails.
            let oneByOne = HLSDownload.Options(concurrentSegments: 1)
            await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/part.m3u8", into: directory, options: oneByOne) {
                    $0.retry.maximumTries = 1
                }
            }
            #expect(!FileManager.default.fileExists(atPath: directory.file("part.ts")))
            #expect(FileManager.default.fileExists(atPath: directory.file("part.ts.hls/video/segment-0")))

            server.serve("/part-4.ts", .init(segments[4]))
            let before = (0..<6).map { Self.gets(server, "/part-\($0).ts") }
            let result = try await Self.fetchVideo(server, "/part.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect(before == [1, 1, 1, 1, 1, 0])
            // Only the two missing segments were asked for.
            #expect((0..<6).map { Self.gets(server, "/part-\($0).ts") } == [1, 1, 1, 1, 2, 1])
            #expect(directory.contents() == ["part.ts"])

            // The playlist changes between two runs: the work left by the first is not spliced into the second.
            try FileManager.default.removeItem(atPath: result.path)
            server.serve("/part-5.ts", .init(segments[5], failures: 100))
            await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/part.m3u8", into: directory, options: oneByOne) {
                    $0.retry.maximumTries = 1
                }
            }
            #expect(FileManager.default.fileExists(atPath: directory.file("part.ts.hls/video/segment-4")))
            let other = HLSTestStream.transportStream(packets: 10, seed: 444)
            server.serve("/part-5.ts", .init(segments[5]))
            server.serve("/other.ts", .init(other))
            let changed = HLSTestStream.mediaPlaylist((0..<5).map { "part-\($0).ts" } + ["other.ts"])
            server.serve("/part.m3u8", .init(text: changed, contentType: HLSTestStream.mpegURL))
            let second = (0..<5).map { Self.gets(server, "/part-\($0).ts") }
            let restarted = try await Self.fetchVideo(server, "/part.m3u8", into: directory)
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: restarted.path)))
                    == segments[0..<5].flatMap { $0 } + other
            )
            #expect((0..<5).map { Self.gets(server, "/part-\($0).ts") } == second.map { $0 + 1 })
        }
    }

    /// A write permit that says no for good once `withdrawWhen` holds, and counts its answers.
    final class Permit: Sendable {
        let asked = NIOLockedValueBox((yes: 0, no: 0))
        let withdrawWhen: @Sendable () -> Bool

        init(withdrawWhen: @escaping @Sendable () -> Bool) {
            self.withdrawWhen = withdrawWhen
        }

        @Sendable func allows() -> Bool {
            let withdraw = self.withdrawWhen()
            return self.asked.withLockedValue { asked in
                let allows = asked.no == 0 && !withdraw
                if allows { asked.yes += 1 } else { asked.no += 1 }
                return allows
            }
        }
    }

    /// Reads the playlist at `path`, then runs its video under `permit` (as a fleet's node does under its lease).
    static func runUnderPermit(
        _ server: RangeTestServer,
        _ path: String,
        into directory: ScratchDirectory,
        permit: Permit,
        idleRead: Duration = .seconds(10),
        finishing: @escaping @Sendable () -> Bool = { true }
    ) async throws -> HLSDownload.Result {
        var configuration = testConfiguration(idleRead: idleRead)
        configuration.followsPlaylists = true
        let request = try DownloadRequest(
            url: server.url(path),
            destination: .directory(directory.path),
            configuration: configuration
        )
        let playlist = try #require(try await Download(request).run().playlist)
        let run = HLSDownload(
            playlist,
            request: request,
            downloader: .shared,
            options: .init(concurrentSegments: 1),
            logger: Logger(label: "test"),
            limiter: BandwidthLimiter(rate: nil),
            writePermit: permit.allows
        )
        return try await run.run(finishing: finishing)
    }

    @Test("a write permit withdrawn mid-segments: superseded, nothing named, the segments kept for the next writer")
    func permitWithdrawnMidSegments() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "lease", count: 8)
            let work = directory.file("lease.ts.hls/video")
            // Withdrawn once three segments are whole: the fourth's fetch is the first to hear it.
            let permit = Permit { FileManager.default.fileExists(atPath: work + "/segment-2") }
            await #expect {
                try await Self.runUnderPermit(server, "/lease.m3u8", into: directory, permit: permit)
            } throws: {
                ($0 as? DownloadError)?.code == .superseded
            }
            #expect(!FileManager.default.fileExists(atPath: directory.file("lease.ts")))
            let kept = Set(try FileManager.default.contentsOfDirectory(atPath: work))
            #expect(kept.isSuperset(of: ["playlist.fingerprint", "segment-0", "segment-1", "segment-2"]), "\(kept)")
            #expect((3..<8).allSatisfy { !kept.contains("segment-\($0)") }, "\(kept)")
            // Nothing was asked for once the permit was withdrawn.
            #expect((3..<8).map { Self.gets(server, "/lease-\($0).ts") } == [0, 0, 0, 0, 0])

            // The writer that takes over fetches only what is missing.
            let result = try await Self.fetchVideo(server, "/lease.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect((0..<8).map { Self.gets(server, "/lease-\($0).ts") } == [1, 1, 1, 1, 1, 1, 1, 1])
            #expect(directory.contents() == ["lease.ts"])
        }
    }

    @Test("a write permit withdrawn while a segment's body is awaited: that fetch stops at once, asked for no more")
    func permitWithdrawnWhileWaiting() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "held", count: 4)
            let playlist = HLSTestStream.mediaPlaylist((0..<4).map { "held-\($0).ts" })
            // The playlist and two segments, then nothing.
            server.holdBodies(afterSending: playlist.utf8.count + segments[0].count + segments[1].count)
            let withdrawn = NIOLockedValueBox(false)
            let permit = Permit { withdrawn.withLockedValue { $0 } }
            // No read time-out to end the wait for the body: only the permit's watch can.
            let ended = NIOLockedValueBox<DownloadError.Code??>(nil)
            let run = Task {
                do {
                    _ = try await Self.runUnderPermit(
                        server,
                        "/held.m3u8",
                        into: directory,
                        permit: permit,
                        idleRead: .seconds(3600)
                    )
                    ended.withLockedValue { $0 = .some(nil) }
                } catch {
                    ended.withLockedValue { $0 = .some((error as? DownloadError)?.code) }
                }
            }
            try await waitUntil("the third segment asked for") { Self.gets(server, "/held-2.ts") == 1 }
            withdrawn.withLockedValue { $0 = true }
            // Ended with the body still held: the permit's watch stopped the fetch that waited for it.
            try await waitUntil("the run ended") { ended.withLockedValue { $0 } != nil }
            await run.value
            #expect(ended.withLockedValue { $0 } == .some(.superseded))
            #expect((2..<4).map { Self.gets(server, "/held-\($0).ts") } == [1, 0])
            server.releaseBodies()
        }
    }

    @Test("a write permit withdrawn once every segment is in: no output is written or named, the segments stay")
    func permitWithdrawnBeforeWriting() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "late", count: 4)
            // Past the point of no return (`finishing`), the permit says no at its next answer.
            let finished = NIOLockedValueBox(false)
            let permit = Permit { finished.withLockedValue { $0 } }
            await #expect {
                try await Self.runUnderPermit(server, "/late.m3u8", into: directory, permit: permit) {
                    finished.withLockedValue { $0 = true }
                    return true
                }
            } throws: {
                ($0 as? DownloadError)?.code == .superseded
            }
            #expect(!FileManager.default.fileExists(atPath: directory.file("late.ts")))
            let work = directory.file("late.ts.hls/video")
            #expect(
                Set(try FileManager.default.contentsOfDirectory(atPath: work))
                    == Set(["playlist.fingerprint"] + (0..<4).map { "segment-\($0)" })
            )
            // Nothing was written into the video's .part: the output's start was refused.
            let part = directory.file("late.ts.part")
            let size = (try? FileManager.default.attributesOfItem(atPath: part)[.size] as? NSNumber)?.intValue ?? 0
            #expect(size == 0)
            let result = try await Self.fetchVideo(server, "/late.m3u8", into: directory)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect((0..<4).map { Self.gets(server, "/late-\($0).ts") } == [1, 1, 1, 1])
        }
    }

    @Test("a live playlist is recorded as it grows, until EXT-X-ENDLIST")
    func liveUntilEnd() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = (0..<5).map { HLSTestStream.transportStream(packets: 20 + $0, seed: 60 + UInt64($0)) }
            for (index, bytes) in segments.enumerated() { server.serve("/live-\(index).ts", .init(bytes)) }
            let names = (0..<5).map { "live-\($0).ts" }
            func playlist(_ count: Int, end: Bool) -> String {
                HLSTestStream.mediaPlaylist(Array(names.prefix(count)), end: end)
                    .replacingOccurrences(of: "#EXT-X-TARGETDURATION:2", with: "#EXT-X-TARGETDURATION:1")
            }
            server.serve("/live.m3u8", .init(text: playlist(3, end: false), contentType: HLSTestStream.mpegURL))
            async let recording = Self.fetchVideo(server, "/live.m3u8", into: directory)
            // Once the first three are in, the stream grows by two and ends.
            try await waitUntil("the first three segments fetched") { Self.gets(server, "/live-2.ts") == 1 }
            server.serve("/live.m3u8", .init(text: playlist(5, end: true), contentType: HLSTestStream.mpegURL))
            let result = try await recording
            #expect(result.segments == 5)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect((0..<5).map { Self.gets(server, "/live-\($0).ts") } == [1, 1, 1, 1, 1])
            #expect(directory.contents() == ["live.ts"])
        }
    }

    @Test("a live recording stops after --media-record-time and saves what it has")
    func liveForAWhile() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            let segments = HLSTestStream.serveSegments(server, prefix: "s", count: 2)
            server.serve(
                "/on-air.m3u8",
                .init(
                    text: HLSTestStream.mediaPlaylist(["s-0.ts", "s-1.ts"], end: false),
                    contentType: HLSTestStream.mpegURL
                )
            )
            // No time at all: the segments listed at the start, and no second look at the playlist.
            let result = try await Self.fetchVideo(
                server,
                "/on-air.m3u8",
                into: directory,
                options: .init(recordTime: .zero)
            )
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: result.path))) == segments.flatMap { $0 })
            #expect(Self.gets(server, "/on-air.m3u8") == 1)
        }
    }

    @Test("refused before anything is fetched: SAMPLE-AES, an existing file")
    func refusals() async throws {
        try await RangeTestServer.withServer(content: []) { server in
            let directory = try ScratchDirectory()
            defer { directory.remove() }
            _ = HLSTestStream.serveSegments(server, prefix: "s", count: 2)
            let sample = HLSTestStream.mediaPlaylist(["s-0.ts"], header: ["#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\""])
            server.serve("/sample.m3u8", .init(text: sample, contentType: HLSTestStream.mpegURL))
            let refused = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/sample.m3u8", into: directory)
            }
            #expect(refused?.code == .invalidRequest)
            #expect(refused?.message.contains("SAMPLE-AES") == true, "\(refused?.message ?? "")")
            #expect(Self.gets(server, "/s-0.ts") == 0)

            try Data("mine".utf8).write(to: URL(fileURLWithPath: directory.file("s.ts")))
            let error = await #expect(throws: DownloadError.self) {
                try await Self.fetchVideo(server, "/s.m3u8", into: directory)
            }
            #expect(error?.code == .outputExists)
            #expect(try String(contentsOfFile: directory.file("s.ts"), encoding: .utf8) == "mine")
            #expect(Self.gets(server, "/s-0.ts") == 0)
        }
    }
}
