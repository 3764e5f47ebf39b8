/// Parses JSON text into a ``JSONValue``, the way aria2's parser does: tolerant of numbers (fractions and
/// exponents are accepted, the RPC layer uses their integer part) and strict about the rest (strings must be
/// UTF-8, nothing may follow the value but white space).
///
/// Nesting deeper than ``maximumDepth`` is an error, so a hostile request cannot exhaust the stack.
package struct JSONParser: Sendable {
    /// Why text is not JSON.
    package struct Failure: Error, Sendable, Hashable {
        /// The offset of the byte where parsing stopped.
        package var offset: Int
        /// What was wrong.
        package var reason: String
    }

    /// Arrays and objects nested deeper than this are refused.
    package static let maximumDepth = 64

    /// Parses a whole text.
    /// - Throws: ``Failure`` when the text is not one JSON value.
    package static func parse(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONValue {
        let result: Result<JSONValue, Failure>? = bytes.withContiguousStorageIfAvailable { buffer in
            Self.parse(buffer: buffer)
        }
        if let result { return try result.get() }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { Self.parse(buffer: $0) }.get()
    }

    /// Parses a whole string.
    package static func parse(_ text: String) throws(Failure) -> JSONValue {
        var text = text
        let result = text.withUTF8 { Self.parse(buffer: $0) }
        return try result.get()
    }

    private static func parse(buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, Failure> {
        var reader = Reader(bytes: buffer)
        do throws(JSONParser.Failure) {
            reader.skipWhiteSpace()
            let value = try reader.parseValue(depth: 0)
            reader.skipWhiteSpace()
            guard reader.index == buffer.count else { throw reader.failure("unexpected text after the value") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }
}

private struct Reader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    func failure(_ reason: String) -> JSONParser.Failure {
        JSONParser.Failure(offset: self.index, reason: reason)
    }

    mutating func skipWhiteSpace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case 0x20, 0x09, 0x0A, 0x0D: self.index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParser.Failure) -> JSONValue {
        guard self.index < self.bytes.count else { throw self.failure("unexpected end of text") }
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"): return try self.parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try self.parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"):
            try self.expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try self.expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try self.expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.parseNumber()
        default: throw self.failure("unexpected character")
        }
    }

    mutating func expect(_ word: StaticString) throws(JSONParser.Failure) {
        let count = word.utf8CodeUnitCount
        guard self.bytes.count - self.index >= count else { throw self.failure("unexpected end of text") }
        let start = word.utf8Start
        for offset in 0..<count where self.bytes[self.index + offset] != start[offset] {
            throw self.failure("unexpected character")
        }
        self.index += count
    }

    mutating func parseObject(depth: Int) throws(JSONParser.Failure) -> JSONValue {
        guard depth <= JSONParser.maximumDepth else { throw self.failure("nested too deeply") }
        self.index += 1
        var members: [JSONObject.Member] = []
        self.skipWhiteSpace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
            self.index += 1
            return .object(JSONObject(members))
        }
        while true {
            self.skipWhiteSpace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\"") else {
                throw self.failure("expected a member name")
            }
            let key = try self.parseString()
            self.skipWhiteSpace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ":") else {
                throw self.failure("expected ':'")
            }
            self.index += 1
            self.skipWhiteSpace()
            let value = try self.parseValue(depth: depth)
            members.append(JSONObject.Member(key: key, value: value))
            self.skipWhiteSpace()
            guard self.index < self.bytes.count else { throw self.failure("unexpected end of text") }
            let byte = self.bytes[self.index]
            self.index += 1
            if byte == UInt8(ascii: "}") { return .object(JSONObject(members)) }
            guard byte == UInt8(ascii: ",") else { throw self.failure("expected ',' or '}'") }
            // aria2 takes a comma before the closing brace (measured against aria2c 1.37.0), so clients may send one.
            self.skipWhiteSpace()
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
                self.index += 1
                return .object(JSONObject(members))
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParser.Failure) -> JSONValue {
        guard depth <= JSONParser.maximumDepth else { throw self.failure("nested too deeply") }
        self.index += 1
        var elements: [JSONValue] = []
        self.skipWhiteSpace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "]") {
            self.index += 1
            return .array(elements)
        }
        while true {
            self.skipWhiteSpace()
            elements.append(try self.parseValue(depth: depth))
            self.skipWhiteSpace()
            guard self.index < self.bytes.count else { throw self.failure("unexpected end of text") }
            let byte = self.bytes[self.index]
            self.index += 1
            if byte == UInt8(ascii: "]") { return .array(elements) }
            guard byte == UInt8(ascii: ",") else { throw self.failure("expected ',' or ']'") }
        }
    }

    mutating func parseNumber() throws(JSONParser.Failure) -> JSONValue {
        let start = self.index
        var isInteger = true
        if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
        let digitsStart = self.index
        self.skipDigits()
        guard self.index > digitsStart else { throw self.failure("expected a digit") }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            let fractionStart = self.index
            self.skipDigits()
            guard self.index > fractionStart else { throw self.failure("expected a digit") }
        }
        if self.index < self.bytes.count, self.bytes[self.index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            self.index += 1
            if self.index < self.bytes.count,
                self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-")
            {
                self.index += 1
            }
            let exponentStart = self.index
            self.skipDigits()
            guard self.index > exponentStart else { throw self.failure("expected a digit") }
        }
        let text = UnsafeBufferPointer(rebasing: self.bytes[start..<self.index])
        if isInteger, let value = Self.integer(text) { return .integer(value) }
        // A number beyond a double's range is refused, as aria2 refuses it ("Parse error").
        guard let number = Double(String(decoding: text, as: UTF8.self)), number.isFinite else {
            throw JSONParser.Failure(offset: start, reason: "a number out of range")
        }
        return .double(number)
    }

    mutating func skipDigits() {
        while self.index < self.bytes.count, self.bytes[self.index] &- UInt8(ascii: "0") < 10 {
            self.index += 1
        }
    }

    /// An integer's value; `nil` when it does not fit in 64 bits.
    static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var index = 0
        let negative = text[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        var value: Int64 = 0
        while index < text.count {
            let digit = Int64(text[index] &- UInt8(ascii: "0"))
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) =
                negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = sum
            index += 1
        }
        return value
    }

    mutating func parseString() throws(JSONParser.Failure) -> String {
        self.index += 1
        let start = self.index
        // The fast path: no escapes.
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: self.bytes[start..<self.index])
                self.index += 1
                return try self.makeString(raw, at: start)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw self.failure("control character in a string") }
            self.index += 1
        }
        var scalars: [UInt8] = Array(UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]))
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            switch byte {
            case UInt8(ascii: "\""):
                self.index += 1
                return try scalars.withUnsafeBufferPointer { buffer throws(JSONParser.Failure) in
                    try self.makeString(buffer, at: start)
                }
            case UInt8(ascii: "\\"):
                self.index += 1
                guard self.index < self.bytes.count else { throw self.failure("unexpected end of text") }
                let escaped = self.bytes[self.index]
                self.index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escaped)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try self.parseUnicodeEscape()
                    scalars.append(contentsOf: String(Character(scalar)).utf8)
                default: throw self.failure("unknown escape")
                }
            default:
                if byte < 0x20 { throw self.failure("control character in a string") }
                scalars.append(byte)
                self.index += 1
            }
        }
        throw self.failure("unterminated string")
    }

    /// `\uXXXX`, with a following low surrogate when it is a high one. A lone surrogate is refused, as aria2
    /// refuses it: it stands for no character.
    mutating func parseUnicodeEscape() throws(JSONParser.Failure) -> Unicode.Scalar {
        let start = self.index
        let first = try self.parseHex4()
        if (0xD800..<0xDC00).contains(first), self.bytes.count - self.index >= 6,
            self.bytes[self.index] == UInt8(ascii: "\\"), self.bytes[self.index + 1] == UInt8(ascii: "u")
        {
            self.index += 2
            let second = try self.parseHex4()
            if (0xDC00..<0xE000).contains(second),
                let scalar = Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            {
                return scalar
            }
        }
        guard let scalar = Unicode.Scalar(first) else {
            throw JSONParser.Failure(offset: start, reason: "a lone surrogate in a \\u escape")
        }
        return scalar
    }

    mutating func parseHex4() throws(JSONParser.Failure) -> UInt32 {
        guard self.bytes.count - self.index >= 4 else { throw self.failure("unexpected end of text") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.failure("bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            self.index += 1
        }
        return value
    }

    func makeString(_ raw: UnsafeBufferPointer<UInt8>, at offset: Int) throws(JSONParser.Failure) -> String {
        guard let string = Self.validUTF8(raw) else {
            throw JSONParser.Failure(offset: offset, reason: "a string is not UTF-8")
        }
        return string
    }

    /// The bytes as a string when they are well-formed UTF-8 (no overlong forms, no surrogates, nothing above
    /// U+10FFFF), else `nil`: the standard library's validation. Where `String(validating:as:)` is not there yet
    /// (before macOS 15 and iOS 18), a decoding that replaced nothing is the same check.
    static func validUTF8(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return String(validating: raw, as: UTF8.self)
        }
        let decoded = String(decoding: raw, as: UTF8.self)
        return decoded.utf8.elementsEqual(raw) ? decoded : nil
    }
}
