import Downpour
import DownpourJSON
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

    /// The features `aria2.getVersion` lists: only those of aria2's names that Downpour has. No BitTorrent, SFTP,
    /// GZip (responses are never decompressed), asynchronous DNS or Firefox cookies.
    public static let enabledFeatures = ["HTTPS", "Message Digest", "Metalink", "XML-RPC"]

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

    /// How a request came and how it is answered: JSON-RPC (`/jsonrpc`, the WebSocket) or XML-RPC (`/rpc`).
    public enum Dialect: Sendable, Hashable {
        case jsonRPC
        case xmlRPC
    }

    /// A request read once: one request object or a batch, each object's call parsed (``RPCCall``).
    public struct ParsedRequest: Sendable {
        /// The request as JSON.
        package let body: JSONValue
        let requests: [RequestObject]
        let isBatch: Bool
        var dialect = Dialect.jsonRPC

        /// Whether it is one `system.multicall`.
        var isMulticall: Bool {
            guard !self.isBatch, case .call(_, .multicall)? = self.requests.first else { return false }
            return true
        }

        /// Whether a call in it carried the right token (with a secret set, any call that needs one and was not
        /// refused for it): a WebSocket admitted only by the secret is served notifications from then on.
        public var provesToken: Bool {
            self.requests.contains { request in
                guard case .call(_, let call) = request else { return false }
                return call.provesToken
            }
        }

        /// Whether every call only reads (calls refused before they run change nothing).
        public var onlyReads: Bool {
            self.requests.allSatisfy { request in
                guard case .call(_, let call) = request else { return true }
                return call.onlyReads
            }
        }
    }

    /// What ``handleNow(body:)`` did with a request body.
    public enum Immediate: Sendable {
        /// It is answered: the reply to send.
        case answered(RPCReply)
        /// It is parsed and waits for ``handle(parsed:)``: it changes the queue, or the queue cannot be read
        /// from the calling thread.
        case pending(ParsedRequest)
    }

    /// Reads a request: its calls, or the reply that refuses it (neither an object nor a batch).
    package func parse(_ request: JSONValue) -> Result<ParsedRequest, RPCError> {
        let objects: [JSONObject]
        let isBatch: Bool
        switch request {
        case .object(let object):
            (objects, isBatch) = ([object], false)
        case .array(let elements):
            // A batch's elements that are not objects get no response, as in aria2.
            objects = elements.compactMap(\.objectValue)
            isBatch = true
        default:
            return .failure(.invalidRequest)
        }
        return .success(
            ParsedRequest(
                body: request,
                requests: objects.map { RequestObject($0, tokenCheck: self.tokenCheck) },
                isBatch: isBatch
            )
        )
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
        let parsed: ParsedRequest
        do {
            parsed = try self.parse(try JSONParser.parse(body)).get()
        } catch let error as RPCError {
            return .answered(Self.errorReply(error, id: .null))
        } catch {
            return .answered(Self.errorReply(.malformedJSON, id: .null))
        }
        guard parsed.onlyReads, let reply = self.service.readIfIsolated({ self.answer(parsed, reading: $0) }) else {
            return .pending(parsed)
        }
        return .answered(reply)
    }

    /// Answers a parsed request object or batch.
    package func handle(request: JSONValue) async -> RPCReply {
        switch self.parse(request) {
        case .success(let parsed): await self.handle(parsed: parsed)
        case .failure(let error): Self.errorReply(error, id: .null)
        }
    }

    /// Answers a request ``parse(_:)`` read.
    public func handle(parsed: ParsedRequest) async -> RPCReply {
        if parsed.onlyReads {
            // One visit to the queue for the lot: every read sees the same moment.
            return await self.service.read { queue in self.answer(parsed, reading: queue) }
        }
        var effects = Effects()
        var responses: [Response] = []
        responses.reserveCapacity(parsed.requests.count)
        for request in parsed.requests {
            switch request {
            case .refused(let response):
                responses.append(Self.refusal(response, effects: &effects))
            case .call(let id, let call):
                responses.append(Response(id, await self.run(call, effects: &effects)))
            }
        }
        return self.reply(responses, of: parsed, effects: effects)
    }

    /// ``handle(parsed:)`` for a request of reads only, from `queue`.
    func answer(_ parsed: ParsedRequest, reading queue: any QueueReader) -> RPCReply {
        var effects = Effects()
        let responses = parsed.requests.map { request in
            switch request {
            case .refused(let response):
                return Self.refusal(response, effects: &effects)
            case .call(let id, let call):
                return Response(id, self.answer(call, reading: queue, effects: &effects))
            }
        }
        return self.reply(responses, of: parsed, effects: effects)
    }

    /// Reads an XML-RPC body (`POST /rpc`): one `<methodCall>`, read as a call (``XMLRPCRequest``), or the fault
    /// that refuses it.
    public func parse(xml body: some Collection<UInt8>) -> Result<ParsedRequest, RPCError> {
        let request: XMLRPCRequest
        do {
            request = try XMLRPCRequest(parsing: body)
        } catch {
            return .failure(error)
        }
        let object = RequestObject(
            method: request.methodName,
            params: request.params,
            id: .null,
            tokenCheck: self.tokenCheck
        )
        var parsed = ParsedRequest(body: .null, requests: [object], isBatch: false)
        parsed.dialect = .xmlRPC
        return .success(parsed)
    }

    /// ``handleNow(body:)`` for an XML-RPC body: answered now when it is malformed or only reads on the queue's
    /// own thread, else parsed for ``handle(parsed:)``.
    public func handleNow(xml body: some Collection<UInt8>) -> Immediate {
        switch self.parse(xml: body) {
        case .failure(let error):
            return .answered(Self.faultReply(error, httpStatus: 400))
        case .success(let parsed):
            guard parsed.onlyReads, let reply = self.service.readIfIsolated({ self.answer(parsed, reading: $0) })
            else { return .pending(parsed) }
            return .answered(reply)
        }
    }

    /// Answers an XML-RPC body (`POST /rpc`).
    public func handle(xml body: some Collection<UInt8>) async -> RPCReply {
        switch self.parse(xml: body) {
        case .failure(let error): Self.faultReply(error, httpStatus: 400)
        case .success(let parsed): await self.handle(parsed: parsed)
        }
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
        /// Calls refused for a wrong or missing token.
        var unauthorizedCalls = 0
        var isUnauthorized: Bool { self.unauthorizedCalls > 0 }
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

    /// The reply to the responses of a request: the one response, or a batch's in an array.
    private func reply(_ responses: [Response], of parsed: ParsedRequest, effects: Effects) -> RPCReply {
        var afterReply: (@Sendable () async -> Void)?
        if let force = effects.shutdown {
            let onShutdown = self.onShutdown
            afterReply = { await onShutdown(force) }
        }
        guard parsed.dialect == .jsonRPC else {
            var reply = Self.xmlReply(responses.first, isMulticall: parsed.isMulticall)
            reply.unauthorizedCalls = effects.unauthorizedCalls
            reply.afterReply = afterReply
            reply.provesToken = parsed.provesToken
            return reply
        }
        let isBatch = parsed.isBatch
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
        var reply = RPCReply(
            body: writer.bytes,
            httpStatus: status,
            afterReply: afterReply
        )
        reply.unauthorizedCalls = effects.unauthorizedCalls
        reply.provesToken = parsed.provesToken
        return reply
    }

    /// An XML-RPC answer: the result, or a fault; HTTP 200 either way, as aria2 answers.
    static func xmlReply(_ response: Response?, isMulticall: Bool) -> RPCReply {
        guard let response, response.error == nil else {
            return Self.faultReply(response?.error ?? .invalidRequest)
        }
        let result = response.result ?? .null
        return RPCReply(
            body: XMLRPCWriter.response(isMulticall ? XMLRPCWriter.multicallResults(result) : result),
            contentType: XMLRPCWriter.contentType
        )
    }

    /// An XML-RPC fault: HTTP 200 for a call's error, 400 for a document that is not a call (aria2 answers 400
    /// there too, with no body; the fault says what is wrong). A wrong token is marked, so its answer is held back
    /// as a JSON-RPC one is.
    static func faultReply(_ error: RPCError, httpStatus: Int = 200) -> RPCReply {
        RPCReply(
            body: XMLRPCWriter.fault(error),
            httpStatus: httpStatus,
            contentType: XMLRPCWriter.contentType,
            isUnauthorized: error == .unauthorized
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

    /// A response that refuses a call, noting an unauthorized one (the HTTP layer counts them).
    static func refusal(_ response: Response, effects: inout Effects) -> Response {
        if response.error == .unauthorized { effects.unauthorizedCalls += 1 }
        return response
    }

    /// What a request object asks for: a call, or the response that refuses it.
    enum RequestObject: Sendable {
        case call(id: JSONValue, RPCCall)
        case refused(Response)

        /// One request object (§1.3): an `id` is required (any type, echoed), `method` must be a string,
        /// `params` an array or absent; then the call is read (``RPCCall``).
        init(_ request: JSONObject, tokenCheck: TokenCheck) {
            guard let id = request["id"] else {
                self = .refused(Response(id: .null, error: .invalidRequest))
                return
            }
            guard case .string(let method)? = request["method"] else {
                self = .refused(Response(id: id, error: .invalidRequest))
                return
            }
            let params: [JSONValue]
            switch request["params"] {
            case nil: params = []
            case .array(let array)?: params = array
            default:
                self = .refused(Response(id: id, error: .invalidParams))
                return
            }
            self.init(method: method, params: params, id: id, tokenCheck: tokenCheck)
        }

        /// A call of `method` with `params` (the token, if any, first), answered with `id`.
        init(method: String, params: [JSONValue], id: JSONValue, tokenCheck: TokenCheck) {
            do throws(RPCError) {
                self = .call(id: id, try RPCCall(method, params: params, tokenCheck: tokenCheck))
            } catch {
                self = .refused(Response(id: id, error: error))
            }
        }
    }
}
