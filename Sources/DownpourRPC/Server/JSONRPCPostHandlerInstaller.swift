import NIOCore
import NIOHTTPTypesHTTP1

/// Puts a ``JSONRPCPostHandler`` ahead of Hummingbird's `HTTP1ToHTTPServerCodec`, then leaves the pipeline.
///
/// Hummingbird adds its extra handlers after that codec, which turns each request head into Swift HTTP Types' form
/// and each response head back. A call answered on the loop needs neither conversion, and the two cost about as
/// much as the call's own work. So Hummingbird is given this installer, which, once added, puts the handler in
/// front of the codec, where NIO's own request and response parts pass, and removes itself.
/// `ServerTests` checks the order it leaves.
final class JSONRPCPostHandlerInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let handler: JSONRPCPostHandler

    init(_ handler: JSONRPCPostHandler) {
        self.handler = handler
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        // Without the codec (another Hummingbird's pipeline) the router answers every request: slower, still right.
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(self.handler, position: .before(codec))
        }
        pipeline.removeHandler(context: context, promise: nil)
    }
}
