import DownpourTestSupport
import Foundation
import Testing

@Suite("downpour get -i: entries whose URL is a Metalink", .timeLimit(.minutes(10)))
struct MetalinkBatchCLITests {
    static let content = MetalinkCLITests.content

    @Test("an ordinary URL and a .meta4 URL: both files SHA-256-identical, the document not saved, 2 downloads")
    func followed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { files in
            let document = Array(MetalinkCLITests.document(url: files.url("/file.bin")).utf8)
            try await RangeTestServer.withServer(content: document) { server in
                let input = """
                    \(files.url("/plain.bin"))
                    \(server.url("/release.meta4"))
                      dir=\(scratch.file("out/sub"))
                    """
                try input.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
                let result = try await Binary.run([
                    "get", "-i", scratch.file("list.txt"), "-d", scratch.file("out"), "-x", "1", "-j", "1",
                ])
                #expect(result.status == 0, "\(result.standardError)")
                #expect(result.standardOutput.contains("All 2 downloads completed."), "\(result.standardOutput)")
                #expect(
                    result.standardOutput.contains("Metalink \(server.url("/release.meta4")): 1 file(s) to download"),
                    "\(result.standardOutput)"
                )
                #expect(try sha256Hex(ofFileAt: scratch.file("out/plain.bin")) == sha256Hex(Self.content))
                // The file goes into the entry's dir; the document is nowhere.
                #expect(try sha256Hex(ofFileAt: scratch.file("out/sub/file.bin")) == sha256Hex(Self.content))
                #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file("out/sub")) == ["file.bin"])
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: scratch.file("out")).sorted() == [
                        "plain.bin", "sub",
                    ]
                )
                let paths = files.statistics().requests.filter { $0.method == "GET" }.map(\.uri)
                #expect(Set(paths) == ["/plain.bin", "/file.bin"], "\(paths)")
            }
        }
    }

    @Test("a file of the Metalink that fails is named in the summary; the exit status is not 0")
    func fileFails() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { files in
            // The document's digest is not the file's: the file fails its check.
            let document = Array(
                MetalinkCLITests.document(url: files.url("/file.bin"))
                    .replacingOccurrences(of: sha256Hex(Self.content), with: String(repeating: "0", count: 64))
                    .utf8
            )
            try await RangeTestServer.withServer(content: document) { server in
                let input = "\(files.url("/plain.bin"))\n\(server.url("/release.meta4"))\n"
                try input.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
                let result = try await Binary.run([
                    "get", "-i", scratch.file("list.txt"), "-d", scratch.file("out"), "-x", "1", "--max-tries", "1",
                ])
                #expect(result.status != 0, "\(result.standardError)")
                #expect(
                    result.standardError.contains("1 of 2 downloads completed, 1 failed"),
                    "\(result.standardError)"
                )
                #expect(
                    result.standardError.contains("line 2 (Metalink \(server.url("/release.meta4")), file file.bin)"),
                    "\(result.standardError)"
                )
                #expect(try sha256Hex(ofFileAt: scratch.file("out/plain.bin")) == sha256Hex(Self.content))
            }
        }
    }

    @Test("follow-metalink=false on the entry (or --follow-metalink=false): the document is saved as a file")
    func notFollowed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { files in
            let document = Array(MetalinkCLITests.document(url: files.url("/file.bin")).utf8)
            try await RangeTestServer.withServer(content: document) { server in
                let input = """
                    \(server.url("/release.meta4"))
                      follow-metalink=false
                    """
                try input.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
                let result = try await Binary.run(["get", "-i", scratch.file("list.txt"), "-d", scratch.file("out")])
                #expect(result.status == 0, "\(result.standardError)")
                #expect(try sha256Hex(ofFileAt: scratch.file("out/release.meta4")) == sha256Hex(document))
                #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file("out")) == ["release.meta4"])

                let plain = "\(server.url("/other.meta4"))\n"
                try plain.write(toFile: scratch.file("plain.txt"), atomically: true, encoding: .utf8)
                let global = try await Binary.run([
                    "get", "-i", scratch.file("plain.txt"), "-d", scratch.file("out"), "--follow-metalink=false",
                ])
                #expect(global.status == 0, "\(global.standardError)")
                #expect(try sha256Hex(ofFileAt: scratch.file("out/other.meta4")) == sha256Hex(document))
                #expect(files.statistics().requests.isEmpty)
            }
        }
    }
}
