import Downpour
import DownpourJSON
import Foundation
import Testing

@testable import DownpourRPC

/// §1.5: `GET /jsonrpc?method=&id=&params=` and JSONP.
@Suite struct GETRequestTests {
    let harness = RPCHarness()

    static func base64(_ text: String) -> String {
        Self.base64(Array(text.utf8))
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var output = ""
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for (offset, byte) in chunk.enumerated() { value |= Int(byte) << (16 - 8 * offset) }
            for position in 0..<4 {
                output.append(position <= chunk.count ? alphabet[(value >> (18 - 6 * position)) & 63] : "=")
            }
            index += 3
        }
        return output
    }

    static func percentEncoded(_ text: String) -> String {
        text.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F").replacingOccurrences(
            of: "=",
            with: "%3D"
        )
    }

    @Test func base64Helper() {
        #expect(Self.base64(#"["2089b05ecca3d829"]"#) == "WyIyMDg5YjA1ZWNjYTNkODI5Il0=")
    }

    @Test func methodIDAndParams() async throws {
        let gid = try await harness.add()
        let params = Self.percentEncoded(Self.base64(#"["token:x","\#(gid)",["gid","status"]]"#))
        let reply = await harness.dispatcher.handle(query: "jsonrpc=2.0&method=aria2.tellStatus&id=42&params=\(params)")
        #expect(reply.contentType == "application/json-rpc")
        #expect(reply.httpStatus == 200)
        let json = try JSONParser.parse(reply.body)
        #expect(
            json == ["id": "42", "jsonrpc": "2.0", "result": ["gid": .string(gid.description), "status": "waiting"]]
        )
    }

    @Test func jsonpAndNoParams() async throws {
        let reply = await harness.dispatcher.handle(query: "method=aria2.getGlobalStat&id=foo&jsoncallback=cb")
        let text = String(decoding: reply.body, as: UTF8.self)
        #expect(text.hasPrefix(#"cb({"id":"foo","jsonrpc":"2.0","result":{"downloadSpeed":"0""#))
        #expect(text.hasSuffix("}})"))
        #expect(reply.contentType == "text/javascript")
    }

    @Test func batchOverGET() async throws {
        let batch = Self.base64(#"[{"id":1,"method":"aria2.getVersion"},{"id":2,"method":"system.listNotifications"}]"#)
        let reply = await harness.dispatcher.handle(query: "params=\(Self.percentEncoded(batch))")
        let json = try JSONParser.parse(reply.body)
        #expect(json.arrayValue?.count == 2)
        #expect(json[1]?["id"] == 2)
    }

    @Test func badParams() async throws {
        for query in [
            "method=aria2.getVersion&id=1&params=!!!", "method=aria2.getVersion&id=1&params=\(Self.base64("[1,"))", "",
        ] {
            let reply = await harness.dispatcher.handle(query: Substring(query))
            #expect(try JSONParser.parse(reply.body)["error"]?["code"] == .integer(-32700))
            #expect(reply.httpStatus == 500)
        }
        let named = await harness.dispatcher.handle(query: "method=aria2.getVersion&id=1&params=\(Self.base64("{}"))")
        #expect(try JSONParser.parse(named.body)["error"]?["code"] == .integer(-32602))
    }

    @Test func base64Variants() {
        #expect(Base64.decode(Array("WyJhIl0".utf8)) == Array(#"["a"]"#.utf8))
        #expect(Base64.decode(Array("Pz8_".utf8)) == Array("???".utf8))
        #expect(Base64.decode(Array("Pz8/".utf8)) == Array("???".utf8))
        #expect(Base64.decode(Array("P*".utf8)) == nil)
        #expect(GETRequest.percentDecoded("a%2Fb%2fc%zz%") == Array("a/b/c%zz%".utf8))
    }
}
