import Downpour
import DownpourJSON
import DownpourQueue
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DownpourRPC

#if canImport(FoundationXML)
import FoundationXML
#endif

/// XML-RPC at `/rpc` (§10): the reader's types, hostile documents, the writer, and every method through the
/// dispatcher, each read answered as JSON-RPC answers it.
@Suite struct XMLRPCTests {
    // MARK: Reading

    static func call(_ method: String, _ params: String...) -> String {
        "<?xml version=\"1.0\"?><methodCall><methodName>\(method)</methodName><params>"
            + params.map { "<param>\($0)</param>" }.joined() + "</params></methodCall>"
    }

    struct TypeRow: Sendable, CustomTestStringConvertible {
        var xml: String
        var value: JSONValue
        var testDescription: String { self.xml }
    }

    static let types: [TypeRow] = [
        TypeRow(xml: "<value><int>42</int></value>", value: 42),
        TypeRow(xml: "<value><i4>-7</i4></value>", value: -7),
        TypeRow(xml: "<value><i8>9000000000</i8></value>", value: 9_000_000_000),
        TypeRow(xml: "<value><string>a &amp; b &lt;c&gt;</string></value>", value: "a & b <c>"),
        TypeRow(xml: "<value>bare text</value>", value: "bare text"),
        TypeRow(xml: "<value></value>", value: ""),
        TypeRow(xml: "<value><string/></value>", value: ""),
        TypeRow(xml: "<value><boolean>1</boolean></value>", value: true),
        TypeRow(xml: "<value><boolean>0</boolean></value>", value: false),
        TypeRow(xml: "<value><double>2.5</double></value>", value: 2.5),
        TypeRow(xml: "<value><base64>aGVs\n bG8=</base64></value>", value: "aGVsbG8="),
        TypeRow(
            xml: "<value><dateTime.iso8601>19980717T14:08:55</dateTime.iso8601></value>",
            value: "19980717T14:08:55"
        ),
        TypeRow(xml: "<value><nil/></value>", value: nil),
        TypeRow(xml: "<value><array><data></data></array></value>", value: []),
        TypeRow(xml: "<value><array/></value>", value: []),
        TypeRow(
            xml: "<value><array><data><value>x</value><value><int>1</int></value></data></array></value>",
            value: ["x", 1]
        ),
        TypeRow(
            xml: "<value><struct><member><name>split</name><value><string>4</string></value></member>"
                + "<member><name>header</name><value><array><data><value>A: b</value></data></array></value>"
                + "</member></struct></value>",
            value: ["split": "4", "header": ["A: b"]]
        ),
        TypeRow(xml: "<value>\n  <int> 5 </int>\n</value>", value: 5),
        TypeRow(xml: "<value><string><![CDATA[<raw>]]></string></value>", value: "<raw>"),
    ]

    @Test(arguments: types)
    func readsEachType(_ row: TypeRow) throws {
        let request = try XMLRPCRequest(parsing: Array(Self.call("m", row.xml).utf8))
        #expect(request.methodName == "m")
        #expect(request.params == [row.value])
    }

    @Test func readsACallWithoutParams() throws {
        let request = try XMLRPCRequest(
            parsing: Array("<methodCall>\n <methodName> system.listMethods </methodName>\n</methodCall>".utf8)
        )
        #expect(request == XMLRPCRequest(methodName: "system.listMethods", params: []))
    }

    struct HostileRow: Sendable, CustomTestStringConvertible {
        var name: String
        var body: String
        var testDescription: String { self.name }

        /// What the fault must say, for the refusals that have a reason of their own.
        var reason: String? {
            switch self.name {
            case "deep nesting": "nest deeper"
            case "2 MB of attributes": "attributes"
            case let name where name.contains("DOCTYPE") || name.contains("doctype") || name.contains("entit"):
                "not accepted"
            case let name where name.contains("UTF-16"): "wide encoding"
            case let name where name.contains("UTF-7"): "encoding 'utf-7'"
            case let name where name.contains("EBCDIC"): "not ASCII-compatible"
            default: nil
            }
        }
    }

    static let hostile: [HostileRow] = [
        HostileRow(
            name: "entity expansion (billion laughs)",
            body: "<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;\">"
                + "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;\">]><methodCall><methodName>&c;</methodName></methodCall>"
        ),
        HostileRow(
            name: "an external entity",
            body: "<!DOCTYPE m [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><methodCall><methodName>&x;</methodName>"
                + "</methodCall>"
        ),
        HostileRow(
            name: "a DOCTYPE alone",
            body: "<!DOCTYPE methodCall><methodCall><methodName>m</methodName></methodCall>"
        ),
        HostileRow(
            name: "deep nesting",
            body: Self.call(
                "m",
                String(repeating: "<value><array><data>", count: 10000)
                    + String(repeating: "</data></array></value>", count: 10000)
            )
        ),
        HostileRow(
            name: "a DOCTYPE behind a processing instruction that holds a comment opener",
            body: "<?p <!-- ?><!DOCTYPE m [<!ENTITY a \"x\">]><!--x--><methodCall><methodName>&a;</methodName>"
                + "</methodCall>"
        ),
        HostileRow(
            name: "a lowercase doctype",
            body: "<!doctype m><methodCall><methodName>m</methodName></methodCall>"
        ),
        HostileRow(
            name: "UTF-16 (NUL bytes hide the markup from a look at the bytes)",
            body: String(decoding: Array("<methodCall/>".utf8).flatMap { [$0, 0] }, as: UTF8.self)
        ),
        HostileRow(
            name: "UTF-7 declared",
            body: "<?xml version=\"1.0\" encoding=\"UTF-7\"?>+ADw-!DOCTYPE m+AD4-<methodCall/>"
        ),
        HostileRow(name: "EBCDIC-like bytes before the markup", body: "Lo\u{A7}\u{94}<methodCall/>"),
        HostileRow(
            name: "2 MB of attributes",
            body: "<methodCall a=\"" + String(repeating: "x", count: 2_000_000)
                + "\"><methodName>m</methodName></methodCall>"
        ),
        HostileRow(name: "not XML", body: "{\"id\":1}"),
        HostileRow(name: "empty", body: ""),
        HostileRow(name: "unclosed", body: "<methodCall><methodName>m</methodName>"),
        HostileRow(name: "another root", body: "<methodResponse/>"),
        HostileRow(name: "no method name", body: "<methodCall><params/></methodCall>"),
        HostileRow(name: "a bad int", body: Self.call("m", "<value><int>12x</int></value>")),
        HostileRow(name: "an unknown type", body: Self.call("m", "<value><float>1</float></value>")),
        HostileRow(
            name: "a member without a name",
            body: Self.call("m", "<value><struct><member><value>1</value></member></struct></value>")
        ),
        HostileRow(name: "two values in a param", body: Self.call("m", "<value>a</value><value>b</value>")),
    ]

    @Test(arguments: hostile)
    func refusesHostileDocuments(_ row: HostileRow) {
        #expect {
            try XMLRPCRequest(parsing: Array(row.body.utf8))
        } throws: { error in
            guard let error = error as? RPCError, error.code == 1 else { return false }
            return row.reason.map { error.message.contains($0) } ?? true
        }
    }

    @Test("64 levels of arrays are taken, 65 are not")
    func depthLimit() throws {
        func nested(_ depth: Int) -> String {
            Self.call(
                "m",
                String(repeating: "<value><array><data>", count: depth)
                    + String(
                        repeating: "</data></array></value>",
                        count: depth
                    )
            )
        }
        _ = try XMLRPCRequest(parsing: Array(nested(XMLRPCRequest.maximumDepth).utf8))
        #expect(throws: RPCError.self) {
            try XMLRPCRequest(parsing: Array(nested(XMLRPCRequest.maximumDepth + 1).utf8))
        }
    }

    // MARK: Writing

    @Test func writesResultsAndFaultsAsAria2Does() {
        #expect(
            String(decoding: XMLRPCWriter.response(["gid": "2089b05ecca3d829", "n": ["1", 2]]), as: UTF8.self)
                == "<?xml version=\"1.0\"?><methodResponse><params><param><value><struct>"
                + "<member><name>gid</name><value><string>2089b05ecca3d829</string></value></member>"
                + "<member><name>n</name><value><array><data><value><string>1</string></value>"
                + "<value><int>2</int></value></data></array></value></member>"
                + "</struct></value></param></params></methodResponse>"
        )
        #expect(
            String(decoding: XMLRPCWriter.fault(.method("a <b> & c")), as: UTF8.self)
                == "<?xml version=\"1.0\"?><methodResponse><fault><value><struct>"
                + "<member><name>faultCode</name><value><int>1</int></value></member>"
                + "<member><name>faultString</name><value><string>a &lt;b&gt; &amp; c</string></value></member>"
                + "</struct></value></fault></methodResponse>"
        )
    }

    // MARK: Every method

    /// Sends an XML-RPC body; returns the decoded result, or the fault.
    static func send(_ harness: RPCHarness, _ body: String) async throws -> Result<JSONValue, RPCError> {
        let reply = await harness.dispatcher.handle(xml: Array(body.utf8))
        #expect(reply.httpStatus == (body.hasSuffix("</methodCall>") ? 200 : 400))
        #expect(reply.contentType == "text/xml")
        return try XMLRPCResponseReader.read(reply.body)
    }

    static func value(_ value: JSONValue) -> String {
        String(
            decoding: {
                var out: [UInt8] = []
                XMLRPCWriter.write(value, to: &out)
                return out
            }(),
            as: UTF8.self
        )
    }

    /// The XML-RPC form of a call with `params` (JSON values written as the writer writes them).
    static func call(_ method: String, _ params: [JSONValue]) -> String {
        Self.call(method, params.map(Self.value))
    }

    static func call(_ method: String, _ params: [String]) -> String {
        "<?xml version=\"1.0\"?><methodCall><methodName>\(method)</methodName><params>"
            + params.map { "<param>\($0)</param>" }.joined() + "</params></methodCall>"
    }

    @Test("Every method over XML-RPC: reads answer what JSON-RPC answers, writes do what they do")
    func everyMethod() async throws {
        let harness = RPCHarness(secret: "s")
        let token: JSONValue = "token:s"
        func xml(_ method: String, _ params: [JSONValue] = []) async throws -> JSONValue {
            try await Self.send(harness, Self.call(method, [token] + params)).get()
        }
        func fault(_ method: String, _ params: [JSONValue] = []) async throws -> RPCError? {
            guard case .failure(let error) = try await Self.send(harness, Self.call(method, [token] + params)) else {
                return nil
            }
            return error
        }
        func json(_ method: String, _ params: [JSONValue] = []) async throws -> JSONValue {
            try await harness.result(method, [token] + params)
        }
        var covered: Set<String> = []
        func cover(_ method: String) { covered.insert(method) }

        let gid = try #require(try await xml("aria2.addUri", [["http://a/1"], ["split": "2"]]).stringValue)
        cover("aria2.addUri")
        let second = try #require(try await xml("aria2.addUri", [["http://a/2"], [:], 0]).stringValue)
        let metalink = Data(
            """
            <?xml version="1.0"?><metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="m.bin">\
            <url>http://a/m.bin</url></file></metalink>
            """.utf8
        ).base64EncodedString()
        let added = try await Self.send(
            harness,
            Self.call("aria2.addMetalink", [Self.value(token), "<value><base64>\(metalink)</base64></value>"])
        ).get()
        #expect(added.arrayValue?.count == 1)
        cover("aria2.addMetalink")
        #expect(try await fault("aria2.addTorrent", ["AAAA"])?.code == 1)
        cover("aria2.addTorrent")

        // Reads: the same answer as JSON-RPC's, on the same queue.
        let reads: [(String, [JSONValue])] = [
            ("aria2.tellStatus", [.string(gid)]), ("aria2.tellStatus", [.string(gid), ["gid", "status"]]),
            ("aria2.getUris", [.string(gid)]), ("aria2.getFiles", [.string(gid)]), ("aria2.getPeers", [.string(gid)]),
            ("aria2.tellActive", []), ("aria2.tellWaiting", [0, 10]), ("aria2.tellStopped", [0, 10]),
            ("aria2.getOption", [.string(gid)]), ("aria2.getGlobalOption", []), ("aria2.getVersion", []),
            ("aria2.getSessionInfo", []), ("aria2.getGlobalStat", []),
        ]
        for (method, params) in reads {
            #expect(try await xml(method, params) == json(method, params), "\(method)")
            cover(method)
        }
        #expect(
            try await Self.send(harness, Self.call("system.listMethods", [String]())).get()
                == json("system.listMethods")
        )
        #expect(
            try await Self.send(harness, Self.call("system.listNotifications", [String]())).get()
                == json("system.listNotifications")
        )
        cover("system.listMethods")
        cover("system.listNotifications")
        let getServers = try await fault("aria2.getServers", [.string(gid)])
        #expect(getServers == .method("No active download for GID#\(gid)"))
        cover("aria2.getServers")

        // Writes.
        #expect(try await xml("aria2.changePosition", [.string(gid), 0, "POS_SET"]) == 0)
        cover("aria2.changePosition")
        #expect(try await xml("aria2.changeUri", [.string(gid), 1, ["http://a/1"], ["http://b/1"]]) == [1, 1])
        cover("aria2.changeUri")
        #expect(try await xml("aria2.changeOption", [.string(gid), ["split": "3"]]) == "OK")
        #expect(try await json("aria2.getOption", [.string(gid)])["split"] == "3")
        cover("aria2.changeOption")
        #expect(try await xml("aria2.changeGlobalOption", [["max-concurrent-downloads": "3"]]) == "OK")
        cover("aria2.changeGlobalOption")
        for method in ["aria2.pause", "aria2.forcePause"] {
            #expect(try await xml(method, [.string(second)]) == .string(second))
            cover(method)
            #expect(try await xml("aria2.unpause", [.string(second)]) == .string(second))
        }
        cover("aria2.unpause")
        for method in ["aria2.pauseAll", "aria2.forcePauseAll", "aria2.unpauseAll"] {
            #expect(try await xml(method) == "OK")
            cover(method)
        }
        #expect(try await xml("aria2.remove", [.string(second)]) == .string(second))
        cover("aria2.remove")
        #expect(try await xml("aria2.forceRemove", [.string(gid)]) == .string(gid))
        cover("aria2.forceRemove")
        let stoppedText = try #require(try await xml("aria2.addUri", [["http://a/3"]]).stringValue)
        let stopped = try #require(DownloadID(stoppedText))
        await harness.queue.start(stopped)
        await harness.queue.finish(stopped)
        #expect(try await xml("aria2.removeDownloadResult", [.string(stoppedText)]) == "OK")
        cover("aria2.removeDownloadResult")
        #expect(try await xml("aria2.purgeDownloadResult") == "OK")
        cover("aria2.purgeDownloadResult")
        #expect(try await fault("aria2.saveSession") == .method("Filename is not given."))
        cover("aria2.saveSession")

        // system.multicall in XML-RPC's form: results in one-element arrays, faults as {faultCode, faultString}.
        let multicall = try await Self.send(
            harness,
            Self.call(
                "system.multicall",
                [
                    [
                        ["methodName": "aria2.getVersion", "params": [token]],
                        ["methodName": "aria2.tellStatus", "params": [token, "zz"]],
                        ["methodName": "aria2.getVersion", "params": ["token:wrong"]],
                    ]
                ] as [JSONValue]
            )
        ).get()
        let entries = try #require(multicall.arrayValue)
        #expect(entries.count == 3)
        #expect(entries[0].arrayValue?.first?["version"] == "1.37.0")
        #expect(entries[1] == ["faultCode": 1, "faultString": "Invalid GID zz"])
        #expect(entries[2] == ["faultCode": 1, "faultString": "Unauthorized"])
        cover("system.multicall")

        for method in ["aria2.shutdown", "aria2.forceShutdown"] {
            let reply = await harness.dispatcher.handle(xml: Array(Self.call(method, [token]).utf8))
            #expect(try XMLRPCResponseReader.read(reply.body) == .success("OK"))
            await reply.afterReply?()
            cover(method)
        }
        #expect(harness.shutdowns.withLockedValue { $0 } == [false, true])
        #expect(covered == Set(RPCMethod.allCases.map(\.rawValue)))
    }

    @Test("Faults: a wrong token is aria2's Unauthorized and held back; an unknown method; a broken document")
    func faults() async throws {
        let harness = RPCHarness(secret: "s")
        let wrong = await harness.dispatcher.handle(
            xml: Array(Self.call("aria2.getVersion", ["token:x"] as [JSONValue]).utf8)
        )
        #expect(wrong.isUnauthorized)
        #expect(try XMLRPCResponseReader.read(wrong.body) == .failure(.unauthorized))
        let missing = try await Self.send(harness, Self.call("aria2.getVersion", [String]()))
        #expect(missing == .failure(.unauthorized))
        let unknown = try await Self.send(harness, Self.call("aria2.nothing", ["token:s"] as [JSONValue]))
        #expect(unknown == .failure(.method("No such method: aria2.nothing")))
        let broken = try await Self.send(harness, "<methodCall>")
        guard case .failure(let error) = broken else {
            Issue.record("a broken document was answered: \(broken)")
            return
        }
        #expect(error.code == 1)
    }

    @Test("A read answered on the queue's thread comes through handleNow as handle answers it")
    func handleNowAnswersReads() async throws {
        let harness = RPCHarness()
        let body = Array(Self.call("aria2.getGlobalStat", [JSONValue]()).utf8)
        let expected = await harness.dispatcher.handle(xml: body)
        switch harness.dispatcher.handleNow(xml: body) {
        case .answered(let reply): #expect(reply.body == expected.body)
        case .pending(let parsed):
            #expect(
                String(decoding: (await harness.dispatcher.handle(parsed: parsed)).body, as: UTF8.self)
                    == String(decoding: expected.body, as: UTF8.self)
            )
        }
    }
}

/// Reads an XML-RPC `<methodResponse>` back into values, for the tests: the result, or the fault.
final class XMLRPCResponseReader: NSObject, XMLParserDelegate {
    private var stack: [(name: String, text: String, children: [JSONValue], keys: [String])] = []
    private var result: JSONValue?
    private var isFault = false

    static func read(_ bytes: [UInt8]) throws -> Result<JSONValue, RPCError> {
        let reader = XMLRPCResponseReader()
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = reader
        guard parser.parse(), let value = reader.result else {
            throw RPCError.method("not an XML-RPC response: \(String(decoding: bytes, as: UTF8.self))")
        }
        guard reader.isFault else { return .success(value) }
        guard case .integer(let code)? = value["faultCode"], case .string(let message)? = value["faultString"] else {
            throw RPCError.method("a fault without faultCode and faultString")
        }
        return .failure(RPCError(code: Int(code), message: message))
    }

    func parser(
        _ parser: XMLParser,
        didStartElement element: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if element == "fault" { self.isFault = true }
        self.stack.append((element, "", [], []))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !self.stack.isEmpty else { return }
        self.stack[self.stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
        let frame = self.stack.removeLast()
        let value: JSONValue?
        switch element {
        case "string": value = .string(frame.text)
        case "int", "i4": value = Int64(frame.text).map(JSONValue.integer)
        case "boolean": value = .bool(frame.text == "1")
        case "nil": value = .null
        case "data": value = .array(frame.children)
        case "array": value = frame.children.first ?? .array([])
        case "struct":
            value = .object(JSONObject(zip(frame.keys, frame.children).map { JSONObject.Member(key: $0, value: $1) }))
        case "name":
            self.stack[self.stack.count - 1].keys.append(frame.text)
            return
        case "value": value = frame.children.first ?? .string(frame.text)
        case "member":
            self.stack[self.stack.count - 1].keys += frame.keys
            self.stack[self.stack.count - 1].children += frame.children
            return
        case "param", "fault":
            self.result = frame.children.first
            return
        default: return
        }
        if let value, !self.stack.isEmpty { self.stack[self.stack.count - 1].children.append(value) }
    }
}
