import Crypto
import Downpour
import Foundation

/// What one media playlist asks to fetch, and how the output is made of it, in order: a value, decided before
/// anything is fetched, with no I/O.
///
/// Each resource is fetched once into a file of its own: a segment, an fMP4 initialisation section
/// (`EXT-X-MAP`), a key. Segments and sections given as byte ranges (`EXT-X-BYTERANGE`) of one resource are cut
/// from the runs of bytes those ranges cover together (``Fetch/range``): ranges that follow or overlap each other
/// are one run, fetched once over several connections; a gap starts another run, so the bytes between are never
/// fetched.
struct HLSFetchPlan: Sendable, Hashable {
    /// One resource to fetch.
    struct Fetch: Sendable, Hashable {
        /// The file it is saved as, inside the download's work directory.
        var name: String
        var url: URL
        /// Only these bytes of it (a run of byte ranges); `nil`: all of it.
        var range: Range<Int64>? = nil
        /// A run of bytes the ranges of several segments are cut from: fetched over several connections.
        var isShared: Bool
        /// The segments it holds, for progress: 1 for a segment, 0 for a key or an initialisation section.
        var segments = 0
    }

    /// How one segment is decrypted.
    struct Decryption: Sendable, Hashable {
        /// The file the key is saved as.
        var keyName: String
        var keyURL: URL
        var iv: [UInt8]
    }

    /// One part of the output, in order.
    struct Piece: Sendable, Hashable {
        /// The file its bytes are in.
        var name: String
        /// Where in that file; `nil`: the whole file.
        var range: Range<Int64>?
        var decryption: Decryption?
        /// A decrypted MPEG-TS segment: every 188-byte packet must start with the sync byte, or the key was wrong.
        var checksTransportStream: Bool
        /// What messages call it ("segment 3 of 40").
        var label: String
        var url: URL
    }

    /// The extensions of packed audio segments (RFC 8216, 3.4): no MPEG-TS sync bytes in them.
    static let packedAudio: Set<String> = ["aac", "mp3", "ac3", "ec3"]

    var fetches: [Fetch]
    var pieces: [Piece]
    /// The segments' count, for progress.
    var segmentCount: Int
    /// Initialisation sections (`EXT-X-MAP`): the output is fragmented MP4, not MPEG-TS.
    var isFragmentedMP4: Bool
    /// A digest of everything that decides the output's bytes: a playlist with other segments, ranges or keys has
    /// another one, and a download resumed against it starts over.
    var fingerprint: String

    /// A live playlist's segments so far are planned as any playlist's; each is named by its media sequence number,
    /// so that the plan of a longer list names the same segments the same.
    ///
    /// - Throws: ``DownloadError`` `invalidRequest` for what Downpour cannot fetch: a method it cannot decrypt
    ///   (`SAMPLE-AES`, DRM), an empty playlist.
    init(_ media: HLSMediaPlaylist, url: URL) throws(DownloadError) {
        if let method = media.unsupportedKeys.first {
            let name: String
            switch method {
            case .aes128: name = "AES-128"
            case .sampleAES: name = "SAMPLE-AES"
            case .other(let other): name = other
            }
            throw DownloadError(
                code: .invalidRequest,
                message: "The playlist at \(url.absoluteString) is encrypted with \(name), which Downpour cannot "
                    + "decrypt (only AES-128 is: SAMPLE-AES and DRM schemes are for players that hold the rights)."
            )
        }
        guard !media.segments.isEmpty else {
            throw DownloadError(
                code: .invalidRequest,
                message: "The playlist at \(url.absoluteString) lists no segments."
            )
        }

        // The fetches in the playlist's order; each resource given as byte ranges stands for its runs, which are
        // known once every range is.
        enum Slot {
            case fetch(Fetch)
            case runs(of: URL)
        }
        var slots: [Slot] = []
        var fetchNames: [String: String] = [:]  // a whole resource's URL → its file
        var keyNames: [URL: String] = [:]
        // Every byte range of each resource given as byte ranges.
        var ranges: [URL: [Range<Int64>]] = [:]
        func shared(_ url: URL, _ range: Range<Int64>) -> String {
            if ranges[url] == nil { slots.append(.runs(of: url)) }
            ranges[url, default: []].append(range)
            return ""  // named below, by the run it falls in
        }
        func whole(_ url: URL, prefix: String) -> String {
            let key = prefix + " " + url.absoluteString
            if let name = fetchNames[key] { return name }
            let name = "\(prefix)-\(fetchNames.count)"
            fetchNames[key] = name
            slots.append(.fetch(Fetch(name: name, url: url, isShared: false)))
            return name
        }

        // The decryption by `key` of what has `sequence`; the key is fetched once per URI.
        func decryption(by key: HLSMediaPlaylist.Key, sequence: Int) -> Decryption {
            let keyName = keyNames[key.url] ?? "key-\(keyNames.count)"
            if keyNames[key.url] == nil {
                keyNames[key.url] = keyName
                slots.append(.fetch(Fetch(name: keyName, url: key.url, isShared: false)))
            }
            return Decryption(keyName: keyName, keyURL: key.url, iv: key.iv(forSequence: sequence))
        }

        var pieces: [Piece] = []
        var lastMap: HLSMediaPlaylist.Map?
        let count = media.segments.count
        for (index, segment) in media.segments.enumerated() {
            let label = "segment \(index + 1) of \(count)"
            if let map = segment.map, map != lastMap {
                let name = map.byteRange.map { shared(map.url, $0) } ?? whole(map.url, prefix: "map")
                pieces.append(
                    Piece(
                        name: name,
                        range: map.byteRange,
                        decryption: map.key.map { decryption(by: $0, sequence: segment.sequence) },
                        checksTransportStream: false,
                        label: "the initialisation section before \(label)",
                        url: map.url
                    )
                )
            }
            lastMap = segment.map
            let decryption = segment.key.map { decryption(by: $0, sequence: segment.sequence) }
            let name: String
            if let range = segment.byteRange {
                name = shared(segment.url, range)
            } else {
                name = "segment-\(segment.sequence)"
                slots.append(.fetch(Fetch(name: name, url: segment.url, isShared: false)))
            }
            pieces.append(
                Piece(
                    name: name,
                    range: segment.byteRange,
                    decryption: decryption,
                    // Packed audio (.aac, .mp3, ...) and fMP4 have no sync bytes to check; anything else must be
                    // MPEG-TS, whatever its name.
                    checksTransportStream: decryption != nil && segment.map == nil
                        && !Self.packedAudio.contains(segment.url.pathExtension.lowercased()),
                    label: label,
                    url: segment.url
                )
            )
        }

        // Each resource's runs: its ranges sorted, those that touch or overlap joined.
        var runs: [URL: [Range<Int64>]] = [:]
        for (resource, parts) in ranges {
            var joined: [Range<Int64>] = []
            for part in parts.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if let last = joined.last, part.lowerBound <= last.upperBound {
                    joined[joined.count - 1] = last.lowerBound..<max(last.upperBound, part.upperBound)
                } else {
                    joined.append(part)
                }
            }
            runs[resource] = joined
        }
        var fetches: [Fetch] = []
        var runNames: [URL: [String]] = [:]
        for slot in slots {
            switch slot {
            case .fetch(let fetch):
                fetches.append(fetch)
            case .runs(let resource):
                // Named by the resource and the bytes: a live playlist's longer list names the same run the same,
                // and a run it widened otherwise (fetched again, not taken for the shorter one on disk).
                let tag = SHA256.hash(data: Data(resource.absoluteString.utf8)).prefix(8)
                    .map { String(format: "%02x", $0) }.joined()
                for run in runs[resource] ?? [] {
                    let name = "range-\(tag)-\(run.lowerBound)-\(run.upperBound)"
                    runNames[resource, default: []].append(name)
                    fetches.append(Fetch(name: name, url: resource, range: run, isShared: true))
                }
            }
        }
        // A ranged piece is cut from the run that holds it, at its place in that run.
        for index in pieces.indices {
            guard let range = pieces[index].range, let resourceRuns = runs[pieces[index].url],
                let run = resourceRuns.firstIndex(where: { $0.contains(range.lowerBound) })
            else { continue }
            let start = resourceRuns[run].lowerBound
            pieces[index].name = runNames[pieces[index].url]![run]
            pieces[index].range = (range.lowerBound - start)..<(range.upperBound - start)
        }

        let segmentsIn = Dictionary(
            pieces.filter { !$0.label.hasPrefix("the initialisation") }.map { ($0.name, 1) },
            uniquingKeysWith: +
        )
        for index in fetches.indices { fetches[index].segments = segmentsIn[fetches[index].name] ?? 0 }

        self.fetches = fetches
        self.pieces = pieces
        self.segmentCount = count
        self.isFragmentedMP4 = media.segments.contains { $0.map != nil }
        var hasher = SHA256()
        for fetch in fetches {
            let range = fetch.range.map { " \($0.lowerBound)-\($0.upperBound)" } ?? ""
            hasher.update(data: Data("fetch \(fetch.name) \(fetch.url.absoluteString)\(range)\n".utf8))
        }
        for piece in pieces {
            let range = piece.range.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "-"
            let iv = piece.decryption.map { $0.keyName + " " + $0.iv.map { String($0, radix: 16) }.joined() } ?? "-"
            hasher.update(data: Data("piece \(piece.name) \(range) \(iv) \(piece.checksTransportStream)\n".utf8))
        }
        self.fingerprint = hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
