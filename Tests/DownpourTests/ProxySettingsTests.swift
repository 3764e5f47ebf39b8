import Foundation
import Testing

@testable import Downpour
@testable import DownpourAria2

@Suite("Proxies: URLs, NO_PROXY, the environment")
struct ProxySettingsTests {
    struct Parsed: Sendable, CustomTestStringConvertible {
        var text: String
        var expected: ProxyURL
        var testDescription: String { self.text }
    }

    static let parsed: [Parsed] = [
        .init(text: "proxy.example.com", expected: ProxyURL(kind: .http, host: "proxy.example.com", port: 1080)),
        .init(text: "proxy.example.com:3128", expected: ProxyURL(kind: .http, host: "proxy.example.com", port: 3128)),
        .init(
            text: "http://Proxy.Example.COM:8080/",
            expected: ProxyURL(kind: .http, host: "proxy.example.com", port: 8080)
        ),
        .init(text: "HTTP://127.0.0.1:8888", expected: ProxyURL(kind: .http, host: "127.0.0.1", port: 8888)),
        .init(text: "socks5://127.0.0.1", expected: ProxyURL(kind: .socks5, host: "127.0.0.1", port: 1080)),
        .init(text: "socks5h://localhost:9050", expected: ProxyURL(kind: .socks5h, host: "localhost", port: 9050)),
        .init(text: "SOCKS5H://[::1]:1081", expected: ProxyURL(kind: .socks5h, host: "::1", port: 1081)),
        .init(text: "http://[::1]", expected: ProxyURL(kind: .http, host: "::1", port: 1080)),
        .init(
            text: "http://alice:s%40cr%3At@proxy:3128",
            expected: ProxyURL(kind: .http, host: "proxy", port: 3128, username: "alice", password: "s@cr:t")
        ),
        .init(
            text: "http://bob@proxy:3128",
            expected: ProxyURL(kind: .http, host: "proxy", port: 3128, username: "bob", password: "")
        ),
        .init(
            text: "http://user:pass:with:colons@proxy",
            expected: ProxyURL(kind: .http, host: "proxy", port: 1080, username: "user", password: "pass:with:colons")
        ),
        .init(
            text: "  http://a%20b:c@proxy:1  ",
            expected: ProxyURL(kind: .http, host: "proxy", port: 1, username: "a b", password: "c")
        ),
        // SOCKS5 credentials (RFC 1929): up to 255 bytes each, the password may be empty.
        .init(
            text: "socks5://user:p%40ss@proxy:1080",
            expected: ProxyURL(kind: .socks5, host: "proxy", port: 1080, username: "user", password: "p@ss")
        ),
        .init(
            text: "socks5h://user@proxy",
            expected: ProxyURL(kind: .socks5h, host: "proxy", port: 1080, username: "user", password: "")
        ),
        .init(
            text: "socks5h://\(String(repeating: "u", count: 255)):\(String(repeating: "p", count: 255))@proxy",
            expected: ProxyURL(
                kind: .socks5h,
                host: "proxy",
                username: String(repeating: "u", count: 255),
                password: String(repeating: "p", count: 255)
            )
        ),
    ]

    @Test("proxy URLs that parse", arguments: Self.parsed)
    func parses(_ row: Parsed) throws {
        #expect(try ProxyURL(parsing: row.text) == row.expected)
    }

    @Test(
        "proxy URLs that are refused, with a message saying why",
        arguments: [
            ("https://proxy:443", "TLS to the proxy"),
            ("socks4://proxy:1080", "not SOCKS5"),
            ("socks4a://proxy", "not SOCKS5"),
            ("ftp://proxy", "scheme 'ftp'"),
            ("socks5://:pass@proxy:1080", "password without a user name"),
            ("socks5h://\(String(repeating: "u", count: 256)):p@proxy", "longer than 255 bytes"),
            ("socks5h://u:\(String(repeating: "%C3%A9", count: 128))@proxy", "longer than 255 bytes"),
            ("http://", "no valid host"),
            ("http://:8080", "no valid host"),
            ("http://proxy:0", "port"),
            ("http://proxy:65536", "port"),
            ("http://proxy:http", "port"),
            ("http://proxy:80/path", "path"),
            ("http://proxy:80?x=1", "path"),
            ("http://pro xy:80", "no valid host"),
            ("http://[::1:80", "IPv6"),
            ("http://u:%zz@proxy", "percent-encoding"),
        ]
    )
    func refused(_ text: String, _ reason: String) {
        #expect {
            try ProxyURL(parsing: text)
        } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .invalidRequest && error.message.contains(reason)
        }
    }

    @Test("a password is never shown")
    func redacted() throws {
        let proxy = try ProxyURL(parsing: "http://alice:secret@proxy:3128")
        #expect(proxy.description == "http://alice:***@proxy:3128")
        #expect(ProxyURL(kind: .socks5h, host: "::1", port: 9).description == "socks5h://[::1]:9")
        #expect(ProxyURL.redacted("http://alice:secret@proxy:3128") == "http://alice:***@proxy:3128")
        #expect(ProxyURL.redacted("alice:secret@proxy") == "alice:***@proxy")
        #expect(ProxyURL.redacted("proxy:3128") == "proxy:3128")
        let message = #expect(throws: DownloadError.self) { try ProxyURL(parsing: "https://alice:secret@proxy") }
        #expect(message?.message.contains("secret") == false)
    }

    static let httpProxy = ProxyURL(kind: .http, host: "h", port: 1)
    static let httpsProxy = ProxyURL(kind: .http, host: "s", port: 2)
    static let allProxy = ProxyURL(kind: .socks5h, host: "a", port: 3)

    @Test(
        "the scheme's own proxy before the one for all",
        arguments: [
            // (http, https, all, URL, expected)
            (true, true, true, "http://example.com/", "h"),
            (true, true, true, "https://example.com/", "s"),
            (false, true, true, "http://example.com/", "a"),
            (true, false, true, "https://example.com/", "a"),
            (true, false, false, "https://example.com/", nil),
            (false, true, false, "http://example.com/", nil),
            (false, false, false, "http://example.com/", nil),
            (false, false, true, "HTTPS://EXAMPLE.COM/", "a"),
        ] as [(Bool, Bool, Bool, String, String?)]
    )
    func precedence(_ http: Bool, _ https: Bool, _ all: Bool, _ url: String, _ expected: String?) throws {
        let settings = ProxySettings(
            all: all ? Self.allProxy : nil,
            http: http ? Self.httpProxy : nil,
            https: https ? Self.httpsProxy : nil
        )
        #expect(settings.proxy(for: try #require(URL(string: url)))?.host == expected)
    }

    @Test(
        "NO_PROXY entries, as curl reads them (plus ports and networks)",
        arguments: [
            // (entry, URL, bypassed)
            ("example.com", "http://example.com/", true),
            ("example.com", "http://www.example.com/", true),
            ("example.com", "http://a.b.example.com:8080/", true),
            ("example.com", "http://badexample.com/", false),
            ("example.com", "http://example.com.evil.net/", false),
            (".example.com", "http://example.com/", true),
            (".example.com", "http://www.example.com/", true),
            ("*.example.com", "http://www.example.com/", true),
            ("Example.COM", "http://www.EXAMPLE.com/", true),
            ("example.com.", "http://example.com./", true),
            ("*", "http://anything.at.all/", true),
            ("*", "https://10.1.2.3/", true),
            ("localhost", "http://localhost:8080/", true),
            ("localhost", "http://127.0.0.1/", false),
            ("127.0.0.1", "http://127.0.0.1:9/", true),
            ("127.0.0.1", "http://127.0.0.10/", false),
            ("127.0.0.0/8", "http://127.9.9.9/", true),
            ("10.0.0.0/8", "http://11.0.0.1/", false),
            ("192.168.1.0/24", "http://192.168.1.77/", true),
            ("192.168.1.0/24", "http://192.168.2.77/", false),
            ("0.0.0.0/0", "http://8.8.8.8/", true),
            ("10.0.0.0/8", "http://ten.example/", false),
            ("::1", "http://[::1]:8080/", true),
            ("[::1]", "http://[::1]/", true),
            ("fd00::/8", "http://[fd12::1]/", true),
            ("fd00::/8", "http://[fe80::1]/", false),
            ("[fd00::]/8", "http://[fd12::1]/", true),
            ("example.com:8080", "http://example.com:8080/", true),
            ("example.com:8080", "http://example.com/", false),
            ("example.com:80", "http://example.com/", true),
            ("example.com:443", "https://www.example.com/", true),
            ("example.com:443", "http://www.example.com/", false),
            ("127.0.0.1:9", "http://127.0.0.1:9/", true),
            ("127.0.0.1:9", "http://127.0.0.1:10/", false),
            ("[::1]:8080", "http://[::1]:8080/", true),
            ("[::1]:8080", "http://[::1]:8081/", false),
        ] as [(String, String, Bool)]
    )
    func noProxy(_ entry: String, _ url: String, _ bypassed: Bool) throws {
        let settings = ProxySettings(all: Self.allProxy, noProxy: [entry])
        #expect(try settings.validate() == ())
        let chosen = settings.proxy(for: try #require(URL(string: url)))
        #expect((chosen == nil) == bypassed)
    }

    @Test(
        "no-proxy lists split on commas and spaces; bad entries are refused",
        arguments: ["", "a.com:x", "1.2.3.0/33", ":80"]
    )
    func noProxyLists(_ bad: String) {
        #expect(
            ProxySettings.noProxyEntries("a.com, .b.org  10.0.0.0/8,,localhost") == [
                "a.com", ".b.org", "10.0.0.0/8", "localhost",
            ]
        )
        #expect(NoProxyRule(bad) == nil)
        #expect(throws: DownloadError.self) { try ProxySettings(noProxy: ["ok.com", bad]).validate() }
    }

    @Test(
        "the environment variables curl reads, in its order",
        arguments: [
            // (environment, expected http, https, all hosts, no-proxy)
            (["http_proxy": "h:1"], "h", nil, nil, []),
            (["HTTP_PROXY": "h:1"], nil, nil, nil, []),  // never the upper-case one
            (["https_proxy": "s:1", "HTTPS_PROXY": "S:1"], nil, "s", nil, []),
            (["HTTPS_PROXY": "upper:1"], nil, "upper", nil, []),
            (["https_proxy": "", "HTTPS_PROXY": "upper:1"], nil, "upper", nil, []),  // empty counts as unset
            (["all_proxy": "socks5h://a", "ALL_PROXY": "b"], nil, nil, "a", []),
            (["ALL_PROXY": "socks5://b"], nil, nil, "b", []),
            (["no_proxy": "x.com,y.com", "NO_PROXY": "z.com"], nil, nil, nil, ["x.com", "y.com"]),
            (["NO_PROXY": "z.com, 10.0.0.0/8"], nil, nil, nil, ["z.com", "10.0.0.0/8"]),
            (["no_proxy": "good.com,<local>,bad:port"], nil, nil, nil, ["good.com"]),  // unreadable entries dropped
            ([:], nil, nil, nil, []),
        ] as [([String: String], String?, String?, String?, [String])]
    )
    func environment(
        _ environment: [String: String],
        _ http: String?,
        _ https: String?,
        _ all: String?,
        _ noProxy: [String]
    ) throws {
        let settings = try ProxySettings.fromEnvironment(environment)
        #expect(settings.http?.host == http)
        #expect(settings.https?.host == https)
        #expect(settings.all?.host == all)
        #expect(settings.noProxy == noProxy)
    }

    @Test("a bad proxy in the environment is an error naming the variable")
    func badEnvironment() {
        let error = #expect(throws: DownloadError.self) {
            try ProxySettings.fromEnvironment(["https_proxy": "https://proxy:443"])
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("https_proxy") == true)
    }

    @Test("input-file options by aria2's names")
    func aria2Options() throws {
        var options = Aria2DownloadSettings(
            configuration: DownloadConfiguration(proxy: ProxySettings(all: Self.allProxy))
        )
        try options.apply(name: "https-proxy", value: "http://u:p@proxy:3128")
        try options.apply(name: "no-proxy", value: "localhost,.corp")
        #expect(
            options.configuration.proxy.https
                == ProxyURL(kind: .http, host: "proxy", port: 3128, username: "u", password: "p")
        )
        #expect(options.configuration.proxy.noProxy == ["localhost", ".corp"])
        try options.apply(name: "all-proxy", value: "")
        #expect(options.configuration.proxy.all == nil)
        #expect(throws: DownloadError.self) { try options.apply(name: "http-proxy", value: "socks4://x") }
        #expect(throws: DownloadError.self) { try options.apply(name: "no-proxy", value: "1.2.3.4/99") }
        #expect(Aria2Option.named("all-proxy")?.scope == .download)
    }

    @Test("a proxy with credentials survives encoding with the configuration")
    func codable() throws {
        let configuration = DownloadConfiguration(
            proxy: ProxySettings(http: try ProxyURL(parsing: "http://u:p@h:1"), noProxy: ["x"])
        )
        let decoded = try JSONDecoder().decode(
            DownloadConfiguration.self,
            from: try JSONEncoder().encode(configuration)
        )
        #expect(decoded == configuration)
    }
}
