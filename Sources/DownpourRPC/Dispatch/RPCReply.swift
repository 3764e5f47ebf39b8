/// What the dispatcher answers one HTTP body, GET query or WebSocket frame with.
public struct RPCReply: Sendable {
    /// The response text: one JSON-RPC response, an array of them for a batch, or `cb(...)` for JSONP. Empty
    /// when a WebSocket frame needs no answer.
    public var body: [UInt8]
    /// The HTTP status aria2 gives this reply (§1.1): 200 for a result or a batch, 400 for a method error or an
    /// invalid request, 500 for a parse error or invalid params.
    public var httpStatus: Int
    /// `application/json-rpc`, or `text/javascript` for JSONP.
    public var contentType: String
    /// How many calls failed their token check (a batch or `system.multicall` carries many guesses): each counts
    /// as a guess.
    public var unauthorizedCalls: Int
    /// A call failed its token check: aria2 sends such replies about a second late, to slow guessing.
    public var isUnauthorized: Bool { self.unauthorizedCalls > 0 }
    /// To run once the reply has been sent (the daemon's shutdown after `aria2.shutdown`).
    public var afterReply: (@Sendable () async -> Void)?
    /// A call carried the right token (``RPCDispatcher/ParsedRequest/provesToken``).
    public var provesToken = false

    public init(
        body: [UInt8],
        httpStatus: Int = 200,
        contentType: String = RPCReply.jsonRPCContentType,
        isUnauthorized: Bool = false,
        afterReply: (@Sendable () async -> Void)? = nil
    ) {
        self.body = body
        self.httpStatus = httpStatus
        self.contentType = contentType
        self.unauthorizedCalls = isUnauthorized ? 1 : 0
        self.afterReply = afterReply
    }

    /// The content type of a JSON-RPC reply.
    public static let jsonRPCContentType = "application/json-rpc"
    /// The content type of a JSONP reply.
    public static let javaScriptContentType = "text/javascript"
}
