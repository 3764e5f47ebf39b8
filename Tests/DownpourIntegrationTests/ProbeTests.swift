import Downpour
import DownpourTestSupport
import Foundation
import Testing

/// The probe is the download's first request, a `GET` of the first 8 MiB: a small file's bytes are kept, a longer
/// one's response goes on as connection 1's first range.
@Suite("Probing with the first ranged GET", .timeLimit(.minutes(10)))
struct ProbeTests {
    /// Smaller than the probe's chunk: one request fetches it all.
    static let small = makeTestContent(count: 40_000, seed: 71)
    /// Larger than the probe's chunk.
    static let large = makeTestContent(count: 1024 * 1024 + 4321, seed: 72)
    static let chunk = 64 * 1024
    /// What the probe asks for with one connection: the download's first 8 MiB.
    static let firstRequest = 8 * 1024 * 1024

    /// What the probe asks for: one split with several connections (no other connection asks for bytes it
    /// carries), 8 MiB with one.
    static func probeRange(_ configuration: DownloadConfiguration = testConfiguration()) -> String {
        let size = configuration.connections == 1 ? Int64(Self.firstRequest) : configuration.minimumSplitSize
        return "bytes=0-\(size - 1)"
    }
    /// What the probe asks for when a `.part` file may be resumed: its first 64 KiB.
    static var resumingProbeRange: String { "bytes=0-\(Self.chunk - 1)" }

    @Test("a small file is fetched with exactly one request, the probe's")
    func smallFileOneRequest() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.small) { server in
            let path = directory.file("small.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.small, in: directory)
            #expect(result.remoteFile.length == Int64(Self.small.count))
            #expect(result.remoteFile.acceptsRanges)
            #expect(result.downloadedBytes == Int64(Self.small.count))
            let requests = server.statistics().requests
            #expect(requests.count == 1, "\(describe(requests))")
            #expect(requests.first?.method == "GET")
            #expect(requests.first?.header("Range") == Self.probeRange())
            #expect(requests.first?.status == 206)
        }
    }

    @Test("a file of exactly the probe's chunk is fetched with one request")
    func chunkSizedFile() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: Self.chunk, seed: 73)
        try await withServer(content: content) { server in
            let path = directory.file("chunk.bin")
            _ = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: content, in: directory)
            #expect(server.statistics().requests.count == 1, "\(describe(server.statistics().requests))")
        }
    }

    /// A file longer than the probe's chunk that the download does not split (one connection, or a file shorter
    /// than two minimum splits): the probe's response carries it all with one connection; with several, the
    /// probe asks for one split and its connection asks for the rest: every byte is sent once.
    @Test(
        "a larger file not split: the probe's connection fetches it all, every byte once",
        arguments: [(1, 256 * 1024), (4, 1024 * 1024)] as [(Int, Int64)]
    )
    func largeFileOneRequest(connections: Int, minimumSplitSize: Int64) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.large) { server in
            let path = directory.file("large.bin")
            var configuration = testConfiguration(connections: connections, minimumSplitSize: minimumSplitSize)
            configuration.racesTail = false
            let result = try await runDownload(server.url(), to: .file(path), configuration: configuration).value
            try expectFile(path, equals: Self.large, in: directory)
            #expect(result.downloadedBytes == Int64(Self.large.count))
            let statistics = server.statistics()
            #expect(statistics.headRequests == 0)
            let gets = statistics.getRequestsRecorded
            #expect(gets.count == (connections == 1 ? 1 : 2), "\(describe(gets))")
            #expect(Set(gets.map(\.connectionID)).count == 1, "\(describe(gets))")
            #expect(gets.first?.header("Range") == Self.probeRange(configuration))
            #expect(statistics.bodyBytesSent == Self.large.count, "\(describe(gets))")
        }
    }

    /// A file split over several connections: the probe's response goes on as connection 1's first range, cut at
    /// the end of its share; the connections opened while it was in flight ask for the others' at once.
    @Test("a file split over several connections: the probe's response is the first range, the others follow it")
    func splitFileProbeGoesOn() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.large) { server in
            let path = directory.file("large.bin")
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 256 * 1024)
            configuration.racesTail = false
            let result = try await runDownload(server.url(), to: .file(path), configuration: configuration).value
            try expectFile(path, equals: Self.large, in: directory)
            #expect(result.downloadedBytes == Int64(Self.large.count))
            let statistics = server.statistics()
            let gets = statistics.getRequestsRecorded
            // The connections opened while the probe was in flight sent nothing else: one range each.
            #expect(statistics.headRequests == 0, "\(describe(statistics.requests))")
            #expect(statistics.connections == 4, "\(statistics.connections) connections")
            #expect(gets.count == 4, "\(describe(gets))")
            #expect(gets.first?.header("Range") == Self.probeRange(configuration))
            let probeConnection = try #require(gets.first?.connectionID)
            // The other ranges cover the rest of the file exactly once, from the end of the probe's response (one
            // split: its own range in the plan). Each connection opened ahead sends one of them at most; which takes
            // which is the pool's choice, and on a loaded machine the probe's connection may be idle before one
            // opened ahead is up, and take a range itself.
            let others = gets.dropFirst().filter { $0.connectionID != probeConnection }
            #expect(Set(others.map(\.connectionID)).count == others.count, "\(describe(gets))")
            let ranges = try gets.dropFirst().map { request in
                try #require(request.requestedRange, "\(describe(gets))")
            }.sorted { $0.lowerBound < $1.lowerBound }
            #expect(ranges.first?.lowerBound == 256 * 1024, "\(describe(gets))")
            #expect(ranges.last?.upperBound == Self.large.count, "\(describe(gets))")
            for (first, second) in zip(ranges, ranges.dropFirst()) {
                #expect(first.upperBound == second.lowerBound, "asked twice or never: \(describe(gets))")
            }
            // The same again at once: the ranges' connections wait idle in the pool, so none is opened ahead (an
            // idle one would have taken a placeholder request and sent it).
            let second = try ScratchDirectory()
            defer { second.remove() }
            let again = second.file("again.bin")
            _ = try await runDownload(server.url(), to: .file(again), configuration: configuration).value
            try expectFile(again, equals: Self.large, in: second)
            let all = server.statistics().requests
            #expect(all.allSatisfy { $0.method == "GET" }, "\(describe(all))")
        }
    }

    /// A share longer than the probe's request: connection 1 asks for the rest of it on the same connection, and no
    /// byte is sent twice.
    @Test("a share longer than the probe's request: the rest is asked for on the probe's connection")
    func shareLongerThanProbe() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 2 * Self.firstRequest + 3 * 1024 * 1024 + 11, seed: 75)
        try await withServer(content: content) { server in
            let path = directory.file("long.bin")
            // Splits of at least 8 MiB: the two shares (9.5 MiB) cannot be split, so nothing cuts the probe's.
            var configuration = testConfiguration(connections: 2, minimumSplitSize: Int64(Self.firstRequest))
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: nil)
            let result = try await runDownload(server.url(), to: .file(path), configuration: configuration).value
            try expectFile(path, equals: content, in: directory)
            #expect(result.downloadedBytes == Int64(content.count))
            let statistics = server.statistics()
            let gets = statistics.getRequestsRecorded
            #expect(statistics.connections == 2, "\(describe(gets))")
            #expect(statistics.bodyBytesSent == content.count, "a byte was sent twice: \(describe(gets))")
            let probeConnection = try #require(gets.first?.connectionID)
            let onProbeConnection = gets.filter { $0.connectionID == probeConnection }
            #expect(onProbeConnection.first?.header("Range") == Self.probeRange(configuration), "\(describe(gets))")
            #expect(
                onProbeConnection.dropFirst().first?.requestedRange?.lowerBound == Self.firstRequest,
                "\(describe(gets))"
            )
        }
    }

    @Test("a redirect is followed by the probe's GET; its bytes and the final URL are kept")
    func redirectThenProbe() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.small) { server in
            let path = directory.file("redirected.bin")
            let result = try await runDownload(server.url("/redirect/2"), to: .file(path)).value
            try expectFile(path, equals: Self.small, in: directory)
            #expect(result.remoteFile.url.absoluteString == server.url("/file.bin"))
            let requests = server.statistics().requests
            #expect(requests.map(\.method) == ["GET", "GET", "GET", "GET"], "\(describe(requests))")
            #expect(requests.map(\.status) == [302, 302, 302, 206], "\(describe(requests))")
            #expect(requests.last?.uri == "/file.bin")
            #expect(requests.allSatisfy { $0.header("Range") == Self.probeRange() })
        }
    }

    @Test("behind redirects, the probe's response still goes on as the download's range: one GET of the file")
    func redirectThenLargeFile() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.large) { server in
            let path = directory.file("redirected.bin")
            let result = try await runDownload(
                server.url("/redirect/2"),
                to: .file(path),
                configuration: testConfiguration(connections: 1)
            ).value
            try expectFile(path, equals: Self.large, in: directory)
            #expect(result.remoteFile.url.absoluteString == server.url("/file.bin"))
            let requests = server.statistics().requests
            #expect(requests.map(\.status) == [302, 302, 302, 206], "\(describe(requests))")
            #expect(server.statistics().bodyBytesSent == Self.large.count, "\(describe(requests))")
        }
    }

    @Test("a server that answers the probe's GET with 200: a small body is the whole file, one request")
    func smallFileWithoutRanges() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.small, faults: [.ignoreRange]) { server in
            let path = directory.file("whole.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.small, in: directory)
            #expect(result.remoteFile.acceptsRanges == false)
            #expect(result.length == Int64(Self.small.count))
            let requests = server.statistics().requests
            #expect(requests.count == 1, "\(describe(requests))")
            #expect(requests.first?.status == 200)
            #expect(result.wastedBytes == 0)
        }
    }

    @Test("a server that answers the probe's GET with 200: a large body goes on streaming as the download, one request")
    func largeFileWithoutRanges() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.large, faults: [.ignoreRange]) { server in
            let path = directory.file("whole.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.large, in: directory)
            #expect(result.remoteFile.acceptsRanges == false)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.count == 1, "\(describe(gets))")
            #expect(server.statistics().bodyBytesSent == Self.large.count, "\(describe(gets))")
            #expect(result.wastedBytes == 0)
        }
    }

    @Test("the name from Content-Disposition is known before the file is opened, with one request")
    func contentDispositionName() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(
            content: Self.small,
            faults: [.contentDisposition("attachment; filename=\"report.pdf\"")]
        ) { server in
            let result = try await runDownload(server.url("/download?id=7"), to: .directory(directory.path)).value
            #expect(result.path == directory.file("report.pdf"))
            try expectFile(directory.file("report.pdf"), equals: Self.small, in: directory)
            #expect(server.statistics().requests.count == 1, "\(describe(server.statistics().requests))")
        }
    }

    @Test("an empty file: the probe's 416 ends in an empty file")
    func emptyFile() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: []) { server in
            let path = directory.file("empty.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.length == 0)
            try expectFile(path, equals: [], in: directory)
        }
    }

    @Test("a resumed download proves its validators: every range request after the probe sends If-Range")
    func resumeSendsIfRange() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024 + 777, seed: 74)
        try await withServer(content: content, faults: [.throttle(bytesPerSecond: 1024 * 1024)]) { server in
            let path = directory.file("resumed.bin")
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 256 * 1024)
            configuration.journalInterval = .milliseconds(100)
            // The server stops at 1 MiB by itself: the first run cannot finish, however late the test looks.
            server.holdBodies(afterSending: 1024 * 1024)
            let download = testDownloader.download(
                try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            )
            let task = Task { try await download.run() }
            for await event in download.events {
                if case .progress(let progress) = event, progress.completedBytes >= 512 * 1024, !task.isCancelled {
                    task.cancel()
                }
            }
            server.releaseBodies()
            guard case .failure = await task.result else {
                Issue.record("the download finished before it was cancelled")
                return
            }
            #expect(directory.contents() == ["resumed.bin.part", "resumed.bin.part.downpour"])
            let before = server.statistics().requests.count

            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            _ = try outcome.value
            try expectFile(path, equals: content, in: directory)
            let resumed = outcome.events.compactMap {
                if case .started(let start) = $0 { start.resumedBytes } else { nil }
            }
            #expect((resumed.first ?? 0) > 0, "nothing was resumed")
            let second = Array(server.statistics().requests.dropFirst(before))
            // A `.part` file was there: the probe asks for the first bytes only.
            #expect(second.first?.header("Range") == Self.resumingProbeRange, "\(describe(second))")
            #expect(second.count > 1, "\(describe(second))")
            for request in second.dropFirst() {
                #expect(request.header("If-Range") == "\"downpour-test-v1\"", "\(describe(second))")
                #expect(request.status == 206, "\(describe(second))")
            }
        }
    }
}
