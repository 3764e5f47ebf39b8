/// A parsed `Content-Range` response header (RFC 9110, section 14.4), the byte form only.
public struct ContentRange: Hashable, Sendable {
    /// The bytes the response carries, or `nil` for the unsatisfied form `bytes */LENGTH`.
    public var range: ClosedRange<Int64>?
    /// The complete length of the representation, or `nil` when the server sent `*`.
    public var completeLength: Int64?

    public init(range: ClosedRange<Int64>?, completeLength: Int64?) {
        self.range = range
        self.completeLength = completeLength
    }

    /// Parses `bytes FIRST-LAST/LENGTH`, `bytes FIRST-LAST/*` and `bytes */LENGTH`; `nil` for anything else,
    /// including a last byte before the first or a range past the length.
    public init?(_ header: String) {
        var text = Substring(header).trimmingSpaces()
        guard text.count > 6, text.prefix(6).lowercased() == "bytes " else { return nil }
        text = text.dropFirst(6).trimmingSpaces()
        guard let slash = text.firstIndex(of: "/") else { return nil }
        let rangePart = text[..<slash]
        let lengthPart = text[text.index(after: slash)...]
        if lengthPart == "*" {
            self.completeLength = nil
        } else {
            guard let length = Int64(decimal: lengthPart) else { return nil }
            self.completeLength = length
        }
        if rangePart == "*" {
            guard self.completeLength != nil else { return nil }
            self.range = nil
            return
        }
        guard let dash = rangePart.firstIndex(of: "-"),
            let first = Int64(decimal: rangePart[..<dash]),
            let last = Int64(decimal: rangePart[rangePart.index(after: dash)...]),
            first <= last
        else { return nil }
        if let length = self.completeLength, last >= length { return nil }
        self.range = first...last
    }
}

extension ContentRange {
    /// The complete length of a `Content-Range` that names more bytes than any file can have (past `Int64.max`), as
    /// the server wrote it; `nil` for any other header.
    static func lengthPastAnyFile(_ header: String) -> Substring? {
        guard let slash = header.lastIndex(of: "/") else { return nil }
        let length = Substring(header)[header.index(after: slash)...].trimmingSpaces()
        guard length.count > 18, length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), Int64(length) == nil else {
            return nil
        }
        return length
    }
}

extension Int64 {
    /// A non-negative decimal number with nothing around it, as HTTP writes them; `nil` past `Int64.max` too.
    init?(decimal text: Substring) {
        guard !text.isEmpty, text.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        self.init(text)
    }
}

extension Substring {
    package func trimmingSpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
