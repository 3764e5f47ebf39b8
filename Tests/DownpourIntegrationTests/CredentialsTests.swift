import Downpour
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

@Suite("Credentials, cookies and file times against real servers", .timeLimit(.minutes(10)))
struct CredentialsTests {
    static let content = makeTestContent(count: 512 * 1024 + 3, seed: 17)
    /// The test server's `Last-Modified`, Wed, 21 Oct 2026 07:28:00 GMT.
    static let lastModified: Int64 = 1_792_567_680

    /// A download run to the end, with its events and its cookie jar afterwards.
    struct Run {
        var outcome: DownloadOutcome
        var cookies: CookieJar?
    }

    func run(_ url: String, to path: String, configuration: DownloadConfiguration) async throws -> Run {
        let download = testDownloader.download(
            try DownloadRequest(url: url, destination: .file(path), configuration: configuration)
        )
        return Run(outcome: await collect(download), cookies: download.cookies)
    }

    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    func writeNetrc(_ text: String, mode: mode_t, in directory: ScratchDirectory) throws -> String {
        let path = directory.path + "-netrc"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
        return path
    }

    // MARK: .netrc

    @Test("a private .netrc entry for the host authenticates every request; the file is identical")
    func netrc() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let netrc = try self.writeNetrc(
            "machine example.com login nobody password nothing\nmachine 127.0.0.1\n  login alice\n  password \"s3 cret\"\n",
            mode: 0o600,
            in: directory
        )
        defer { unlink(netrc) }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.netrcPath = netrc
            let path = directory.file("netrc.bin")
            let run = try await self.run(
                server.url("/basic-auth/alice/s3%20cret/file.bin"),
                to: path,
                configuration: configuration
            )
            _ = try run.outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let requests = server.statistics().requests
            #expect(requests.count >= 2)
            for request in requests {
                #expect(request.header("Authorization") == Self.basic("alice", "s3 cret"))
            }
        }
    }

    @Test("a .netrc file others can read is ignored with a notice, and the server's 401 is the error")
    func netrcReadableByOthers() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let netrc = try self.writeNetrc("machine 127.0.0.1 login alice password secret\n", mode: 0o644, in: directory)
        defer { unlink(netrc) }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.netrcPath = netrc
            let run = try await self.run(
                server.url("/basic-auth/alice/secret/file.bin"),
                to: directory.file("x.bin"),
                configuration: configuration
            )
            let error = try #require(run.outcome.error)
            #expect(error.code == .httpStatus)
            #expect(error.httpStatus == 401)
            let notices = run.outcome.events.compactMap { event -> String? in
                if case .notice(let text) = event { return text }
                return nil
            }
            #expect(notices.contains { $0.contains(netrc) && $0.contains("readable by others") }, "\(notices)")
            for request in server.statistics().requests {
                #expect(request.header("Authorization") == nil)
            }
            expectNothingLeft(in: directory)
        }
    }

    @Test("configured credentials win over .netrc, and credentials in the URL over both")
    func precedence() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let netrc = try self.writeNetrc("default login fromnetrc password n\n", mode: 0o600, in: directory)
        defer { unlink(netrc) }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.netrcPath = netrc
            configuration.credentials = Credentials(user: "configured", password: "c")
            let path = directory.file("configured.bin")
            _ = try await self.run(
                server.url("/basic-auth/configured/c/file.bin"),
                to: path,
                configuration: configuration
            )
            .outcome.value
            try expectFile(path, equals: Self.content, in: directory)

            let fromURL = server.url("/basic-auth/inurl/u/file.bin").replacingOccurrences(
                of: "http://",
                with: "http://inurl:u@"
            )
            let second = directory.file("url.bin")
            try FileManager.default.removeItem(atPath: path)
            _ = try await self.run(fromURL, to: second, configuration: configuration).outcome.value
            try expectFile(second, equals: Self.content, in: directory)
        }
    }

    // MARK: Redirects

    @Test("credentials, and Authorization and Cookie headers, never reach another origin after a redirect")
    func crossOriginRedirect() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { other in
            try await withServer(content: Self.content) { origin in
                var configuration = testConfiguration()
                configuration.credentials = Credentials(user: "alice", password: "secret")
                configuration.headers = [
                    HTTPHeaderField(name: "Cookie", value: "given=1"),
                    HTTPHeaderField(name: "X-Trace", value: "kept"),
                ]
                let target = Self.encoded(other.url("/file.bin"))
                let path = directory.file("moved.bin")
                _ = try await self.run(
                    origin.url("/basic-auth/alice/secret/redirect-to?url=\(target)"),
                    to: path,
                    configuration: configuration
                ).outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                let home = origin.statistics().requests
                #expect(!home.isEmpty)
                for request in home {
                    #expect(request.header("Authorization") == Self.basic("alice", "secret"))
                    #expect(request.header("Cookie") == "given=1")
                }
                let elsewhere = other.statistics().requests
                #expect(elsewhere.count >= 2)
                for request in elsewhere {
                    #expect(request.header("Authorization") == nil, "credentials leaked to another origin")
                    #expect(request.header("Cookie") == nil, "a cookie leaked to another origin")
                    #expect(request.header("X-Trace") == "kept")
                }
            }
        }
    }

    @Test("a server that wants the credentials after a cross-origin redirect does not get them: 401")
    func crossOriginRedirectToProtected() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { other in
            try await withServer(content: Self.content) { origin in
                var configuration = testConfiguration()
                configuration.credentials = Credentials(user: "alice", password: "secret")
                let target = Self.encoded(other.url("/basic-auth/alice/secret/file.bin"))
                let run = try await self.run(
                    origin.url("/redirect-to?url=\(target)"),
                    to: directory.file("x.bin"),
                    configuration: configuration
                )
                #expect(run.outcome.error?.httpStatus == 401)
                #expect(other.statistics().requests.allSatisfy { $0.header("Authorization") == nil })
                expectNothingLeft(in: directory)
            }
        }
    }

    @Test("credentials are still sent after a redirect within the same origin")
    func sameOriginRedirect() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.credentials = Credentials(user: "alice", password: "secret")
            let path = directory.file("same.bin")
            _ = try await self.run(
                server.url("/redirect-to?url=\(Self.encoded("/basic-auth/alice/secret/file.bin"))"),
                to: path,
                configuration: configuration
            ).outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let requests = server.statistics().requests
            #expect(requests.count >= 3)
            for request in requests {
                #expect(request.header("Authorization") == Self.basic("alice", "secret"))
            }
        }
    }

    // MARK: Cookies

    @Test("only the cookies whose domain, path, secure flag and expiry match are sent")
    func loadedCookies() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let jar = CookieJar(
            netscapeFormat: """
                # Netscape HTTP Cookie File
                127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\ts1
                127.0.0.1\tFALSE\t/require-cookie\tFALSE\t4102444800\tscoped\tp1
                127.0.0.1\tFALSE\t/elsewhere\tFALSE\t0\twrongpath\tx
                127.0.0.1\tFALSE\t/\tTRUE\t0\tsecureonly\tx
                127.0.0.1\tFALSE\t/\tFALSE\t946684800\texpired\tx
                localhost\tFALSE\t/\tFALSE\t0\totherhost\tx
                #HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\thttponly\th1

                """
        )
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.cookies = jar
            let path = directory.file("cookies.bin")
            let run = try await self.run(
                server.url("/require-cookie/scoped/p1/require-cookie/httponly/h1/file.bin"),
                to: path,
                configuration: configuration
            )
            _ = try run.outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let requests = server.statistics().requests
            #expect(requests.count >= 2)
            for request in requests {
                #expect(request.header("Cookie") == "scoped=p1; session=s1; httponly=h1")
            }
            #expect(run.cookies == jar, "nothing was set, so the jar is unchanged")
        }
    }

    @Test("a cookie for one host is not sent to another after a redirect; the other host's cookie is")
    func cookiesFollowTheirHost() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { other in
            try await withServer(content: Self.content) { origin in
                var configuration = testConfiguration()
                configuration.cookies = CookieJar(cookies: [
                    Cookie(name: "forOrigin", value: "1", domain: "127.0.0.1"),
                    Cookie(name: "forOther", value: "2", domain: "localhost"),
                ])
                // `localhost` is 127.0.0.1 under another name: another host for cookies.
                let target = Self.encoded("http://localhost:\(other.port)/require-cookie/forOther/2/file.bin")
                let path = directory.file("hop.bin")
                _ = try await self.run(origin.url("/redirect-to?url=\(target)"), to: path, configuration: configuration)
                    .outcome.value
                try expectFile(path, equals: Self.content, in: directory)
                for request in origin.statistics().requests {
                    #expect(request.header("Cookie") == "forOrigin=1")
                }
                let elsewhere = other.statistics().requests
                #expect(elsewhere.count >= 2)
                for request in elsewhere {
                    #expect(request.header("Cookie") == "forOther=2")
                }
            }
        }
    }

    @Test("cookies the server sets are sent on the following requests and end up in the jar")
    func setCookies() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.cookies = CookieJar()
            let first = Self.encoded("visit=42; Path=/; Max-Age=3600")
            let second = Self.encoded("gone=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT")
            let third = Self.encoded("scoped=7; Path=/elsewhere")
            let path = directory.file("set.bin")
            let run = try await self.run(
                server.url("/set-cookie/\(first)/set-cookie/\(second)/set-cookie/\(third)/file.bin"),
                to: path,
                configuration: configuration
            )
            _ = try run.outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            let jar = try #require(run.cookies)
            #expect(Set(jar.cookies.map(\.name)) == ["visit", "scoped"], "the expired one is not kept")
            let visit = try #require(jar.cookies.first { $0.name == "visit" })
            #expect(visit.domain == "127.0.0.1" && visit.path == "/" && !visit.includesSubdomains)
            let expires = try #require(visit.expires)
            #expect(expires > Date().addingTimeInterval(3000) && expires <= Date().addingTimeInterval(3600))
            // The probe took the cookies in; the range requests after it sent them.
            let requests = server.statistics().requests
            #expect(requests.first?.header("Cookie") == nil)
            let ranges = requests.dropFirst().filter { $0.method == "GET" }
            #expect(!ranges.isEmpty)
            for request in ranges {
                #expect(request.header("Cookie") == "visit=42")
            }
        }
    }

    @Test("a cookie set by a range response is kept, and sent when the range is fetched again")
    func setCookieOnRangeResponse() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await RangeTestServer.withServer(
            content: Self.content,
            faults: [.closeConnection(afterBytes: 100_000, requests: 1)]
        ) { server in
            var configuration = testConfiguration(connections: 1)
            configuration.cookies = CookieJar()
            let path = directory.file("range.bin")
            let run = try await self.run(
                server.url("/set-cookie-on-get/\(Self.encoded("range=1"))/file.bin"),
                to: path,
                configuration: configuration
            )
            _ = try run.outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            #expect(run.cookies?.cookies.map(\.name) == ["range"])
            let gets = server.statistics().getRequestsRecorded
            #expect(gets.count >= 2, "the cut response was fetched again")
            #expect(gets.first?.header("Cookie") == nil)
            #expect(gets.last?.header("Cookie") == "range=1")
        }
    }

    @Test("without a jar, Set-Cookie is not taken in and nothing is sent")
    func noCookieEngine() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let path = directory.file("plain.bin")
            let run = try await self.run(
                server.url("/set-cookie/\(Self.encoded("a=1"))/file.bin"),
                to: path,
                configuration: testConfiguration()
            )
            _ = try run.outcome.value
            #expect(run.cookies == nil)
            #expect(server.statistics().requests.allSatisfy { $0.header("Cookie") == nil })
        }
    }

    // MARK: File times

    @Test("setsRemoteTime gives the file the server's Last-Modified")
    func remoteTime() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.setsRemoteTime = true
            let path = directory.file("timed.bin")
            _ = try await self.run(server.url(), to: path, configuration: configuration).outcome.value
            try expectFile(path, equals: Self.content, in: directory)
            #expect(try Self.modificationTime(path) == Self.lastModified)

            let untimed = directory.file("untimed.bin")
            _ = try await self.run(server.url(), to: untimed, configuration: testConfiguration()).outcome.value
            #expect(try Self.modificationTime(untimed) != Self.lastModified)
        }
    }

    @Test("conditionalGet keeps a file as new as the remote one: no GET at all")
    func conditionalGetKeeps() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("current.bin")
        let mine = Data("my copy".utf8)
        _ = FileManager.default.createFile(atPath: path, contents: mine)
        try Self.setModificationTime(path, Self.lastModified)
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.conditionalGet = true
            let run = try await self.run(server.url(), to: path, configuration: configuration)
            let result = try run.outcome.value
            #expect(result.wasSkipped)
            #expect(result.downloadedBytes == 0)
            #expect(result.length == Int64(mine.count))
            #expect(server.statistics().getRequests == 0)
            #expect(FileManager.default.contents(atPath: path) == mine)
            #expect(directory.contents() == ["current.bin"])
            guard case .finished(let finished)? = run.outcome.events.last else {
                Issue.record("no finished event: \(run.outcome.events)")
                return
            }
            #expect(finished.wasSkipped)
        }
    }

    @Test("conditionalGet replaces an older file, even without overwrite")
    func conditionalGetReplaces() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("stale.bin")
        _ = FileManager.default.createFile(atPath: path, contents: Data("old".utf8))
        try Self.setModificationTime(path, Self.lastModified - 1)
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.conditionalGet = true
            configuration.setsRemoteTime = true
            let result = try await self.run(server.url(), to: path, configuration: configuration).outcome.value
            #expect(!result.wasSkipped)
            try expectFile(path, equals: Self.content, in: directory)
            #expect(try Self.modificationTime(path) == Self.lastModified)
            #expect(server.statistics().getRequests > 0)
        }
    }

    @Test("conditionalGet without a Last-Modified: an existing file is still an error")
    func conditionalGetWithoutDate() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("kept.bin")
        _ = FileManager.default.createFile(atPath: path, contents: Data("mine".utf8))
        try await RangeTestServer.withServer(content: Self.content, faults: [.noValidators]) { server in
            var configuration = testConfiguration()
            configuration.conditionalGet = true
            let run = try await self.run(server.url(), to: path, configuration: configuration)
            #expect(run.outcome.error?.code == .outputExists)
            #expect(FileManager.default.contents(atPath: path) == Data("mine".utf8))
            #expect(server.statistics().getRequests == 0)
        }
    }

    static func modificationTime(_ path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let date = try #require(attributes[.modificationDate] as? Date)
        return Int64(date.timeIntervalSince1970.rounded(.down))
    }

    static func setModificationTime(_ path: String, _ seconds: Int64) throws {
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: Double(seconds))],
            ofItemAtPath: path
        )
    }
}
