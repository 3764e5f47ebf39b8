import Crypto
import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Checksums and server digests", .timeLimit(.minutes(10)))
struct IntegrityTests {
    static let content = makeTestContent(count: 1024 * 1024 + 333, seed: 61)
    static let other = makeTestContent(count: 1024 * 1024 + 333, seed: 62)
    /// Small enough for the probe's request alone.
    static let small = makeTestContent(count: 10_000, seed: 63)

    static func checksum(_ algorithm: Checksum.Algorithm, of bytes: [UInt8]) -> Checksum {
        let digest: [UInt8] =
            switch algorithm {
            case .sha256: Array(SHA256.hash(data: bytes))
            case .sha512: Array(SHA512.hash(data: bytes))
            case .sha1: Array(Insecure.SHA1.hash(data: bytes))
            case .md5: Array(Insecure.MD5.hash(data: bytes))
            }
        return Checksum(algorithm: algorithm, digest: digest.map { String(format: "%02x", $0) }.joined())
    }

    static func base64SHA256(_ bytes: [UInt8]) -> String {
        Data(SHA256.hash(data: bytes)).base64EncodedString()
    }

    static let right = checksum(.sha256, of: content)
    static let wrong = checksum(.sha256, of: other)

    static func configuration(connections: Int = 4, checksum: Checksum? = nil) -> DownloadConfiguration {
        var configuration = testConfiguration(connections: connections, minimumSplitSize: 64 * 1024)
        configuration.checksum = checksum
        return configuration
    }

    static func notices(_ events: [DownloadEvent]) -> [String] {
        events.compactMap { if case .notice(let text) = $0 { text } else { nil } }
    }

    /// The notices that announced a second download from zero.
    static func restarts(_ events: [DownloadEvent]) -> [String] {
        self.notices(events).filter { $0.contains("again from zero") }
    }

    @Test("a right checksum: the file gets its name", arguments: Checksum.Algorithm.allCases)
    func rightChecksum(algorithm: Checksum.Algorithm) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("file.bin")
            let checksum = Self.checksum(algorithm, of: Self.content)
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(checksum: checksum)
            )
            let result = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            #expect(result.checksum == checksum)
            #expect(Self.restarts(outcome.events).isEmpty)
        }
    }

    @Test("a stream (no ranges, no length) is verified too; a mismatch there fails at once")
    func stream() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.chunkedWithoutLength]) { server in
            let path = directory.file("stream.bin")
            let result = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(checksum: Self.right)
            ).value
            #expect(result.checksum == Self.right)
            try expectFile(path, equals: Self.content, in: directory)
            try FileManager.default.removeItem(atPath: path)

            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(checksum: Self.wrong)
            )
            #expect(outcome.error?.code == .checksumMismatch)
            #expect(outcome.error?.checksumMismatch?.actual == Self.right.digest)
            #expect(Self.restarts(outcome.events).isEmpty, "one response: it would come the same way again")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a server that lies on several connections: one more try from zero, then a mismatch and nothing left")
    func lyingServer() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.lie(fromRequest: 2)]) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: Self.configuration(checksum: Self.right)
            )
            let error = try #require(outcome.error)
            #expect(error.code == .checksumMismatch)
            #expect(error.resumable == false)
            let mismatch = try #require(error.checksumMismatch)
            #expect(mismatch.expected == Self.right)
            #expect(mismatch.source == .configuration)
            #expect(mismatch.actual != Self.right.digest)
            #expect(error.message.contains(Self.right.digest) && error.message.contains(mismatch.actual))
            #expect(Self.restarts(outcome.events).count == 1, "\(Self.notices(outcome.events))")
            #expect(server.statistics().bodyBytesSent >= 2 * Self.content.count, "downloaded twice")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a server that lied only the first time: the second download from zero succeeds")
    func lyingOnce() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.lie(fromRequest: 2, requests: 1)]) { server in
            let path = directory.file("file.bin")
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(checksum: Self.right)
            )
            let result = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let restarts = Self.restarts(outcome.events)
            #expect(restarts.count == 1)
            #expect(restarts.first?.contains("several responses") == true, "\(restarts)")
            #expect(result.downloadedBytes >= 2 * Int64(Self.content.count))
        }
    }

    @Test("one response (the probe's, for a small file), from zero: a mismatch fails at once")
    func singleResponse() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.small, faults: [.lie(fromRequest: 1)]) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: Self.configuration(connections: 1, checksum: Self.checksum(.sha256, of: Self.small))
            )
            #expect(outcome.error?.code == .checksumMismatch)
            #expect(Self.restarts(outcome.events).isEmpty)
            #expect(server.statistics().getRequests == 1)
            expectNothingLeft(in: directory)
        }
    }

    @Test("without a checksum, the server's own Repr-Digest catches a lie")
    func reprDigestCatchesLie() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let faults: [RangeTestServer.Fault] = [
            .lie(fromRequest: 2), .reprDigest("sha-256=:\(Self.base64SHA256(Self.content)):"),
        ]
        try await withServer(content: Self.content, faults: faults) { server in
            let outcome = try await runDownload(server.url(), to: .file(directory.file("file.bin")))
            let error = try #require(outcome.error)
            #expect(error.code == .checksumMismatch)
            #expect(error.checksumMismatch?.source == .reprDigest)
            #expect(error.checksumMismatch?.expected == Self.right)
            #expect(error.message.contains("Repr-Digest"), "\(error.message)")
            #expect(Self.restarts(outcome.events).count == 1)
            expectNothingLeft(in: directory)
        }
    }

    @Test(
        "a wrong Repr-Digest fails the download: at once from one response, after one more try from several",
        arguments: [false, true]
    )
    func wrongReprDigest(severalResponses: Bool) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // A small file comes with the probe's response alone.
        let content = severalResponses ? Self.content : Self.small
        let faults: [RangeTestServer.Fault] = [.reprDigest("sha-256=:\(Self.base64SHA256(Self.other)):")]
        try await withServer(content: content, faults: faults) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: Self.configuration(connections: 4)
            )
            let error = try #require(outcome.error)
            #expect(error.code == .checksumMismatch)
            #expect(error.checksumMismatch?.expected == Self.wrong)
            #expect(error.checksumMismatch?.actual == Self.checksum(.sha256, of: content).digest)
            #expect(Self.restarts(outcome.events).count == (severalResponses ? 1 : 0))
            expectNothingLeft(in: directory)
        }
    }

    static let rightServerDigests: [RangeTestServer.Fault] = [
        .reprDigest(
            "sha-512=:\(Data(SHA512.hash(data: content)).base64EncodedString()):, sha-256=:\(base64SHA256(content)):"
        ),
        .digest("SHA-256=\(base64SHA256(content))"),
        .digest("MD5=\(Data(Insecure.MD5.hash(data: content)).base64EncodedString())"),
    ]

    @Test("a right Repr-Digest or Digest is verified, and the download succeeds", arguments: rightServerDigests)
    func rightServerDigest(fault: RangeTestServer.Fault) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [fault]) { server in
            let path = directory.file("file.bin")
            let result = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration())
                .value
            try expectFile(path, equals: Self.content, in: directory)
            let expected = fault.description.contains("MD5") ? Self.checksum(.md5, of: Self.content) : Self.right
            #expect(result.checksum == expected)
        }
    }

    @Test("the given checksum wins over a server digest that disagrees, with a notice")
    func checksumWins() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let faults: [RangeTestServer.Fault] = [.reprDigest("sha-256=:\(Self.base64SHA256(Self.other)):")]
        try await withServer(content: Self.content, faults: faults) { server in
            let path = directory.file("file.bin")
            let outcome = try await runDownload(
                server.url(),
                to: .file(path),
                configuration: Self.configuration(checksum: Self.right)
            )
            #expect(try outcome.value.checksum == Self.right)
            try expectFile(path, equals: Self.content, in: directory)
            let notice = Self.notices(outcome.events).first { $0.contains("Repr-Digest") }
            #expect(notice?.contains(Self.wrong.digest) == true, "\(Self.notices(outcome.events))")
        }
    }

    @Test("a Digest (RFC 3230) on the probe's 206 may cover only its part: not taken when HEAD is refused")
    func partialResponseDigest() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Longer than the probe's request (8 MiB), so that its 206 carries a part.
        let content = makeTestContent(count: 8 * 1024 * 1024 + 333, seed: 65)
        let faults: [RangeTestServer.Fault] = [.refuseHead, .digest("SHA-256=\(Self.base64SHA256(Self.other))")]
        try await withServer(content: content, faults: faults) { server in
            let path = directory.file("file.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.checksum == nil)
            try expectFile(path, equals: content, in: directory)
        }
    }

    @Test("a Repr-Digest on the probe's 206 covers the whole representation (RFC 9530): verified")
    func partialResponseReprDigest() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let faults: [RangeTestServer.Fault] = [
            .refuseHead, .reprDigest("sha-256=:\(Self.base64SHA256(Self.content)):"),
        ]
        try await withServer(content: Self.content, faults: faults) { server in
            let path = directory.file("file.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.checksum == Self.right)
            try expectFile(path, equals: Self.content, in: directory)
            #expect(server.statistics().headRequests == 0, "HEAD is asked only for a Digest header")
        }
    }

    @Test("a Digest (RFC 3230) on the probe's 206 of a small file covers it all: verified with one request")
    func wholeFileDigestOnPartial() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let small = Array(Self.content.prefix(10_000))
        let faults: [RangeTestServer.Fault] = [.digest("SHA-256=\(Self.base64SHA256(small))")]
        try await withServer(content: small, faults: faults) { server in
            let path = directory.file("file.bin")
            let result = try await runDownload(server.url(), to: .file(path)).value
            #expect(result.checksum == Self.checksum(.sha256, of: small))
            try expectFile(path, equals: small, in: directory)
            #expect(server.statistics().requests.count == 1)
        }
    }

    @Test("a resumed download hashes the bytes already on disk first")
    func resumed() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 1024 * 1024, seed: 63)
        let checksum = Self.checksum(.sha256, of: content)
        try await withServer(content: content, faults: [ResumeTests.throttle]) { server in
            let path = directory.file("big.bin")
            var configuration = ResumeTests.configuration()
            configuration.connections = 2
            configuration.checksum = checksum
            let (error, _) = try await ResumeTests.interrupted(
                server,
                path: path,
                after: 256 * 1024,
                configuration: configuration
            )
            #expect(error?.code == .cancelled)
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            #expect(try outcome.value.checksum == checksum)
            #expect((ResumeTests.resumedBytes(outcome.events) ?? 0) > 0)
            #expect(Self.restarts(outcome.events).isEmpty)
            try expectFile(path, equals: content, in: directory)
        }
    }

    @Test("bytes of an earlier run that do not fit: downloaded again from zero, even over one connection")
    func resumedFromLiar() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 1024 * 1024, seed: 64)
        let checksum = Self.checksum(.sha256, of: content)
        // The first run's one request (the probe's, going on with the whole file) gets other bytes.
        try await withServer(content: content, faults: [ResumeTests.throttle, .lie(fromRequest: 1, requests: 1)]) {
            server in
            let path = directory.file("big.bin")
            var configuration = ResumeTests.configuration()
            configuration.connections = 1
            let (error, _) = try await ResumeTests.interrupted(
                server,
                path: path,
                after: 256 * 1024,
                configuration: configuration
            )
            #expect(error?.code == .cancelled)
            #expect(server.statistics().getRequests == 1)
            configuration.checksum = checksum
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            #expect(try outcome.value.checksum == checksum)
            let restarts = Self.restarts(outcome.events)
            #expect(restarts.count == 1)
            #expect(restarts.first?.contains("an earlier run") == true, "\(restarts)")
            try expectFile(path, equals: content, in: directory)
        }
    }

    @Test("a pause and a resume in the same process keep the hash that was made so far")
    func pauseAndResume() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 1024 * 1024, seed: 65)
        let checksum = Self.checksum(.sha512, of: content)
        try await withServer(content: content, faults: [ResumeTests.throttle]) { server in
            let path = directory.file("paused.bin")
            var configuration = ResumeTests.configuration()
            configuration.connections = 2
            configuration.checksum = checksum
            let download = testDownloader.download(
                try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            )
            let task = Task { try await download.run() }
            var paused = false
            var events: [DownloadEvent] = []
            for await event in download.events {
                events.append(event)
                switch event {
                case .progress(let progress) where !paused && progress.completedBytes > 256 * 1024:
                    paused = true
                    download.pause()
                case .paused:
                    download.resume()
                default:
                    break
                }
            }
            #expect(try await task.value.checksum == checksum)
            #expect(paused)
            #expect(Self.restarts(events).isEmpty)
            try expectFile(path, equals: content, in: directory)
        }
    }

    @Test("a server that ignores ranges after all: the stream that follows is verified")
    func rangesIgnored() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.ignoreRange]) { server in
            let path = directory.file("file.bin")
            // A conditional GET probes with HEAD, which promises ranges here; the range requests then get 200.
            var configuration = Self.configuration(checksum: Self.right)
            configuration.conditionalGet = true
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            #expect(try outcome.value.checksum == Self.right)
            #expect(Self.notices(outcome.events).contains { $0.contains("one stream") })
            try expectFile(path, equals: Self.content, in: directory)
        }
    }
}
