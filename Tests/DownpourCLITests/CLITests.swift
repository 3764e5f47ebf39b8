import DownpourTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the built `downpour` binary, as a user would.
struct CommandResult {
    var status: Int32
    var standardOutput: String
    var standardError: String
}

enum Binary {
    /// `.build/<configuration>/downpour`, next to the test bundle; `DOWNPOUR_BINARY` overrides.
    static var path: String {
        if let path = ProcessInfo.processInfo.environment["DOWNPOUR_BINARY"] { return path }
        #if os(macOS)
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            return bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("downpour").path
        }
        #endif
        return Bundle.main.bundleURL.appendingPathComponent("downpour").path
    }

    /// This process's environment without its proxy variables (the tests talk to servers on 127.0.0.1), plus
    /// `extra`.
    static func environment(adding extra: [String: String] = [:]) -> [String: String] {
        let proxyVariables = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]
        return ProcessInfo.processInfo.environment.filter { !proxyVariables.contains($0.key.lowercased()) }
            .merging(extra) { $1 }
    }

    /// Runs the binary with its output going to temporary files, so nothing blocks a thread of the
    /// concurrency pool while it runs; a child still running after `limit` is killed. The child gets this
    /// process's environment without its proxy variables (the tests talk to servers on 127.0.0.1), plus
    /// `environment`.
    static func run(
        _ arguments: [String],
        in directory: String? = nil,
        limit: Duration = .seconds(45),
        environment: [String: String] = [:]
    ) async throws -> CommandResult {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("downpour-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        let child = try ChildProcess(
            executable: Self.path,
            arguments: arguments,
            environment: Self.environment(adding: environment),
            directory: directory,
            standardOutput: outputURL.path,
            standardError: errorURL.path
        )
        // Past `limit` the child is asked to stop (SIGTERM), and killed if it is still there 10 s later.
        if await child.waitForExit(within: limit) == nil { child.signal(SIGTERM) }
        let status = await child.wait(limit: .seconds(10))
        return CommandResult(
            status: status,
            standardOutput: try String(contentsOf: outputURL, encoding: .utf8),
            standardError: try String(contentsOf: errorURL, encoding: .utf8)
        )
    }
}

struct Scratch {
    let path: String

    init() throws {
        self.path =
            FileManager.default.temporaryDirectory.appendingPathComponent("downpour-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { self.path + "/" + name }
    func contents() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: self.path)) ?? []).sorted() }
    func remove() { try? FileManager.default.removeItem(atPath: self.path) }
}

@Suite("The downpour command", .timeLimit(.minutes(1)))
struct CLITests {
    static let content = makeTestContent(count: 2 * 1024 * 1024 + 7, seed: 11)

    /// Every option of `get` as its help shows it: names and value name, in the order of `GetCommand`.
    static let getOptions = [
        "-o, --output <output>",
        "-d, --dir <dir>",
        "-i, --input-file <file>",
        "-M, --metalink-file <file>",
        "--follow-metalink <true|false>",
        "--metalink-location <locations>",
        "-j, --max-concurrent-downloads <downloads>",
        "-x, --connections <connections>",
        "--min-split-size <size>",
        "--lowest-speed <size>",
        "--slow-window <seconds>",
        "--no-restart-slow",
        "--max-tries <max-tries>",
        "--retry-wait <seconds>",
        "--timeout <seconds>",
        "-H, --header <header>",
        "--user-agent <user-agent>",
        "--overwrite",
        "-q, --quiet",
        "--insecure",
        "--ca-certificate <file>",
        "--no-resume",
        "--journal-interval <seconds>",
        "--max-overall-download-limit <size>",
        "--max-download-limit <size>",
        "-v, --verbose",
        "--http-user <http-user>",
        "--http-passwd <password>",
        "--netrc-path <file>",
        "--no-netrc",
        "--load-cookies <file>",
        "--save-cookies <file>",
        "--remote-time",
        "--conditional-get",
        "--all-proxy <url>",
        "--http-proxy <url>",
        "--https-proxy <url>",
        "--no-proxy <list>",
        "--checksum <type=digest>",
        "--version",
        "-h, --help",
    ]

    /// The entries of the OPTIONS section of a help text: each option's names and value, and its description.
    static func optionEntries(inHelp help: String) -> [(option: String, description: String)] {
        var entries: [(option: String, description: String)] = []
        var inOptions = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") {
                inOptions = line == "OPTIONS:"
                continue
            }
            guard inOptions else { continue }
            let text = line.drop { $0 == " " }
            // Names separated by ", ", then the value name if any, then the description on this line or the next.
            if line.hasPrefix("  -"), let match = text.wholeMatch(of: #/(-[^\s,]+(?:, -[^\s,]+)*(?: <[^>]+>)?) *(.*)/#)
            {
                entries.append((String(match.1), String(match.2)))
            } else if !entries.isEmpty {
                entries[entries.count - 1].description += " " + text
            }
        }
        return entries.map { ($0.option, $0.description.trimmingCharacters(in: .whitespaces)) }
    }

    @Test("--help describes every option of get")
    func help() async throws {
        let root = try await Binary.run(["--help"])
        #expect(root.status == 0)
        #expect(root.standardOutput.contains("get"))
        #expect(root.standardOutput.contains("Exit codes"))
        let get = try await Binary.run(["get", "--help"])
        #expect(get.status == 0)
        let entries = Self.optionEntries(inHelp: get.standardOutput)
        #expect(entries.map(\.option) == Self.getOptions, "\(get.standardOutput)")
        for entry in entries {
            #expect(!entry.description.isEmpty, "\(entry.option) has no description")
        }
    }

    @Test(
        "a bad URL is a usage error with a one-line message",
        arguments: [
            "not a url", "ftp://example.com/file", "http://", "example.com/file.iso",
        ]
    )
    func badURL(url: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let result = try await Binary.run(["get", url, "-o", scratch.file("x")])
        #expect(result.status == 2)
        #expect(result.standardError.split(separator: "\n").count == 1, "\(result.standardError)")
        #expect(result.standardError.hasPrefix("downpour: "))
        #expect(scratch.contents().isEmpty)
    }

    @Test(
        "bad option values are usage errors",
        arguments: [
            ["-x", "0"], ["-x", "65"], ["--min-split-size", "12Q"], ["--max-tries", "0"], ["--retry-wait", "-1"],
            ["--timeout", "0"], ["--header", "no-colon"], ["-o", "a", "-d", "b"], ["--slow-window", "0"],
            ["--lowest-speed", "0"], ["--lowest-speed", "fast"],
        ]
    )
    func badOptions(options: [String]) async throws {
        let result = try await Binary.run(["get", "http://127.0.0.1:9/x"] + options)
        #expect(result.status == 2, "\(options): \(result.standardError)")
        #expect(!result.standardError.isEmpty)
    }

    @Test("downloads a file, prints progress lines when stdout is not a terminal")
    func download() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(
            content: Self.content,
            faults: [.throttle(bytesPerSecond: 1_000_000)]
        ) { server in
            let path = scratch.file("out.bin")
            let result = try await Binary.run(["get", server.url(), "-o", path, "-x", "4", "--min-split-size", "64K"])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
            #expect(scratch.contents() == ["out.bin"])
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.first?.hasPrefix("Downloading ") == true)
            #expect(lines.contains { $0.contains("%") && $0.contains("/s") }, "\(result.standardOutput)")
            #expect(lines.last?.hasPrefix("Saved ") == true)
            #expect(!result.standardOutput.contains("\r"), "no terminal escapes in plain output")
        }
    }

    @Test("--quiet prints nothing; -d saves under the URL's name")
    func quietIntoDirectory() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let result = try await Binary.run([
                "get", server.url("/files/name.iso"), "-d", scratch.file("sub"), "--quiet",
            ])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.isEmpty)
            #expect(result.standardError.isEmpty)
            #expect(try sha256Hex(ofFileAt: scratch.file("sub/name.iso")) == sha256Hex(Self.content))
        }
    }

    @Test("an existing output file: exit 6, file untouched")
    func existingFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let path = scratch.file("keep.txt")
            try Data("keep".utf8).write(to: URL(fileURLWithPath: path))
            let result = try await Binary.run(["get", server.url(), "-o", path])
            #expect(result.status == 6)
            #expect(result.standardError.contains("--overwrite"))
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep")
            #expect(scratch.contents() == ["keep.txt"])
        }
    }

    @Test("a 404: exit 3, no file")
    func notFound() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let result = try await Binary.run(["get", server.url("/status/404"), "-o", scratch.file("x"), "-q"])
            #expect(result.status == 3)
            #expect(result.standardError.contains("404"))
            #expect(scratch.contents().isEmpty)
        }
    }

    @Test("connection refused: exit 4 after the tries")
    func refused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let result = try await Binary.run([
            "get", refusing.url(), "-o", scratch.file("x"), "--max-tries", "2", "--retry-wait", "0.01",
        ])
        #expect(result.status == 4, "\(result.standardError)")
        #expect(result.standardError.contains("refused the connection"), "\(result.standardError)")
        #expect(scratch.contents().isEmpty)
    }

    @Test("a lying server: exit 5, nothing left")
    func lyingServer() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(
            content: Self.content,
            faults: [.wrongContentRange(fromRequest: 1)]
        ) { server in
            let result = try await Binary.run(["get", server.url(), "-o", scratch.file("x"), "-q"])
            #expect(result.status == 5, "\(result.standardError)")
            #expect(scratch.contents().isEmpty)
        }
    }
}
