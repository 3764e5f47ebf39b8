import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Downloads against the test server", .timeLimit(.minutes(10)))
struct DownloadTests {
    static let content = makeTestContent(count: 3 * 1024 * 1024 + 12345, seed: 42)

    @Test("a file arrives byte for byte", arguments: [1, 4, 16])
    func plainDownload(connections: Int) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("out.bin")
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: testConfiguration(connections: connections)
            )
            let result = try outcome.value
            #expect(result.length == Int64(Self.content.count))
            // Racing the last tails may fetch a few bytes twice: at most two split floors per connection.
            #expect(result.downloadedBytes >= Int64(Self.content.count))
            #expect(result.downloadedBytes <= Int64(Self.content.count) + Int64(connections) * 2 * 64 * 1024)
            try expectFile(path, equals: Self.content, in: directory)
            let statistics = server.statistics()
            #expect(statistics.headRequests == 0)
            // What came for nothing: at least the bytes written twice, at most what the server sent beyond the file.
            let extra = Int64(statistics.bodyBytesSent - Self.content.count)
            #expect(result.wastedBytes >= result.downloadedBytes - result.length, "\(result.wastedBytes)")
            #expect(result.wastedBytes <= extra, "\(result.wastedBytes) of \(extra) extra bytes sent")
            // The probe asks for the first bytes before any validator is known; every range after it is pinned.
            let gets = statistics.getRequestsRecorded
            // One split with several connections (no other asks for what it carries), 8 MiB with one.
            #expect(gets.first?.header("Range") == (connections == 1 ? "bytes=0-8388607" : "bytes=0-65535"))
            for request in gets.dropFirst() {
                #expect(request.header("Range") != nil)
                #expect(request.header("If-Range") == "\"downpour-test-v1\"")
            }
        }
    }

    @Test("sizes at the edges", arguments: [0, 1, 2, 10, 65536, 65537, 1024 * 1024 + 1])
    func edgeSizes(size: Int) async throws {
        let content = makeTestContent(count: size, seed: UInt64(size) + 1)
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: content) { server in
            let path = directory.file("edge.bin")
            // More connections than bytes for the small sizes.
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: testConfiguration(connections: 16, minimumSplitSize: 1024)
            )
            #expect(try outcome.value.length == Int64(size))
            try expectFile(path, equals: content, in: directory)
        }
    }

    @Test("progress events: started first, finished last, bytes only grow and end at the length")
    func progressEvents() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // 4 connections at 1 MiB/s: about 0.75 s, many progress intervals of 20 ms.
        try await withServer(content: Self.content, faults: [.throttle(bytesPerSecond: 1024 * 1024)]) { server in
            let outcome = try await runDownload(server.url(), to: .file(directory.file("p.bin")))
            _ = try outcome.value
            guard case .started(let start) = outcome.events.first else {
                Issue.record("first event is not started: \(String(describing: outcome.events.first))")
                return
            }
            #expect(start.remoteFile.length == Int64(Self.content.count))
            #expect(start.connections == 4)
            guard case .finished = outcome.events.last else {
                Issue.record("last event is not finished")
                return
            }
            var last: Int64 = -1
            var sawSpeed = false
            var progressCount = 0
            for event in outcome.events {
                guard case .progress(let progress) = event else { continue }
                progressCount += 1
                #expect(progress.completedBytes >= last)
                last = progress.completedBytes
                #expect(progress.totalBytes == Int64(Self.content.count))
                if progress.bytesPerSecond > 0 { sawSpeed = true }
                #expect(progress.connections.count <= 4)
            }
            #expect(progressCount >= 2)
            #expect(last == Int64(Self.content.count))
            #expect(sawSpeed)
        }
    }

    @Test("a connection closed mid-body is resumed from its last byte")
    func closedConnections() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.closeConnection(afterBytes: 100_000, requests: 6)]) {
            server in
            let path = directory.file("cut.bin")
            // Without races, so that every repeated start would be a retry that started over; and without restarts
            // of slow connections, which count as restarts too (a loaded machine made one slow for 3 s).
            var configuration = testConfiguration()
            configuration.racesTail = false
            configuration.slowConnections.shareOfMedian = nil
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            _ = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.count >= 4 + 6)
            // The last progress counts each connection's replacements: five. The fault covers the first six
            // requests, the probe's among them, whose 64 KiB (one split) come whole before the cut: its connection
            // closes, and nothing of its range is missing.
            let last = outcome.events.compactMap { if case .progress(let progress) = $0 { progress } else { nil } }.last
            #expect(last?.connections.reduce(0) { $0 + $1.restarts } == 5, "\(String(describing: last?.connections))")
            // Retries ask for what is missing, never a range from a start already asked for.
            let starts = gets.dropFirst().compactMap { $0.header("Range") }.map { $0.split(separator: "-").first! }
            #expect(Set(starts).count == starts.count, "a range was fetched again from its start: \(starts)")
        }
    }

    @Test("a kept-alive connection the server closed as the next request went out is replaced, the request sent again")
    func droppedReusedConnection() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Longer than the probe's request (8 MiB), so that one connection asks for the rest after it.
        let content = makeTestContent(count: 9 * 1024 * 1024 + 5, seed: 43)
        try await withServer(content: content, faults: [.dropReusedConnection(requests: 1)]) { server in
            let path = directory.file("reused.bin")
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: testConfiguration(connections: 1)
            )
            _ = try outcome.value
            try expectFile(path, equals: content, in: directory)
            // The probe's connection was reused for the rest of the range: dropped unanswered, then asked again.
            let requests = server.statistics().requests
            let log = requests.map { "\($0.connectionID) \($0.header("Range") ?? "-") \($0.status)" }
            let dropped = requests.filter { $0.status == 0 }
            #expect(dropped.count == 1, "\(log)")
            let range = try #require(dropped.first?.header("Range"))
            let again = requests.filter { $0.status == 206 && $0.header("Range") == range }
            #expect(again.count == 1, "\(log)")
            #expect(again.first?.connectionID != dropped.first?.connectionID, "\(log)")
        }
    }

    @Test("a server that ignores Range is downloaded as one stream")
    func ignoredRange() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.ignoreRange]) { server in
            let path = directory.file("whole.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.remoteFile.acceptsRanges == false)
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("a stream cut short starts again from byte 0: the bytes of the cut attempt are counted as wasted")
    func restartedStreamWaste() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // The probe's 200, which the stream goes on with, is cut after 300 000 bytes; the second request runs whole.
        let cut = 300_000
        try await withServer(
            content: Self.content,
            faults: [.ignoreRange, .closeConnection(afterBytes: cut, requests: 1)]
        ) { server in
            let path = directory.file("again.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.count == 2, "\(describe(gets))")
            #expect(gets.last?.header("Range") == nil, "\(describe(gets))")
            #expect(result.wastedBytes == Int64(cut), "\(describe(gets))")
        }
    }

    @Test("HEAD refused: no matter, the probe is the first ranged GET, then the rest in ranges")
    func refusedHead() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.refuseHead]) { server in
            let path = directory.file("nohead.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.remoteFile.acceptsRanges)
            #expect(result.remoteFile.length == Int64(Self.content.count))
            try expectFile(path, equals: Self.content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.first?.header("Range") == "bytes=0-65535")
            #expect(server.statistics().headRequests == 0)
        }
    }

    @Test("a wrong Content-Range is never written: the download fails, nothing is left")
    func wrongContentRange() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.wrongContentRange(fromRequest: 1)]) { server in
            let outcome = try await runDownload(server.url(), to: .file(directory.file("lie.bin")))
            #expect(outcome.error?.code == .remoteMisbehaved, "\(String(describing: outcome.error))")
            expectNothingLeft(in: directory)
            guard case .failed = outcome.events.last else {
                Issue.record("last event is not failed")
                return
            }
        }
    }

    @Test("503 with Retry-After is retried after the server's delay")
    func serviceUnavailable() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Longer than the probe's request (8 MiB), so that a second request follows it, and is refused.
        let content = makeTestContent(count: 9 * 1024 * 1024 + 5, seed: 44)
        try await withServer(content: content, faults: [.serviceUnavailable(everyNth: 2, retryAfterSeconds: 1)]) {
            server in
            let path = directory.file("busy.bin")
            // One connection: its requests take turns with the refusals (every second request is refused), so each
            // 503 is followed by a success and is retried once. With several, a connection's requests could all land
            // on refused turns until its tries ran out, and a racing copy refused after the other copy finished is
            // cancelled with the round without a retry (both seen under load).
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: testConfiguration(connections: 1)
            )
            _ = try outcome.value
            try expectFile(path, equals: content, in: directory)
            let delays = outcome.events.compactMap { event -> Duration? in
                guard case .retrying(_, _, let delay, _) = event else { return nil }
                return delay
            }
            let refused = server.statistics().getRequestsRecorded.filter { $0.status == 503 }
            #expect(!refused.isEmpty)
            #expect(delays.count == refused.count, "one retry per 503: \(delays.count) retries, \(refused.count) 503s")
            // The configured back-off is 10 ms: every wait of a second is the server's Retry-After.
            #expect(delays.allSatisfy { $0 == .seconds(1) }, "\(delays)")
        }
    }

    @Test("content that changes mid-download is detected; no spliced file is left")
    func changedContent() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let newContent = makeTestContent(count: Self.content.count, seed: 99)
        try await withServer(
            content: Self.content,
            faults: [.changeContent(afterRequests: 2, newContent: newContent)]
        ) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("changed.bin")),
                configuration: testConfiguration(connections: 4)
            )
            #expect(outcome.error?.code == .remoteChanged, "\(String(describing: outcome.error))")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a body shorter than promised is completed by retries")
    func shortBody() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.shortBody(missingBytes: 5000, requests: 3)]) { server in
            let path = directory.file("short.bin")
            _ = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("chunked with no length: one stream, length learned at the end")
    func chunkedWithoutLength() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.chunkedWithoutLength]) { server in
            let path = directory.file("chunked.bin")
            let outcome = try await runDownload(server.url(), to: .file(path))
            let result = try outcome.value
            #expect(result.length == Int64(Self.content.count))
            #expect(result.remoteFile.length == nil)
            guard case .started(let start) = outcome.events.first else {
                Issue.record("first event is not started: \(String(describing: outcome.events.first))")
                return
            }
            #expect(start.connections == 1)
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("redirects are followed and the final URL recorded")
    func redirects() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("redirected.bin")
            let result = try await runDownload(server.url("/redirect/3"), to: .file(path)).value
            #expect(result.remoteFile.url.absoluteString == server.url("/file.bin"))
            try expectFile(path, equals: Self.content, in: directory)
            // The probe follows the redirects; every byte comes from the final URL.
            for request in server.statistics().getRequestsRecorded where request.status != 302 {
                #expect(request.uri == "/file.bin")
            }
        }
    }

    @Test("a redirect loop and too many redirects are clear errors")
    func redirectLimits() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let loop = try await runDownload(server.url("/loop/a"), to: .file(directory.file("loop.bin")))
            #expect(loop.error?.code == .httpStatus)
            #expect(loop.error?.message.contains("loop") == true, "\(String(describing: loop.error))")
            let long = try await runDownload(server.url("/redirect/11"), to: .file(directory.file("long.bin")))
            #expect(long.error?.code == .httpStatus)
            #expect(long.error?.message.contains("More than 10 redirects") == true, "\(String(describing: long.error))")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a slow connection's range is split among the fast ones")
    func throttledConnection() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024, seed: 5)
        // A throttled connection alone would take 32 s for its quarter: the others finish theirs and split it
        // however busy the machine is (at 256 KiB/s, a loaded run once saw it finish before any other did), and
        // with a 16 KiB floor what is left to it at the end takes at most a second. Every second connection is
        // throttled: of the four (the probe's and the three opened ahead), the server cannot tell which carry
        // ranges when one more is opened under load, and the test needs a throttled one among them.
        try await withServer(
            content: content,
            faults: [.throttle(bytesPerSecond: 32 * 1024, everyNthConnection: 2)]
        ) { server in
            let path = directory.file("slow.bin")
            // No races and no restarts: only a split can send a slow connection's bytes to another.
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 16 * 1024)
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: nil)
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            _ = try outcome.value
            try expectFile(path, equals: content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.contains { $0.throttle != nil }, "no throttled connection: \(describe(gets))")
            // Another connection asked for a later part of a throttled connection's range: a split.
            let splits = takeovers(in: gets).filter { slow, taker in
                guard let asked = slow.requestedRange, let taken = taker.requestedRange else { return false }
                return taken.lowerBound > asked.lowerBound && taken.upperBound <= asked.upperBound
            }
            #expect(!splits.isEmpty, "no split of a throttled range: \(describe(gets))")
        }
    }

    @Test("racing the tail: a slow connection's rest is fetched again by another one", arguments: [true, false])
    func racedTail(racing: Bool) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 2 * 1024 * 1024, seed: 6)
        // Every second connection is throttled; with a 512 KiB floor nothing can be split, and with restarts off
        // only a race can ask for a slow range's bytes on another connection. Racing, the slow connections crawl
        // (32 s per range alone) so that a race is sure to be worth it however busy the machine is; the control
        // lets them finish (0.5 s).
        let rate = racing ? 16 * 1024 : 1024 * 1024
        try await withServer(
            content: content,
            faults: [.throttle(bytesPerSecond: rate, everyNthConnection: 2)]
        ) { server in
            let path = directory.file("raced.bin")
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 512 * 1024)
            configuration.racesTail = racing
            configuration.slowConnections = .init(shareOfMedian: nil)
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            _ = try outcome.value
            try expectFile(path, equals: content, in: directory)
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.allSatisfy { $0.requestedRange != nil }, "a GET without a range: \(describe(gets))")
            #expect(gets.contains { $0.throttle != nil }, "no throttled connection: \(describe(gets))")
            if racing {
                #expect(!takeovers(in: gets).isEmpty, "no range of a throttled connection raced: \(describe(gets))")
            } else {
                // Every byte asked for exactly once: the probe's request (first) goes on as connection 1's share,
                // from 0, and the others' ranges follow it.
                let ranges = gets.indices.compactMap { askedRange(ofRequest: $0, in: gets) }
                    .sorted { $0.lowerBound < $1.lowerBound }
                #expect(ranges.first?.lowerBound == 0)
                #expect(ranges.last?.upperBound == content.count)
                for (first, second) in zip(ranges, ranges.dropFirst()) {
                    #expect(first.upperBound == second.lowerBound, "asked twice or never: \(describe(gets))")
                }
            }
        }
    }

    @Test("connections are kept: N connections fetch N ranges, the probe's request the first of them")
    func connectionsKept() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Four ranges of 1 MiB + 16 KiB: the probe's GET goes on as the first (cut at its end), three follow.
        let content = makeTestContent(count: 4 * 1024 * 1024 + 64 * 1024, seed: 11)
        try await withServer(content: content) { server in
            let path = directory.file("kept.bin")
            // Four 1 MiB ranges that cannot be split, and no racing: the probe's GET and exactly three more. No
            // idle-read retry on a loaded machine (it once opened a fifth connection with the suite and another
            // process busy).
            var configuration = testConfiguration(
                connections: 4,
                minimumSplitSize: 1024 * 1024,
                idleRead: .seconds(600)
            )
            configuration.racesTail = false
            _ = try await runDownload(server.url(), to: .file(path), configuration: configuration).value
            try expectFile(path, equals: content, in: directory)
            let statistics = server.statistics()
            #expect(statistics.headRequests == 0)
            #expect(statistics.getRequests == 4, "\(describe(statistics.getRequestsRecorded))")
            #expect(statistics.connections == 4, "a connection was not reused")
        }
    }

    @Test("a connection far slower than the others is restarted on a new connection, for the rest of its range")
    func slowConnectionRestarted() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Three ranges of 2 MiB + 21 KiB; the probe's GET goes on as the first.
        let content = makeTestContent(count: 6 * 1024 * 1024 + 64 * 1024, seed: 9)
        // Every connection runs at 256 KiB/s, every second at 4 KiB/s: connections 1 to 3, the probe's (going on as
        // the first range) and the two others', open together in any order, so one of the ranges crawls (against a
        // median of the others of a fast one's). Nothing may be split or raced, so only a
        // restart moves the slow connection's third elsewhere. The others stay busy with theirs for 8 s, long enough
        // to be compared with however late the watchdog runs; once the restarted request is in, the test stops.
        try await withServer(
            content: content,
            faults: [
                .throttle(bytesPerSecond: 256 * 1024),
                .throttle(bytesPerSecond: 4 * 1024, everyNthConnection: 2),
            ]
        ) { server in
            // Three 2 MiB ranges; with a 2 MiB floor none of them can be split.
            var configuration = testConfiguration(connections: 3, minimumSplitSize: 2 * 1024 * 1024)
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: 0.1, window: .milliseconds(400))
            let download = testDownloader.download(
                try DownloadRequest(
                    url: server.url(),
                    destination: .file(directory.file("r.bin")),
                    configuration: configuration
                )
            )
            let task = Task { try await download.run() }
            // Without a restart the download would take minutes: give up after 30 s.
            let bound = Task {
                try await Task.sleep(for: .seconds(30))
                task.cancel()
            }
            defer {
                bound.cancel()
                task.cancel()
            }
            var restarts: [String] = []
            for await event in download.events {
                guard case .restarted(_, let reason) = event else { continue }
                restarts.append(reason)
                try await waitUntil("the restarted range is asked for") {
                    !takeovers(in: server.statistics().getRequestsRecorded).isEmpty
                }
                task.cancel()
            }
            #expect((await task.result).isFailure, "finished without the slow connection")
            #expect(!restarts.isEmpty)
            #expect(restarts.allSatisfy { $0.contains("median") }, "\(restarts)")
            // A new connection asked for the rest of the slow connection's range, up to its end.
            let gets = server.statistics().getRequestsRecorded
            let restarted = takeovers(in: gets)
            #expect(!restarted.isEmpty, "\(describe(gets))")
            for (slow, taker) in restarted {
                // Not on the slow connection: a new one, or one whose range is done, idle in the pool (on a loaded
                // machine the restart may come after the probe's connection finished its range).
                #expect(taker.connectionID != slow.connectionID, "\(describe(gets))")
                let asked = gets.firstIndex { $0.connectionID == slow.connectionID && $0.receivedAt == slow.receivedAt }
                #expect(
                    taker.requestedRange?.upperBound
                        == asked.flatMap { askedRange(ofRequest: $0, in: gets) }?.upperBound,
                    "\(describe(gets))"
                )
            }
        }
    }

    @Test("a connection below the lowest speed is restarted, and after --max-tries restarts the download stops")
    func belowLowestSpeed() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 2 * 1024 * 1024, seed: 10)
        try await withServer(content: content, faults: [.throttle(bytesPerSecond: 64 * 1024)]) { server in
            let path = directory.file("floor.bin")
            var configuration = testConfiguration(connections: 1)
            configuration.retry.maximumTries = 2
            configuration.slowConnections = .init(lowestSpeed: 1024 * 1024, window: .milliseconds(300))
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            let error = try #require(outcome.error)
            #expect(error.code == .network)
            #expect(error.message.contains("lowest speed"), "\(error.message)")
            #expect(error.resumable)
            let restarts = outcome.events.filter { event in
                if case .restarted = event { return true }
                return false
            }
            #expect(restarts.count == 1)
            // What arrived is kept for a later run.
            #expect(directory.contents() == ["floor.bin.part", "floor.bin.part.downpour"])
        }
    }

    @Test("a path-traversal Content-Disposition name is reduced to a safe base name")
    func traversalName() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(
            content: Self.content,
            faults: [.contentDisposition("attachment; filename=\"../../escape.sh\"")]
        ) { server in
            let target = directory.file("downloads")
            let result = try await runDownload(server.url(), to: .directory(target)).value
            #expect(result.path == target + "/escape.sh")
            #expect(try sha256Hex(ofFileAt: result.path) == sha256Hex(Self.content))
            #expect(directory.contents() == ["downloads"])
            #expect(!FileManager.default.fileExists(atPath: directory.path + "/../escape.sh"))
        }
    }

    @Test("without a suggested name the URL's last path component is used")
    func nameFromURL() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let result = try await runDownload(server.url("/dir/image%20v2.iso"), to: .directory(directory.path)).value
            #expect(result.path == directory.path + "/image v2.iso")
            try expectFile(result.path, equals: Self.content, in: directory)
        }
    }

    @Test("no validators: downloads without If-Range")
    func noValidators() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.noValidators]) { server in
            let path = directory.file("plain.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.remoteFile.etag == nil)
            try expectFile(path, equals: Self.content, in: directory)
            for request in server.statistics().getRequestsRecorded {
                #expect(request.header("If-Range") == nil)
            }
        }
    }

    @Test("a weak ETag is not used for If-Range; Last-Modified is")
    func weakETag() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, etag: "W/\"weak\"") { server in
            let path = directory.file("weak.bin")
            _ = try await runDownload(server.url(), to: .file(path)).value
            try expectFile(path, equals: Self.content, in: directory)
            // The probe's request comes before any validator is known.
            for request in server.statistics().getRequestsRecorded.dropFirst() {
                #expect(request.header("If-Range") == "Wed, 21 Oct 2026 07:28:00 GMT")
            }
        }
    }
}
