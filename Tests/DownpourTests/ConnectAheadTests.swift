import DownpourTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import Downpour

/// A download's other connections open once the probe's connection is up, not before: a host that refuses (or does
/// not resolve, or fails its certificate) costs one attempt, as with curl and aria2c, not one per connection.
@Suite("Connections opened ahead", .timeLimit(.minutes(10)))
struct ConnectAheadTests {
    static func withTransport(_ body: (HTTPTransport) async throws -> Void) async throws {
        var configuration = DownloadConfiguration()
        configuration.retry = .init(maximumTries: 1, wait: .milliseconds(1), maximumWait: .milliseconds(1))
        try await DownpourTests.withTransport(loops: 2, configuration: configuration, body)
    }

    @Test("connections open ahead once per origin in the window, however many other origins come and go")
    func onceAmongManyOrigins() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let pool = HTTPClientPool(
            eventLoops: [group.next()],
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        func origin(_ host: String) throws -> Origin { Origin(try #require(URL(string: "http://\(host):8080/f"))) }
        let connect = TimeAmount.seconds(10)
        let first = try origin("first.test")
        #expect(pool.mayConnectAhead(to: first, connectTimeout: connect))
        #expect(!pool.mayConnectAhead(to: first, connectTimeout: connect), "the second download finds it busy")
        // A list of 1,000 hosts: each is new once; the quiet ones are dropped now and then, the recent ones kept.
        for number in 0..<1000 {
            let other = try origin("h\(number).test")
            #expect(pool.mayConnectAhead(to: other, connectTimeout: connect))
            #expect(!pool.mayConnectAhead(to: other, connectTimeout: connect))
        }
        #expect(!pool.mayConnectAhead(to: first, connectTimeout: connect), "still within its window")
        pool.noteRequest(to: first, +1)
        #expect(pool.mayStillConnectAhead(to: try origin("h999.test")))
        #expect(!pool.mayStillConnectAhead(to: try origin("never.test")))
        await pool.shutdown()
        try await group.shutdownGracefully()
    }

    @Test("a refused probe opens no other connection")
    func refusedProbe() async throws {
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        try await Self.withTransport { transport in
            let url = try #require(URL(string: refusing.url()))
            let ahead = try #require(await transport.prepareConnectAhead(to: url, count: 3))
            await #expect(throws: (any Error).self) {
                _ = try await transport.probe(
                    method: .GET,
                    url: url,
                    headers: [],
                    bodyLimit: 1024,
                    connectAhead: ahead
                )
            }
            #expect(!ahead.isOpen)
        }
    }

    @Test("once the probe's request went out, the other connections open while it waits for its answer")
    func reachedProbe() async throws {
        let content = makeTestContent(count: 4096, seed: 82)
        try await RangeTestServer.withServer(content: content) { server in
            try await Self.withTransport { transport in
                let url = try #require(URL(string: server.url()))
                let ahead = try #require(await transport.prepareConnectAhead(to: url, count: 3))
                let response = try await transport.probe(
                    method: .GET,
                    url: url,
                    headers: [],
                    bodyLimit: 8192,
                    connectAhead: ahead
                )
                #expect(response.status.code == 200)
                #expect(ahead.isOpen)
                // Three more connections, and no request on them.
                try await waitUntil("the connections opened ahead are up") { server.statistics().connections == 4 }
                #expect(server.statistics().requests.count == 1)
            }
        }
    }
}
