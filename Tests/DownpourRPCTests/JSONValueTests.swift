import DownpourJSON
import Testing

@testable import DownpourRPC

@Suite struct JSONValueTests {
    @Test func parsesEveryKind() throws {
        let value = try JSONParser.parse(
            #" {"a": [1, -2, 3.75, 1e2, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"], "b": {}} "#
        )
        #expect(
            value == [
                "a": [1, -2, .double(3.75), .double(100), true, false, nil, "x\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{1F600}"],
                "b": [:],
            ]
        )
        #expect(value["a"]?[2]?.integerValue == 3)
        #expect(value.keys == ["a", "b"])
    }

    @Test func integersKeepTheirIntegerPart() throws {
        #expect(try JSONParser.parse("9223372036854775807") == .integer(.max))
        #expect(try JSONParser.parse("-9223372036854775808") == .integer(.min))
        #expect(try JSONParser.parse("9223372036854775808").integerValue == nil)
        #expect(try JSONParser.parse("-1.9").integerValue == -1)
        #expect(try JSONParser.parse("1E3").integerValue == 1000)
        #expect(try JSONParser.parse("1e300").integerValue == nil)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\"}", "{\"a\":}", "01x", "-", "1.", "1e", "tru", "nulll", "\"\u{1}\"",
        "\"abc", "\"\\x\"", "\"\\u00g0\"", "[1] [2]", "{'a':1}", "+1", ".5",
    ])
    func refusesBadText(text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(text) }
    }

    @Test func refusesInvalidUTF8() throws {
        for bytes: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC0, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22],
        ] {
            #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
        }
        #expect(try JSONParser.parse([0x22, 0xE2, 0x82, 0xAC, 0x22]) == "€")
    }

    /// aria2 answers "Parse error." to a lone surrogate, and to a number beyond a double's range (measured against
    /// aria2c 1.37.0); so does Foundation (`JSONOracleTests`).
    @Test func loneSurrogatesAndHugeNumbersAreRefused() throws {
        for text in [#""\ud800x""#, #""\udc00""#, #""\ud800\u0041""#, #""\ud800\ud800""#, "1e400", "-1e400"] {
            #expect(throws: JSONParser.Failure.self, "\(text)") { try JSONParser.parse(text) }
        }
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == "😀")
        #expect(try JSONParser.parse("1e308") == .double(1e308))
    }

    @Test func nestingIsCapped() throws {
        let ok =
            String(repeating: "[", count: JSONParser.maximumDepth)
            + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(deep) }
        let deepObjects = String(repeating: "{\"a\":", count: 100_000)
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(deepObjects) }
    }

    @Test func aCommaBeforeTheClosingBraceIsTakenAsAria2TakesIt() throws {
        #expect(try JSONParser.parse(#"{"id":1, "method":"aria2.getVersion" , }"#)["method"] == "aria2.getVersion")
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse("{,}") }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse("[1,]") }
    }

    @Test func lastDuplicateKeyWins() throws {
        let value = try JSONParser.parse(#"{"id":1,"id":2}"#)
        #expect(value["id"] == 2)
    }

    @Test func writesLikeAria2() {
        let value: JSONValue = [
            "s": "a/b\"c\\d\n\t\u{1}\u{1f}\u{7f}é😀", "n": -12_345, "z": 0, "b": true, "nil": nil, "a": [1, "x"],
            "d": .double(2.5),
        ]
        #expect(
            JSONWriter.string(value)
                == #"{"s":"a\/b\"c\\d\n\t\u0001\u001f"# + "\u{7f}é😀"
                + #"","n":-12345,"z":0,"b":true,"nil":null,"a":[1,"x"],"d":2.5}"#
        )
        #expect(JSONWriter.string(.integer(.min)) == "-9223372036854775808")
        #expect(JSONWriter.string(.integer(.max)) == "9223372036854775807")
        #expect(JSONWriter.string(.double(.infinity)) == "null")
    }

    @Test func roundTrips() throws {
        let value: JSONValue = ["k": ["a\u{0}b", 1, [nil, false], ["x": "/"]], "é": "\u{10FFFF}"]
        #expect(try JSONParser.parse(JSONWriter.encode(value)) == value)
    }
}
