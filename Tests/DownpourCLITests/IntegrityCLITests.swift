import DownpourTestSupport
import Foundation
import Testing

@Suite("downpour get --checksum", .timeLimit(.minutes(10)))
struct IntegrityCLITests {
    static let content = makeTestContent(count: 512 * 1024 + 3, seed: 71)
    static let right = sha256Hex(content)
    static let wrong = sha256Hex(makeTestContent(count: 16, seed: 72))

    @Test("a right checksum: exit 0")
    func right() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("out.bin")
            let result = try await Binary.run([
                "get", server.url(), "-o", path, "-x", "4", "--min-split-size", "64K", "-q",
                "--checksum", "sha-256=\(Self.right.uppercased())",
            ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == Self.right)
            #expect(scratch.contents() == ["out.bin"])
        }
    }

    @Test("a mismatch: exit 10, both digests on standard error, nothing left")
    func mismatch() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let result = try await Binary.run([
                "get", server.url(), "-o", scratch.file("out.bin"), "-x", "1", "-q",
                "--checksum", "sha-256=\(Self.wrong)",
            ])
            #expect(result.status == 10, "\(result.standardError)")
            #expect(result.standardError.contains(Self.wrong), "\(result.standardError)")
            #expect(result.standardError.contains(Self.right), "\(result.standardError)")
            #expect(result.standardError.contains("--checksum"), "the CLI's remedy names its own flag")
            #expect(scratch.contents().isEmpty)
        }
    }

    @Test("-M: every file of a Metalink from its URLs, best first, checked against its digest; a bad digest exits 10")
    func metalink() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let document = """
                <?xml version="1.0" encoding="UTF-8"?>
                <metalink xmlns="urn:ietf:params:xml:ns:metalink">
                  <file name="good.bin">
                    <size>\(Self.content.count)</size>
                    <hash type="sha-256">\(Self.right)</hash>
                    <url priority="2">http://127.0.0.1:9/unused.bin</url>
                    <url priority="1">\(server.url("/good.bin"))</url>
                  </file>
                  <file name="sub/bad.bin">
                    <hash type="sha-256">\(Self.wrong)</hash>
                    <url>\(server.url("/bad.bin"))</url>
                  </file>
                </metalink>
                """
            try document.write(toFile: scratch.file("files.meta4"), atomically: true, encoding: .utf8)
            let result = try await Binary.run(["get", "-M", scratch.file("files.meta4"), "-d", scratch.file("out")])
            #expect(result.status == 10, "\(result.standardError)")
            #expect(result.standardError.contains(Self.wrong), "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: scratch.file("out/good.bin")) == Self.right)
            #expect(!FileManager.default.fileExists(atPath: scratch.file("out/sub/bad.bin")))
            // The best URL is probed first (the worse one, a mirror, would have failed), and good.bin came from here.
            #expect(server.statistics().requests.contains { $0.uri == "/good.bin" })

            try "<metalink/>".write(toFile: scratch.file("empty.meta4"), atomically: true, encoding: .utf8)
            let empty = try await Binary.run(["get", "-M", scratch.file("empty.meta4")])
            #expect(empty.status == 2, "\(empty.standardError)")
            #expect(empty.standardError.contains("lists no file"), "\(empty.standardError)")
        }
    }

    @Test("checksum= in an input file")
    func inputFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let list = """
                \(server.url("/good.bin"))
                  checksum=sha-256=\(Self.right)
                \(server.url("/bad.bin"))
                  checksum=SHA-256=\(Self.wrong)
                """
            try list.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
            let result = try await Binary.run(["get", "-i", scratch.file("list.txt"), "-d", scratch.file("out")])
            #expect(result.status == 10, "\(result.standardError)")
            #expect(result.standardError.contains(Self.wrong), "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: scratch.file("out/good.bin")) == Self.right)
            #expect(!FileManager.default.fileExists(atPath: scratch.file("out/bad.bin")))
        }
    }

    @Test(
        "a malformed checksum is a usage error",
        arguments: ["sha-256=xyz", "crc32=12345678", "sha-256", "sha-512=\(String(repeating: "0", count: 64))"]
    )
    func malformed(value: String) async throws {
        let result = try await Binary.run(["get", "http://127.0.0.1:9/x", "--checksum", value])
        #expect(result.status == 2, "\(result.standardError)")
        #expect(result.standardError.contains("checksum"), "\(result.standardError)")
    }

    @Test("--help names --checksum and exit code 10")
    func help() async throws {
        let get = try await Binary.run(["get", "--help"])
        #expect(get.standardOutput.contains("--checksum"))
        let root = try await Binary.run(["--help"])
        #expect(root.standardOutput.contains("10 the file's digest"), "\(root.standardOutput)")
    }
}
