import DownpourJSON
import Testing

@testable import DownpourRPC

/// §1.8: the `token:` parameter.
@Suite struct DispatcherTokenTests {
    @Test func tokenIsStrippedWithoutASecret() async throws {
        let harness = RPCHarness()
        let result = try await harness.result("aria2.tellActive", ["token:whatever", ["gid"]])
        #expect(result == [])
        _ = try await harness.add()
        let active = try await harness.result("aria2.tellWaiting", ["token:", 0, 10, ["status"]])
        #expect(active == [["status": "waiting"]])
    }

    @Test func secretIsRequiredForAria2Methods() async throws {
        let harness = RPCHarness(secret: "s3cr3t")
        for params: [JSONValue] in [[], ["token:wrong"], ["token:s3cr3"], ["token:s3cr3t!"], ["s3cr3t"], [5]] {
            let (json, reply) = try await harness.send(
                JSONWriter.string(["id": "q", "method": "aria2.getGlobalStat", "params": .array(params)])
            )
            #expect(json["error"] == ["code": 1, "message": "Unauthorized"])
            #expect(reply.isUnauthorized)
            #expect(reply.httpStatus == 400)
        }
        let ok = try await harness.result("aria2.getGlobalStat", ["token:s3cr3t"])
        #expect(ok["numActive"] == "0")
    }

    @Test func unknownMethodsAreCheckedFirst() async throws {
        let harness = RPCHarness(secret: "s")
        #expect(try await harness.errorMessage("aria2.bogus", []) == "Unauthorized")
        #expect(try await harness.errorMessage("aria2.bogus", ["token:s"]) == "No such method: aria2.bogus")
        #expect(try await harness.errorMessage("system.bogus", []) == "Unauthorized")
    }

    @Test func systemMethodsNeedNoToken() async throws {
        let harness = RPCHarness(secret: "s")
        let methods = try await harness.result("system.listMethods")
        #expect(methods.arrayValue?.count == 36)
        let withToken = try await harness.result("system.listMethods", ["token:wrong"])
        #expect(withToken == methods)
        #expect(try await harness.result("system.listNotifications").arrayValue?.count == 6)
    }

    @Test func multicallChecksEachInnerToken() async throws {
        let harness = RPCHarness(secret: "s")
        let (json, reply) = try await harness.send(
            #"{"id":"m","method":"system.multicall","params":[[{"methodName":"aria2.getVersion","params":["token:s"]},{"methodName":"aria2.getVersion","params":["token:x"]},{"methodName":"aria2.getVersion"}]]}"#
        )
        let results = try #require(json["result"]?.arrayValue)
        #expect(results.count == 3)
        #expect(results[0][0]?["version"] == "1.37.0")
        #expect(results[1] == ["code": 1, "message": "Unauthorized"])
        #expect(results[2] == ["code": 1, "message": "Unauthorized"])
        #expect(reply.httpStatus == 200)
        #expect(reply.isUnauthorized)
    }

    @Test func tokenCheckIsExact() {
        let check = TokenCheck(secret: "abc")
        #expect(check.authorizes("abc"))
        #expect(!check.authorizes("ab"))
        #expect(!check.authorizes("abcd"))
        #expect(!check.authorizes(""))
        #expect(!check.authorizes(nil))
        #expect(TokenCheck(secret: nil).authorizes(nil))
        #expect(TokenCheck(secret: "").authorizes("x"))
    }
}
