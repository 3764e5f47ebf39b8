import Downpour
import DownpourJSON
import DownpourQueue
import NIOConcurrencyHelpers
import Testing

@testable import DownpourRPC

/// A dispatcher over an ``InMemoryQueue``, with helpers that build requests and read replies.
struct RPCHarness {
    let queue: InMemoryQueue
    let dispatcher: RPCDispatcher
    let shutdowns: NIOLockedValueBox<[Bool]>

    init(secret: String? = nil) {
        let queue = InMemoryQueue()
        let shutdowns = NIOLockedValueBox<[Bool]>([])
        self.queue = queue
        self.shutdowns = shutdowns
        self.dispatcher = RPCDispatcher(service: queue, secret: secret) { force in
            shutdowns.withLockedValue { $0.append(force) }
        }
    }

    /// Sends raw text; returns the parsed reply and the whole reply.
    func send(_ text: String) async throws -> (json: JSONValue, reply: RPCReply) {
        let reply = await self.dispatcher.handle(body: Array(text.utf8))
        return (try JSONParser.parse(reply.body), reply)
    }

    /// Calls a method with `params` (the token is not added); returns the response object.
    func response(_ method: String, _ params: [JSONValue] = [], id: JSONValue = 1) async throws -> JSONObject {
        let request: JSONValue = ["jsonrpc": "2.0", "id": id, "method": .string(method), "params": .array(params)]
        let reply = await self.dispatcher.handle(request: request)
        let json = try JSONParser.parse(reply.body)
        return try #require(json.objectValue)
    }

    /// The result of a call that must succeed.
    func result(
        _ method: String,
        _ params: [JSONValue] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws -> JSONValue
    {
        let response = try await self.response(method, params)
        #expect(
            response["error"] == nil,
            "\(method) failed: \(JSONWriter.string(.object(response)))",
            sourceLocation: sourceLocation
        )
        return try #require(response["result"], sourceLocation: sourceLocation)
    }

    /// The error message of a call that must fail with code 1.
    func errorMessage(
        _ method: String,
        _ params: [JSONValue] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws -> String
    {
        let response = try await self.response(method, params)
        let error = try #require(response["error"]?.objectValue, sourceLocation: sourceLocation)
        #expect(error["code"] == .integer(1), sourceLocation: sourceLocation)
        #expect(response["result"] == nil, sourceLocation: sourceLocation)
        return try #require(error["message"]?.stringValue, sourceLocation: sourceLocation)
    }

    /// Adds a download of `uri`; returns its GID.
    func add(_ uri: String = "http://example.com/file", options: JSONValue = [:]) async throws -> DownloadID {
        let gid = try await self.result("aria2.addUri", [[.string(uri)], options])
        let text = try #require(gid.stringValue)
        return try #require(DownloadID(text))
    }
}

extension JSONValue {
    /// The member `key` of an object.
    subscript(key: String) -> JSONValue? {
        self.objectValue?[key]
    }

    /// The element at `index` of an array.
    subscript(index: Int) -> JSONValue? {
        guard let array = self.arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }

    /// The keys of an object, in order.
    var keys: [String] { self.objectValue?.members.map(\.key) ?? [] }
}
