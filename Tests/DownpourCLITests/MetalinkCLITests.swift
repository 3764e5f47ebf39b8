import DownpourTestSupport
import Foundation
import Testing

@Suite("downpour get: Metalink pieces and Metalink by URL", .timeLimit(.minutes(10)))
struct MetalinkCLITests {
    static let pieceLength = 128 * 1024
    /// Six pieces, the last one short.
    static let content = makeTestContent(count: 5 * pieceLength + 77, seed: 81)

    static func range(ofPiece index: Int) -> Range<Int> {
        (index * pieceLength)..<min(content.count, (index + 1) * pieceLength)
    }

    /// A Metalink 4 document for `content` at `url`, named `name`, with its size, digest and piece digests.
    static func document(url: String, name: String = "file.bin") -> String {
        let pieces = stride(from: 0, to: content.count, by: pieceLength).map { start in
            "      <hash>\(sha256Hex(content[start..<min(content.count, start + pieceLength)]))</hash>"
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="\(name)">
                <size>\(content.count)</size>
                <hash type="sha-256">\(sha256Hex(content))</hash>
                <pieces length="\(pieceLength)" type="sha-256">
            \(pieces.joined(separator: "\n"))
                </pieces>
                <url priority="1">\(url)</url>
              </file>
            </metalink>
            """
    }

    /// A few bytes inside piece `index`.
    static func damage(inPiece index: Int) -> Range<Int> {
        (index * pieceLength + 500)..<(index * pieceLength + 600)
    }

    @Test("-M with a bad piece: that piece is fetched again and the file is SHA-256-identical")
    func badPiece() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bad = 3
        try await RangeTestServer.withServer(content: Self.content, faults: [.corrupt(Self.damage(inPiece: bad))]) {
            server in
            try Self.document(url: server.url("/file.bin")).write(
                toFile: scratch.file("file.meta4"),
                atomically: true,
                encoding: .utf8
            )
            let result = try await Binary.run([
                "get", "-M", scratch.file("file.meta4"), "-d", scratch.file("out"), "-x", "1", "-q",
            ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: scratch.file("out/file.bin")) == sha256Hex(Self.content))
            let ranges = server.statistics().requests.filter { $0.method == "GET" }.map(\.requestedRange)
            // The probe's request, going on with the whole file, then the bad piece alone.
            #expect(ranges == [0..<Self.content.count, Self.range(ofPiece: bad)], "\(ranges)")
        }
    }

    @Test("-M with a piece that is bad every time: exit 10, the piece named, nothing left")
    func badPieceAlways() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let faults: [RangeTestServer.Fault] = [.corrupt(Self.damage(inPiece: 4), servings: .max)]
        try await RangeTestServer.withServer(content: Self.content, faults: faults) { server in
            try Self.document(url: server.url("/file.bin")).write(
                toFile: scratch.file("file.meta4"),
                atomically: true,
                encoding: .utf8
            )
            let result = try await Binary.run([
                "get", "-M", scratch.file("file.meta4"), "-d", scratch.file("out"), "-x", "2", "-q",
            ])
            #expect(result.status == 10, "\(result.standardError)")
            #expect(result.standardError.contains("Piece 4 "), "\(result.standardError)")
            #expect(result.standardError.contains("than the Metalink describes"), "\(result.standardError)")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: scratch.file("out"))) ?? []).isEmpty)
        }
    }

    @Test(
        "a URL that is a Metalink (.meta4, or its Content-Type): its files are downloaded, the document is not saved",
        arguments: [false, true]
    )
    func metalinkByURL(byContentType: Bool) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content, faults: [.corrupt(Self.damage(inPiece: 1))]) {
            files in
            let document = Array(Self.document(url: files.url("/file.bin")).utf8)
            let faults: [RangeTestServer.Fault] = byContentType ? [.contentType("application/metalink4+xml")] : []
            try await RangeTestServer.withServer(content: document, faults: faults) { server in
                let url = server.url(byContentType ? "/latest" : "/release.meta4")
                // One connection: with two, a racing copy of the tail could overwrite the damaged bytes.
                let result = try await Binary.run(["get", url, "-d", scratch.file("out"), "-x", "1"])
                #expect(result.status == 0, "\(result.standardError)")
                #expect(result.standardOutput.contains("is a Metalink of 1 file(s)"), "\(result.standardOutput)")
                #expect(!result.standardOutput.contains("Saved \(scratch.file("out/latest"))"))
                #expect(try sha256Hex(ofFileAt: scratch.file("out/file.bin")) == sha256Hex(Self.content))
                #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file("out")) == ["file.bin"])
                let ranges = files.statistics().requests.filter { $0.method == "GET" }.map(\.requestedRange)
                #expect(ranges == [0..<Self.content.count, Self.range(ofPiece: 1)], "\(ranges)")
            }
        }
    }

    @Test("--metalink-location: a URL of a preferred country is taken before a better-priority one")
    func location() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let document = Self.document(url: server.url("/file.bin")).replacingOccurrences(
                of: "<url priority=\"1\">",
                with: "<url priority=\"1\">http://127.0.0.1:9/unused.bin</url>\n<url priority=\"2\" location=\"fr\">"
            )
            try document.write(toFile: scratch.file("file.meta4"), atomically: true, encoding: .utf8)
            let result = try await Binary.run([
                "get", "-M", scratch.file("file.meta4"), "-d", scratch.file("out"), "--metalink-location", "FR", "-x",
                "1",
            ])
            #expect(result.status == 0, "\(result.standardError)")
            // The preferred URL was probed first: the better-priority one (where nothing listens) never had to be
            // skipped.
            let output = result.standardOutput + result.standardError
            #expect(!output.contains("unused.bin"), "\(output)")
            #expect(server.statistics().getRequests >= 1)
            #expect(try sha256Hex(ofFileAt: scratch.file("out/file.bin")) == sha256Hex(Self.content))
        }
    }

    @Test("--follow-metalink=false saves the document; -o with a .meta4 URL is refused")
    func followMetalinkFalse() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { files in
            let document = Array(Self.document(url: files.url("/file.bin")).utf8)
            try await RangeTestServer.withServer(content: document) { server in
                let url = server.url("/release.meta4")
                let saved = try await Binary.run([
                    "get", url, "-o", scratch.file("doc.meta4"), "--follow-metalink=false",
                ])
                #expect(saved.status == 0, "\(saved.standardError)")
                #expect(try sha256Hex(ofFileAt: scratch.file("doc.meta4")) == sha256Hex(document))
                #expect(files.statistics().requests.isEmpty)

                let refused = try await Binary.run(["get", url, "-o", scratch.file("other.bin")])
                #expect(refused.status == 2, "\(refused.standardError)")
                #expect(refused.standardError.contains("-d DIR"), "\(refused.standardError)")
                #expect(scratch.contents() == ["doc.meta4"])
            }
        }
    }
}
