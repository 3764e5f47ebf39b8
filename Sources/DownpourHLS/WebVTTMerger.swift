/// Joins the WebVTT segments of an HLS subtitles rendition into one WebVTT file (RFC 8216, 3.5).
///
/// Each segment is a WebVTT file of its own: its header (`WEBVTT`, and an `X-TIMESTAMP-MAP` that ties its cue times
/// to the stream's MPEG-2 clock) and its cues. The output keeps the first segment's header; a later segment whose map
/// differs has its cue times moved onto the first one's, so every cue stays where the stream shows it. `STYLE` and
/// `REGION` blocks are kept from the first segment only (WebVTT allows them before the first cue alone), and a cue
/// repeated in the next segment, as packagers do for one that spans the boundary, is written once.
public enum WebVTTMerger {
    /// The MPEG-2 clock runs at 90 kHz and wraps at 2^33.
    static let clockRate: Int64 = 90_000
    static let clockWrap: Int64 = 1 << 33

    /// The segments' texts, in playlist order, as one WebVTT file.
    public static func merge(_ segments: [String]) -> String {
        var output: [String] = []
        var firstMap = TimestampMap.zero
        var previousCues: Set<String> = []
        var identifiers: Set<String> = []
        for (index, text) in segments.enumerated() {
            let (header, blocks) = Self.split(text)
            // A segment without a map is mapped as MPEGTS:0,LOCAL:00:00:00.000 (RFC 8216, 3.5).
            let map = header.lazy.compactMap(TimestampMap.init(line:)).first
            if index == 0 {
                firstMap = map ?? .zero
                output.append("WEBVTT")
                if let map { output.append(map.line) }
                output.append("")
            }
            let shift = Self.shift(from: map ?? .zero, to: firstMap)
            var cues: Set<String> = []
            for block in blocks {
                guard let timing = block.firstIndex(where: { $0.contains("-->") }) else {
                    // STYLE, REGION and NOTE: only before the first cue, so only from the first segment.
                    if index == 0 {
                        output += block
                        output.append("")
                    }
                    continue
                }
                var cue = block
                if shift != 0, let moved = Self.move(cue[timing], by: shift) { cue[timing] = moved }
                let key = cue[timing...].joined(separator: "\n")
                cues.insert(key)
                if previousCues.contains(key) { continue }
                // An identifier is unique in a file: one a segment before used already is dropped.
                if timing > 0 {
                    let identifier = cue[..<timing].joined(separator: "\n")
                    if !identifiers.insert(identifier).inserted { cue.removeFirst(timing) }
                }
                output += cue
                output.append("")
            }
            previousCues = cues
        }
        if output.isEmpty { return "WEBVTT\n" }
        return output.joined(separator: "\n")
    }

    /// The header lines (up to the first blank line) and the blocks after it, each a list of lines.
    static func split(_ text: String) -> (header: [String], blocks: [[String]]) {
        var body = Substring(text)
        if body.first == "\u{FEFF}" { body = body.dropFirst() }
        let lines = body.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
            .map(String.init)
        var header: [String] = []
        var index = 0
        while index < lines.count, !lines[index].trimmingSpaces.isEmpty {
            header.append(lines[index])
            index += 1
        }
        var blocks: [[String]] = []
        var block: [String] = []
        for line in lines[index...] {
            if line.trimmingSpaces.isEmpty {
                if !block.isEmpty { blocks.append(block) }
                block = []
            } else {
                block.append(line)
            }
        }
        if !block.isEmpty { blocks.append(block) }
        return (header, blocks)
    }

    /// How far a cue time of a segment with `map` moves to be the same moment under `first`, in milliseconds
    /// (rounded). Both maps hold bounded values (``TimestampMap``), so nothing here overflows.
    static func shift(from map: TimestampMap, to first: TimestampMap) -> Int64 {
        var ticks = map.mpegts - first.mpegts
        if ticks > Self.clockWrap / 2 { ticks -= Self.clockWrap }
        if ticks < -Self.clockWrap / 2 { ticks += Self.clockWrap }
        let scaled = ticks * 1000
        let milliseconds = (scaled + (scaled >= 0 ? Self.clockRate / 2 : -Self.clockRate / 2)) / Self.clockRate
        return milliseconds - (map.local - first.local)
    }

    /// A timing line (`00:01.000 --> 00:02.500 align:start`) with both times moved by `shift` milliseconds; `nil`
    /// when it is not one.
    static func move(_ line: String, by shift: Int64) -> String? {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count >= 3, parts[1] == "-->", let start = Self.milliseconds(parts[0]),
            let end = Self.milliseconds(parts[2])
        else { return nil }
        let settings = parts.dropFirst(3).joined(separator: " ")
        let moved = "\(Self.format(max(0, start + shift))) --> \(Self.format(max(0, end + shift)))"
        return settings.isEmpty ? moved : moved + " " + settings
    }

    /// The longest time read: 10^6 hours, far past any stream, and far from overflowing a millisecond count.
    static let longestTime: Int64 = 1_000_000 * 3_600_000

    /// `hh:mm:ss.ttt` or `mm:ss.ttt` in milliseconds (digits only, minutes and seconds under 60, at most
    /// ``longestTime``); `nil` for anything else.
    static func milliseconds(_ text: some StringProtocol) -> Int64? {
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 2, pieces[1].count == 3, let fraction = Self.digits(pieces[1]) else { return nil }
        let clock = pieces[0].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 2 || clock.count == 3 else { return nil }
        var values: [Int64] = []
        for (index, field) in clock.enumerated() {
            // Hours take up to seven digits; minutes and seconds exactly two.
            let isHours = clock.count == 3 && index == 0
            guard isHours ? (1...7).contains(field.count) : field.count == 2, let value = Self.digits(field),
                isHours || value < 60
            else { return nil }
            values.append(value)
        }
        let total = values.reduce(0) { $0 * 60 + $1 } * 1000 + fraction
        return total <= Self.longestTime ? total : nil
    }

    /// A run of ASCII digits as a number; `nil` for anything else, or one past `Int64.max`.
    static func digits(_ text: some StringProtocol) -> Int64? {
        guard !text.isEmpty, text.count <= 19, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }

    static func format(_ milliseconds: Int64) -> String {
        let hours = milliseconds / 3_600_000
        let minutes = milliseconds / 60_000 % 60
        let seconds = milliseconds / 1000 % 60
        let fraction = milliseconds % 1000
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(seconds, 2)).\(pad(fraction, 3))"
    }

    /// `X-TIMESTAMP-MAP=MPEGTS:<ticks>,LOCAL:<cue time>` (RFC 8216, 3.5). Its values are bounded: the ticks are
    /// taken modulo 2^33 (the clock's own wrap), the time is at most ``longestTime``.
    struct TimestampMap: Sendable, Hashable {
        var mpegts: Int64
        /// Milliseconds.
        var local: Int64
        var line: String

        /// What a segment without a map is mapped as.
        static let zero = TimestampMap(mpegts: 0, local: 0, line: "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000")

        init(mpegts: Int64, local: Int64, line: String) {
            self.mpegts = mpegts
            self.local = local
            self.line = line
        }

        init?(line: String) {
            guard line.hasPrefix("X-TIMESTAMP-MAP=") else { return nil }
            var mpegts: Int64?
            var local: Int64?
            for pair in line.dropFirst("X-TIMESTAMP-MAP=".count).split(separator: ",") {
                let field = pair.split(separator: ":", maxSplits: 1)
                guard field.count == 2 else { continue }
                switch field[0].trimmingSpaces {
                case "MPEGTS": mpegts = WebVTTMerger.digits(field[1].trimmingSpaces).map { $0 % WebVTTMerger.clockWrap }
                case "LOCAL": local = WebVTTMerger.milliseconds(field[1].trimmingSpaces)
                default: break
                }
            }
            guard let mpegts, let local else { return nil }
            self.init(mpegts: mpegts, local: local, line: line)
        }
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
