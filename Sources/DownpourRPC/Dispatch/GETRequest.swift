import Downpour
import DownpourJSON

/// A JSON-RPC call given as the query of `GET /jsonrpc` (§1.5 of the reference):
/// `method=M&id=I&params=<percent-encoded base64 of a JSON array>[&jsoncallback=cb]`, or with neither `method`
/// nor `id` a whole request or batch in `params`.
///
/// As in aria2, `method`, `id` and `jsoncallback` are taken as they appear (not percent-decoded) and `id` is
/// always a string; other keys (AriaNg sends `jsonrpc=2.0`) are ignored.
struct GETRequest: Sendable {
    var method: String?
    var id: String?
    /// The decoded bytes of `params` (JSON text), `nil` when absent or not base64.
    var params: [UInt8]?
    var hasParams: Bool
    var callback: String?

    init(query: Substring) {
        self.hasParams = false
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = parts[0]
            let value = parts.count > 1 ? parts[1] : ""
            switch key {
            case "method": self.method = String(value)
            case "id": self.id = String(value)
            case "params":
                self.hasParams = true
                self.params = Base64.decode(Self.percentDecoded(value))
            case "jsoncallback": self.callback = String(value)
            default: break
            }
        }
    }

    /// The request as JSON, or the error it is.
    func request() -> Result<JSONValue, RPCError> {
        let params: JSONValue?
        if self.hasParams {
            guard let bytes = self.params, let parsed = try? JSONParser.parse(bytes) else {
                return .failure(.malformedJSON)
            }
            params = parsed
        } else {
            params = nil
        }
        let method = self.method ?? ""
        let id = self.id ?? ""
        if method.isEmpty && id.isEmpty {
            guard let params else { return .failure(.malformedJSON) }
            return .success(params)
        }
        var object = JSONObject()
        object.append("method", .string(method))
        object.append("id", .string(id))
        if let params { object.append("params", params) }
        return .success(.object(object))
    }

    static func percentDecoded(_ text: Substring) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next() else {
                bytes.append(byte)
                break
            }
            guard let low = iterator.next() else {
                bytes.append(contentsOf: [byte, high])
                break
            }
            if let high = HexDigit.value(high), let low = HexDigit.value(low) {
                bytes.append(high << 4 | low)
            } else {
                bytes.append(contentsOf: [byte, high, low])
            }
        }
        return bytes
    }
}
