/// Writes compact JSON the way aria2 does (`json::jsonEscape`): no white space; in strings `"`, `\` and `/` are
/// escaped, as are `\b \f \n \r \t`, other control characters as `\u00XX`; everything else, non-ASCII
/// included, is written as raw UTF-8.
package struct JSONWriter: Sendable {
    /// The text written so far.
    package private(set) var bytes: [UInt8]

    package init(reservingCapacity capacity: Int = 256) {
        self.bytes = []
        self.bytes.reserveCapacity(capacity)
    }

    /// The compact text of `value`.
    package static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(value)
        return writer.bytes
    }

    /// The compact text of `value`, as a string.
    package static func string(_ value: JSONValue) -> String {
        String(decoding: Self.encode(value), as: UTF8.self)
    }

    package mutating func write(_ value: JSONValue) {
        switch value {
        case .null: self.writeASCII("null")
        case .bool(let flag): self.writeASCII(flag ? "true" : "false")
        case .integer(let number): self.writeInteger(number)
        case .double(let number):
            if number.isFinite {
                self.bytes.append(contentsOf: "\(number)".utf8)
            } else {
                self.writeASCII("null")
            }
        case .string(let text): self.writeString(text)
        case .array(let elements):
            self.bytes.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { self.bytes.append(UInt8(ascii: ",")) }
                self.write(element)
            }
            self.bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            self.bytes.append(UInt8(ascii: "{"))
            for (offset, member) in object.members.enumerated() {
                if offset > 0 { self.bytes.append(UInt8(ascii: ",")) }
                self.writeString(member.key)
                self.bytes.append(UInt8(ascii: ":"))
                self.write(member.value)
            }
            self.bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Appends text that is already JSON (no check).
    package mutating func writeRaw(_ json: some Sequence<UInt8>) {
        self.bytes.append(contentsOf: json)
    }

    /// Appends ASCII text as it is (punctuation, literals, keys known not to need escapes).
    package mutating func writeASCII(_ text: StaticString) {
        self.bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    package mutating func writeInteger(_ number: Int64) {
        if number < 0 { self.bytes.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        var count = 1
        var probe = magnitude / 10
        while probe > 0 {
            count += 1
            probe /= 10
        }
        let end = self.bytes.count + count
        self.bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
        var index = end - 1
        repeat {
            self.bytes[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
            index -= 1
        } while magnitude > 0
    }

    package mutating func writeString(_ text: String) {
        self.bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                let escape: StaticString?
                switch byte {
                case UInt8(ascii: "\""): escape = "\\\""
                case UInt8(ascii: "\\"): escape = "\\\\"
                case UInt8(ascii: "/"): escape = "\\/"
                case 0x08: escape = "\\b"
                case 0x0C: escape = "\\f"
                case 0x0A: escape = "\\n"
                case 0x0D: escape = "\\r"
                case 0x09: escape = "\\t"
                case 0..<0x20: escape = ""
                default: continue
                }
                self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                if let escape, escape.utf8CodeUnitCount > 0 {
                    self.bytes.append(
                        contentsOf: UnsafeBufferPointer(start: escape.utf8Start, count: escape.utf8CodeUnitCount)
                    )
                } else {
                    let hex: StaticString = "0123456789abcdef"
                    self.writeASCII("\\u00")
                    self.bytes.append(hex.utf8Start[Int(byte >> 4)])
                    self.bytes.append(hex.utf8Start[Int(byte & 0x0F)])
                }
            }
            self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        self.bytes.append(UInt8(ascii: "\""))
    }
}
