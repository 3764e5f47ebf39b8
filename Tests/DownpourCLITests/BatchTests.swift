import Crypto
import DownpourTestSupport
import Foundation
import Testing

@Suite("downpour get -i: many files")
struct BatchTests {
    static let content = makeTestContent(count: 192 * 1024, seed: 51)

    static func sha256(_ path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    static let expected = SHA256.hash(data: Data(content)).map { String(format: "%02x", $0) }.joined()

    @Test("every entry arrives, with its own options, N at a time over kept-alive connections")
    func batch() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let list = """
                # six files; comments and blank lines are skipped

                \(server.url("/one.bin"))
                \(server.url("/two.bin"))
                  out=renamed.bin
                \(server.url("/three.bin"))
                \tdir=\(scratch.file("sub"))
                \(server.url("/four.bin"))
                  header=X-Batch: four
                \(server.url("/five.bin"))
                \(server.url("/six.bin"))
                  split=2
                  out=nested/deeper/six.bin
                """
            try list.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
            let result = try await Binary.run([
                "get", "-i", scratch.file("list.txt"), "-j", "2", "-x", "1", "-d", scratch.file("out"),
            ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.contains("All 6 downloads completed."), "\(result.standardOutput)")
            for name in ["one.bin", "renamed.bin", "four.bin", "five.bin", "nested/deeper/six.bin"] {
                #expect(try Self.sha256(scratch.file("out/" + name)) == Self.expected, "\(name)")
            }
            #expect(try Self.sha256(scratch.file("sub/three.bin")) == Self.expected)
            let statistics = server.statistics()
            let fourth = statistics.requests.filter { $0.uri == "/four.bin" }
            #expect(!fourth.isEmpty && fourth.allSatisfy { $0.header("X-Batch") == "four" })
            #expect(statistics.requests.filter { $0.uri != "/four.bin" }.allSatisfy { $0.header("X-Batch") == nil })
            // Kept-alive connections: at most two per concurrent download, where one per request would be 12+.
            #expect(statistics.connections <= 4, "\(statistics.connections) connections for 6 downloads at -j 2")
        }
    }

    @Test("a failed entry: the others complete, the exit status is the failure's, the summary names its line")
    func failure() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let list = "\(server.url("/a.bin"))\n\(server.url("/status/404"))\n\(server.url("/c.bin"))\n"
            try list.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
            let result = try await Binary.run([
                "get", "-i", scratch.file("list.txt"), "-d", scratch.file("out"), "-q",
            ])
            #expect(result.status == 3, "\(result.standardError)")
            #expect(result.standardError.contains("2 of 3 downloads completed, 1 failed"), "\(result.standardError)")
            #expect(result.standardError.contains("line 2: \(server.url("/status/404"))"), "\(result.standardError)")
            #expect(try Self.sha256(scratch.file("out/a.bin")) == Self.expected)
            #expect(try Self.sha256(scratch.file("out/c.bin")) == Self.expected)
            #expect(result.standardOutput.isEmpty)
        }
    }

    @Test(
        "a bad input file is a usage error naming the line; nothing is downloaded",
        arguments: [
            ("  out=x\nhttp://127.0.0.1:1/a\n", "line 1"),
            ("http://127.0.0.1:1/a\n  no-such-option=1\n", "line 2: The option 'no-such-option' is not supported"),
            ("http://127.0.0.1:1/a\nhttp://127.0.0.1:1/b\n  split=99\n", "line 3: The option 'split'"),
            ("http://127.0.0.1:1/a\n  out=../../etc/x\n", "line 2: The option 'out'"),
            ("ftp://127.0.0.1/a\n", "line 1"),
            ("# nothing but a comment\n", "lists no URLs"),
        ]
    )
    func badInput(_ input: (String, String)) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try input.0.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
        let result = try await Binary.run(["get", "-i", scratch.file("list.txt"), "-d", scratch.file("out")])
        #expect(result.status == 2, "\(result.standardError)")
        #expect(result.standardError.contains(input.1), "\(result.standardError)")
        #expect(scratch.contents() == ["list.txt"])
    }

    @Test(
        "-i and -j, and the rate limits, reject bad combinations and values before any traffic",
        arguments: [
            ["get", "-i", "list.txt", "http://127.0.0.1:1/x"],
            ["get", "-i", "list.txt", "-o", "x"],
            ["get", "-i", "list.txt", "-j", "0"],
            ["get"],
            ["get", "http://127.0.0.1:1/a", "ftp://127.0.0.1:1/b"],
            ["get", "http://127.0.0.1:1/a", "--max-download-limit", "fast"],
            ["get", "http://127.0.0.1:1/a", "--max-overall-download-limit", "-1"],
        ]
    )
    func badArguments(_ arguments: [String]) async throws {
        let result = try await Binary.run(arguments)
        #expect(result.status == 2, "\(arguments): \(result.standardError)")
        #expect(!result.standardError.isEmpty)
    }
}
