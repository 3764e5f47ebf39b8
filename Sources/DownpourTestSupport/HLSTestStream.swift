/// HLS streams made for tests: MPEG-TS segments of known bytes and media playlists of them, served by
/// ``RangeTestServer``.
public enum HLSTestStream {
    public static let mpegURL = "application/vnd.apple.mpegurl"

    /// `count` MPEG-TS packets: the sync byte, then bytes of `seed`.
    public static func transportStream(packets count: Int, seed: UInt64) -> [UInt8] {
        let filler = makeTestContent(count: count * 187, seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 188)
        for packet in 0..<count {
            bytes.append(0x47)
            bytes.append(contentsOf: filler[(packet * 187)..<((packet + 1) * 187)])
        }
        return bytes
    }

    /// A media playlist of `segments` (their paths), each two seconds long, with `header` lines after the version.
    public static func mediaPlaylist(_ segments: [String], header: [String] = [], end: Bool = true) -> String {
        var lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0"] + header
        for segment in segments { lines += ["#EXTINF:2.0,", segment] }
        if end { lines.append("#EXT-X-ENDLIST") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A multivariant playlist of the media playlists `variants` (their paths, in order of rising bandwidth), each
    /// taking its audio from the rendition at `audio`.
    public static func multivariantPlaylist(variants: [String], audio: String) -> String {
        var lines = ["#EXTM3U", "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",DEFAULT=YES,URI=\"\(audio)\""]
        for (index, variant) in variants.enumerated() {
            lines += ["#EXT-X-STREAM-INF:BANDWIDTH=\(800_000 * (2 * index + 1)),AUDIO=\"a\"", variant]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The bytes of the playlists `texts`: what a test lets a server send before it holds the segments' bodies.
    public static func length(of texts: [String]) -> Int {
        texts.reduce(0) { $0 + $1.utf8.count }
    }

    /// Serves `count` TS segments of `packets` packets (one more for each next one) at `/PREFIX-N.ts` and a playlist
    /// of them at `/PREFIX.m3u8`; returns the segments.
    @discardableResult
    public static func serveSegments(
        _ server: RangeTestServer,
        prefix: String,
        count: Int,
        packets: Int = 40,
        seed: UInt64 = 1
    ) -> [[UInt8]] {
        let segments = (0..<count).map { transportStream(packets: packets + $0, seed: seed + UInt64($0)) }
        for (index, bytes) in segments.enumerated() { server.serve("/\(prefix)-\(index).ts", .init(bytes)) }
        server.serve(
            "/\(prefix).m3u8",
            .init(text: mediaPlaylist((0..<count).map { "\(prefix)-\($0).ts" }), contentType: mpegURL)
        )
        return segments
    }
}
