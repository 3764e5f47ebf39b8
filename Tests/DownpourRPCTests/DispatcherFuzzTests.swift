import DownpourJSON
import DownpourTestSupport
import Foundation
import Testing

@testable import DownpourRPC

/// Random and mutated requests through the dispatcher: it answers every one with well-formed JSON-RPC and never
/// crashes. Bounded by count; the generator is seeded, so a failure repeats.
@Suite struct DispatcherFuzzTests {
    /// How many times the counts below are run: `DOWNPOUR_FUZZ_SCALE=10 swift test --filter Fuzz` fuzzes ten times
    /// longer (the seeds go on, so the first runs are the same). The default keeps the suite's longest test at the
    /// pace of the others.
    static let scale =
        ProcessInfo.processInfo.environment["DOWNPOUR_FUZZ_SCALE"].flatMap { Int($0) }.map { max(1, $0) } ?? 1

    static let seeds: [String] = [
        #"{"jsonrpc":"2.0","id":"qwer","method":"aria2.addUri","params":["token:s",["http://a/f","http://m/f"],{"dir":"/d","header":["A: b"]},0]}"#,
        #"{"id":1,"method":"aria2.tellStatus","params":["token:s","2089b05ecca3d829",["gid","status"]]}"#,
        #"{"id":-1,"method":"aria2.tellWaiting","params":[-1,1000,["gid","files"]]}"#,
        #"{"id":0,"method":"aria2.tellStopped","params":[0,1000]}"#,
        #"[{"id":1,"method":"aria2.getVersion"},{"id":2,"method":"aria2.tellActive","params":[["gid","status"]]}]"#,
        #"{"id":"m","method":"system.multicall","params":[[{"methodName":"aria2.tellStatus","params":["token:s","2089b0"]},{"methodName":"aria2.remove","params":["ffff000000000000"]}]]}"#,
        #"{"id":2,"method":"aria2.changePosition","params":["2089","1","POS_CUR"]}"#,
        #"{"id":3,"method":"aria2.changeUri","params":["2089b05ecca3d829",1,["http://a"],["http://b"],0]}"#,
        #"{"id":4,"method":"aria2.changeOption","params":["2089b05ecca3d829",{"max-download-limit":"1M"}]}"#,
        #"{"id":5,"method":"aria2.changeGlobalOption","params":[{"max-concurrent-downloads":"3"}]}"#,
        #"{"id":6,"method":"aria2.getGlobalStat"}"#,
        #"{"id":7,"method":"system.listMethods","params":[]}"#,
        #"{"id":8,"method":"aria2.pause","params":["2089b05ecca3d829"]}"#,
        #"{"id":9,"method":"aria2.getServers","params":["2089b05ecca3d829"]}"#,
    ]

    static let fragments: [String] = [
        "null", "true", "[]", "{}", "\"\"", "-1", "0", "1e999", "-9223372036854775809", "99999999999999999999999",
        "1.5e-7", "\"token:\"", "\"token:s\"", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]",
        String(repeating: "[", count: 5000), String(repeating: "{\"a\":", count: 3000), "\"\\ud800\"", "\"\\u0000\"",
        "{\"methodName\":\"system.multicall\",\"params\":[[]]}", "\"aria2.addUri\"", "[\"http://x\"]",
    ]

    @Test func answersEveryRequestWithWellFormedJSON() async throws {
        var random = SplitMix64(seed: 0x00D0_3B70_0125)
        var harness = RPCHarness(secret: "s")
        for iteration in 0..<(40_000 * Self.scale) {
            if iteration % 200 == 0 {
                // A fresh queue now and then keeps `tellWaiting(-1, 1000)` small; yielding lets other tests run.
                harness = RPCHarness(secret: "s")
                await Task.yield()
            }
            let input = Self.request(&random)
            let reply: RPCReply
            var body: ArraySlice<UInt8>
            if random.next(below: 10) == 0 {
                // The same request as a GET query, sometimes as JSONP.
                let callback = random.next(below: 2) == 0 ? "&jsoncallback=cb" : ""
                let query = "params=\(GETRequestTests.percentEncoded(GETRequestTests.base64(input)))\(callback)"
                reply = await harness.dispatcher.handle(query: Substring(query))
                body = reply.body[...]
                if !callback.isEmpty {
                    #expect(body.starts(with: Array("cb(".utf8)) && body.last == UInt8(ascii: ")"))
                    body = body.dropFirst(3).dropLast()
                }
            } else {
                reply = await harness.dispatcher.handle(body: input)
                body = reply.body[...]
            }
            let text = String(decoding: body, as: UTF8.self)
            let json = try #require(try? JSONParser.parse(body), "iteration \(iteration): \(text)")
            let wasBatch = (try? JSONParser.parse(input))?.arrayValue != nil
            if wasBatch {
                let responses = try #require(json.arrayValue, "iteration \(iteration)")
                for response in responses { try Self.checkResponse(response, iteration: iteration) }
                #expect(reply.httpStatus == 200)
            } else {
                try Self.checkResponse(json, iteration: iteration)
                #expect([200, 400, 500].contains(reply.httpStatus))
            }
        }
    }

    static func checkResponse(_ response: JSONValue, iteration: Int) throws {
        let object = try #require(response.objectValue, "iteration \(iteration)")
        #expect(object.members.first?.key == "id", "iteration \(iteration)")
        #expect(object["jsonrpc"] == "2.0", "iteration \(iteration)")
        #expect((object["result"] == nil) != (object["error"] == nil), "iteration \(iteration)")
        if let error = object["error"] {
            #expect(error["code"]?.integerValue != nil, "iteration \(iteration)")
            #expect(error["message"]?.stringValue != nil, "iteration \(iteration)")
        }
        #expect(object.count == 3, "iteration \(iteration)")
    }

    static func request(_ random: inout SplitMix64) -> [UInt8] {
        if random.next(below: 10) == 0 {
            return (0..<random.next(below: 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        var bytes = Array(Self.seeds[random.next(below: Self.seeds.count)].utf8)
        for _ in 0..<(1 + random.next(below: 3)) {
            Self.mutate(&bytes, &random)
        }
        return bytes
    }

    static func mutate(_ bytes: inout [UInt8], _ random: inout SplitMix64) {
        guard !bytes.isEmpty else { return }
        switch random.next(below: 7) {
        case 0:
            bytes.removeLast(random.next(below: bytes.count))
        case 1:
            let index = random.next(below: bytes.count)
            bytes[index] ^= UInt8(1 << random.next(below: 8))
        case 2:
            bytes[random.next(below: bytes.count)] = [0xFF, 0xC0, 0xED, 0x80, 0x00, 0x22][random.next(below: 6)]
        default:
            // Replace a value (a token after ':' ',' or '[') with a fragment of another type.
            let starts = bytes.indices.filter {
                [UInt8(ascii: ":"), UInt8(ascii: ","), UInt8(ascii: "[")].contains(bytes[$0])
            }
            guard let start = starts.isEmpty ? nil : starts[random.next(below: starts.count)] else { return }
            var end = start + 1
            var depth = 0
            var inString = false
            while end < bytes.count {
                let byte = bytes[end]
                if inString {
                    if byte == UInt8(ascii: "\\") { end += 1 } else if byte == UInt8(ascii: "\"") { inString = false }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                    depth += 1
                } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                    if depth == 0 { break }
                    depth -= 1
                } else if byte == UInt8(ascii: ","), depth == 0 {
                    break
                }
                end += 1
            }
            let fragment = Array(Self.fragments[random.next(below: Self.fragments.count)].utf8)
            bytes.replaceSubrange((start + 1)..<min(end, bytes.count), with: fragment)
        }
    }
}

extension SplitMix64 {
    /// A number in `0..<bound` (0 when `bound` is not positive).
    mutating func next(below bound: Int) -> Int {
        bound <= 0 ? 0 : Int(self.next() % UInt64(bound))
    }
}
