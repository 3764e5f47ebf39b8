/// A download's stable identity: 16 lowercase hexadecimal digits, as aria2's GIDs are.
///
/// ```swift
/// let id = DownloadID()                       // random, e.g. 2089b05ecca3d829
/// let same = DownloadID("2089b05ecca3d829")   // parsed; nil unless exactly 16 hex digits
/// ```
public struct DownloadID: Sendable, Hashable, Codable, CustomStringConvertible, LosslessStringConvertible {
    /// The 64 bits of the ID.
    public let value: UInt64

    /// A random ID.
    public init() {
        var generator = SystemRandomNumberGenerator()
        self.value = generator.next()
    }

    public init(value: UInt64) {
        self.value = value
    }

    /// Parses 16 hexadecimal digits (either case); `nil` for anything else.
    public init?(_ description: String) {
        guard description.utf8.count == 16, let value = UInt64(description, radix: 16),
            description.utf8.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") })
        else { return nil }
        self.value = value
    }

    /// 16 lowercase hexadecimal digits, zero-padded.
    public var description: String {
        let digits = String(self.value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let id = DownloadID(text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "'\(text)' is not a download ID (16 hexadecimal digits)."
            )
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.description)
    }
}
