/// The file name a server suggests in `Content-Disposition` (RFC 6266), `filename*` (RFC 8187) preferred.
///
/// Returns the name as the server wrote it, decoded; reduce it with ``SafeFileName`` before using it as a path.
public enum ContentDisposition {
    public static func filename(fromHeader header: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in Self.parameters(of: header) {
            switch parameter.name {
            case "filename*":
                if extended == nil { extended = Self.decodeExtendedValue(parameter.value) }
            case "filename":
                if plain == nil { plain = parameter.value }
            default:
                continue
            }
        }
        return extended ?? plain
    }

    /// Splits `type; name=value; name="quoted; value"` into lowercased names and unquoted values.
    static func parameters(of header: String) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        let characters = Array(header)
        var index = 0
        // Skip the disposition type.
        while index < characters.count, characters[index] != ";" { index += 1 }
        while index < characters.count {
            index += 1  // past ";"
            while index < characters.count, characters[index] == " " || characters[index] == "\t" { index += 1 }
            var name = ""
            while index < characters.count, characters[index] != "=", characters[index] != ";" {
                name.append(characters[index])
                index += 1
            }
            guard index < characters.count, characters[index] == "=" else { continue }
            index += 1
            while index < characters.count, characters[index] == " " || characters[index] == "\t" { index += 1 }
            var value = ""
            if index < characters.count, characters[index] == "\"" {
                index += 1
                while index < characters.count, characters[index] != "\"" {
                    if characters[index] == "\\", index + 1 < characters.count {
                        index += 1
                    }
                    value.append(characters[index])
                    index += 1
                }
                // Past the closing quote, then to the next ";".
                while index < characters.count, characters[index] != ";" { index += 1 }
            } else {
                while index < characters.count, characters[index] != ";" {
                    value.append(characters[index])
                    index += 1
                }
                value = String(Substring(value).trimmingSpaces())
            }
            result.append((String(Substring(name).trimmingSpaces()).lowercased(), value))
        }
        return result
    }

    /// Decodes `charset'language'percent-encoded` (RFC 8187). UTF-8 and ISO-8859-1 are understood.
    static func decodeExtendedValue(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        guard let bytes = Self.percentDecodedBytes(parts[2]) else { return nil }
        switch charset {
        case "utf-8":
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
                return String(validating: bytes, as: UTF8.self)
            }
            // Before macOS 15 and iOS 18: a decoding that replaced nothing is the same check.
            let decoded = String(decoding: bytes, as: UTF8.self)
            return decoded.utf8.elementsEqual(bytes) ? decoded : nil
        case "iso-8859-1":
            return String(decoding: bytes.map { UInt16($0) }, as: UTF16.self)
        default:
            return nil
        }
    }

    static func percentDecodedBytes(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(HexDigit.value),
                    let low = iterator.next().flatMap(HexDigit.value)
                else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return bytes
    }
}
