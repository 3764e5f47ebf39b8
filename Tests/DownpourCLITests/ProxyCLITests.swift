import DownpourTestSupport
import Foundation
import Testing

/// The proxy options and variables of `downpour get`; the downloads through real proxies are in
/// `scripts/interop/proxy-interop.sh`. Port 9 on 127.0.0.1 stands for a proxy that is not there.
@Suite("The downpour command's proxies", .timeLimit(.minutes(10)))
struct ProxyCLITests {
    static let content = makeTestContent(count: 256 * 1024, seed: 17)

    @Test("get --help lists the proxy options and the variables")
    func help() async throws {
        let result = try await Binary.run(["get", "--help"])
        for text in ["--all-proxy", "--http-proxy", "--https-proxy", "--no-proxy", "https_proxy", "NO_PROXY"] {
            #expect(result.standardOutput.contains(text), "get --help does not mention \(text)")
        }
    }

    @Test(
        "a bad proxy is a usage error saying what is wrong",
        arguments: [
            (["--all-proxy", "https://127.0.0.1:9"], [:], "TLS to the proxy"),
            (["--http-proxy", "socks4://127.0.0.1:9"], [:], "'http-proxy'"),
            (["--https-proxy", "socks5://:secret@127.0.0.1:9"], [:], "without a user name"),
            (["--all-proxy", "127.0.0.1:99999"], [:], "port"),
            (["--no-proxy", "10.0.0.0/40"], [:], "10.0.0.0/40"),
            ([], ["https_proxy": "ftp://127.0.0.1:9"], "https_proxy"),
            ([], ["ALL_PROXY": "http://[::1"], "ALL_PROXY"),
        ] as [([String], [String: String], String)]
    )
    func badProxy(_ options: [String], _ environment: [String: String], _ text: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let result = try await Binary.run(
            ["get", "http://127.0.0.1:9/x", "-o", scratch.file("x")] + options,
            environment: environment
        )
        #expect(result.status == 2, "\(result.standardError)")
        #expect(result.standardError.contains(text), "\(result.standardError)")
        #expect(!result.standardError.contains("secret"))
        #expect(scratch.contents().isEmpty)
    }

    @Test(
        "a proxy from the environment or an option is used; NO_PROXY and --no-proxy bypass it",
        arguments: [
            // (options, environment, goes through the missing proxy)
            ([], ["http_proxy": "http://127.0.0.1:9"], true),
            ([], ["HTTP_PROXY": "http://127.0.0.1:9"], false),  // curl ignores the upper-case one
            ([], ["ALL_PROXY": "socks5h://127.0.0.1:9"], true),
            ([], ["https_proxy": "http://127.0.0.1:9"], false),  // an http URL
            ([], ["http_proxy": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"], false),
            ([], ["http_proxy": "http://127.0.0.1:9", "no_proxy": "127.0.0.1:1"], true),  // another port
            (["--all-proxy", "socks5://127.0.0.1:9"], [:], true),
            (["--all-proxy", "127.0.0.1:9", "--no-proxy", "example.com,127.0.0.0/8"], [:], false),
            (["--all-proxy", "127.0.0.1:9"], ["no_proxy": "127.0.0.1"], false),  // NO_PROXY still applies
            (["--all-proxy", "127.0.0.1:9"], ["NO_PROXY": "127.0.0.1"], false),
            (["--http-proxy", ""], ["http_proxy": "http://127.0.0.1:9"], false),  // an option drops the variables
            (["--https-proxy", "127.0.0.1:9"], ["http_proxy": "http://127.0.0.1:9"], false),
            (["--all-proxy", ""], ["http_proxy": "ftp://not-a-proxy"], false),  // ... and a bad one is not read
        ] as [([String], [String: String], Bool)]
    )
    func choice(_ options: [String], _ environment: [String: String], _ throughProxy: Bool) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("out.bin")
            let result = try await Binary.run(
                ["get", server.url(), "-o", path, "--max-tries", "1", "-q"] + options,
                environment: environment
            )
            if throughProxy {
                #expect(result.status == 4, "\(result.standardError)")
                #expect(result.standardError.contains("proxy"), "\(result.standardError)")
                #expect(server.statistics().requests.isEmpty)
            } else {
                #expect(result.status == 0, "\(result.standardError)")
                #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
            }
        }
    }

    @Test("input-file entries take aria2's proxy options")
    func inputFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let list = """
                \(server.url("/a.bin"))
                  out=a.bin
                  all-proxy=socks5h://127.0.0.1:9
                \(server.url("/b.bin"))
                  out=b.bin
                  no-proxy=127.0.0.1
                """
            try list.write(toFile: scratch.file("list.txt"), atomically: true, encoding: .utf8)
            let result = try await Binary.run(
                ["get", "-i", scratch.file("list.txt"), "-d", scratch.path, "--max-tries", "1", "-q"],
                environment: ["http_proxy": "http://127.0.0.1:9"]
            )
            #expect(result.status == 4, "\(result.standardError)")
            #expect(result.standardError.contains("line 1"), "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: scratch.file("b.bin")) == sha256Hex(Self.content))
            #expect(!FileManager.default.fileExists(atPath: scratch.file("a.bin")))
        }
    }
}
