import DownpourTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("downpour get: credentials, cookies, file times", .timeLimit(.minutes(10)))
struct CredentialsCLITests {
    static let content = makeTestContent(count: 300 * 1024 + 11, seed: 23)
    /// The test server's `Last-Modified`, Wed, 21 Oct 2026 07:28:00 GMT.
    static let lastModified: Int64 = 1_792_567_680

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    /// A home directory with a `.netrc` of the given mode.
    static func home(netrc: String, mode: mode_t, in scratch: Scratch) throws -> String {
        let home = scratch.file("home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try netrc.write(toFile: home + "/.netrc", atomically: false, encoding: .utf8)
        chmod(home + "/.netrc", mode)
        return home
    }

    static func modificationTime(_ path: String) throws -> Int64 {
        let date = try #require(try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
        return Int64(date.timeIntervalSince1970.rounded(.down))
    }

    @Test("--help lists the credential, cookie and time options")
    func help() async throws {
        let result = try await Binary.run(["get", "--help"])
        for option in [
            "--http-user", "--http-passwd", "--netrc-path", "--no-netrc", "--load-cookies", "--save-cookies",
            "--remote-time", "--conditional-get",
        ] {
            #expect(result.standardOutput.contains(option), "get --help does not mention \(option)")
        }
    }

    @Test("~/.netrc, private: an authenticated download, identical file")
    func defaultNetrc() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let home = try Self.home(netrc: "machine 127.0.0.1 login alice password secret\n", mode: 0o600, in: scratch)
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("out.bin")
            let result = try await Binary.run(
                ["get", server.url("/basic-auth/alice/secret/file.bin"), "-o", path],
                environment: ["HOME": home]
            )
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
            #expect(
                server.statistics().requests.allSatisfy { $0.header("Authorization") == Self.basic("alice", "secret") }
            )
        }
    }

    @Test("~/.netrc readable by others: a warning naming the file, then the server's 401 (exit 3)")
    func netrcReadableByOthers() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let home = try Self.home(netrc: "machine 127.0.0.1 login alice password secret\n", mode: 0o644, in: scratch)
        try await RangeTestServer.withServer(content: Self.content) { server in
            let result = try await Binary.run(
                ["get", server.url("/basic-auth/alice/secret/file.bin"), "-o", scratch.file("out.bin")],
                environment: ["HOME": home]
            )
            #expect(result.status == 3, "\(result.standardError)")
            #expect(result.standardError.contains("\(home)/.netrc"))
            #expect(result.standardError.contains("readable by others"))
            #expect(result.standardError.contains("401"))
            #expect(result.standardError.contains("--http-user"), "the CLI names the remedy: \(result.standardError)")
            #expect(!FileManager.default.fileExists(atPath: scratch.file("out.bin")))
        }
    }

    @Test("--no-netrc ignores ~/.netrc; --netrc-path reads another file")
    func netrcOptions() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let home = try Self.home(netrc: "machine 127.0.0.1 login alice password secret\n", mode: 0o600, in: scratch)
        let other = scratch.file("other-netrc")
        try "default login bob password builder\n".write(toFile: other, atomically: false, encoding: .utf8)
        chmod(other, 0o600)
        try await RangeTestServer.withServer(content: Self.content) { server in
            let refused = try await Binary.run(
                ["get", server.url("/basic-auth/alice/secret/file.bin"), "-o", scratch.file("a.bin"), "--no-netrc"],
                environment: ["HOME": home]
            )
            #expect(refused.status == 3, "\(refused.standardError)")
            let path = scratch.file("b.bin")
            let result = try await Binary.run(
                ["get", server.url("/basic-auth/bob/builder/file.bin"), "-o", path, "--netrc-path", other],
                environment: ["HOME": home]
            )
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        }
    }

    @Test(
        "bad credential and cookie options are usage errors",
        arguments: [
            ["--netrc-path", "/nonexistent/netrc"], ["--netrc-path", "/tmp", "--no-netrc"],
            ["--http-passwd", "p"], ["--http-user", "a:b"], ["--load-cookies", "/nonexistent/cookies.txt"],
            ["--save-cookies", "/tmp"],
        ]
    )
    func badOptions(options: [String]) async throws {
        let result = try await Binary.run(["get", "http://127.0.0.1:9/x"] + options)
        #expect(result.status == 2, "\(options): \(result.standardError)")
        #expect(!result.standardError.isEmpty)
    }

    @Test("--http-user and --http-passwd; not sent after a redirect to another origin, sent after one within it")
    func httpUser() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { other in
            try await RangeTestServer.withServer(content: Self.content) { origin in
                let expected = Self.basic("alice", "open sesame")
                let credentials = ["--http-user", "alice", "--http-passwd", "open sesame", "--no-netrc"]
                let same = scratch.file("same.bin")
                let inside = Self.encoded("/basic-auth/alice/open%20sesame/file.bin")
                let sameResult = try await Binary.run(
                    ["get", origin.url("/redirect-to?url=\(inside)"), "-o", same] + credentials
                )
                #expect(sameResult.status == 0, "\(sameResult.standardError)")
                #expect(try sha256Hex(ofFileAt: same) == sha256Hex(Self.content))
                #expect(origin.statistics().requests.allSatisfy { $0.header("Authorization") == expected })

                let moved = scratch.file("moved.bin")
                let outside = Self.encoded(other.url("/file.bin"))
                let movedResult = try await Binary.run(
                    ["get", origin.url("/redirect-to?url=\(outside)"), "-o", moved, "-H", "Cookie: given=1"]
                        + credentials
                )
                #expect(movedResult.status == 0, "\(movedResult.standardError)")
                #expect(try sha256Hex(ofFileAt: moved) == sha256Hex(Self.content))
                // However many requests the file took there (one, when the probe's response carries it whole; more
                // when connections opened ahead take ranges: it varies with timing), none carries the credentials.
                let elsewhere = other.statistics().requests
                #expect(!elsewhere.isEmpty)
                for request in elsewhere {
                    #expect(request.header("Authorization") == nil, "credentials leaked to another origin")
                    #expect(request.header("Cookie") == nil, "a cookie leaked to another origin")
                }
            }
        }
    }

    @Test("--load-cookies sends the matching cookies; --save-cookies writes them with what the server set, mode 0600")
    func cookies() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let loaded = scratch.file("in.txt")
        try """
        # Netscape HTTP Cookie File
        127.0.0.1\tFALSE\t/\tFALSE\t0\tlogin\tyes
        127.0.0.1\tFALSE\t/\tTRUE\t0\tsecure\tno
        localhost\tFALSE\t/\tFALSE\t0\tother\tno

        """.write(toFile: loaded, atomically: false, encoding: .utf8)
        let saved = scratch.file("out.txt")
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("c.bin")
            let set = Self.encoded("token=abc; Path=/; Max-Age=86400")
            let result = try await Binary.run([
                "get", server.url("/require-cookie/login/yes/set-cookie/\(set)/file.bin"), "-o", path,
                "--load-cookies", loaded, "--save-cookies", saved, "--no-netrc",
            ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
            #expect(server.statistics().requests.first?.header("Cookie") == "login=yes")
            let text = try String(contentsOfFile: saved, encoding: .utf8)
            let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
            #expect(lines.contains("127.0.0.1\tFALSE\t/\tFALSE\t0\tlogin\tyes"))
            #expect(lines.contains("localhost\tFALSE\t/\tFALSE\t0\tother\tno"))
            #expect(lines.contains { $0.hasPrefix("127.0.0.1\tFALSE\t/\tFALSE\t") && $0.hasSuffix("\ttoken\tabc") })
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: saved)[.posixPermissions] as? Int)
            #expect(mode == 0o600)
            #expect(scratch.contents().allSatisfy { !$0.contains(".downpour-") }, "\(scratch.contents())")
        }
    }

    @Test(
        "--save-cookies writes the jar even when the download fails, and a missing --load-cookies file that is also saved to is fine"
    )
    func cookiesOnFailure() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let jar = scratch.file("jar.txt")
        try await RangeTestServer.withServer(content: Self.content) { server in
            let set = Self.encoded("seen=1")
            let result = try await Binary.run([
                "get", server.url("/set-cookie/\(set)/status/404"), "-o", scratch.file("x.bin"),
                "--load-cookies", jar, "--save-cookies", jar, "--no-netrc",
            ])
            #expect(result.status == 3, "\(result.standardError)")
            let text = try String(contentsOfFile: jar, encoding: .utf8)
            #expect(text.contains("\tseen\t1\n"), "\(text)")
        }
    }

    @Test("--remote-time sets the mtime; --conditional-get then skips the download, and fetches a newer remote")
    func times() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("t.bin")
            let first = try await Binary.run(["get", server.url(), "-o", path, "--remote-time", "--no-netrc"])
            #expect(first.status == 0, "\(first.standardError)")
            #expect(try Self.modificationTime(path) == Self.lastModified)
            let gets = server.statistics().getRequests

            let second = try await Binary.run(["get", server.url(), "-o", path, "--conditional-get", "--no-netrc"])
            #expect(second.status == 0, "\(second.standardError)")
            #expect(server.statistics().getRequests == gets, "an up-to-date file is not fetched again")
            #expect(second.standardOutput.contains("nothing downloaded"), "\(second.standardOutput)")

            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSince1970: Double(Self.lastModified - 3600))],
                ofItemAtPath: path
            )
            try Data("stale".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSince1970: Double(Self.lastModified - 3600))],
                ofItemAtPath: path
            )
            let third = try await Binary.run(["get", server.url(), "-o", path, "--conditional-get", "--no-netrc"])
            #expect(third.status == 0, "\(third.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
            #expect(server.statistics().getRequests > gets)
            #expect(scratch.contents() == ["t.bin"])
        }
    }
}
