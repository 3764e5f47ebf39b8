/// The daemon's two RPC endpoints, as aria2 has them: JSON-RPC at `/jsonrpc` (a `POST`, a `GET` with base64
/// `params`, the WebSocket) and XML-RPC at `/rpc` (a `POST`).
enum RPCPath: Sendable, Hashable {
    case jsonRPC
    case xmlRPC

    /// The endpoint a request's target names (a query after `?` aside), or `nil`.
    init?(uri: String) {
        let path = uri.firstIndex(of: "?").map { uri[..<$0] } ?? uri[...]
        switch path {
        case "/jsonrpc": self = .jsonRPC
        case "/rpc": self = .xmlRPC
        default: return nil
        }
    }
}
