import Crypto
import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Piece checksums (Metalink <pieces>)", .timeLimit(.minutes(10)))
struct PieceChecksumTests {
    static let pieceLength = 128 * 1024
    /// Nine pieces, the last one short.
    static let content = makeTestContent(count: 8 * pieceLength + 333, seed: 71)

    static func pieceChecksums(of bytes: [UInt8] = content) -> PieceChecksums {
        let digests = stride(from: 0, to: bytes.count, by: pieceLength).map { start in
            let piece = bytes[start..<min(bytes.count, start + pieceLength)]
            return SHA256.hash(data: piece).map { String(format: "%02x", $0) }.joined()
        }
        return PieceChecksums(algorithm: .sha256, pieceLength: Int64(pieceLength), digests: digests)
    }

    static func range(ofPiece index: Int) -> Range<Int> {
        (index * pieceLength)..<min(content.count, (index + 1) * pieceLength)
    }

    /// A few bytes inside piece `index`.
    static func damage(inPiece index: Int) -> Range<Int> {
        let start = index * pieceLength + 1000
        return start..<(start + 100)
    }

    static func configuration(connections: Int) -> DownloadConfiguration {
        var configuration = testConfiguration(connections: connections, minimumSplitSize: 64 * 1024)
        configuration.pieceChecksums = Self.pieceChecksums()
        configuration.expectedLength = Int64(Self.content.count)
        return configuration
    }

    static func notices(_ events: [DownloadEvent]) -> [String] {
        events.compactMap { if case .notice(let text) = $0 { text } else { nil } }
    }

    @Test("Metalink with a bad piece: that piece only is fetched again; the file is SHA-256-identical")
    func badPieceOnce() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let bad = 5
        try await withServer(content: Self.content, faults: [.corrupt(Self.damage(inPiece: bad))]) { server in
            let path = directory.file("file.bin")
            var configuration = Self.configuration(connections: 1)
            // The whole-file digest too: the hash of the prefix took in the bad bytes and must start over.
            configuration.checksum = Checksum(
                algorithm: .sha256,
                digest: SHA256.hash(data: Self.content).map { String(format: "%02x", $0) }.joined()
            )
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            let result = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            #expect(result.checksum == configuration.checksum)

            let gets = server.statistics().getRequestsRecorded
            // The probe's request, going on with the whole file (one connection), then piece 5 alone.
            #expect(
                gets.map(\.requestedRange) == [0..<Self.content.count, Self.range(ofPiece: bad)],
                "\(describe(gets))"
            )
            let notices = Self.notices(outcome.events).filter { $0.contains("Piece \(bad) ") }
            #expect(notices.count == 1, "\(Self.notices(outcome.events))")
            let range = Self.range(ofPiece: bad)
            #expect(notices.first?.contains("bytes \(range.lowerBound)-\(range.upperBound - 1)") == true)
            // The bad piece came twice: that is what was wasted.
            #expect(result.wastedBytes == Int64(range.count))
        }
    }

    @Test("a bad piece with four connections: fetched again alone, the rest is not")
    func badPieceSeveralConnections() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let bad = 3
        // Two damaged servings: the probe's response carries the whole file (the server serves piece 3 in it), but
        // it is cut at the end of connection 1's share, before piece 3; the range that writes piece 3 gets the
        // second.
        try await withServer(content: Self.content, faults: [.corrupt(Self.damage(inPiece: bad), servings: 2)]) {
            server in
            let path = directory.file("file.bin")
            var configuration = Self.configuration(connections: 4)
            // Nothing may fetch the damaged bytes a second time in the first round: no races, no restarts, and no
            // splits (four ranges of 256 KiB and a bit cannot be split at 256 KiB). A split cuts a request short
            // after the server has sent bytes past the cut, and the damaged serving may be among those.
            configuration.racesTail = false
            configuration.slowConnections.shareOfMedian = nil
            configuration.minimumSplitSize = 256 * 1024
            let outcome = try await runDownload(server.url(), to: .file(path), configuration: configuration)
            _ = try outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            // The second round asks for piece 3 only (in one or more requests, as the planner splits it, and idle
            // connections may race its tail); they come last in the log, after every request of the first round.
            let gets = server.statistics().getRequestsRecorded
            let piece = Self.range(ofPiece: bad)
            let tail = gets.reversed().prefix { $0.requestedRange.map { piece.contains($0) && !$0.isEmpty } == true }
            var covered = IndexSet()
            for range in tail.compactMap(\.requestedRange) { covered.insert(integersIn: range) }
            // As ranges: a failing comparison of two sets of 128 Ki indexes takes minutes to describe.
            #expect(Array(covered.rangeView) == [piece], "\(describe(gets))")
            // Every other byte was asked for in the first round, and the tail is all of the second.
            #expect(gets.count - tail.count >= 2, "\(describe(gets))")
        }
    }

    @Test("while a bad piece is fetched again, the journal on disk does not claim its bytes")
    func journalForgetsBadPiece() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let bad = 4
        try await withServer(content: Self.content, faults: [.corrupt(Self.damage(inPiece: bad))]) { server in
            let path = directory.file("file.bin")
            // The first round gets every byte; the second one's body waits.
            server.holdBodies(afterSending: Self.content.count)
            let request = try DownloadRequest(
                url: server.url(),
                destination: .file(path),
                configuration: Self.configuration(connections: 1)
            )
            let download = testDownloader.download(request)
            let outcome = Task { await collect(download) }
            try await waitUntil("piece \(bad) asked for again") {
                server.statistics().getRequestsRecorded.count == 3
            }
            let piece = Self.range(ofPiece: bad)
            let journal = try String(contentsOfFile: path + ".part.downpour", encoding: .utf8)
            let body = try #require(journal.split(separator: "\n").dropFirst().first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let done = try #require(object["done"] as? [[Int]]).map { $0[0]..<$0[1] }
            #expect(
                !done.contains { $0.lowerBound <= piece.lowerBound && piece.upperBound <= $0.upperBound },
                "\(done)"
            )
            #expect(done.contains { $0.lowerBound == 0 && $0.upperBound >= piece.lowerBound }, "\(done)")
            #expect(
                done.contains { $0.upperBound == Self.content.count && $0.lowerBound <= piece.upperBound },
                "\(done)"
            )
            server.releaseBodies()
            _ = try await outcome.value.value
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("a piece bad every time: checksum mismatch naming the piece and both digests; no file, no .part")
    func badPieceAlways() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let bad = 7
        let faults: [RangeTestServer.Fault] = [.corrupt(Self.damage(inPiece: bad), servings: .max)]
        try await withServer(content: Self.content, faults: faults) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: Self.configuration(connections: 1)
            )
            let error = try #require(outcome.error)
            #expect(error.code == .checksumMismatch)
            #expect(error.resumable == false)
            let mismatch = try #require(error.checksumMismatch)
            let range = Self.range(ofPiece: bad)
            #expect(mismatch.source == .piece(index: bad, range: Int64(range.lowerBound)..<Int64(range.upperBound)))
            #expect(mismatch.expected.digest == Self.pieceChecksums().digests[bad])
            #expect(error.message.contains("Piece \(bad) "))
            #expect(error.message.contains(mismatch.expected.digest) && error.message.contains(mismatch.actual))
            expectNothingLeft(in: directory)
            // Fetched three times in all: with the rest (the probe's request, the whole file), then twice alone.
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.filter { $0.requestedRange == range }.count == 2, "\(describe(gets))")
            #expect(gets.count == 3, "\(describe(gets))")
        }
    }

    @Test("a server whose length is not the expected one: remoteChanged before a byte is written")
    func lengthMismatch() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            var configuration = Self.configuration(connections: 2)
            configuration.pieceChecksums = nil
            configuration.expectedLength = Int64(Self.content.count + 1)
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: configuration
            )
            let error = try #require(outcome.error)
            #expect(error.code == .remoteChanged)
            #expect(
                error.message.contains("\(Self.content.count)") && error.message.contains("\(Self.content.count + 1)")
            )
            expectNothingLeft(in: directory)
        }
    }

    @Test(
        "a chunked body of unknown length that ends at another length than the expected one: remoteChanged, nothing left",
        arguments: [40_000, 300_000]
    )
    func unknownLengthMismatch(size: Int) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: size, seed: 83)
        try await withServer(content: content, faults: [.chunkedWithoutLength]) { server in
            var configuration = Self.configuration(connections: 2)
            configuration.pieceChecksums = nil
            configuration.expectedLength = Int64(size + 1)
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("file.bin")),
                configuration: configuration
            )
            let error = try #require(outcome.error)
            #expect(error.code == .remoteChanged, "\(error)")
            #expect(error.message.contains("\(size)") && error.message.contains("\(size + 1)"), "\(error)")
            expectNothingLeft(in: directory)
            // The body came once: the probe's response was the stream.
            #expect(server.statistics().getRequestsRecorded.count == 1)
        }
    }

    @Test("a stream (no ranges): pieces are verified; a bad one cannot be fetched alone and fails")
    func stream() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.chunkedWithoutLength]) { server in
            let path = directory.file("stream.bin")
            _ = try await runDownload(server.url(), to: .file(path), configuration: Self.configuration(connections: 2))
                .value
            try expectFile(path, equals: Self.content, in: directory)
        }
        try FileManager.default.removeItem(atPath: directory.file("stream.bin"))
        // Every time: the probe's own GET (a 200 with the whole body, dropped) would use up a single serving.
        let faults: [RangeTestServer.Fault] = [
            .chunkedWithoutLength, .corrupt(Self.damage(inPiece: 2), servings: .max),
        ]
        try await withServer(content: Self.content, faults: faults) { server in
            let outcome = try await runDownload(
                server.url(),
                to: .file(directory.file("stream.bin")),
                configuration: Self.configuration(connections: 2)
            )
            #expect(outcome.error?.code == .checksumMismatch)
            #expect(outcome.error?.message.contains("Piece 2 ") == true)
            expectNothingLeft(in: directory)
        }
    }
}
