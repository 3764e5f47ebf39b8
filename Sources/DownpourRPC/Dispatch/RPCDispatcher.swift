import Downpour
import DownpourQueue

/// aria2's JSON-RPC interface over a ``DownloadQueueService``, free of any transport: bytes in, a reply (bytes
/// and the HTTP status aria2 would give) out. The HTTP server, the WebSocket sessions and tests all call it.
///
/// ```swift
/// let dispatcher = RPCDispatcher(service: manager, secret: "s3cr3t") { force in
///     await daemon.stop(force: force)
/// }
/// let reply = await dispatcher.handle(body: Array(#"{"id":1,"method":"aria2.getVersion"}"#.utf8))
/// // reply.body == {"id":1,"jsonrpc":"2.0","result":{"version":"1.37.0",...}}, reply.httpStatus == 200
/// ```
///
/// It follows aria2 1.37.0 (§1.3, §1.8 and §2 of `shared/aria2-rpc.md`): single requests and batches, any `id`
/// echoed, `jsonrpc` ignored, a leading `token:` parameter always removed and checked against the secret
/// (`system.*` methods need none), errors with aria2's codes and words.
public struct RPCDispatcher: Sendable {
    /// Called once the reply to `aria2.shutdown` (`force` false) or `aria2.forceShutdown` (`force` true) has
    /// been sent.
    public typealias ShutdownHandler = @Sendable (_ force: Bool) async -> Void

    /// The version `aria2.getVersion` reports. Clients gate features on aria2's version (AriaNg, aria2p and
    /// Motrix check it against the releases that brought a method or an option), so Downpour reports the aria2
    /// release whose interface it follows, not its own version.
    public static let aria2Version = "1.37.0"

    /// The features `aria2.getVersion` lists: only those of aria2's names that Downpour has. No BitTorrent,
    /// Metalink, XML-RPC, SFTP, GZip (responses are never decompressed), asynchronous DNS or Firefox cookies.
    public static let enabledFeatures = ["HTTPS", "Message Digest"]

    let service: any DownloadQueueService
    let tokenCheck: TokenCheck
    let onShutdown: ShutdownHandler
    /// `aria2.getSessionInfo`'s `sessionId`: 40 random hexadecimal digits, new with every dispatcher.
    public let sessionID: String

    /// - Parameters:
    ///   - service: the queue the calls act on.
    ///   - secret: the `--rpc-secret`; `nil` or empty and every call is authorized.
    ///   - onShutdown: what `aria2.shutdown` and `aria2.forceShutdown` set off once their reply is out.
    public init(service: any DownloadQueueService, secret: String?, onShutdown: @escaping ShutdownHandler = { _ in }) {
        self.service = service
        self.tokenCheck = TokenCheck(secret: secret)
        self.onShutdown = onShutdown
        var generator = SystemRandomNumberGenerator()
        self.sessionID =
            (0..<5).map { _ in
                let digits = String(generator.next() as UInt64, radix: 16)
                return String(repeating: "0", count: 16 - digits.count) + digits
            }.joined().prefix(40).description
    }

    /// Whether calls need a token.
    public var requiresToken: Bool { self.tokenCheck.requiresToken }

    // MARK: Entry points

    /// Answers a request body (HTTP POST) or a WebSocket text frame: one request object or a batch.
    public func handle(body: some Collection<UInt8>) async -> RPCReply {
        let request: JSONValue
        do {
            request = try JSONParser.parse(body)
        } catch {
            return Self.errorReply(.malformedJSON, id: .null)
        }
        return await self.handle(request: request)
    }

    /// Answers a parsed request object or batch.
    public func handle(request: JSONValue) async -> RPCReply {
        var effects = Effects()
        var writer = JSONWriter()
        let status: Int
        switch request {
        case .object(let object):
            let response = await self.respond(to: object, effects: &effects)
            Self.write(response, to: &writer)
            status = response.error?.httpStatus ?? 200
        case .array(let elements):
            writer.writeASCII("[")
            var first = true
            for element in elements {
                guard case .object(let object) = element else { continue }
                if !first { writer.writeASCII(",") }
                first = false
                Self.write(await self.respond(to: object, effects: &effects), to: &writer)
            }
            writer.writeASCII("]")
            status = 200
        default:
            return Self.errorReply(.invalidRequest, id: .null)
        }
        return self.reply(writer.bytes, status: status, effects: effects)
    }

    /// Answers the query of `GET /jsonrpc` (the text after `?`), JSONP when it has `jsoncallback`.
    public func handle(query: Substring) async -> RPCReply {
        let get = GETRequest(query: query)
        var reply: RPCReply
        switch get.request() {
        case .success(let request): reply = await self.handle(request: request)
        case .failure(let error): reply = Self.errorReply(error, id: .null)
        }
        if let callback = get.callback, !callback.isEmpty {
            reply.body = Array(callback.utf8) + [UInt8(ascii: "(")] + reply.body + [UInt8(ascii: ")")]
            reply.contentType = RPCReply.javaScriptContentType
        }
        return reply
    }

    // MARK: Responses

    /// What a call left to do besides its answer.
    struct Effects: Sendable {
        var isUnauthorized = false
        var shutdown: Bool?
    }

    struct Response: Sendable {
        var id: JSONValue
        var result: JSONValue?
        var error: RPCError?
    }

    private func reply(_ body: [UInt8], status: Int, effects: Effects) -> RPCReply {
        var afterReply: (@Sendable () async -> Void)?
        if let force = effects.shutdown {
            let onShutdown = self.onShutdown
            afterReply = { await onShutdown(force) }
        }
        return RPCReply(body: body, httpStatus: status, isUnauthorized: effects.isUnauthorized, afterReply: afterReply)
    }

    static func errorReply(_ error: RPCError, id: JSONValue) -> RPCReply {
        var writer = JSONWriter()
        Self.write(Response(id: id, error: error), to: &writer)
        return RPCReply(body: writer.bytes, httpStatus: error.httpStatus)
    }

    /// `{"id":…,"jsonrpc":"2.0","result":…}` or `{"id":…,"jsonrpc":"2.0","error":{"code":…,"message":…}}`.
    static func write(_ response: Response, to writer: inout JSONWriter) {
        writer.writeASCII("{\"id\":")
        writer.write(response.id)
        writer.writeASCII(",\"jsonrpc\":\"2.0\",")
        if let error = response.error {
            writer.writeASCII("\"error\":{\"code\":")
            writer.writeInteger(Int64(error.code))
            writer.writeASCII(",\"message\":")
            writer.writeString(error.message)
            writer.writeASCII("}}")
        } else {
            writer.writeASCII("\"result\":")
            writer.write(response.result ?? .null)
            writer.writeASCII("}")
        }
    }

    /// One request object (§1.3): an `id` is required (any type, echoed), `method` must be a string, `params`
    /// an array or absent.
    private func respond(to request: JSONObject, effects: inout Effects) async -> Response {
        guard let id = request["id"] else { return Response(id: .null, error: .invalidRequest) }
        guard case .string(let method)? = request["method"] else { return Response(id: id, error: .invalidRequest) }
        let params: [JSONValue]
        switch request["params"] {
        case nil: params = []
        case .array(let array)?: params = array
        default: return Response(id: id, error: .invalidParams)
        }
        switch await self.call(method, params: params, effects: &effects) {
        case .success(let result): return Response(id: id, result: result)
        case .failure(let error): return Response(id: id, error: error)
        }
    }

    // MARK: Calls

    /// Runs one method: removes a leading `token:` parameter, checks it, and dispatches.
    func call(
        _ name: String,
        params: [JSONValue],
        effects: inout Effects
    ) async -> Result<JSONValue, RPCError> {
        var params = params
        var token: String?
        if case .string(let first)? = params.first, first.hasPrefix("token:") {
            token = String(first.dropFirst(6))
            params.removeFirst()
        }
        let method = RPCMethod(rawValue: name)
        if method?.needsToken ?? true, !self.tokenCheck.authorizes(token) {
            effects.isUnauthorized = true
            return .failure(.unauthorized)
        }
        if name == Self.subscribeMethod {
            return .failure(.method("\(name) works only on the WebSocket at /jsonrpc, where the progress is pushed."))
        }
        guard let method else { return .failure(.method("No such method: \(name)")) }
        do throws(RPCError) {
            return .success(try await self.run(method, RPCParameters(values: params), effects: &effects))
        } catch {
            return .failure(error)
        }
    }
}
