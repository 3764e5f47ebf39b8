import Downpour
import DownpourJSON
import DownpourQueue

/// A ``DownloadStatus`` as aria2's status struct (§2.3 of the reference, for downloads that are not
/// BitTorrent): every number a decimal string, no JSON `null`, and exactly the keys aria2 has for such a
/// download: `errorCode` and `errorMessage` only for stopped ones, `bitfield` only once the length is known,
/// `followedBy` and `following` only for a Metalink URL's download and the downloads of its files; and, in a fleet,
/// Downpour's `node` for an active one.
enum StatusStruct {
    /// The piece size used for `pieceLength`, `numPieces` and `bitfield`. Downpour has no pieces (it tracks
    /// byte ranges), so this is a fixed size for display: 1 MiB, aria2's default `piece-length`.
    static let pieceLength: Int64 = 1 << 20

    /// The struct, restricted to `keys` when given (unknown keys are ignored; an empty list means all).
    static func make(_ status: DownloadStatus, keys: Set<String>? = nil) -> JSONValue {
        let all = keys?.isEmpty ?? true
        func wants(_ key: String) -> Bool { all || keys!.contains(key) }
        let isStopped = Self.isStopped(status.status)
        var object = JSONObject()
        object.members.reserveCapacity(all ? 16 : keys!.count)
        if wants("gid") { object.append("gid", .string(status.gid.description)) }
        if wants("status") { object.append("status", .string(status.status.rawValue)) }
        if wants("totalLength") { object.append("totalLength", Self.number(status.totalLength)) }
        if wants("completedLength") { object.append("completedLength", Self.number(status.completedLength)) }
        if wants("uploadLength") { object.append("uploadLength", "0") }
        let numPieces = Self.numberOfPieces(status.totalLength)
        if wants("bitfield"), numPieces > 0 {
            object.append("bitfield", .string(Self.bitfield(status, numPieces: numPieces)))
        }
        if wants("downloadSpeed") {
            object.append("downloadSpeed", Self.number(status.status == .active ? status.downloadSpeed : 0))
        }
        if wants("uploadSpeed") { object.append("uploadSpeed", "0") }
        if wants("pieceLength") { object.append("pieceLength", Self.number(Self.pieceLength)) }
        if wants("numPieces") { object.append("numPieces", Self.number(numPieces)) }
        if wants("connections") {
            object.append("connections", Self.number(Int64(status.status == .active ? status.connections : 0)))
        }
        if isStopped {
            if wants("errorCode") {
                object.append("errorCode", Self.number(Int64(status.errorCode ?? Self.defaultErrorCode(status.status))))
            }
            if wants("errorMessage") { object.append("errorMessage", .string(status.errorMessage ?? "")) }
        }
        // aria2 leaves these out unless set: a Metalink URL's download and the downloads of its files.
        if wants("followedBy"), !status.followedBy.isEmpty {
            object.append("followedBy", .array(status.followedBy.map { .string($0.description) }))
        }
        if wants("following"), let following = status.following {
            object.append("following", .string(following.description))
        }
        // Downpour's own, in a fleet: aria2's clients ignore keys they do not know.
        if wants("node"), let node = status.node { object.append("node", .string(node)) }
        if wants("dir") { object.append("dir", .string(status.directory)) }
        if wants("files") { object.append("files", Self.files(status)) }
        return .object(object)
    }

    /// `aria2.getGlobalStat`'s struct (also the progress push's `globalStat`): every number a decimal string.
    static func globalStat(_ stat: GlobalStat) -> JSONValue {
        [
            "downloadSpeed": Self.number(stat.downloadSpeed),
            "uploadSpeed": "0",
            "numActive": Self.number(Int64(stat.numActive)),
            "numWaiting": Self.number(Int64(stat.numWaiting)),
            "numStopped": Self.number(Int64(stat.numStopped)),
            "numStoppedTotal": Self.number(Int64(stat.numStoppedTotal)),
        ]
    }

    /// The code of a stopped download whose status came without one: 0 complete, 31 removed, 1 (unknown) else.
    static func defaultErrorCode(_ status: QueueStatus) -> Int {
        switch status {
        case .complete: return 0
        case .removed: return 31
        default: return 1
        }
    }

    static func isStopped(_ status: QueueStatus) -> Bool {
        switch status {
        case .active, .waiting, .paused: return false
        case .complete, .error, .removed: return true
        }
    }

    static func number(_ value: Int64) -> JSONValue {
        .string(String(value))
    }

    static func numberOfPieces(_ totalLength: Int64) -> Int64 {
        totalLength <= 0 ? 0 : (totalLength - 1) / Self.pieceLength + 1
    }

    /// `files`: the one file of a download; for an HLS video with a separate audio rendition, the video and then
    /// the audio, whose length is the video's part of the whole.
    static func files(_ status: DownloadStatus) -> JSONValue {
        let audio = status.audio
        let audioLength = audio?.length ?? 0
        let video: JSONValue = [
            "index": "1",
            "path": .string(status.path ?? ""),
            "length": Self.number(status.totalLength - audioLength),
            "completedLength": Self.number(max(0, status.completedLength - audioLength)),
            "selected": "true",
            "uris": .array(Self.uris(status)),
        ]
        guard let audio else { return [video] }
        let second: JSONValue = [
            "index": "2",
            "path": .string(audio.path),
            "length": Self.number(audio.length),
            "completedLength": Self.number(status.status == .complete ? audio.length : 0),
            "selected": "true",
            "uris": [],
        ]
        return [video, second]
    }

    /// The URIs with aria2's status: an active download uses all of them (they are mirrors of one file, and its
    /// connections are spread over them), a waiting one uses none yet, a stopped one has used them.
    static func uris(_ status: DownloadStatus) -> [JSONValue] {
        status.uris.map { uri in
            let used: Bool
            switch status.status {
            case .active: used = true
            case .waiting, .paused: used = false
            case .complete, .error, .removed: used = true
            }
            return ["uri": .string(uri), "status": used ? "used" : "waiting"]
        }
    }

    /// Hexadecimal, the most significant bit of the first byte for piece 0; a piece counts when its bytes are
    /// all on disk.
    static func bitfield(_ status: DownloadStatus, numPieces: Int64) -> String {
        var ranges = status.completedRanges
        if ranges.isEmpty, status.status == .complete { ranges = [0..<status.totalLength] }
        let byteCount = Int((numPieces + 7) / 8)
        var bytes = [UInt8](repeating: 0, count: byteCount)
        var next = 0
        for piece in 0..<numPieces {
            let start = piece * Self.pieceLength
            let end = min(start + Self.pieceLength, status.totalLength)
            while next < ranges.count, ranges[next].upperBound <= start { next += 1 }
            guard next < ranges.count else { break }
            if ranges[next].lowerBound <= start, ranges[next].upperBound >= end {
                bytes[Int(piece / 8)] |= 0x80 >> UInt8(piece % 8)
            }
        }
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(byteCount * 2)
        for byte in bytes {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
