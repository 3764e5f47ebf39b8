import DownpourJSON
import Testing

@testable import DownpourRPC

/// §1.3/§1.4: the envelope, ids, batches, parse errors and HTTP statuses.
@Suite struct DispatcherEnvelopeTests {
    let harness = RPCHarness()

    @Test(arguments: [#""qwer""#, "0", "-1", "null", "1.5", #"{"a":[1]}"#])
    func anyIDIsEchoed(id: String) async throws {
        let (json, reply) = try await harness.send(#"{"json-rpc":"2.0","id":\#(id),"method":"aria2.getGlobalStat"}"#)
        #expect(json["id"] == (try JSONParser.parse(id)))
        #expect(json["jsonrpc"] == "2.0")
        #expect(json["result"]?["numActive"] == "0")
        #expect(reply.httpStatus == 200)
        #expect(reply.contentType == "application/json-rpc")
    }

    @Test func responseIsCompactInAria2sOrder() async throws {
        let reply = await harness.dispatcher.handle(body: Array(#"{"id":7,"method":"system.listNotifications"}"#.utf8))
        let text = String(decoding: reply.body, as: UTF8.self)
        #expect(
            text
                == #"{"id":7,"jsonrpc":"2.0","result":["aria2.onDownloadStart","aria2.onDownloadPause","aria2.onDownloadStop","aria2.onDownloadComplete","aria2.onDownloadError","aria2.onBtDownloadComplete"]}"#
        )
    }

    @Test func missingIDIsInvalidRequest() async throws {
        let (json, reply) = try await harness.send(#"{"method":"aria2.getVersion"}"#)
        #expect(
            String(decoding: reply.body, as: UTF8.self)
                == #"{"id":null,"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request."}}"#
        )
        #expect(json["id"] == .null)
        #expect(reply.httpStatus == 400)
    }

    @Test func methodThatIsNotAStringIsInvalidRequestWithTheID() async throws {
        let (json, reply) = try await harness.send(#"{"id":"x","method":5}"#)
        #expect(json["id"] == "x")
        #expect(json["error"]?["code"] == .integer(-32600))
        #expect(reply.httpStatus == 400)
    }

    @Test func namedParamsAreInvalidParams() async throws {
        let (json, reply) = try await harness.send(#"{"id":"x","method":"aria2.tellActive","params":{"keys":[]}}"#)
        #expect(json["id"] == "x")
        #expect(json["error"] == ["code": -32602, "message": "Invalid params."])
        #expect(reply.httpStatus == 500)
    }

    /// aria2c 1.37.0 takes a comma before the closing brace: `{"id":1,}` is read, and lacks its method.
    @Test func aCommaBeforeTheClosingBraceIsReadAsAria2ReadsIt() async throws {
        let (json, reply) = try await harness.send(#"{"id":1 , }"#)
        #expect(json == ["id": 1, "jsonrpc": "2.0", "error": ["code": -32600, "message": "Invalid Request."]])
        #expect(reply.httpStatus == 400)
    }

    @Test(arguments: ["", "{", "{,}", "[1,2", "nul", "{\"id\":1}x", "\"\\u12\"", "[1,]", "1e400", "\"\\ud800\""])
    func parseErrors(text: String) async throws {
        let (json, reply) = try await harness.send(text)
        #expect(json == ["id": nil, "jsonrpc": "2.0", "error": ["code": -32700, "message": "Parse error."]])
        #expect(reply.httpStatus == 500)
    }

    @Test(arguments: ["1", "\"text\"", "true", "null"])
    func topLevelThatIsNeitherObjectNorArray(text: String) async throws {
        let (json, reply) = try await harness.send(text)
        #expect(json["error"]?["code"] == .integer(-32600))
        #expect(json["id"] == .null)
        #expect(reply.httpStatus == 400)
    }

    @Test func missingParamsAreEmpty() async throws {
        let (json, _) = try await harness.send(#"{"id":1,"method":"aria2.tellActive"}"#)
        #expect(json["result"] == [])
    }

    @Test func batchSkipsNonObjectsAndKeepsOrder() async throws {
        let (json, reply) = try await harness.send(
            #"[{"id":1,"method":"aria2.getVersion"},5,"x",null,{"id":2,"method":"nope"},{"method":"x"},[]]"#
        )
        let array = try #require(json.arrayValue)
        #expect(array.count == 3)
        #expect(array[0]["id"] == 1)
        #expect(array[0]["result"]?["version"] == "1.37.0")
        #expect(array[1]["error"] == ["code": 1, "message": "No such method: nope"])
        #expect(array[2]["error"]?["code"] == .integer(-32600))
        #expect(reply.httpStatus == 200)
    }

    @Test func emptyBatch() async throws {
        let (json, reply) = try await harness.send("[]")
        #expect(json == [])
        #expect(String(decoding: reply.body, as: UTF8.self) == "[]")
        #expect(reply.httpStatus == 200)
    }

    @Test func methodErrorIs400AndUnknownMethod() async throws {
        let (json, reply) = try await harness.send(#"{"id":1,"method":"aria2.bogus"}"#)
        #expect(json["error"] == ["code": 1, "message": "No such method: aria2.bogus"])
        #expect(reply.httpStatus == 400)
    }
}
