import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The request context of the RPC routes: Hummingbird's, the WebSocket upgrade reference, and the connection's
/// channel (to close a connection whose request is too large without reading it).
struct RPCRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<RPCRequestContext>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.channel = source.channel
    }
}
