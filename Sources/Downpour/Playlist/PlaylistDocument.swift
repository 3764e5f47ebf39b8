import Foundation

/// An HLS playlist (`.m3u8`) a download answered with, read into memory instead of saved
/// (``DownloadConfiguration/followsPlaylists``). The library recognises it and hands it over; the `DownpourHLS`
/// module reads it and fetches its segments.
public struct PlaylistDocument: Sendable, Hashable {
    /// Where the document came from, after redirects: relative URIs in it are resolved against this.
    public var url: URL
    /// The document's bytes.
    public var data: Data

    public init(url: URL, data: Data) {
        self.url = url
        self.data = data
    }

    /// The longest document read: far more than the longest real playlist (tens of thousands of segments).
    public static let maximumDocumentLength: Int64 = 16 * 1024 * 1024

    /// The media types servers give playlists (`application/vnd.apple.mpegurl` and its older spellings).
    public static let mediaTypes: Set<String> = [
        "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl",
    ]

    /// Whether a response of this `Content-Type` is a playlist.
    public static func isPlaylist(contentType: String) -> Bool {
        guard let type = contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        else { return false }
        return Self.mediaTypes.contains(type)
    }

    /// How much of a body ``isPlaylist(prefix:)`` reads.
    public static let prefixLength: Int64 = 4096

    /// Whether a body is an HLS playlist by its first bytes (``prefixLength``): `#EXTM3U` as its first line (after a
    /// byte order mark), as RFC 8216 requires, and an `#EXT-X-` tag. An ordinary extended M3U list (a radio's, an
    /// IPTV list) starts with `#EXTM3U` too, but has no `#EXT-X-` tag.
    public static func isPlaylist(prefix: some Collection<UInt8>) -> Bool {
        var bytes = prefix[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        guard bytes.starts(with: Array("#EXTM3U".utf8)) else { return false }
        let rest = bytes.dropFirst(7)
        guard let next = rest.first, next == 0x0A || next == 0x0D || next == 0x20 || next == 0x09 else { return false }
        let tag = Array("#EXT-X-".utf8)
        let window = Array(rest.prefix(Int(Self.prefixLength)))
        guard window.count >= tag.count else { return false }
        for start in 0...(window.count - tag.count) where window[start] == 0x23 {
            if window[start..<(start + tag.count)].elementsEqual(tag) { return true }
        }
        return false
    }
}
