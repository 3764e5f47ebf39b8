import Crypto
import DownpourTestSupport
import Foundation
import Testing

@Suite("downpour get with mirrors", .timeLimit(.minutes(10)))
struct MirrorCLITests {
    static let content = makeTestContent(count: 1024 * 1024 + 17, seed: 61)
    static let expected = SHA256.hash(data: Data(content)).map { String(format: "%02x", $0) }.joined()

    static func sha256(_ path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    @Test("get URL1 URL2: one file from both; a 404 mirror is dropped with a notice; credentials stay home")
    func severalURLs() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // Slow enough that the 404 mirror's answer comes long before the others could take its share over.
        let throttle = RangeTestServer.Fault.throttle(bytesPerSecond: 256 * 1024)
        try await RangeTestServer.withServer(content: Self.content, faults: [throttle]) { first in
            try await RangeTestServer.withServer(content: Self.content, faults: [throttle]) { second in
                let result = try await Binary.run([
                    "get", first.url(), second.url(), first.url("/status/404"), "-x", "4",
                    "--min-split-size", "64K", "--max-tries", "2", "--retry-wait", "0",
                    "--http-user", "u", "--http-passwd", "p", "-o", scratch.file("file.bin"),
                ])
                #expect(result.status == 0, "\(result.standardError)")
                #expect(try Self.sha256(scratch.file("file.bin")) == Self.expected)
                #expect(first.statistics().getRequests >= 1 && second.statistics().getRequests >= 1)
                let output = result.standardOutput + result.standardError
                #expect(output.contains("Dropped the mirror \(first.url("/status/404"))"), "\(output)")
                #expect(first.statistics().requests.allSatisfy { $0.header("Authorization") != nil })
                #expect(second.statistics().requests.allSatisfy { $0.header("Authorization") == nil })
            }
        }
    }

    @Test("get -i: TAB-separated URLs on one line are mirrors of one file")
    func inputFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { first in
            try await RangeTestServer.withServer(content: Self.content) { second in
                let list = "\(first.url("/a.bin"))\t\(second.url("/a.bin"))\n  split=4\n  min-split-size=64K\n"
                try list.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
                let result = try await Binary.run([
                    "get", "-i", scratch.file("list.txt"), "-d", scratch.file("out"), "-q",
                ])
                #expect(result.status == 0, "\(result.standardError)")
                #expect(try Self.sha256(scratch.file("out/a.bin")) == Self.expected)
                #expect(first.statistics().getRequests >= 1 && second.statistics().getRequests >= 1)
            }
        }
    }

    @Test("every mirror failing: the last error's exit status, naming every URL")
    func allFailing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let result = try await Binary.run([
                "get", server.url("/status/404"), server.url("/status/410"), "-o", scratch.file("file.bin"), "-q",
            ])
            #expect(result.status == 3, "\(result.standardError)")
            #expect(result.standardError.contains(server.url("/status/404")), "\(result.standardError)")
            #expect(result.standardError.contains(server.url("/status/410")), "\(result.standardError)")
            #expect(scratch.contents().isEmpty)
        }
    }
}
