/// The daemon's two RPC endpoints, as aria2 has them: JSON-RPC at `/jsonrpc` (a `POST`, a `GET` with base64
/// `params`, the WebSocket) and XML-RPC at `/rpc` (a `POST`).
///
/// A path is read as Hummingbird's router reads it: the query after `?` aside, empty segments dropped, so
/// `/jsonrpc/` and `//jsonrpc` name the endpoint too and pass the same request policy (a `<script>` tag that asks
/// for `/jsonrpc/?…` is an RPC call, not a page).
enum RPCPath: Sendable, Hashable {
    case jsonRPC
    case xmlRPC

    /// The endpoint a request's target names, or `nil`.
    init?(uri: String) {
        let path = uri.firstIndex(of: "?").map { uri[..<$0] } ?? uri[...]
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        guard segments.count == 1 else { return nil }
        switch segments[0] {
        case "jsonrpc": self = .jsonRPC
        case "rpc": self = .xmlRPC
        default: return nil
        }
    }
}
