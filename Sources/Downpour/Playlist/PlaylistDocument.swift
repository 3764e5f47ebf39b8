import Foundation

/// A media playlist document (HLS, `.m3u8`) a download answered with, read into memory instead of saved
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

    /// Whether a URL path names a playlist: it ends in `.m3u8` (any case).
    public static func isPlaylist(path: String) -> Bool {
        path.lowercased().hasSuffix(".m3u8")
    }

    /// Whether a body is a playlist: `#EXTM3U` at its start, after a byte order mark and blank space, as servers
    /// that call it `text/plain` or `application/octet-stream` need.
    public static func startsLikePlaylist(_ prefix: some Collection<UInt8>) -> Bool {
        var bytes = prefix.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        return bytes.starts(with: Array("#EXTM3U".utf8))
    }
}
