import Downpour
import Foundation

/// An HLS playlist (RFC 8216): a multivariant ("master") playlist that lists the same video at several bitrates, or a
/// media playlist that lists one rendition's segments. A value, parsed from the playlist's text with its URL
/// (``parse(_:url:)``); it does no I/O.
///
/// ```swift
/// switch try HLSPlaylist.parse(text, url: url) {
/// case .multivariant(let master): let variant = master.variant(.best)
/// case .media(let media): media.segments.map(\.url)
/// }
/// ```
public enum HLSPlaylist: Sendable, Hashable {
    case multivariant(HLSMultivariantPlaylist)
    case media(HLSMediaPlaylist)

    /// Whether a response is a playlist: by its media type, or by what its body starts with
    /// (``PlaylistDocument/isPlaylist(prefix:)``), as servers that call it `text/plain` need.
    public static func isPlaylist(contentType: String?, prefix: some Collection<UInt8>) -> Bool {
        contentType.map(PlaylistDocument.isPlaylist(contentType:)) ?? false
            || PlaylistDocument.isPlaylist(prefix: prefix)
    }

    /// Parses a playlist's text; `url` is where it came from (relative URIs are resolved against it).
    ///
    /// - Throws: ``DownloadError`` `remoteMisbehaved` when the text is not an HLS playlist or a tag in it is malformed,
    ///   naming the line.
    public static func parse(_ text: String, url: URL) throws(DownloadError) -> HLSPlaylist {
        var parser = HLSParser(url: url)
        return try parser.parse(text)
    }
}

/// A multivariant playlist: the variants (one video at several bitrates and sizes) and the renditions they share
/// (audio in several languages, subtitles).
public struct HLSMultivariantPlaylist: Sendable, Hashable {
    /// One `EXT-X-STREAM-INF`: a media playlist and what it takes to play.
    public struct Variant: Sendable, Hashable {
        public var url: URL
        /// Peak bits per second (`BANDWIDTH`).
        public var bandwidth: Int
        public var averageBandwidth: Int?
        public var width: Int?
        public var height: Int?
        public var codecs: String?
        /// The `GROUP-ID` of the audio renditions it plays with, if its audio is not in its own segments.
        public var audioGroup: String?
        public var subtitlesGroup: String?

        /// Whether it carries video: a `RESOLUTION`, or a video codec in `CODECS`; a variant that says neither
        /// counts as video (old playlists give only `BANDWIDTH`).
        public var hasVideo: Bool {
            guard self.height == nil, let codecs = self.codecs?.lowercased() else { return true }
            return ["avc1", "avc3", "hvc1", "hev1", "dvh1", "dvhe", "av01", "vp09", "vp8", "mp4v"].contains {
                codecs.contains($0)
            }
        }
    }

    /// One `EXT-X-MEDIA`.
    public struct Rendition: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable {
            case audio = "AUDIO"
            case video = "VIDEO"
            case subtitles = "SUBTITLES"
            case closedCaptions = "CLOSED-CAPTIONS"
        }

        public var kind: Kind
        public var groupID: String
        public var name: String
        public var language: String?
        public var isDefault: Bool
        public var autoselect: Bool
        /// `nil` when the rendition is in the variant's own segments.
        public var url: URL?
    }

    public var variants: [Variant]
    public var renditions: [Rendition]

    /// The variant `choice` picks; `nil` when there is none (or none of that height). Variants with video (a
    /// resolution, or a video codec) come first: an audio-only variant is picked only when there is nothing else.
    public func variant(_ choice: HLSVideoChoice) -> Variant? {
        let video = self.variants.filter(\.hasVideo)
        let variants = video.isEmpty ? self.variants : video
        let order = { (a: Variant, b: Variant) in (a.bandwidth, a.height ?? 0) < (b.bandwidth, b.height ?? 0) }
        switch choice {
        case .best:
            return variants.max(by: order)
        case .worst:
            return variants.min(by: order)
        case .height(let height):
            return variants.filter { $0.height == height }.max(by: order)
        case .bandwidth(let limit):
            // The best at or under the limit; the leanest when all are over it.
            return variants.filter { $0.bandwidth <= limit }.max(by: order) ?? variants.min(by: order)
        }
    }

    /// The rendition of `kind` in `group` to fetch beside a variant: the one in `language` when given, else the
    /// group's `DEFAULT=YES` one, else its first; only renditions with a URI of their own count.
    public func rendition(_ kind: Rendition.Kind, group: String, language: String? = nil) -> Rendition? {
        let candidates = self.renditions.filter { $0.kind == kind && $0.groupID == group && $0.url != nil }
        if let language {
            return candidates.first { $0.language?.lowercased() == language.lowercased() }
        }
        return candidates.first(where: \.isDefault) ?? candidates.first
    }
}

/// Which variant of a multivariant playlist to fetch (`--media-video`).
public enum HLSVideoChoice: Sendable, Hashable, CustomStringConvertible {
    /// The highest `BANDWIDTH` (the default).
    case best
    /// The lowest `BANDWIDTH`.
    case worst
    /// The variant of this many lines (`720p`, or `720`); of several, the highest bandwidth.
    case height(Int)
    /// The best at or under this many bits per second; the leanest when every variant needs more.
    case bandwidth(Int)

    /// `best`, `worst`, a height (`720p` or `720`), or a bandwidth in bits per second (`2500000`, or `2500k`,
    /// `2.5M`); `nil` for anything else. A bare number below 10,000 is a height.
    public init?(_ text: String) {
        let value = text.trimmingCharacters(in: .whitespaces).lowercased()
        switch value {
        case "best": self = .best
        case "worst": self = .worst
        default:
            if value.hasSuffix("p"), let height = Int(value.dropLast()), height > 0 {
                self = .height(height)
            } else if let number = Int(value), number > 0 {
                self = number < 10_000 ? .height(number) : .bandwidth(number)
            } else if let last = value.last, let scale = ["k": 1_000.0, "m": 1_000_000.0][String(last)],
                let number = Double(value.dropLast()), number > 0, number.isFinite,
                let bandwidth = Int(exactly: (number * scale).rounded()), bandwidth > 0
            {
                self = .bandwidth(bandwidth)
            } else {
                return nil
            }
        }
    }

    public var description: String {
        switch self {
        case .best: "best"
        case .worst: "worst"
        case .height(let height): "\(height)p"
        case .bandwidth(let bandwidth): "\(bandwidth)"
        }
    }
}

/// Which subtitles renditions of a multivariant playlist to fetch beside the video (`--media-subtitles`).
public enum HLSSubtitleChoice: Sendable, Hashable, CustomStringConvertible {
    /// None (the default).
    case none
    /// Every subtitles rendition the variant names.
    case all
    /// Those in these languages (`en`, `pt-BR`), in this order; `en` takes `en-US` too.
    case languages([String])

    /// `none`, `all`, or language tags separated by commas (`en,de`); `nil` for anything else.
    public init?(_ text: String) {
        let value = text.trimmingCharacters(in: .whitespaces).lowercased()
        switch value {
        case "none": self = .none
        case "all": self = .all
        default:
            let tags = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-")
            guard !tags.isEmpty, tags.allSatisfy({ !$0.isEmpty && $0.count <= 35 && $0.allSatisfy(allowed.contains) })
            else { return nil }
            self = .languages(tags)
        }
    }

    public var description: String {
        switch self {
        case .none: "none"
        case .all: "all"
        case .languages(let tags): tags.joined(separator: ",")
        }
    }
}

extension HLSMultivariantPlaylist {
    /// The subtitles renditions of `group` that `choice` asks for, with a URI of their own: all of them in playlist
    /// order, or per language asked for, the first whose `LANGUAGE` is it or starts with it (`en` takes `en-US`).
    public func subtitles(_ choice: HLSSubtitleChoice, group: String) -> [Rendition] {
        let candidates = self.renditions.filter { $0.kind == .subtitles && $0.groupID == group && $0.url != nil }
        switch choice {
        case .none:
            return []
        case .all:
            return candidates
        case .languages(let tags):
            var chosen: [Rendition] = []
            for tag in tags {
                let match = candidates.first { rendition in
                    guard let language = rendition.language?.lowercased() else { return false }
                    return language == tag || language.hasPrefix(tag + "-")
                }
                if let match, !chosen.contains(match) { chosen.append(match) }
            }
            return chosen
        }
    }
}

/// A media playlist: the segments of one rendition, in order.
public struct HLSMediaPlaylist: Sendable, Hashable {
    /// How a segment is encrypted (`EXT-X-KEY`).
    public struct Key: Sendable, Hashable {
        public enum Method: Sendable, Hashable {
            case aes128
            case sampleAES
            /// A method Downpour cannot decrypt (`SAMPLE-AES-CTR`, DRM schemes).
            case other(String)
        }

        public var method: Method
        public var url: URL
        /// The 16-byte IV; `nil`: the segment's media sequence number, big-endian (RFC 8216, 5.2).
        public var iv: [UInt8]?
        public var keyFormat: String?

        /// The IV of the segment with this media sequence number.
        public func iv(forSequence sequence: Int) -> [UInt8] {
            if let iv = self.iv { return iv }
            let number = UInt64(truncatingIfNeeded: sequence)
            return [UInt8](repeating: 0, count: 8) + (0..<8).map { UInt8(truncatingIfNeeded: number >> (56 - 8 * $0)) }
        }
    }

    /// Where a part of a resource is (`EXT-X-BYTERANGE`, the `BYTERANGE` of `EXT-X-MAP`).
    public typealias ByteRange = Range<Int64>

    /// The fMP4 initialisation section (`EXT-X-MAP`), written before the segments it applies to.
    public struct Map: Sendable, Hashable {
        public var url: URL
        public var byteRange: ByteRange?
        /// The key in force where the section is declared (RFC 8216, 4.3.2.5); `nil`: not encrypted. An AES-128 key
        /// here always has its IV.
        public var key: Key? = nil
    }

    public struct Segment: Sendable, Hashable {
        public var url: URL
        /// Seconds (`EXTINF`).
        public var duration: Double
        /// The media sequence number.
        public var sequence: Int
        public var byteRange: ByteRange?
        /// `nil`: not encrypted.
        public var key: Key?
        public var map: Map?
        /// An `EXT-X-DISCONTINUITY` comes before it.
        public var discontinuity: Bool
    }

    public var targetDuration: Int
    public var mediaSequence: Int
    public var segments: [Segment]
    /// `EXT-X-ENDLIST`: no segment will be added. Without it the playlist is live.
    public var hasEnd: Bool
    /// `EXT-X-PLAYLIST-TYPE` (`VOD`, `EVENT`).
    public var playlistType: String?

    /// The playing time, in seconds.
    public var duration: Double { self.segments.reduce(0) { $0 + $1.duration } }

    /// Every key or method Downpour cannot decrypt, for a clear refusal before anything is fetched.
    public var unsupportedKeys: [Key.Method] {
        var methods: [Key.Method] = []
        for key in self.segments.compactMap(\.key) where key.method != .aes128 && !methods.contains(key.method) {
            methods.append(key.method)
        }
        return methods
    }
}
