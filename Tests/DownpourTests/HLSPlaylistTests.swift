import Downpour
import Foundation
import Testing

@testable import DownpourHLS

/// ``HLSPlaylist``: playlists as servers write them (ffmpeg's, Apple's examples), and the malformed ones a
/// server can send, parsed without I/O.
@Suite struct HLSPlaylistTests {
    static let base = URL(string: "https://cdn.example/video/master.m3u8")!

    static func media(_ text: String) throws -> HLSMediaPlaylist {
        guard case .media(let playlist) = try HLSPlaylist.parse(text, url: Self.base) else {
            Issue.record("not a media playlist")
            throw CancellationError()
        }
        return playlist
    }

    static func url(_ path: String) -> URL { URL(string: path, relativeTo: Self.base)!.absoluteURL }

    @Test("a byte order mark and CRLF line ends are read as ffmpeg and Windows tools write them")
    func byteOrderMarkAndCRLF() throws {
        let playlist = try Self.media("\u{FEFF}#EXTM3U\r\n#EXTINF:1.5,\r\na.ts\r\n#EXT-X-ENDLIST\r\n")
        #expect(playlist.segments.map(\.url) == [Self.url("a.ts")] && playlist.hasEnd)
    }

    @Test("a media playlist of MPEG-TS segments: URLs resolved, sequence numbers from EXT-X-MEDIA-SEQUENCE, the end")
    func mediaPlaylist() throws {
        let playlist = try Self.media(
            """
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:4
            #EXT-X-MEDIA-SEQUENCE:7
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXTINF:4.000,
            seg7.ts
            #EXTINF:4.0,title with, a comma
            /abs/seg8.ts
            # a comment, and an unknown tag:
            #EXT-X-SOMETHING-NEW:1
            #EXTINF:2.5,
            https://other.example/seg9.ts?token=a%20b
            #EXT-X-ENDLIST
            """
        )
        #expect(
            playlist.segments.map(\.url) == [
                Self.url("seg7.ts"), URL(string: "https://cdn.example/abs/seg8.ts")!,
                URL(string: "https://other.example/seg9.ts?token=a%20b")!,
            ]
        )
        #expect(playlist.segments.map(\.sequence) == [7, 8, 9])
        #expect(playlist.segments.map(\.duration) == [4, 4, 2.5])
        #expect(playlist.duration == 10.5)
        #expect(playlist.targetDuration == 4 && playlist.mediaSequence == 7)
        #expect(playlist.hasEnd && playlist.playlistType == "VOD")
        #expect(playlist.segments.allSatisfy { $0.key == nil && $0.map == nil && !$0.discontinuity })
        #expect(playlist.unsupportedKeys.isEmpty)
    }

    @Test("byte ranges: with an offset, and without one going on where the last range of the same resource ended")
    func byteRanges() throws {
        let playlist = try Self.media(
            """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MAP:URI="main.mp4",BYTERANGE="720@0"
            #EXTINF:4,
            #EXT-X-BYTERANGE:1000@720
            main.mp4
            #EXTINF:4,
            #EXT-X-BYTERANGE:500
            main.mp4
            #EXTINF:4,
            #EXT-X-BYTERANGE:300@0
            other.mp4
            """
        )
        #expect(playlist.segments.map(\.byteRange) == [720..<1720, 1720..<2220, 0..<300])
        #expect(playlist.segments.allSatisfy { $0.map == .init(url: Self.url("main.mp4"), byteRange: 0..<720) })
        #expect(!playlist.hasEnd, "no EXT-X-ENDLIST: live")
    }

    @Test("the plan of byte ranges: runs of touching ranges, pieces cut at their place, names that a longer list keeps")
    func byteRangePlan() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MAP:URI="main.mp4",BYTERANGE="720@0"
            #EXTINF:4,
            #EXT-X-BYTERANGE:1000@720
            main.mp4
            #EXTINF:4,
            #EXT-X-BYTERANGE:500@3000
            main.mp4
            #EXTINF:4,
            #EXT-X-BYTERANGE:300@0
            other.mp4

            """
        let plan = try HLSFetchPlan(Self.media(text), url: Self.base)
        let ranged = plan.fetches.filter { $0.range != nil }
        #expect(ranged.map(\.url) == [Self.url("main.mp4"), Self.url("main.mp4"), Self.url("other.mp4")])
        #expect(ranged.map(\.range) == [0..<1720, 3000..<3500, 0..<300], "a gap at 1720..<3000: two runs")
        #expect(Set(ranged.map(\.name)).count == 3)
        // Each piece is cut from its run, at its place in it.
        #expect(plan.pieces.map(\.range) == [0..<720, 720..<1720, 0..<500, 0..<300])
        #expect(plan.pieces.map(\.name) == [ranged[0].name, ranged[0].name, ranged[1].name, ranged[2].name])

        // A live list grown by a range after the gap: the untouched runs keep their names; the widened one is
        // another fetch.
        let longer = try HLSFetchPlan(
            Self.media(text + "#EXTINF:4,\n#EXT-X-BYTERANGE:200@3500\nmain.mp4\n"),
            url: Self.base
        )
        let names = Set(longer.fetches.filter { $0.range != nil }.map(\.name))
        #expect(names.contains(ranged[0].name) && names.contains(ranged[2].name))
        #expect(!names.contains(ranged[1].name))
        #expect(longer.fetches.contains { $0.range == 3000..<3700 })
        #expect(longer.fingerprint != plan.fingerprint)
    }

    @Test("EXT-X-KEY: AES-128 with and without an IV, NONE ends it, other methods are reported")
    func keys() throws {
        let playlist = try Self.media(
            """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:258
            #EXT-X-KEY:METHOD=AES-128,URI="key1.bin",IV=0x000102030405060708090A0B0C0D0E0F
            #EXTINF:2,
            a.ts
            #EXT-X-KEY:METHOD=AES-128,URI="https://keys.example/k2"
            #EXTINF:2,
            b.ts
            #EXT-X-KEY:METHOD=NONE
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            c.ts
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://x",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXTINF:2,
            d.ts
            #EXT-X-ENDLIST
            """
        )
        let keys = playlist.segments.map(\.key)
        #expect(keys[0]?.method == .aes128 && keys[0]?.url == Self.url("key1.bin"))
        #expect(keys[0]?.iv(forSequence: 258) == Array(0...15))
        #expect(keys[1]?.url == URL(string: "https://keys.example/k2")! && keys[1]?.iv == nil)
        // No IV: the media sequence number, big-endian, in 16 bytes (259 = 0x0103).
        #expect(keys[1]?.iv(forSequence: 259) == [UInt8](repeating: 0, count: 14) + [0x01, 0x03])
        #expect(keys[2] == nil && playlist.segments[2].discontinuity)
        #expect(!playlist.segments[3].discontinuity, "a discontinuity applies to the next segment only")
        #expect(keys[3]?.method == .sampleAES && keys[3]?.keyFormat == "com.apple.streamingkeydelivery")
        #expect(playlist.unsupportedKeys == [.sampleAES])
    }

    @Test("keys offered in several formats: the identity AES-128 one is used; a key after a segment starts a new set")
    func keyFormats() throws {
        let playlist = try Self.media(
            """
            #EXTM3U
            #EXT-X-KEY:METHOD=AES-128,URI="plain.key"
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://drm",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXTINF:2,
            a.ts
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://drm2",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXTINF:2,
            b.ts
            """
        )
        #expect(playlist.segments[0].key?.url == Self.url("plain.key"))
        #expect(playlist.segments[1].key?.method == .sampleAES, "the second set has no identity key")
        #expect(playlist.unsupportedKeys == [.sampleAES])
    }

    static let master = """
        #EXTM3U
        #EXT-X-INDEPENDENT-SEGMENTS
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="Français",LANGUAGE="fr",DEFAULT=NO,URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="subs/en.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,AVERAGE-BANDWIDTH=700000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2",AUDIO="aud"
        360p/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,CODECS="avc1.640028,mp4a.40.2",AUDIO="aud",SUBTITLES="subs"
        1080p/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2500000,RESOLUTION=1280x720,AUDIO="aud"
        720p/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=1800000,RESOLUTION=1280x720,AUDIO="aud"
        720p-lean/index.m3u8
        """

    @Test(
        "a multivariant playlist: the variant each choice picks",
        arguments: [
            ("best", "1080p/index.m3u8"), ("worst", "360p/index.m3u8"), ("720p", "720p/index.m3u8"),
            ("720", "720p/index.m3u8"), ("2000000", "720p-lean/index.m3u8"), ("2.5M", "720p/index.m3u8"),
            ("100k", "360p/index.m3u8"), ("480p", nil),
        ] as [(String, String?)]
    )
    func variants(choice: String, expected: String?) throws {
        guard case .multivariant(let master) = try HLSPlaylist.parse(Self.master, url: Self.base) else {
            Issue.record("not a multivariant playlist")
            return
        }
        let pick = try #require(HLSVideoChoice(choice))
        #expect(master.variant(pick)?.url == expected.map(Self.url))
    }

    @Test("an audio-only variant is picked only when there is no video")
    func audioOnlyVariant() throws {
        let text = """
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.5"
            audio-only.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=400000,CODECS="avc1.42e00a,mp4a.40.2"
            low.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=960x540
            mid.m3u8
            """
        guard case .multivariant(let master) = try HLSPlaylist.parse(text, url: Self.base) else {
            Issue.record("not a multivariant playlist")
            return
        }
        #expect(master.variant(.worst)?.url == Self.url("low.m3u8"))
        #expect(master.variant(.bandwidth(100_000))?.url == Self.url("low.m3u8"))
        #expect(master.variant(.best)?.url == Self.url("mid.m3u8"))
        let audio = try HLSPlaylist.parse(
            "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS=\"mp4a.40.5\"\na.m3u8",
            url: Self.base
        )
        guard case .multivariant(let only) = audio else { return }
        #expect(only.variant(.best)?.url == Self.url("a.m3u8"), "audio alone: that is what there is")
    }

    @Test("a multivariant playlist: attributes with quoted commas, and the renditions beside a variant")
    func renditions() throws {
        guard case .multivariant(let master) = try HLSPlaylist.parse(Self.master, url: Self.base) else {
            Issue.record("not a multivariant playlist")
            return
        }
        #expect(master.variants.count == 4)
        let first = master.variants[0]
        #expect(first.codecs == "avc1.4d401e,mp4a.40.2" && first.averageBandwidth == 700_000)
        #expect(first.width == 640 && first.height == 360 && first.audioGroup == "aud")
        #expect(master.variants[1].subtitlesGroup == "subs")
        #expect(master.rendition(.audio, group: "aud")?.url == Self.url("audio/en.m3u8"))
        #expect(master.rendition(.audio, group: "aud", language: "FR")?.name == "Français")
        #expect(master.rendition(.audio, group: "aud", language: "de") == nil)
        #expect(master.rendition(.subtitles, group: "subs")?.url == Self.url("subs/en.m3u8"))
        #expect(master.rendition(.audio, group: "none") == nil)
    }

    @Test(
        "what a server can get wrong is refused, naming the line",
        arguments: [
            ("<html>not a playlist</html>", "does not begin with #EXTM3U"),
            ("x#EXTM3U\n", "does not begin with #EXTM3U"),
            ("#EXTM3U\nseg.ts", "line 2: a segment URI has no EXTINF before it"),
            ("#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=1x1\nv.m3u8", "EXT-X-STREAM-INF has no BANDWIDTH"),
            ("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x0102\n", "IV is not 16 bytes"),
            ("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n", "EXT-X-KEY has no URI"),
            ("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"file:///etc/key\"\n", "is not an http or https URL"),
            ("#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd", "is not an http or https URL"),
            ("#EXTM3U\n#EXTINF:x,\na.ts", "EXTINF has no duration"),
            ("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:10\na.ts", "has no offset and follows no range"),
            ("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:10@9223372036854775800\na.ts", "ends past 2^63"),
            ("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"10\"\n", "EXT-X-MAP's BYTERANGE has no offset"),
            ("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXTINF:1,\na.ts", "both variants and media segments"),
            // Hostile numbers: each a refusal, never a crash.
            (
                "#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:9223372036854775807@0\na.ts\n#EXTINF:1,\n#EXT-X-BYTERANGE:1\na.ts",
                "ends past 2^63"
            ),
            (
                "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807\n#EXTINF:1,\na.ts\n#EXTINF:1,\nb.ts",
                "the media sequence numbers pass 2^63"
            ),
            ("#EXTM3U\n#EXTINF:inf,\na.ts", "EXTINF has no duration"),
            ("#EXTM3U\n#EXTINF:1e400,\na.ts", "EXTINF has no duration"),
            ("#EXTM3U\n#EXTINF:1,\na.ts\n#EXT-X-MEDIA-SEQUENCE:5\n", "EXT-X-MEDIA-SEQUENCE comes after a segment"),
            ("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:10@\na.ts", "is not n[@o]"),
            ("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:@5\na.ts", "is not n[@o]"),
        ]
    )
    func malformed(text: String, message: String) {
        #expect {
            _ = try HLSPlaylist.parse(text, url: Self.base)
        } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .remoteMisbehaved && error.message.contains(message)
        }
    }

    @Test("a response is a playlist by its media type, or by #EXTM3U first and an #EXT-X- tag in its body")
    func recognition() {
        #expect(HLSPlaylist.isPlaylist(contentType: "application/vnd.apple.mpegurl", prefix: []))
        #expect(HLSPlaylist.isPlaylist(contentType: "Application/X-MpegURL; charset=utf-8", prefix: []))
        #expect(HLSPlaylist.isPlaylist(contentType: "audio/mpegurl", prefix: []))
        let media = Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n".utf8)
        #expect(HLSPlaylist.isPlaylist(contentType: "text/plain", prefix: media))
        #expect(HLSPlaylist.isPlaylist(contentType: nil, prefix: [0xEF, 0xBB, 0xBF] + media))
        #expect(HLSPlaylist.isPlaylist(contentType: nil, prefix: Array("#EXTM3U\r\n#EXT-X-VERSION:3".utf8)))
        // An extended M3U list of a radio: #EXTM3U, but no #EXT-X- tag. Blank lines before #EXTM3U: not a playlist
        // (RFC 8216 wants it first, and the parser refuses it there).
        #expect(
            !HLSPlaylist.isPlaylist(contentType: nil, prefix: Array("#EXTM3U\n#EXTINF:-1,Radio\nhttp://r/x\n".utf8))
        )
        #expect(!HLSPlaylist.isPlaylist(contentType: nil, prefix: Array("\r\n#EXTM3U\n#EXT-X-VERSION:3".utf8)))
        #expect(!HLSPlaylist.isPlaylist(contentType: nil, prefix: Array("#EXTM3UX\n#EXT-X-VERSION:3".utf8)))
        #expect(!HLSPlaylist.isPlaylist(contentType: "video/mp2t", prefix: [0x47, 0x40, 0x00]))
        #expect(!HLSPlaylist.isPlaylist(contentType: "text/plain", prefix: Array("#EXTINF".utf8)))
    }

    @Test(
        "--media-video's values",
        arguments: [
            ("best", HLSVideoChoice.best), ("WORST", .worst), ("720p", .height(720)), ("1080", .height(1080)),
            ("2500000", .bandwidth(2_500_000)), ("2.5M", .bandwidth(2_500_000)), ("800k", .bandwidth(800_000)),
            ("fast", nil), ("0", nil), ("-720p", nil), ("", nil), ("infk", nil), ("1e300k", nil), ("nanm", nil),
        ] as [(String, HLSVideoChoice?)]
    )
    func videoChoice(text: String, expected: HLSVideoChoice?) {
        #expect(HLSVideoChoice(text) == expected)
    }
}
