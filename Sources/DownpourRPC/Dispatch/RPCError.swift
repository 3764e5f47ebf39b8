import DownpourJSON
import DownpourQueue

/// The error of one JSON-RPC call, as aria2 sends it: `{"code":1,"message":"..."}`.
///
/// Every error a method raises has code 1 and aria2's own words, because clients match them (AriaNg stops
/// polling on `Unauthorized`); the negative codes are JSON-RPC's, for requests that are not well-formed.
public struct RPCError: Error, Sendable, Hashable {
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// A method's error: code 1.
    public static func method(_ message: String) -> RPCError {
        RPCError(code: 1, message: message)
    }

    /// The body is not JSON.
    public static let malformedJSON = RPCError(code: -32700, message: "Parse error.")
    /// Not a request: no `id`, a `method` that is not a string, a top level that is neither object nor array.
    public static let invalidRequest = RPCError(code: -32600, message: "Invalid Request.")
    /// `params` is not an array.
    public static let invalidParams = RPCError(code: -32602, message: "Invalid params.")
    /// A wrong or missing secret token.
    public static let unauthorized = RPCError.method("Unauthorized")

    static func wrongType(at index: Int) -> RPCError {
        .method("The parameter at \(index) has wrong type.")
    }

    static func missing(at index: Int) -> RPCError {
        .method("The parameter at \(index) is required but missing.")
    }

    /// aria2's message for a queue's refusal. `gid` is the GID as the client gave it, used when the error does
    /// not name one.
    init(_ error: QueueError, gid: String? = nil) {
        let name = error.gid ?? gid ?? ""
        switch error.reason {
        case .notFound: self = .method("GID \(name) is not found")
        case .notUnique: self = .method("GID \(name) is not unique")
        case .invalidGID: self = .method("Invalid GID \(name)")
        case .notActive: self = .method("Active Download not found for GID#\(name)")
        case .cannotPause: self = .method("GID#\(name) cannot be paused now")
        case .cannotUnpause: self = .method("GID#\(name) cannot be unpaused now")
        case .notWaiting: self = .method("GID#\(name) not found in the waiting queue.")
        case .cannotChangeOption: self = .method("Cannot change option for GID#\(name)")
        case .noResult: self = .method("Could not remove download result of GID#\(name)")
        case .duplicateGID: self = .method("GID#\(name) is not unique.")
        case .invalidRequest, .storage:
            if let option = error.option {
                self = .method("We encountered a problem while processing the option '--\(option)'.")
            } else {
                self = .method(error.message.isEmpty ? "Internal error." : error.message)
            }
        }
    }

    /// The error as the `error` member of a response.
    var json: JSONValue {
        .object(
            JSONObject([
                .init(key: "code", value: .integer(Int64(self.code))),
                .init(key: "message", value: .string(self.message)),
            ])
        )
    }

    /// The HTTP status aria2 answers a single request that failed with this error.
    var httpStatus: Int {
        switch self.code {
        case 1, -32600: return 400
        case -32601: return 404
        default: return 500
        }
    }
}
