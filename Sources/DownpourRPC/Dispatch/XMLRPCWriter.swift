import DownpourJSON

/// Writes an XML-RPC `<methodResponse>` as aria2 does (`XmlRpcResponse.cc`): a result as one `<param>`, an error
/// as a `<fault>` whose struct has `faultCode` (an `<int>`) and `faultString`. The values are the ones JSON-RPC
/// answers, so aria2's numbers-as-strings hold here too: strings as `<string>`, integers as `<int>`, arrays, structs.
///
/// ```swift
/// XMLRPCWriter.response(.string("2089b05ecca3d829"))
/// // <?xml version="1.0"?><methodResponse><params><param><value><string>2089b05ecca3d829</string></value>…
/// ```
enum XMLRPCWriter {
    /// The media type of an answer.
    static let contentType = "text/xml"

    /// A result.
    static func response(_ result: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        Self.append("<?xml version=\"1.0\"?><methodResponse><params><param>", to: &out)
        Self.write(result, to: &out)
        Self.append("</param></params></methodResponse>", to: &out)
        return out
    }

    /// A fault.
    static func fault(_ error: RPCError) -> [UInt8] {
        var out: [UInt8] = []
        Self.append("<?xml version=\"1.0\"?><methodResponse><fault>", to: &out)
        Self.write(Self.faultStruct(error), to: &out)
        Self.append("</fault></methodResponse>", to: &out)
        return out
    }

    /// `system.multicall`'s answer: each entry a one-element array (a result) or, for an error, the fault struct
    /// (`{faultCode, faultString}`, where JSON-RPC has `{code, message}`).
    static func multicallResults(_ results: JSONValue) -> JSONValue {
        guard case .array(let entries) = results else { return results }
        return .array(
            entries.map { entry in
                guard case .object(let error) = entry, case .integer(let code)? = error["code"],
                    case .string(let message)? = error["message"]
                else { return entry }
                return Self.faultStruct(RPCError(code: Int(code), message: message))
            }
        )
    }

    private static func faultStruct(_ error: RPCError) -> JSONValue {
        .object(
            JSONObject([
                .init(key: "faultCode", value: .integer(Int64(error.code))),
                .init(key: "faultString", value: .string(error.message)),
            ])
        )
    }

    static func write(_ value: JSONValue, to out: inout [UInt8]) {
        Self.append("<value>", to: &out)
        switch value {
        case .null:
            Self.append("<nil/>", to: &out)
        case .bool(let flag):
            Self.append(flag ? "<boolean>1</boolean>" : "<boolean>0</boolean>", to: &out)
        case .integer(let number):
            Self.append("<int>\(number)</int>", to: &out)
        case .double(let number):
            Self.append("<double>\(number)</double>", to: &out)
        case .string(let text):
            Self.append("<string>", to: &out)
            Self.escape(text, to: &out)
            Self.append("</string>", to: &out)
        case .array(let elements):
            Self.append("<array><data>", to: &out)
            for element in elements { Self.write(element, to: &out) }
            Self.append("</data></array>", to: &out)
        case .object(let members):
            Self.append("<struct>", to: &out)
            for member in members.members {
                Self.append("<member><name>", to: &out)
                Self.escape(member.key, to: &out)
                Self.append("</name>", to: &out)
                Self.write(member.value, to: &out)
                Self.append("</member>", to: &out)
            }
            Self.append("</struct>", to: &out)
        }
        Self.append("</value>", to: &out)
    }

    private static func append(_ text: String, to out: inout [UInt8]) {
        out.append(contentsOf: text.utf8)
    }

    /// Text as XML character data: `&`, `<` and `>` as references (and `"`, `'`, as aria2 writes them); a control
    /// character other than tab and line ends, which XML cannot carry, as U+FFFD.
    private static func escape(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"): Self.append("&amp;", to: &out)
            case UInt8(ascii: "<"): Self.append("&lt;", to: &out)
            case UInt8(ascii: ">"): Self.append("&gt;", to: &out)
            case UInt8(ascii: "\""): Self.append("&quot;", to: &out)
            case UInt8(ascii: "'"): Self.append("&#39;", to: &out)
            case 0x09, 0x0A, 0x0D: out.append(byte)
            // XML 1.0 has no way to write the other control characters, not even as references.
            case ..<0x20: out.append(contentsOf: [0xEF, 0xBF, 0xBD])
            default: out.append(byte)
            }
        }
    }
}
