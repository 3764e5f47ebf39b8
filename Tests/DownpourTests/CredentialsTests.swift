import Foundation
import NIOHTTP1
import Testing

@testable import Downpour
@testable import DownpourAria2

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Credentials, .netrc and cookies, without I/O")
struct CredentialsTests {
    // MARK: Basic credentials

    @Test("Basic authorization is base64 of user:password in UTF-8")
    func basic() throws {
        #expect(
            Credentials(user: "Aladdin", password: "open sesame").basicAuthorization
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        )
        #expect(Credentials(user: "é", password: "").basicAuthorization == "Basic w6k6")
        let url = try #require(URL(string: "http://us%40er:p%3Ass@127.0.0.1/x"))
        #expect(Credentials(userInfoOf: url) == Credentials(user: "us@er", password: "p:ss"))
        #expect(Credentials(userInfoOf: try #require(URL(string: "http://127.0.0.1/x"))) == nil)
        #expect(!"\(Credentials(user: "u", password: "hunter2"))".contains("hunter2"))
    }

    // MARK: .netrc

    @Test(
        "netrc files as curl reads them",
        arguments: [
            (
                "machine example.com login alice password secret", "example.com",
                Credentials(user: "alice", password: "secret")
            ),
            (
                "machine example.com\n  login alice\n  password secret\n", "EXAMPLE.com",
                Credentials(user: "alice", password: "secret")
            ),
            (
                "machine\texample.com\tlogin\talice\tpassword\tsecret", "example.com",
                Credentials(user: "alice", password: "secret")
            ),
            (
                "machine a.example login a password 1\nmachine b.example login b password 2\ndefault login d password 3",
                "b.example", Credentials(user: "b", password: "2")
            ),
            (
                "machine a.example login a password 1\ndefault login d password 3", "other.example",
                Credentials(user: "d", password: "3")
            ),
            (
                "machine h login \"two words\" password \"q\\\"uo\\\\te\\n\"", "h",
                Credentials(user: "two words", password: "q\"uo\\te\n")
            ),
            ("machine h login u account acct password p", "h", Credentials(user: "u", password: "p")),
            (
                "# a comment line\nmachine h login u password p # trailing comment", "h",
                Credentials(user: "u", password: "p")
            ),
            ("machine h login u password #notacomment", "h", Credentials(user: "u", password: "#notacomment")),
            (
                "macdef init\ncd /pub\nmachine evil login x password y\n\nmachine h login u password p",
                "h", Credentials(user: "u", password: "p")
            ),
            ("machine h login u", "h", Credentials(user: "u", password: "")),
            ("machine H.Example LOGIN u PASSWORD p", "h.example", Credentials(user: "u", password: "p")),
            (
                "machine first login 1 password 1\nmachine first login 2 password 2", "first",
                Credentials(user: "1", password: "1")
            ),
        ]
    )
    func netrc(text: String, host: String, expected: Credentials) {
        #expect(NetrcFile(parsing: text).credentials(forHost: host) == expected)
    }

    @Test(
        "netrc files that have nothing for a host",
        arguments: [
            ("machine a login u password p", "b"),
            ("", "h"),
            ("macdef m\nmachine h login u password p\n", "h"),
            ("machine h", "h"),
            ("login u password p", "h"),
        ]
    )
    func netrcWithout(text: String, host: String) {
        #expect(NetrcFile(parsing: text).credentials(forHost: host) == nil)
    }

    @Test("a netrc file others may read is refused; a missing one is nothing to report")
    func netrcPermissions() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netrc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/netrc"
        try "machine h login u password p".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        #expect(NetrcFile.load(path: path) == .file(NetrcFile(parsing: "machine h login u password p")))
        for mode: mode_t in [0o644, 0o640, 0o604, 0o620] {
            chmod(path, mode)
            guard case .refused(let reason) = NetrcFile.load(path: path) else {
                Issue.record("mode \(String(mode, radix: 8)) was accepted")
                continue
            }
            #expect(reason.contains("readable by others"))
            #expect(!reason.contains("--"), "the library names no command-line flag: \(reason)")
        }
        #expect(NetrcFile.load(path: directory + "/none") == .missing)
    }

    @Test("a downloader reads a .netrc again when it changes, is re-permissioned or goes away, else keeps it")
    func netrcCacheFollowsTheFile() async throws {
        let directory = NSTemporaryDirectory() + "downpour-netrc-cache-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/netrc"
        let cache = NetrcCache()
        #expect(await cache.load(path: path) == .missing)
        try "machine h login u password p".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        #expect(await cache.load(path: path) == .file(NetrcFile(parsing: "machine h login u password p")))
        #expect(await cache.load(path: path) == .file(NetrcFile(parsing: "machine h login u password p")))
        // Another file put in its place (a new inode, whatever the times and sizes say).
        try "machine h login v password q".write(toFile: path + ".new", atomically: false, encoding: .utf8)
        chmod(path + ".new", 0o600)
        rename(path + ".new", path)
        #expect(await cache.load(path: path) == .file(NetrcFile(parsing: "machine h login v password q")))
        chmod(path, 0o644)
        guard case .refused = await cache.load(path: path) else {
            Issue.record("a file others may read was used from the cache")
            return
        }
        unlink(path)
        #expect(await cache.load(path: path) == .missing)
    }

    // MARK: cookies.txt

    static let cookieFile = """
        # Netscape HTTP Cookie File
        # a comment
        .example.com\tTRUE\t/\tFALSE\t0\tsession\tabc
        www.example.com\tFALSE\t/docs\tTRUE\t4102444800\tlong\tv=1;x
        #HttpOnly_example.org\tFALSE\t/\tFALSE\t0\thidden\th
        example.net\tFALSE\t/\tFALSE\t0\tempty
        broken line without tabs
        example.net\tFALSE\t/\tFALSE\tsoon\tbad\texpiry

        """

    @Test("cookies.txt: seven fields, a six-field line has an empty value, #HttpOnly_, comments and junk skipped")
    func parseCookieFile() {
        let jar = CookieJar(netscapeFormat: Self.cookieFile)
        #expect(
            jar.cookies == [
                Cookie(name: "session", value: "abc", domain: "example.com", includesSubdomains: true),
                Cookie(
                    name: "long",
                    value: "v=1;x",
                    domain: "www.example.com",
                    path: "/docs",
                    secure: true,
                    expires: Date(timeIntervalSince1970: 4_102_444_800)
                ),
                Cookie(name: "hidden", value: "h", domain: "example.org", httpOnly: true),
                Cookie(name: "empty", value: "", domain: "example.net"),
            ]
        )
        // Written and read again: the same jar.
        let written = jar.netscapeFormat(now: Date(timeIntervalSince1970: 0))
        #expect(CookieJar(netscapeFormat: written) == jar)
        #expect(written.contains(".example.com\tTRUE\t/\tFALSE\t0\tsession\tabc\n"))
        #expect(written.contains("#HttpOnly_example.org\tFALSE\t/\tFALSE\t0\thidden\th\n"))
        #expect(CookieJar(netscapeFormat: "a\tFALSE\t/\tFALSE\t0\tn\tv\r\n").cookies.first?.value == "v")
    }

    @Test("expired cookies are not written")
    func expiredNotWritten() {
        let jar = CookieJar(cookies: [
            Cookie(name: "old", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 100)),
            Cookie(name: "new", value: "2", domain: "h", expires: Date(timeIntervalSince1970: 300)),
        ])
        let written = jar.netscapeFormat(now: Date(timeIntervalSince1970: 200))
        #expect(!written.contains("old"))
        #expect(written.contains("h\tFALSE\t/\tFALSE\t300\tnew\t2\n"))
    }

    @Test(
        "which cookies go with a URL: domain, path, secure, expiry",
        arguments: [
            // domain
            (Cookie(name: "c", value: "1", domain: "example.com"), "http://example.com/", true),
            (Cookie(name: "c", value: "1", domain: "example.com"), "http://www.example.com/", false),
            (
                Cookie(name: "c", value: "1", domain: "example.com", includesSubdomains: true),
                "http://www.example.com/", true
            ),
            (
                Cookie(name: "c", value: "1", domain: ".example.com", includesSubdomains: true), "http://EXAMPLE.com/",
                true
            ),
            (
                Cookie(name: "c", value: "1", domain: "example.com", includesSubdomains: true),
                "http://badexample.com/", false
            ),
            (
                Cookie(name: "c", value: "1", domain: "example.com", includesSubdomains: true),
                "http://example.com.evil/", false
            ),
            (Cookie(name: "c", value: "1", domain: "0.0.1", includesSubdomains: true), "http://127.0.0.1/", false),
            (
                Cookie(name: "c", value: "1", domain: "127.0.0.1", includesSubdomains: true), "http://127.0.0.1:8080/",
                true
            ),
            (Cookie(name: "c", value: "1", domain: "localhost"), "http://127.0.0.1/", false),
            // path
            (Cookie(name: "c", value: "1", domain: "h", path: "/docs"), "http://h/docs", true),
            (Cookie(name: "c", value: "1", domain: "h", path: "/docs"), "http://h/docs/a.iso", true),
            (Cookie(name: "c", value: "1", domain: "h", path: "/docs/"), "http://h/docs/a.iso", true),
            (Cookie(name: "c", value: "1", domain: "h", path: "/docs"), "http://h/docsearch", false),
            (Cookie(name: "c", value: "1", domain: "h", path: "/docs"), "http://h/", false),
            (Cookie(name: "c", value: "1", domain: "h", path: "/"), "http://h", true),
            // secure
            (Cookie(name: "c", value: "1", domain: "h", secure: true), "http://h/", false),
            (Cookie(name: "c", value: "1", domain: "h", secure: true), "https://h/", true),
            // expiry: now is 1000 s after 1970
            (Cookie(name: "c", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 999)), "http://h/", false),
            (
                Cookie(name: "c", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 1000)), "http://h/",
                false
            ),
            (Cookie(name: "c", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 1001)), "http://h/", true),
            (Cookie(name: "c", value: "1", domain: "h", expires: nil), "http://h/", true),
        ]
    )
    func matching(cookie: Cookie, url: String, matches: Bool) throws {
        #expect(cookie.matches(try #require(URL(string: url)), now: Date(timeIntervalSince1970: 1000)) == matches)
    }

    @Test("the Cookie header: longer paths first, then older first; nil when nothing matches")
    func cookieHeader() throws {
        let jar = CookieJar(cookies: [
            Cookie(name: "a", value: "1", domain: "h"),
            Cookie(name: "b", value: "2", domain: "h", path: "/files"),
            Cookie(name: "c", value: "3", domain: "h"),
            Cookie(name: "d", value: "4", domain: "other"),
        ])
        #expect(jar.cookieHeader(for: try #require(URL(string: "http://h/files/x"))) == "b=2; a=1; c=3")
        #expect(jar.cookieHeader(for: try #require(URL(string: "http://nobody/"))) == nil)
    }

    @Test(
        "Set-Cookie: attributes, defaults, refusals",
        arguments: [
            ("s=1", "http://h/dir/file", [Cookie(name: "s", value: "1", domain: "h", path: "/dir")]),
            ("s=1", "http://h/file", [Cookie(name: "s", value: "1", domain: "h", path: "/")]),
            (
                " s = 1 ; Path=/x ; HttpOnly", "http://h/",
                [Cookie(name: "s", value: "1", domain: "h", path: "/x", httpOnly: true)]
            ),
            ("s=1; Path=relative", "http://h/a/b", [Cookie(name: "s", value: "1", domain: "h", path: "/a")]),
            (
                "s=1; Domain=.Example.com", "http://www.example.com/",
                [Cookie(name: "s", value: "1", domain: "example.com", includesSubdomains: true)]
            ),
            ("s=1; Domain=other.com", "http://www.example.com/", []),
            ("s=1; Domain=com", "http://example.com/", []),
            ("s=1; Domain=www.example.com", "http://example.com/", []),
            ("s=1; Secure", "http://h/", []),
            ("s=1; Secure", "https://h/", [Cookie(name: "s", value: "1", domain: "h", secure: true)]),
            (
                "s=1; Expires=Wed, 21-Oct-2026 07:28:00 GMT", "http://h/",
                [Cookie(name: "s", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 1_792_567_680))]
            ),
            (
                "s=1; Max-Age=60; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "http://h/",
                [Cookie(name: "s", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 1060))]
            ),
            ("s=1; Max-Age=0", "http://h/", []),
            ("s=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT", "http://h/", []),
            ("s=1; Expires=garbage", "http://h/", [Cookie(name: "s", value: "1", domain: "h")]),
            ("novalue", "http://h/", []),
            ("=1", "http://h/", []),
            ("e=", "http://h/", [Cookie(name: "e", value: "", domain: "h")]),
        ]
    )
    func setCookie(header: String, url: String, expected: [Cookie]) throws {
        var jar = CookieJar()
        jar.setCookie(header, from: try #require(URL(string: url)), now: Date(timeIntervalSince1970: 1000))
        #expect(jar.cookies == expected)
    }

    @Test("Set-Cookie replaces the cookie of the same name, domain and path, and an expired one removes it")
    func setCookieReplaces() throws {
        let url = try #require(URL(string: "http://h/"))
        let now = Date(timeIntervalSince1970: 1000)
        var jar = CookieJar(cookies: [
            Cookie(name: "s", value: "old", domain: "h"),
            Cookie(name: "s", value: "other path", domain: "h", path: "/x"),
        ])
        jar.setCookie("s=new", from: url, now: now)
        #expect(jar.cookies.map(\.value) == ["new", "other path"])
        jar.setCookie("s=gone; Max-Age=-1", from: url, now: now)
        #expect(jar.cookies.map(\.value) == ["other path"])
        var merged = CookieJar(cookies: [Cookie(name: "a", value: "1", domain: "h")])
        merged.merge(
            CookieJar(cookies: [Cookie(name: "a", value: "2", domain: "h"), Cookie(name: "b", value: "3", domain: "h")])
        )
        #expect(merged.cookies.map(\.value) == ["2", "3"])
    }

    // MARK: HTTP dates

    @Test(
        "HTTP dates: IMF-fixdate, RFC 850, asctime, cookie dates",
        arguments: [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),
            ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777.0),
            ("Sun Nov  6 08:49:37 1994", 784_111_777.0),
            ("Sun, 06-Nov-1994 08:49:37 GMT", 784_111_777.0),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
            ("Wed, 21 Oct 2026 07:28:00 GMT", 1_792_567_680.0),
            ("Tue, 29 Feb 2028 23:59:59 GMT", 1_835_481_599.0),
        ]
    )
    func httpDate(text: String, seconds: Double) {
        #expect(HTTPDate.parse(text) == seconds)
        #expect(HTTPDate.parse(HTTPDate.format(Int64(seconds))) == seconds)
    }

    @Test(
        "not HTTP dates",
        arguments: [
            "", "soon", "Sun, 06 Nov 1994", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "06 Nov 1500 08:49:37",
        ]
    )
    func notHTTPDate(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("HTTPDate.format writes IMF-fixdate")
    func formatDate() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    // MARK: Conditional GET

    @Test(
        "conditional GET: keep a file as new as the remote one, replace an older one",
        arguments: [
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT", ConditionalGet.keep),
            (784_111_778, "Sun, 06 Nov 1994 08:49:37 GMT", .keep),
            (784_111_776, "Sun, 06 Nov 1994 08:49:37 GMT", .replace),
            (0, "Sun, 06 Nov 1994 08:49:37 GMT", .replace),
            (784_111_777, nil, .undecided),
            (784_111_777, "yesterday", .undecided),
        ] as [(Int64, String?, ConditionalGet)]
    )
    func conditionalGet(local: Int64, remote: String?, expected: ConditionalGet) {
        #expect(ConditionalGet(localModified: local, remoteLastModified: remote) == expected)
    }

    // MARK: Which headers go where

    @Test("credentials and configured Authorization/Cookie go only to the original origin; jar cookies by host")
    func requestAuthorization() throws {
        let home = try #require(URL(string: "http://127.0.0.1:8000/a"))
        let store = CookieStore(
            CookieJar(cookies: [
                Cookie(name: "home", value: "1", domain: "127.0.0.1"),
                Cookie(name: "away", value: "2", domain: "localhost"),
            ])
        )
        let authorization = RequestAuthorization(
            origin: Origin(home),
            credentials: Credentials(user: "u", password: "p"),
            cookies: store
        )
        let configured = [
            HTTPHeaderField(name: "X-Trace", value: "t"),
            HTTPHeaderField(name: "Cookie", value: "given=3"),
        ]
        func headers(_ url: String) throws -> [String: String] {
            let fields = authorization.headers(configured, for: try #require(URL(string: url)))
            return Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + "," + $1 })
        }
        #expect(
            try headers("http://127.0.0.1:8000/b") == [
                "X-Trace": "t", "Cookie": "given=3; home=1", "Authorization": "Basic dTpw",
            ]
        )
        // Same host, another port: another origin, but cookies do not care about ports.
        #expect(try headers("http://127.0.0.1:8001/b") == ["X-Trace": "t", "Cookie": "home=1"])
        #expect(try headers("https://127.0.0.1:8000/b") == ["X-Trace": "t", "Cookie": "home=1"])
        #expect(try headers("http://localhost:8000/b") == ["X-Trace": "t", "Cookie": "away=2"])

        let explicit = RequestAuthorization(
            origin: Origin(home),
            credentials: Credentials(user: "u", password: "p"),
            cookies: nil
        )
        let given = [HTTPHeaderField(name: "authorization", value: "Bearer x")]
        #expect(explicit.headers(given, for: home) == given, "a configured Authorization header wins")
        #expect(explicit.headers(given, for: try #require(URL(string: "http://127.0.0.1:9/"))).isEmpty)
    }

    @Test("Set-Cookie headers of a response are taken in, each on its own")
    func absorb() throws {
        let store = CookieStore(CookieJar())
        var headers = HTTPHeaders([
            ("Set-Cookie", "a=1; Expires=Wed, 21 Oct 2099 07:28:00 GMT"), ("Set-Cookie", "b=2"),
        ])
        store.absorb(headers, from: try #require(URL(string: "http://h/x")))
        #expect(store.snapshot.cookies.map(\.name) == ["a", "b"])
        headers = HTTPHeaders([])
        store.absorb(headers, from: try #require(URL(string: "http://h/x")))
        #expect(store.snapshot.cookies.count == 2)
    }

    // MARK: Input files

    @Test("aria2 option names for credentials and times")
    func aria2Options() throws {
        var options = Aria2DownloadSettings()
        try options.apply(name: "http-user", value: "alice")
        try options.apply(name: "http-passwd", value: "s:ecret")
        try options.apply(name: "remote-time", value: "true")
        try options.apply(name: "conditional-get", value: "true")
        options.configuration.netrcPath = "/home/x/.netrc"
        try options.apply(name: "no-netrc", value: "true")
        #expect(options.configuration.credentials == Credentials(user: "alice", password: "s:ecret"))
        #expect(options.configuration.setsRemoteTime)
        #expect(options.configuration.conditionalGet)
        #expect(options.configuration.netrcPath == nil)
        #expect(throws: DownloadError.self) { try options.apply(name: "http-user", value: "a:b") }
        #expect(throws: DownloadError.self) { try options.apply(name: "remote-time", value: "yes") }
        var bad = DownloadConfiguration()
        bad.credentials = Credentials(user: "a:b", password: "")
        #expect(throws: DownloadError.self) { try bad.validate() }
    }

    @Test("a configuration with credentials and cookies survives a JSON round trip")
    func codable() throws {
        var configuration = DownloadConfiguration()
        configuration.credentials = Credentials(user: "u", password: "p")
        configuration.netrcPath = "/n"
        configuration.cookies = CookieJar(cookies: [
            Cookie(name: "a", value: "1", domain: "h", expires: Date(timeIntervalSince1970: 5))
        ])
        configuration.setsRemoteTime = true
        configuration.conditionalGet = true
        let decoded = try JSONDecoder().decode(
            DownloadConfiguration.self,
            from: try JSONEncoder().encode(configuration)
        )
        #expect(decoded == configuration)
    }
}
