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
    public static let enabledFeatures = ["HTTPS", "Message Digest", "Metalink"]

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

    /// What ``handleNow(body:)`` did with a request body.
    public enum Immediate: Sendable {
        /// It is answered: the reply to send.
        case answered(RPCReply)
        /// It is parsed and waits for ``handle(request:)``: it changes the queue, or the queue cannot be read
        /// from the calling thread.
        case pending(JSONValue)
    }

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

    /// Answers a request body right away, on the calling thread, when nothing in it waits: malformed JSON, a
    /// request that is neither an object nor a batch, and calls that only read (`tellStatus`, `tellActive`,
    /// `getGlobalStat`..., alone, in a batch or in `system.multicall`) when the caller is on the queue's own thread
    /// (``DownloadQueueService/readIfIsolated(_:)``). The reply is the one ``handle(body:)`` would give.
    public func handleNow(body: some Collection<UInt8>) -> Immediate {
        let request: JSONValue
        do {
            request = try JSONParser.parse(body)
        } catch {
            return .answered(Self.errorReply(.malformedJSON, id: .null))
        }
        guard let (objects, isBatch) = Self.objects(of: request) else {
            return .answered(Self.errorReply(.invalidRequest, id: .null))
        }
        guard Self.onlyReads(objects),
            let reply = self.service.readIfIsolated({ queue in self.answer(objects, isBatch: isBatch, reading: queue) })
        else { return .pending(request) }
        return .answered(reply)
    }

    /// Answers a parsed request object or batch.
    public func handle(request: JSONValue) async -> RPCReply {
        guard let (objects, isBatch) = Self.objects(of: request) else {
            return Self.errorReply(.invalidRequest, id: .null)
        }
        if Self.onlyReads(objects) {
            // One visit to the queue for the lot: every read sees the same moment.
            return await self.service.read { queue in self.answer(objects, isBatch: isBatch, reading: queue) }
        }
        var effects = Effects()
        var responses: [Response] = []
        responses.reserveCapacity(objects.count)
        for object in objects {
            responses.append(await self.respond(to: object, effects: &effects))
        }
        return self.reply(responses, isBatch: isBatch, effects: effects)
    }

    /// ``handle(request:)`` for the request objects of a request of reads only, from `queue`.
    func answer(_ objects: [JSONObject], isBatch: Bool, reading queue: any QueueReader) -> RPCReply {
        var effects = Effects()
        let responses = objects.map { self.respond(to: $0, reading: queue, effects: &effects) }
        return self.reply(responses, isBatch: isBatch, effects: effects)
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

        init(id: JSONValue, result: JSONValue? = nil, error: RPCError? = nil) {
            self.id = id
            self.result = result
            self.error = error
        }

        init(_ id: JSONValue, _ outcome: Result<JSONValue, RPCError>) {
            switch outcome {
            case .success(let result): self.init(id: id, result: result)
            case .failure(let error): self.init(id: id, error: error)
            }
        }
    }

    /// The request objects of a request: itself, or the objects of a batch (its other elements get no
    /// response, as in aria2); `nil` for anything else.
    static func objects(of request: JSONValue) -> (objects: [JSONObject], isBatch: Bool)? {
        switch request {
        case .object(let object):
            return ([object], false)
        case .array(let elements):
            return (
                elements.compactMap { element in
                    guard case .object(let object) = element else { return nil }
                    return object
                }, true
            )
        default:
            return nil
        }
    }

    /// Whether every call of a request's objects only reads: no method that changes the queue, directly or in
    /// `system.multicall`. Calls that fail before they run (a bad method name, bad parameters) change nothing.
    static func onlyReads(_ objects: [JSONObject]) -> Bool {
        func readsOnly(_ call: JSONObject, nameKey: String, nested: Bool) -> Bool {
            guard case .string(let name)? = call[nameKey], let method = RPCMethod(rawValue: name) else { return true }
            if method == .multicall {
                // Nested, it is refused; at the top, its calls are in any array among its parameters.
                guard !nested, case .array(let params)? = call["params"] else { return true }
                return params.allSatisfy { param in
                    guard case .array(let calls) = param else { return true }
                    return calls.allSatisfy { entry in
                        guard case .object(let spec) = entry else { return true }
                        return readsOnly(spec, nameKey: "methodName", nested: true)
                    }
                }
            }
            return !method.changesQueue
        }
        return objects.allSatisfy { readsOnly($0, nameKey: "method", nested: false) }
    }

    /// The reply to the responses of a request: the one response, or a batch's in an array.
    private func reply(_ responses: [Response], isBatch: Bool, effects: Effects) -> RPCReply {
        var writer = JSONWriter()
        if isBatch {
            writer.writeASCII("[")
            for (index, response) in responses.enumerated() {
                if index > 0 { writer.writeASCII(",") }
                Self.write(response, to: &writer)
            }
            writer.writeASCII("]")
        } else if let response = responses.first {
            Self.write(response, to: &writer)
        }
        let status = isBatch ? 200 : responses.first?.error?.httpStatus ?? 200
        var afterReply: (@Sendable () async -> Void)?
        if let force = effects.shutdown {
            let onShutdown = self.onShutdown
            afterReply = { await onShutdown(force) }
        }
        return RPCReply(
            body: writer.bytes,
            httpStatus: status,
            isUnauthorized: effects.isUnauthorized,
            afterReply: afterReply
        )
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

    /// What a request object asks for: a call, or the response that refuses it.
    enum RequestObject {
        case call(id: JSONValue, method: String, params: [JSONValue])
        case refused(Response)

        /// One request object (§1.3): an `id` is required (any type, echoed), `method` must be a string,
        /// `params` an array or absent.
        init(_ request: JSONObject) {
            guard let id = request["id"] else {
                self = .refused(Response(id: .null, error: .invalidRequest))
                return
            }
            guard case .string(let method)? = request["method"] else {
                self = .refused(Response(id: id, error: .invalidRequest))
                return
            }
            switch request["params"] {
            case nil: self = .call(id: id, method: method, params: [])
            case .array(let array)?: self = .call(id: id, method: method, params: array)
            default: self = .refused(Response(id: id, error: .invalidParams))
            }
        }
    }

    private func respond(to request: JSONObject, effects: inout Effects) async -> Response {
        switch RequestObject(request) {
        case .refused(let response):
            return response
        case .call(let id, let method, let params):
            return Response(id, await self.call(method, params: params, effects: &effects))
        }
    }

    private func respond(to request: JSONObject, reading queue: any QueueReader, effects: inout Effects) -> Response {
        switch RequestObject(request) {
        case .refused(let response):
            return response
        case .call(let id, let method, let params):
            return Response(id, self.call(method, params: params, reading: queue, effects: &effects))
        }
    }

    // MARK: Calls

    /// Removes a leading `token:` parameter, checks it, and finds the method.
    private func prepare(
        _ name: String,
        params: [JSONValue],
        effects: inout Effects
    ) throws(RPCError) -> (RPCMethod, RPCParameters) {
        var params = params
        var token: String?
        if case .string(let first)? = params.first, first.hasPrefix("token:") {
            token = String(first.dropFirst(6))
            params.removeFirst()
        }
        let method = RPCMethod(rawValue: name)
        if method?.needsToken ?? true, !self.tokenCheck.authorizes(token) {
            effects.isUnauthorized = true
            throw .unauthorized
        }
        if name == Self.subscribeMethod {
            throw .method("\(name) works only on the WebSocket at /jsonrpc, where the progress is pushed.")
        }
        guard let method else { throw .method("No such method: \(name)") }
        return (method, RPCParameters(values: params))
    }

    /// Runs one method: removes a leading `token:` parameter, checks it, and dispatches.
    func call(
        _ name: String,
        params: [JSONValue],
        effects: inout Effects
    ) async -> Result<JSONValue, RPCError> {
        do throws(RPCError) {
            let (method, parameters) = try self.prepare(name, params: params, effects: &effects)
            return .success(try await self.run(method, parameters, effects: &effects))
        } catch {
            return .failure(error)
        }
    }

    /// ``call(_:params:effects:)`` for a call that only reads, from `queue`.
    func call(
        _ name: String,
        params: [JSONValue],
        reading queue: any QueueReader,
        effects: inout Effects
    ) -> Result<JSONValue, RPCError> {
        do throws(RPCError) {
            let (method, parameters) = try self.prepare(name, params: params, effects: &effects)
            if method == .multicall {
                return .success(try self.multicall(parameters, reading: queue, effects: &effects))
            }
            return .success(try self.read(method, parameters, from: queue))
        } catch {
            return .failure(error)
        }
    }
}
