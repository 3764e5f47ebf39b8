import DownpourJSON
import Testing

@testable import DownpourRPC

/// A call as `RPCCall` reads it, before anything runs: the token, the method, the parameters, as a table. Each row is
/// what a client sends and the call it becomes (its kind and words), or the refusal a client is answered with.
@Suite("RPC calls as read")
struct RPCCallTests {
    enum Expected: Sendable {
        /// `read`, `write` or `multicall`; words the call's description holds; whether it only reads and proves the
        /// token.
        case call(kind: String, words: String, onlyReads: Bool, provesToken: Bool)
        case refused(String)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var method: String
        var params: [JSONValue]
        var secret: String?
        var expected: Expected

        var testDescription: String {
            "\(self.method) \(self.params.count) parameter(s)\(self.secret == nil ? "" : ", with a secret")"
        }
    }

    static func object(_ members: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject(members.map { JSONObject.Member(key: $0.0, value: $0.1) }))
    }

    static let rows: [Row] = [
        Row(
            method: "aria2.pause",
            params: [.string("2089b05ecca3d829")],
            expected: .call(
                kind: "write",
                words: "pause(gid: \"2089b05ecca3d829\", force: false)",
                onlyReads: false,
                provesToken: true
            )
        ),
        Row(
            method: "aria2.forcePause",
            params: [.string("token:s3cret"), .string("2089b05ecca3d829")],
            secret: "s3cret",
            expected: .call(kind: "write", words: "force: true", onlyReads: false, provesToken: true)
        ),
        Row(method: "aria2.pause", params: [.string("2089")], secret: "s3cret", expected: .refused("Unauthorized")),
        Row(
            method: "aria2.pause",
            params: [.string("token:guess"), .string("2089")],
            secret: "s3cret",
            expected: .refused("Unauthorized")
        ),
        Row(
            method: "system.listMethods",
            params: [],
            secret: "s3cret",
            expected: .call(kind: "read", words: "listMethods", onlyReads: true, provesToken: false)
        ),
        Row(
            method: "aria2.tellActive",
            params: [.array([.string("gid")])],
            expected: .call(kind: "read", words: "tellActive", onlyReads: true, provesToken: true)
        ),
        Row(method: "aria2.addUri", params: [.array([])], expected: .refused("URI is not provided.")),
        Row(method: "aria2.nope", params: [], expected: .refused("No such method: aria2.nope")),
        Row(
            method: "aria2.addTorrent",
            params: [.string("AAAA")],
            expected: .refused("BitTorrent is not supported: Downpour downloads over HTTP and HTTPS only.")
        ),
        Row(
            method: "aria2.changePosition",
            params: [.string("2089"), .integer(0), .string("POS_SIDEWAYS")],
            expected: .refused("Illegal argument.")
        ),
        Row(
            method: "aria2.changeUri",
            params: [.string("2089"), .integer(0), .array([]), .array([])],
            expected: .refused("fileIndex must be greater than or equal to 1.")
        ),
        Row(
            method: "system.multicall",
            params: [
                .array([
                    object([("methodName", .string("aria2.getVersion"))]),
                    object([("methodName", .string("aria2.pause")), ("params", .array([.string("2089")]))]),
                ])
            ],
            expected: .call(kind: "multicall", words: "pause", onlyReads: false, provesToken: true)
        ),
        Row(
            method: "system.multicall",
            params: [.array([object([("methodName", .string("system.listMethods"))]), .string("not a struct")])],
            secret: "s3cret",
            expected: .call(kind: "multicall", words: "expected struct", onlyReads: true, provesToken: false)
        ),
    ]

    @Test("each call reads as the table says", arguments: rows)
    func read(_ row: Row) {
        let check = TokenCheck(secret: row.secret)
        do throws(RPCError) {
            let call = try RPCCall(row.method, params: row.params, tokenCheck: check)
            guard case .call(let kind, let words, let onlyReads, let provesToken) = row.expected else {
                Issue.record("read as \(call), not refused")
                return
            }
            let description = String(describing: call)
            #expect(description.hasPrefix(kind + "("), "\(description)")
            #expect(description.contains(words), "\(description)")
            #expect(call.onlyReads == onlyReads)
            #expect(call.provesToken == provesToken)
        } catch {
            guard case .refused(let message) = row.expected else {
                Issue.record("refused: \(error.message)")
                return
            }
            #expect(error.message == message)
        }
    }
}
