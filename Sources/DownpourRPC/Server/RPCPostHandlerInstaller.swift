import NIOCore
import NIOHTTPTypesHTTP1

/// Puts a ``RequestPolicyHandler`` and a ``RPCPostHandler`` (in that order) ahead of Hummingbird's
/// `HTTP1ToHTTPServerCodec`, then leaves the pipeline.
///
/// Hummingbird adds its extra handlers after that codec, which turns each request head into Swift HTTP Types' form
/// and each response head back. A call answered on the loop needs neither conversion, and the two cost about as
/// much as the call's own work. So Hummingbird is given this installer, which, once added, puts the handler in
/// front of the codec, where NIO's own request and response parts pass, and removes itself.
/// `ServerTests` checks the order it leaves.
final class RPCPostHandlerInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let policy: RequestPolicy
    private let handler: RPCPostHandler

    init(policy: RequestPolicy, _ handler: RPCPostHandler) {
        self.policy = policy
        self.handler = handler
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            var policy = self.policy
            // A server on port 0 learns its port when it binds.
            if let port = context.channel.localAddress?.port { policy.port = port }
            // Installed as the first request comes in, which the gate ahead of the upgrade handler has reported.
            try? pipeline.addHandler(
                RequestPolicyHandler(policy: policy, reportsFirstRequest: false),
                position: .before(codec)
            )
            try? pipeline.addHandler(self.handler, position: .before(codec))
        } else {
            // Without the codec (another Hummingbird's pipeline) nothing would apply the policy: refuse to serve.
            context.close(promise: nil)
        }
        pipeline.removeHandler(context: context, promise: nil)
    }
}
