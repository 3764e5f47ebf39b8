import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import Downpour

@Suite("A probe's response handed over at its head", .timeLimit(.minutes(10)))
struct RunningResponseTests {
    /// Ended before anyone took it, once the client had read it all (its first part waits for a taker): the request
    /// ends. AsyncHTTPClient fails a cancelled task only once a waiting part is let go when it has read the whole
    /// response, so `end()` must let the part go. A short file, handed over from 1 KiB on, comes in one read with
    /// its head; with the usual 64 KiB the client stops reading after the first part, which never brings this about.
    @Test("ended before anyone took it, after the whole body came: the request ends")
    func endedUntaken() async throws {
        let content = makeTestContent(count: 1500, seed: 81)
        try await withTransport { transport in
            try await RangeTestServer.withServer(content: content) { server in
                let url = try #require(URL(string: server.url()))
                let response = try await transport.probe(
                    method: .GET,
                    url: url,
                    headers: [],
                    extraHeaders: [("Range", "bytes=0-8388607")],
                    bodyLimit: 64 * 1024,
                    handsOverFrom: 1024
                )
                #expect(response.status.code == 206)
                let running = try #require(response.running, "not handed over")
                // The whole response comes in one read: head, the part that waits, and the end.
                try await waitUntil("the server sent the whole body") {
                    server.statistics().bodyBytesSent == content.count
                }
                // Waited for with a deadline: without the part let go, the request would never end.
                let outcome = NIOLockedValueBox<Result<Void, any Error>?>(nil)
                running.ended.whenComplete { result in outcome.withLockedValue { $0 = result } }
                running.end()
                try await waitUntil("the request ended") { outcome.withLockedValue { $0 != nil } }
                #expect(throws: (any Error).self) { try outcome.withLockedValue { $0 }?.get() }
            }
        }
    }

    @Test(
        "which heads are handed over: a 206 for a longer file, a 200 with a longer body or one of unknown length",
        arguments: [
            (206, "Content-Range", "bytes 0-65535/65537", true),
            (206, "Content-Range", "bytes 0-65535/65536", false),
            (206, "Content-Range", "bytes 0-65535/*", false),
            (200, "Content-Length", "65537", true),
            (200, "Content-Length", "65536", false),
            (200, "Content-Length", "12", false),
            (200, "Transfer-Encoding", "chunked", true),
            (203, "Content-Length", "100000", false),
            (416, "Content-Range", "bytes */0", false),
        ]
    )
    func handsOver(status: Int, header: String, value: String, expected: Bool) {
        let head = HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: status),
            headers: HTTPHeaders([(header, value)])
        )
        #expect(ProbeResponseDelegate.handsOver(head, from: 65536) == expected)
    }
}
