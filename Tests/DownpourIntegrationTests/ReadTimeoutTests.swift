import Downpour
import DownpourTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// The read time-out counts the time a server sends nothing while Downpour waits for it, and nothing else: not the
/// time Downpour itself holds a response back (see `IdleReadWatch`).
@Suite("Read time-outs")
struct ReadTimeoutTests {
    static let content = makeTestContent(count: 1024 * 1024, seed: 404)

    @Test("a probe's response waits for its connection longer than the read time-out: its bytes are asked for once")
    func parkedProbeResponse() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("parked.bin")
            // One connection: the probe asks for the whole file, and its response waits, parked, until the
            // transfer takes it on. The first write permit is asked in between, and takes twice the read time-out
            // to answer: AsyncHTTPClient's own time-out, which counts the wait, ended the request and asked again.
            // The test helpers' read time-out (10 s), which waits for the server on a loaded machine: a shorter one
            // fires there while the server's thread waits for a core.
            let configuration = testConfiguration(connections: 1)
            let asked = NIOLockedValueBox(0)
            let permit: @Sendable () async -> Bool = {
                if asked.withLockedValue({ count in
                    count += 1
                    return count == 1
                }) {
                    try? await Task.sleep(for: .seconds(21))
                }
                return true
            }
            let request = try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            let outcome = await collect(testDownloader.download(request, writePermit: permit))
            _ = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.count == 1, "\(describe(gets))")
            #expect(server.statistics().bodyBytesSent == Self.content.count)
        }
    }

    @Test("a server that stops sending mid-body: the read time-out ends the request, and the next asks for the rest")
    func stalledServer() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("stalled.bin")
            let sent = 256 * 1024
            server.holdBodies(afterSending: sent)
            let request = try DownloadRequest(
                url: server.url(),
                destination: .file(path),
                // The helpers' read time-out (10 s): a shorter one fires on a loaded machine while the server's
                // thread waits for a core, before the stall.
                configuration: testConfiguration(connections: 1)
            )
            let download = Task { await collect(testDownloader.download(request)) }
            try await waitUntil("the stalled request was asked again") {
                server.statistics().getRequestsRecorded.count >= 2
            }
            server.releaseBodies()
            let outcome = await download.value
            _ = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            // The bytes that came before the stall were kept: the next request starts where they end.
            #expect(
                gets.count >= 2 && gets[1].requestedRange?.lowerBound == gets[0].bodyBytesSent,
                "\(describe(gets))"
            )
            #expect(gets[0].bodyBytesSent >= sent)
            #expect(server.statistics().bodyBytesSent == Self.content.count, "\(describe(gets))")
        }
    }
}
