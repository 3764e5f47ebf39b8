import Logging
import NIOCore
import NIOPosix

@testable import Downpour

/// An ``HTTPTransport`` over a pool of its own on `loops` event loops, for `body`; the pool and its loops are shut
/// down afterwards, whatever happens.
func withTransport(
    loops: Int = 1,
    configuration: DownloadConfiguration = DownloadConfiguration(),
    _ body: (HTTPTransport) async throws -> Void
) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let pool = HTTPClientPool(eventLoops: group.makeIterator().map { $0 }, logger: logger)
    do {
        try await body(HTTPTransport(pool: pool, configuration: configuration, first: 0, logger: logger))
    } catch {
        await pool.shutdown()
        try await group.shutdownGracefully()
        throw error
    }
    await pool.shutdown()
    try await group.shutdownGracefully()
}
