import DownpourJSON
import DownpourTestSupport
import Foundation
import Testing

@testable import DownpourRPC

/// The hand-written JSON parser and writer against Foundation's `JSONSerialization` as the oracle: what the writer
/// writes, Foundation reads back as the same value; text that one parser takes, the other takes too, with the same
/// value; text that one refuses, the other refuses. Seeded, so a failure repeats.
@Suite struct JSONOracleTests {
    /// Whether `theirs` (from `JSONSerialization`) is `ours`.
    static func same(_ ours: JSONValue, _ theirs: Any) -> Bool {
        switch ours {
        case .null:
            return theirs is NSNull
        case .bool(let flag):
            return (theirs as? Bool) == flag
        case .integer(let number):
            guard let other = theirs as? NSNumber else { return false }
            return other.int64Value == number
        case .double(let number):
            guard let other = (theirs as? NSNumber)?.doubleValue else { return false }
            return other == number || abs(other - number) <= abs(number) * 1e-15
        case .string(let text):
            return (theirs as? String) == text
        case .array(let elements):
            guard let others = theirs as? [Any], others.count == elements.count else { return false }
            return zip(elements, others).allSatisfy { Self.same($0, $1) }
        case .object(let object):
            guard let others = theirs as? [String: Any] else { return false }
            // The last of a repeated key wins, in both.
            var last: [String: JSONValue] = [:]
            for member in object.members { last[member.key] = member.value }
            guard last.count == others.count else { return false }
            return last.allSatisfy { key, value in others[key].map { Self.same(value, $0) } ?? false }
        }
    }

    static func foundation(_ bytes: [UInt8]) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
    }

    // MARK: Values

    static let characters: [Character] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1f}", "\u{7f}", "é", "€", "😀",
        "\u{10FFFF}", "\u{2028}",
    ]
    // Not U+FEFF: Foundation on Linux drops it from strings (measured), so it is no oracle for that character.

    static func string(_ random: inout SplitMix64) -> String {
        String(
            (0..<Int(random.next() % 8)).map { _ in Self.characters[Int(random.next() % UInt64(Self.characters.count))]
            }
        )
    }

    static func value(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        switch random.next() % (depth > 4 ? 6 : 8) {
        case 0: return .null
        case 1: return .bool(random.next() % 2 == 0)
        case 2:
            let choices: [Int64] = [0, 1, -1, .max, .min, 1_048_576, Int64(bitPattern: random.next())]
            return .integer(choices[Int(random.next() % UInt64(choices.count))])
        case 3:
            let choices: [Double] = [
                0.5, -2.25, 1e-7, 1.5e300, 123_456.789, Double(Int32(truncatingIfNeeded: random.next())) / 64,
            ]
            return .double(choices[Int(random.next() % UInt64(choices.count))])
        case 4, 5: return .string(Self.string(&random))
        case 6: return .array((0..<Int(random.next() % 5)).map { _ in Self.value(&random, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int(random.next() % 5) {
                object.append(Self.string(&random), Self.value(&random, depth: depth + 1))
            }
            return .object(object)
        }
    }

    @Test func foundationReadsWhatTheWriterWrites() throws {
        var random = SplitMix64(seed: 0x0150_0AC1_E001)
        for iteration in 0..<20_000 {
            let value = Self.value(&random)
            let bytes = JSONWriter.encode(value)
            let theirs = try #require(
                Self.foundation(bytes),
                "iteration \(iteration): \(String(decoding: bytes, as: UTF8.self))"
            )
            #expect(Self.same(value, theirs), "iteration \(iteration): \(String(decoding: bytes, as: UTF8.self))")
            // And the parser reads it back.
            #expect(try JSONParser.parse(bytes) == value)
        }
    }

    // MARK: Texts

    /// Pieces of JSON text, valid and not, that mutations put in.
    static let pieces: [String] = [
        "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\u00e9", "\\ud83d\\ude00", "\\n", "\\x", "1", "-", "0",
        "-0", "01", "1.", ".5", "1e", "1e+5", "1E-2", "+1", "true", "tru", "false", "null", "nul", " ", "\t", "\n",
        "\u{0}", "\u{1}", "é", "NaN", "Infinity", "'", "//", "/*", "9223372036854775807",
        "-9223372036854775808", "9223372036854775808", "1e400",
    ]

    static func mutated(_ text: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = text
        for _ in 0...Int(random.next() % 3) {
            let at = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count + 1))
            switch random.next() % 4 {
            case 0 where !bytes.isEmpty && at < bytes.count:
                bytes.remove(at: at)
            case 1:
                bytes.insert(
                    contentsOf: Array(Self.pieces[Int(random.next() % UInt64(Self.pieces.count))].utf8),
                    at: at
                )
            case 2 where !bytes.isEmpty && at < bytes.count:
                bytes[at] = UInt8(truncatingIfNeeded: random.next())
            default:
                let end = min(bytes.count, at + Int(random.next() % 8))
                bytes.replaceSubrange(
                    at..<end,
                    with: Array(Self.pieces[Int(random.next() % UInt64(Self.pieces.count))].utf8)
                )
            }
        }
        return bytes
    }

    /// Where the parser means to differ from Foundation, each for a reason.
    static func knownDifference(_ bytes: [UInt8]) -> String? {
        // Leading zeros (`01`, `-012.5`): aria2 takes them (measured: `{"id":01,...}` is answered with id 1), so
        // Downpour does; Foundation refuses them, as RFC 8259 does.
        let text = String(decoding: bytes, as: UTF8.self)
        if text.range(of: #"(^|[^0-9.eE+\-])-?0[0-9]"#, options: .regularExpression) != nil { return "leading zero" }
        // A NUL byte outside a string: Foundation on Linux stops reading there and takes what came before
        // (measured: "1\0" is 1); it is not JSON, and Downpour refuses it.
        if bytes.contains(0), (try? JSONParser.parse(bytes)) == nil { return "NUL byte" }
        // A comma before `]`: Foundation takes it; aria2 answers "Parse error." (measured), and so does Downpour.
        if text.range(of: #",\s*\]"#, options: .regularExpression) != nil { return "comma before ]" }
        return nil
    }

    @Test func parsersAgreeOnMutatedText() throws {
        var random = SplitMix64(seed: 0x0150_0AC1_E002)
        var compared = 0
        var accepted = 0
        for iteration in 0..<30_000 {
            let base = JSONWriter.encode(Self.value(&random))
            let bytes = Self.mutated(base, &random)
            let ours = try? JSONParser.parse(bytes)
            let theirs = Self.foundation(bytes)
            if Self.knownDifference(bytes) != nil { continue }
            compared += 1
            let text = String(decoding: bytes, as: UTF8.self).debugDescription
            switch (ours, theirs) {
            case (let ours?, let theirs?):
                accepted += 1
                #expect(Self.same(ours, theirs), "iteration \(iteration): \(text)")
            case (nil, nil):
                break
            case (let ours?, nil):
                Issue.record("iteration \(iteration): only Downpour's parser takes \(text) as \(ours)")
            case (nil, _?):
                Issue.record("iteration \(iteration): only Foundation takes \(text)")
            }
        }
        // Both kinds were met: the mutations neither break everything nor nothing.
        #expect(accepted > 1000 && compared - accepted > 1000, "accepted \(accepted) of \(compared)")
    }
}
