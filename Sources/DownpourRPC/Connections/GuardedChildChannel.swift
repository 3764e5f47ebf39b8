import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's child channel with a ``ConnectionGuard`` put first in every connection's pipeline, before the
/// HTTP decoder and the WebSocket upgrade handler: so the guard sees a connection from its first byte, also one
/// that never completes a request (Hummingbird adds its own extra handlers only after the first request head).
/// A ``RequestPolicyHandler`` for the first request goes right after the HTTP decoder, ahead of the upgrade
/// handler, so a refused WebSocket handshake gets its status and reason too.
struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let configuration: ConnectionGuard.Configuration
    let registry: ConnectionRegistry
    let policy: RequestPolicy

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(configuration: self.configuration, registry: self.registry),
                position: .first
            )
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let value = self.base.setup(channel: channel, logger: logger)
        do {
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
            var policy = self.policy
            if let port = channel.localAddress?.port { policy.port = port }
            try pipeline.addHandler(
                RequestPolicyHandler(policy: policy, firstRequestOnly: true),
                position: .after(decoder.handler)
            )
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return value
    }

    func handle(value: Value, logger: Logger) async {
        await self.base.handle(value: value, logger: logger)
    }
}
