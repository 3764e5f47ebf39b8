import DownpourTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import Downpour

@Suite("A probe's response handed over at its head", .timeLimit(.minutes(1)))
struct RunningResponseTests {
    /// Ended before anyone took it, once the server had sent it all (its first part waits for a taker): the request
    /// ends. (AsyncHTTPClient fails a cancelled task only once a waiting part is let go when it has read the whole
    /// response; `cancel()` lets the part go for that case, which this test could not bring about on loopback.)
    @Test("ended before anyone took it, after the whole body came: the request ends")
    func endedUntaken() async throws {
        let content = makeTestContent(count: 100 * 1024, seed: 81)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let pool = HTTPClientPool(eventLoops: [group.next()], logger: logger)
        do {
            try await RangeTestServer.withServer(content: content) { server in
                let transport = HTTPTransport(
                    pool: pool,
                    configuration: DownloadConfiguration(),
                    first: 0,
                    logger: logger
                )
                let url = try #require(URL(string: server.url()))
                let response = try await transport.probe(
                    method: .GET,
                    url: url,
                    headers: [],
                    extraHeaders: [("Range", "bytes=0-8388607")],
                    bodyLimit: 64 * 1024,
                    handsOverFrom: 64 * 1024
                )
                #expect(response.status.code == 206)
                let running = try #require(response.running, "not handed over")
                // The whole body fits in the sockets' buffers: the server sends it all while its first part waits.
                try await waitUntil("the server sent the whole body") {
                    server.statistics().bodyBytesSent == content.count
                }
                running.cancel()
                await #expect(throws: (any Error).self) { _ = try await running.ended.get() }
            }
        } catch {
            await pool.shutdown()
            try await group.shutdownGracefully()
            throw error
        }
        await pool.shutdown()
        try await group.shutdownGracefully()
    }
}
