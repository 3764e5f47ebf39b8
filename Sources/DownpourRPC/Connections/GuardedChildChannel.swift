import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's child channel with a ``ConnectionGuard`` put first in every connection's pipeline, before the
/// HTTP decoder and the WebSocket upgrade handler: so the guard sees a connection from its first byte, also one
/// that never completes a request (Hummingbird adds its own extra handlers only after the first request head).
struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let configuration: ConnectionGuard.Configuration
    let registry: ConnectionRegistry

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(configuration: self.configuration, registry: self.registry),
                position: .first
            )
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return self.base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await self.base.handle(value: value, logger: logger)
    }
}
