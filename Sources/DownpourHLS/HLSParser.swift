import Downpour
import Foundation

/// Reads a playlist's lines into an ``HLSPlaylist``: the tags that apply to the next URI line (`EXTINF`,
/// `EXT-X-BYTERANGE`, `EXT-X-DISCONTINUITY`, `EXT-X-STREAM-INF`) are held until it comes; `EXT-X-KEY` and
/// `EXT-X-MAP` apply to every segment after them. Unknown tags and comments are passed over, as RFC 8216 asks.
struct HLSParser {
    let url: URL
    private var lineNumber = 0

    // What the next URI line gets.
    private var duration: Double?
    private var byteRange: HLSMediaPlaylist.ByteRange?
    private var discontinuity = false
    private var streamInfo: [String: String]?

    // What applies until changed.
    /// The keys in force, one per `KEYFORMAT` (consecutive `EXT-X-KEY` tags offer the same segments in several
    /// formats; a tag after a segment starts a new set).
    private var keys: [HLSMediaPlaylist.Key] = []
    private var keysHaveSegment = false
    private var map: HLSMediaPlaylist.Map?
    /// Where the last byte range of each resource ended: a `BYTERANGE` without an offset goes on from there.
    private var rangeEnds: [URL: Int64] = [:]

    private var targetDuration: Int?
    private var mediaSequence = 0
    private var hasEnd = false
    private var playlistType: String?
    private var segments: [HLSMediaPlaylist.Segment] = []
    private var variants: [HLSMultivariantPlaylist.Variant] = []
    private var renditions: [HLSMultivariantPlaylist.Rendition] = []

    init(url: URL) {
        self.url = url
    }

    mutating func parse(_ text: String) throws(DownloadError) -> HLSPlaylist {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).makeIterator()
        // The first line is `#EXTM3U`, after a byte order mark if any.
        let first = lines.next().map { $0.hasPrefix("\u{FEFF}") ? $0.dropFirst() : $0[...] }
        guard let first, first.trimmingCharacters(in: .whitespaces) == "#EXTM3U" else {
            throw DownloadError(
                code: .remoteMisbehaved,
                message: "\(self.url.absoluteString) is not an HLS playlist: it does not begin with #EXTM3U."
            )
        }
        self.lineNumber = 1
        while let raw = lines.next() {
            self.lineNumber += 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            if line.hasPrefix("#") {
                try self.tag(line)
            } else {
                try self.uri(line)
            }
        }
        if !self.variants.isEmpty || !self.renditions.isEmpty {
            guard self.segments.isEmpty else {
                throw self.malformed("it lists both variants and media segments")
            }
            return .multivariant(HLSMultivariantPlaylist(variants: self.variants, renditions: self.renditions))
        }
        return .media(
            HLSMediaPlaylist(
                targetDuration: self.targetDuration
                    ?? Int(exactly: self.segments.map(\.duration).max()?.rounded(.up) ?? 0) ?? 0,
                mediaSequence: self.mediaSequence,
                segments: self.segments,
                hasEnd: self.hasEnd,
                playlistType: self.playlistType
            )
        )
    }

    private mutating func tag(_ line: String) throws(DownloadError) {
        let (name, value) = Self.split(line)
        switch name {
        case "#EXTINF":
            let text = value.split(separator: ",", maxSplits: 1).first.map(String.init) ?? ""
            // A day at most: a segment longer is a server's mistake, and a number past it could not be added up.
            guard let duration = Double(text.trimmingCharacters(in: .whitespaces)), duration >= 0,
                duration <= 86_400
            else {
                throw self.malformed("EXTINF has no duration")
            }
            self.duration = duration
        case "#EXT-X-TARGETDURATION":
            self.targetDuration = try self.integer(value, "EXT-X-TARGETDURATION")
        case "#EXT-X-MEDIA-SEQUENCE":
            // It numbers the first segment: after one, it would renumber only the rest (and their IVs).
            guard self.segments.isEmpty else { throw self.malformed("EXT-X-MEDIA-SEQUENCE comes after a segment") }
            self.mediaSequence = try self.integer(value, "EXT-X-MEDIA-SEQUENCE")
        case "#EXT-X-BYTERANGE":
            self.byteRange = try self.range(value, of: nil)
        case "#EXT-X-DISCONTINUITY":
            self.discontinuity = true
        case "#EXT-X-ENDLIST":
            self.hasEnd = true
        case "#EXT-X-PLAYLIST-TYPE":
            self.playlistType = value
        case "#EXT-X-KEY":
            if self.keysHaveSegment {
                self.keys = []
                self.keysHaveSegment = false
            }
            let key = try self.key(Self.attributes(value))
            if let key {
                self.keys.removeAll { $0.keyFormat ?? "identity" == key.keyFormat ?? "identity" }
                self.keys.append(key)
            } else {
                self.keys = []
            }
        case "#EXT-X-MAP":
            let attributes = Self.attributes(value)
            guard let uri = attributes["URI"] else { throw self.malformed("EXT-X-MAP has no URI") }
            let url = try self.resolve(uri)
            let key = self.keyInForce
            if let key, key.method == .aes128, key.iv == nil {
                throw self.malformed("an EXT-X-MAP encrypted with AES-128 needs the IV of its EXT-X-KEY")
            }
            self.map = HLSMediaPlaylist.Map(
                url: url,
                byteRange: try attributes["BYTERANGE"].map { text throws(DownloadError) in
                    try self.range(text, of: url)
                },
                key: key
            )
        case "#EXT-X-STREAM-INF":
            self.streamInfo = Self.attributes(value)
        case "#EXT-X-MEDIA":
            try self.rendition(Self.attributes(value))
        default:
            break
        }
    }

    private mutating func uri(_ line: String) throws(DownloadError) {
        let url = try self.resolve(line)
        if let info = self.streamInfo {
            self.streamInfo = nil
            guard let bandwidth = info["BANDWIDTH"].flatMap({ Int($0) }) else {
                throw self.malformed("EXT-X-STREAM-INF has no BANDWIDTH")
            }
            let size = info["RESOLUTION"]?.lowercased().split(separator: "x").compactMap { Int($0) } ?? []
            self.variants.append(
                HLSMultivariantPlaylist.Variant(
                    url: url,
                    bandwidth: bandwidth,
                    averageBandwidth: info["AVERAGE-BANDWIDTH"].flatMap { Int($0) },
                    width: size.count == 2 ? size[0] : nil,
                    height: size.count == 2 ? size[1] : nil,
                    codecs: info["CODECS"],
                    audioGroup: info["AUDIO"],
                    subtitlesGroup: info["SUBTITLES"]
                )
            )
            return
        }
        guard let duration = self.duration else { throw self.malformed("a segment URI has no EXTINF before it") }
        var byteRange = self.byteRange
        if let range = byteRange, range.lowerBound < 0 {
            // No offset: from where the last range of this resource ended.
            guard let start = self.rangeEnds[url] else {
                throw self.malformed("EXT-X-BYTERANGE has no offset and follows no range of the same resource")
            }
            let (end, overflow) = start.addingReportingOverflow(range.upperBound - range.lowerBound)
            guard !overflow else { throw self.malformed("a byte range ends past 2^63") }
            byteRange = start..<end
        }
        if let range = byteRange { self.rangeEnds[url] = range.upperBound }
        let (sequence, overflow) = self.mediaSequence.addingReportingOverflow(self.segments.count)
        guard !overflow else { throw self.malformed("the media sequence numbers pass 2^63") }
        let key = self.keyInForce
        self.keysHaveSegment = true
        self.segments.append(
            HLSMediaPlaylist.Segment(
                url: url,
                duration: duration,
                sequence: sequence,
                byteRange: byteRange,
                key: key,
                map: self.map,
                discontinuity: self.discontinuity
            )
        )
        self.duration = nil
        self.byteRange = nil
        self.discontinuity = false
    }

    /// The key of what comes next: of the formats offered, the one Downpour reads (`identity`: the key's bytes),
    /// else the first, named in the refusal.
    private var keyInForce: HLSMediaPlaylist.Key? {
        self.keys.first { $0.method == .aes128 && ($0.keyFormat ?? "identity") == "identity" } ?? self.keys.first
    }

    private func key(_ attributes: [String: String]) throws(DownloadError) -> HLSMediaPlaylist.Key? {
        guard let method = attributes["METHOD"] else { throw self.malformed("EXT-X-KEY has no METHOD") }
        if method == "NONE" { return nil }
        guard let uri = attributes["URI"] else { throw self.malformed("EXT-X-KEY has no URI") }
        var iv: [UInt8]?
        if let text = attributes["IV"] {
            guard let bytes = Self.hexBytes(text), bytes.count == 16 else {
                throw self.malformed("EXT-X-KEY's IV is not 16 bytes in hexadecimal")
            }
            iv = bytes
        }
        // A key Downpour fetches must be on http or https; another method's (FairPlay's `skd://`) is only named
        // in the refusal.
        let url: URL
        if method == "AES-128" {
            url = try self.resolve(uri)
        } else if let other = URL(string: uri, relativeTo: self.url)?.absoluteURL {
            url = other
        } else {
            throw self.malformed("EXT-X-KEY's URI is not a URI")
        }
        return HLSMediaPlaylist.Key(
            method: method == "AES-128" ? .aes128 : method == "SAMPLE-AES" ? .sampleAES : .other(method),
            url: url,
            iv: iv,
            keyFormat: attributes["KEYFORMAT"]
        )
    }

    private mutating func rendition(_ attributes: [String: String]) throws(DownloadError) {
        guard let type = attributes["TYPE"], let kind = HLSMultivariantPlaylist.Rendition.Kind(rawValue: type) else {
            throw self.malformed("EXT-X-MEDIA has no TYPE it knows")
        }
        guard let group = attributes["GROUP-ID"], let name = attributes["NAME"] else {
            throw self.malformed("EXT-X-MEDIA has no GROUP-ID or NAME")
        }
        self.renditions.append(
            HLSMultivariantPlaylist.Rendition(
                kind: kind,
                groupID: group,
                name: name,
                language: attributes["LANGUAGE"],
                isDefault: attributes["DEFAULT"] == "YES",
                autoselect: attributes["AUTOSELECT"] == "YES",
                url: try attributes["URI"].map { uri throws(DownloadError) in try self.resolve(uri) }
            )
        )
    }

    // MARK: - Values

    /// `n[@o]`: `n` bytes from `o`; without `o`, a range whose lower bound is -1 until the URI line says where
    /// it follows on from (for `resource`: an `EXT-X-MAP`'s own range needs its offset).
    private func range(_ text: String, of resource: URL?) throws(DownloadError) -> HLSMediaPlaylist.ByteRange {
        let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false).map {
            Int64($0.trimmingCharacters(in: .whitespaces))
        }
        guard let length = parts.first ?? nil, length > 0, parts.count == 1 || parts[1].map({ $0 >= 0 }) == true else {
            throw self.malformed("a byte range is not n[@o]: \(text)")
        }
        guard parts.count == 2, let offset = parts[1] else {
            guard resource == nil else { throw self.malformed("EXT-X-MAP's BYTERANGE has no offset") }
            return -1..<(length - 1)
        }
        let (end, overflow) = offset.addingReportingOverflow(length)
        guard !overflow else { throw self.malformed("a byte range ends past 2^63: \(text)") }
        return offset..<end
    }

    private func integer(_ text: String, _ tag: String) throws(DownloadError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value >= 0 else {
            throw self.malformed("\(tag) is not a whole number")
        }
        return value
    }

    private func resolve(_ uri: String) throws(DownloadError) -> URL {
        guard let url = URL(string: uri, relativeTo: self.url)?.absoluteURL, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else {
            throw self.malformed("\(uri) is not an http or https URL")
        }
        return url
    }

    private func malformed(_ what: String) -> DownloadError {
        DownloadError(
            code: .remoteMisbehaved,
            message: "The HLS playlist \(self.url.absoluteString) is malformed at line \(self.lineNumber): \(what)."
        )
    }

    /// `#NAME:VALUE` as (`#NAME`, `VALUE`); a tag with no value gives an empty one.
    static func split(_ line: String) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { return (line, "") }
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    }

    /// An attribute list (`KEY=VALUE,KEY="quoted, with commas"`): quoted values lose their quotes.
    static func attributes(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        var rest = Substring(text)
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...]
            let value: Substring
            if rest.first == "\"" {
                let body = rest.dropFirst()
                let close = body.firstIndex(of: "\"") ?? body.endIndex
                value = body[..<close]
                rest = close < body.endIndex ? body[body.index(after: close)...] : body[body.endIndex...]
                if let comma = rest.firstIndex(of: ",") { rest = rest[rest.index(after: comma)...] } else { rest = "" }
            } else {
                let comma = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<comma]
                rest = comma < rest.endIndex ? rest[rest.index(after: comma)...] : rest[rest.endIndex...]
            }
            if !name.isEmpty { result[name] = String(value).trimmingCharacters(in: .whitespaces) }
        }
        return result
    }

    /// `0x` followed by hexadecimal digits, as bytes.
    static func hexBytes(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("0x") || text.hasPrefix("0X") else { return nil }
        let digits = Array(text.dropFirst(2).utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = HexDigit.value(digits[index]), let low = HexDigit.value(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
