import AsyncHTTPClient
import DownpourQueue
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Testing

@testable import DownpourRPC

/// An ``RPCServer`` on a free loopback port over an ``InMemoryQueue``, run in a service group for the length of
/// `body`, then shut down gracefully.
struct LoopbackServer {
    let port: Int
    let queue: InMemoryQueue
    let server: RPCServer
    let shutdowns: AsyncStream<Bool>

    var url: String { "http://127.0.0.1:\(self.port)/jsonrpc" }

    /// A server over an ``InMemoryQueue`` (``queue``), or over `service` on `eventLoopGroup` when given.
    static func with(
        _ configuration: RPCServerConfiguration = RPCServerConfiguration(port: 0, unauthorizedDelay: .zero),
        service: (any DownloadQueueService)? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        _ body: (LoopbackServer) async throws -> Void
    ) async throws {
        let logger = Logger(label: "downpour.rpc.test")
        let queue = InMemoryQueue()
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let (shutdowns, shutdownContinuation) = AsyncStream<Bool>.makeStream()
        let server = try RPCServer(
            service: service ?? queue,
            configuration: configuration,
            eventLoopGroup: eventLoopGroup,
            logger: logger,
            onShutdown: { force in shutdownContinuation.yield(force) },
            onServerRunning: { port in portContinuation.yield(port) }
        )
        let group = ServiceGroup(services: [server], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let running = LoopbackServer(port: port, queue: queue, server: server, shutdowns: shutdowns)
            do {
                try await body(running)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// Sends a request; returns the response and its whole body.
    func send(
        _ method: HTTPMethod,
        path: String = "/jsonrpc",
        headers: [(String, String)] = [],
        body: String? = nil
    ) async throws -> (HTTPClientResponse, String) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(self.port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return (response, String(buffer: bytes))
    }
}
