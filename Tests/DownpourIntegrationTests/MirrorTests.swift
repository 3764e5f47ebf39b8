import Crypto
import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Mirrors", .timeLimit(.minutes(10)))
struct MirrorTests {
    static let content = makeTestContent(count: 2 * 1024 * 1024 + 333, seed: 91)

    static func configuration(connections: Int = 4) -> DownloadConfiguration {
        var configuration = testConfiguration(connections: connections, minimumSplitSize: 128 * 1024)
        configuration.retry = .init(maximumTries: 3, wait: .milliseconds(5), maximumWait: .milliseconds(50))
        return configuration
    }

    static func request(
        _ urls: [String],
        path: String,
        configuration: DownloadConfiguration = configuration()
    ) throws -> DownloadRequest {
        var request = try DownloadRequest(url: urls[0], destination: .file(path), configuration: configuration)
        request.mirrors = urls.dropFirst().map { URL(string: $0)! }
        return request
    }

    static func run(
        _ urls: [String],
        path: String,
        configuration: DownloadConfiguration = configuration()
    ) async throws -> DownloadOutcome {
        let request = try Self.request(urls, path: path, configuration: configuration)
        return try await retryingWhileLocked { await collect(testDownloader.download(request)) }
    }

    static func notices(_ events: [DownloadEvent]) -> [String] {
        events.compactMap { if case .notice(let text) = $0 { text } else { nil } }
    }

    /// Runs `request` to the end, and releases the bodies `held` holds back once a notice says that the mirror at
    /// `dropped` was dropped: a download that cannot finish before a mirror is dropped, whatever the load.
    static func run(
        _ request: DownloadRequest,
        releasing held: RangeTestServer,
        whenDropped dropped: String,
        while body: () async throws -> Void = {}
    ) async throws -> DownloadOutcome {
        let download = testDownloader.download(request)
        let watcher = Task {
            var events: [DownloadEvent] = []
            for await event in download.events {
                events.append(event)
                if case .notice(let text) = event, text.contains("Dropped the mirror \(dropped)") {
                    held.releaseBodies()
                }
            }
            return events
        }
        let run = Task { () async throws(DownloadError) -> DownloadResult in try await download.run() }
        try await body()
        let result = await run.result.mapError {
            $0 as? DownloadError ?? DownloadError(code: .cancelled, message: "\($0)")
        }
        held.releaseBodies()
        return DownloadOutcome(result: result, events: await watcher.value)
    }

    @Test("a dead first mirror (nothing listening, or a 404) is skipped with a notice; the file comes from the next")
    func deadFirstMirror() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        try await withServer(content: Self.content) { server in
            for dead in [refusing.url(), server.url("/status/404")] {
                let path = directory.file("file.bin")
                let outcome = try await Self.run([dead, server.url()], path: path)
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let notices = Self.notices(outcome.events)
                #expect(notices.contains { $0.contains("Dropped the mirror \(dead)") }, "\(notices)")
                try FileManager.default.removeItem(atPath: path)
            }
        }
    }

    @Test("a mirror with another length is dropped with a notice naming both lengths; the other serves the file")
    func otherLength() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let longer = Self.content + [1, 2, 3]
        try await withServer(content: Self.content) { good in
            try await withServer(content: longer) { other in
                let path = directory.file("file.bin")
                // The good mirror cannot finish the file before the other one's first answer has been checked.
                good.holdBodies(afterSending: Self.content.count / 2)
                let outcome = try await Self.run(
                    try Self.request([good.url(), other.url()], path: path),
                    releasing: good,
                    whenDropped: other.url()
                )
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let notices = Self.notices(outcome.events)
                #expect(
                    notices.contains {
                        $0.contains("Dropped the mirror \(other.url())")
                            && $0.contains("\(longer.count) bytes, not \(Self.content.count)")
                    },
                    "\(notices)"
                )
                #expect(other.statistics().getRequests >= 1, "the other mirror was asked")
            }
        }
    }

    @Test("a mirror that dies in the middle is dropped; its work moves to the other one")
    func failsMidway() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { first in
            try await withServer(content: Self.content) { second in
                // Neither can finish the file alone until the second is dropped.
                first.holdBodies(afterSending: Self.content.count / 2)
                second.holdBodies(afterSending: 256 * 1024)
                let path = directory.file("file.bin")
                let outcome = try await Self.run(
                    try Self.request([first.url(), second.url()], path: path),
                    releasing: first,
                    whenDropped: second.url()
                ) {
                    try await waitUntil("the second mirror sent its share") {
                        second.statistics().bodyBytesSent >= 128 * 1024
                    }
                    try await second.shutdown()
                }
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let notices = Self.notices(outcome.events)
                #expect(notices.contains { $0.contains("Dropped the mirror \(second.url())") }, "\(notices)")
            }
        }
    }

    @Test("connections spread over both mirrors; a throttled mirror serves fewer bytes than a fast one")
    func spread() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 8 * 1024 * 1024 + 5, seed: 92)
        try await withServer(content: content) { fast in
            try await withServer(content: content, faults: [.throttle(bytesPerSecond: 128 * 1024)]) { slow in
                let path = directory.file("file.bin")
                var configuration = Self.configuration(connections: 4)
                configuration.minimumSplitSize = 256 * 1024
                let outcome = try await Self.run([fast.url(), slow.url()], path: path, configuration: configuration)
                _ = try outcome.value
                try expectFile(path, equals: content, in: directory)
                let (fastStats, slowStats) = (fast.statistics(), slow.statistics())
                #expect(slowStats.getRequests >= 1 && fastStats.getRequests >= 2)
                #expect(
                    slowStats.bodyBytesSent < fastStats.bodyBytesSent,
                    "slow \(slowStats.bodyBytesSent) B, fast \(fastStats.bodyBytesSent) B"
                )
                let sources = Set(
                    outcome.events.flatMap { event -> [String] in
                        guard case .progress(let progress) = event else { return [] }
                        return progress.connections.compactMap { $0.source?.absoluteString }
                    }
                )
                #expect(sources == [fast.url(), slow.url()], "\(sources)")
            }
        }
    }

    @Test("a mirror that sends a bad piece is dropped; the piece is fetched again from the other; the file is whole")
    func badPieceDropsItsMirror() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let pieceLength = 128 * 1024
        let digests = stride(from: 0, to: Self.content.count, by: pieceLength).map { start in
            let piece = Self.content[start..<min(Self.content.count, start + pieceLength)]
            return SHA256.hash(data: piece).map { String(format: "%02x", $0) }.joined()
        }
        // The bad mirror is the first URL: the probe's bytes (the start of piece 0) come from it, damaged, every
        // time it serves them.
        try await withServer(content: Self.content, faults: [.corrupt(1000..<1100, servings: .max)]) { bad in
            try await withServer(content: Self.content) { good in
                let path = directory.file("file.bin")
                var configuration = Self.configuration(connections: 4)
                configuration.pieceChecksums = PieceChecksums(
                    algorithm: .sha256,
                    pieceLength: Int64(pieceLength),
                    digests: digests
                )
                let outcome = try await Self.run([bad.url(), good.url()], path: path, configuration: configuration)
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let notices = Self.notices(outcome.events)
                #expect(
                    notices.contains { $0.contains("Dropped the mirror \(bad.url())") && $0.contains("piece 0") },
                    "\(notices)"
                )
                // Piece 0 came again, whole, from the good mirror.
                #expect(
                    good.statistics().getRequestsRecorded.contains { $0.requestedRange == 0..<pieceLength },
                    "\(describe(good.statistics().getRequestsRecorded))"
                )
            }
        }
    }

    @Test("every mirror dead: the last error, naming every URL; nothing left behind")
    func allDead() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        try await withServer(content: Self.content) { server in
            let dead = refusing.url()
            let missing = server.url("/status/404")
            let outcome = try await Self.run([dead, missing], path: directory.file("file.bin"))
            let error = try #require(outcome.error)
            #expect(error.code == .httpStatus, "\(error)")
            #expect(error.message.contains("Every URL of the file failed"), "\(error.message)")
            #expect(error.message.contains(dead) && error.message.contains(missing), "\(error.message)")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a mirror whose ETag changes mid-download is dropped; the file is the first version")
    func etagChanges() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let changed = Self.content.map { ~$0 }
        try await withServer(content: Self.content) { stable in
            try await withServer(
                content: Self.content,
                faults: [
                    .closeConnection(afterBytes: 64 * 1024, requests: 1),
                    .changeContent(afterRequests: 1, newContent: changed),
                ]
            ) { changing in
                let path = directory.file("file.bin")
                // The stable mirror cannot finish the file (racing the changing one's tail) before that one's
                // second answer has been checked.
                stable.holdBodies(afterSending: Self.content.count / 2)
                let outcome = try await Self.run(
                    try Self.request(
                        [stable.url(), changing.url()],
                        path: path,
                        configuration: Self.configuration(connections: 2)
                    ),
                    releasing: stable,
                    whenDropped: changing.url()
                )
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let notices = Self.notices(outcome.events)
                #expect(notices.contains { $0.contains("Dropped the mirror \(changing.url())") }, "\(notices)")
                let gets = changing.statistics().getRequestsRecorded
                #expect(gets.count >= 2, "\(describe(gets))")
                #expect(gets.dropFirst().allSatisfy { $0.header("If-Range") == "\"downpour-test-v1\"" })
            }
        }
    }

    @Test("credentials go only to their own origin: the first URL's never reach a mirror, a mirror's own do")
    func credentials() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        func basic(_ user: String, _ password: String) -> String {
            "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
        try await withServer(content: Self.content) { home in
            try await withServer(content: Self.content) { plain in
                try await withServer(content: Self.content) { own in
                    let path = directory.file("file.bin")
                    let urls = [
                        "http://u:p@127.0.0.1:\(home.port)/basic-auth/u/p/file.bin",
                        plain.url(),
                        "http://v:q@127.0.0.1:\(own.port)/basic-auth/v/q/file.bin",
                    ]
                    var configuration = Self.configuration(connections: 6)
                    configuration.headers = [HTTPHeaderField(name: "Cookie", value: "session=home")]
                    let outcome = try await Self.run(urls, path: path, configuration: configuration)
                    _ = try outcome.value
                    try expectFile(path, equals: Self.content, in: directory)
                    let homeGets = home.statistics().getRequestsRecorded
                    let plainGets = plain.statistics().getRequestsRecorded
                    let ownGets = own.statistics().getRequestsRecorded
                    #expect(!plainGets.isEmpty && !ownGets.isEmpty, "every mirror was used")
                    #expect(homeGets.allSatisfy { $0.header("Authorization") == basic("u", "p") })
                    #expect(homeGets.allSatisfy { $0.header("Cookie") == "session=home" })
                    #expect(plainGets.allSatisfy { $0.header("Authorization") == nil && $0.header("Cookie") == nil })
                    #expect(ownGets.allSatisfy { $0.header("Authorization") == basic("v", "q") })
                    #expect(ownGets.allSatisfy { $0.header("Cookie") == nil })
                    #expect(Self.notices(outcome.events).isEmpty, "\(Self.notices(outcome.events))")
                }
            }
        }
    }

    @Test("a mirror that redirects is followed (twice here); one that redirects in a loop is dropped")
    func redirects() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { home in
            try await withServer(content: Self.content) { hop in
                let path = directory.file("file.bin")
                let urls = [home.url(), hop.url("/redirect/1"), hop.url("/loop/a")]
                var configuration = Self.configuration(connections: 6)
                configuration.maximumRedirects = 3
                let outcome = try await Self.run(urls, path: path, configuration: configuration)
                _ = try outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let hopGets = hop.statistics().getRequestsRecorded
                #expect(hopGets.contains { $0.uri == "/redirect/0" }, "\(hopGets.map(\.uri))")
                #expect(hopGets.contains { $0.uri == "/file.bin" && $0.header("Range") != nil }, "the chain's end")
                #expect(
                    Self.notices(outcome.events) == [
                        "Dropped the mirror \(hop.url("/loop/a")): it redirects in a loop (\(hop.url("/loop/a")) "
                            + "again). 2 URLs left."
                    ],
                    "\(Self.notices(outcome.events))"
                )
            }
        }
    }

    @Test("a mirror's redirect to another origin takes none of its credentials there")
    func redirectElsewhere() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { home in
            try await withServer(content: Self.content) { hop in
                try await withServer(content: Self.content) { target in
                    let path = directory.file("file.bin")
                    let away = target.url().addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let urls = [home.url(), "http://v:q@127.0.0.1:\(hop.port)/redirect-to?url=\(away)"]
                    var configuration = Self.configuration(connections: 4)
                    configuration.headers = [HTTPHeaderField(name: "Cookie", value: "session=home")]
                    let outcome = try await Self.run(urls, path: path, configuration: configuration)
                    _ = try outcome.value
                    try expectFile(path, equals: Self.content, in: directory)
                    let hopGets = hop.statistics().getRequestsRecorded
                    let targetGets = target.statistics().getRequestsRecorded
                    #expect(!targetGets.isEmpty, "the redirect was followed")
                    #expect(targetGets.allSatisfy { $0.header("Range") != nil })
                    #expect(targetGets.allSatisfy { $0.header("Authorization") == nil && $0.header("Cookie") == nil })
                    #expect(hopGets.allSatisfy { $0.header("Cookie") == nil })
                    #expect(!hopGets.isEmpty && hopGets.allSatisfy { $0.header("Authorization") != nil })
                    #expect(Self.notices(outcome.events).isEmpty, "\(Self.notices(outcome.events))")
                }
            }
        }
    }

    @Test("resume with mirrors: the journal records each mirror's validators; the second run finishes the file")
    func resume() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024 + 11, seed: 93)
        let throttle = RangeTestServer.Fault.throttle(bytesPerSecond: 1024 * 1024)
        try await withServer(content: content, faults: [throttle]) { first in
            try await RangeTestServer.withServer(content: content, faults: [throttle], etag: "\"other-v1\"") {
                second in
                let path = directory.file("file.bin")
                var configuration = Self.configuration(connections: 4)
                configuration.journalInterval = .milliseconds(50)
                first.holdBodies(afterSending: 1024 * 1024)
                second.holdBodies(afterSending: 1024 * 1024)
                let download = testDownloader.download(
                    try Self.request([first.url(), second.url()], path: path, configuration: configuration)
                )
                let run = Task { try await download.run() }
                try await waitUntil("both mirrors sent bytes and the journal names both") {
                    guard second.statistics().bodyBytesSent > 0,
                        let bytes = FileManager.default.contents(atPath: path + ".part.downpour")
                    else { return false }
                    let text = String(decoding: bytes, as: UTF8.self)
                    return text.contains(#"other-v1"#) && text.contains(#"downpour-test-v1"#)
                }
                run.cancel()
                let error = await run.result
                #expect(error.isFailure)
                first.releaseBodies()
                second.releaseBodies()
                let journal = try ResumeJournal.decode(
                    Array(try #require(FileManager.default.contents(atPath: path + ".part.downpour")))
                )
                #expect(journal.mirrors?[second.url()]?.etag == "\"other-v1\"")
                #expect(journal.mirrors?[first.url()]?.etag == "\"downpour-test-v1\"")

                let outcome = try await Self.run([first.url(), second.url()], path: path, configuration: configuration)
                _ = try outcome.value
                try expectFile(path, equals: content, in: directory)
                var resumed: Int64 = 0
                for case .started(let start) in outcome.events { resumed = start.resumedBytes }
                #expect(resumed > 0)
                // The second run asked the second mirror with its own validator.
                let lastGets = second.statistics().getRequestsRecorded.suffix(1)
                #expect(lastGets.allSatisfy { $0.header("If-Range") == "\"other-v1\"" }, "\(describe(Array(lastGets)))")
            }
        }
    }
}
