import Downpour
import DownpourAria2
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

    /// This process's environment without its proxy variables (the tests talk to servers on 127.0.0.1) and with a
    /// configuration directory that does not exist (a developer's own `downpour.conf` must not change a test),
    /// plus `extra`.
    static func environment(adding extra: [String: String] = [:]) -> [String: String] {
        let proxyVariables = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]
        return ProcessInfo.processInfo.environment.filter { !proxyVariables.contains($0.key.lowercased()) }
            .merging(["XDG_CONFIG_HOME": "/nonexistent/downpour-tests"]) { $1 }
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

    /// A shell script `name` here, executable, running `body`; its path.
    func script(_ name: String, _ body: String) throws -> String {
        let path = self.file(name)
        try "#!/bin/sh\n\(body)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    /// A hook that appends its three arguments to `log`, `|`-separated, after `prefix`.
    func recordingHook(_ name: String, log: String, prefix: String = "") throws -> String {
        try self.script(name, "printf '\(prefix)%s|%s|%s\\n' \"$1\" \"$2\" \"$3\" >> '\(log)'")
    }
    func contents() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: self.path)) ?? []).sorted() }
    func remove() { try? FileManager.default.removeItem(atPath: self.path) }
}

@Suite("The downpour command", .timeLimit(.minutes(10)))
struct CLITests {
    static let content = makeTestContent(count: 2 * 1024 * 1024 + 7, seed: 11)

    /// The entries of the "Options:" list of a help text (the table's options): each option's names, and its
    /// description.
    static func tableEntries(inHelp help: String) -> [(option: String, description: String)] {
        var entries: [(option: String, description: String)] = []
        var inOptions = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") {
                inOptions = line == "Options:"
                continue
            }
            guard inOptions else { continue }
            if line.hasPrefix("  -") {
                entries.append((line.trimmingCharacters(in: .whitespaces), ""))
            } else if line.hasPrefix("      "), !entries.isEmpty {
                entries[entries.count - 1].description += line.trimmingCharacters(in: .whitespaces) + " "
            }
        }
        return entries
    }

    @Test("--help lists every option of the table that get takes, each with its names and a description")
    func help() async throws {
        let root = try await Binary.run(["--help"])
        #expect(root.status == 0)
        #expect(root.standardOutput.contains("get"))
        #expect(root.standardOutput.contains("Exit codes"))
        let get = try await Binary.run(["get", "--help"])
        #expect(get.status == 0)
        let entries = Self.tableEntries(inHelp: get.standardOutput)
        let expected = Aria2Option.all.filter { $0.commands.contains(.get) }.map { option in
            (option.short.map { "-\($0), " } ?? "") + "--\(option.name)=<\(option.valueName)>"
        }
        #expect(entries.map(\.option) == expected, "\(get.standardOutput)")
        for entry in entries {
            #expect(!entry.description.isEmpty, "\(entry.option) has no description")
        }
        // Downpour's earlier spellings are named with the options they stand for.
        for alias in ["--connections", "--overwrite", "--insecure", "--no-resume", "--lowest-speed", "--output"] {
            #expect(get.standardOutput.contains(alias), "\(alias)")
        }
        // Lines fit a terminal of 80 columns, so the help does not re-wrap them.
        #expect(get.standardOutput.split(separator: "\n").allSatisfy { $0.count <= 80 })
        let daemon = try await Binary.run(["daemon", "--help"])
        let daemonEntries = Self.tableEntries(inHelp: daemon.standardOutput)
        #expect(daemonEntries.contains { $0.option == "--rpc-listen-port=<port>" })
        #expect(!daemonEntries.contains { $0.option.contains("--load-cookies") })
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
            ["--timeout", "0"], ["--header", "no-colon"], ["--continue=maybe"], ["--slow-window", "0"],
            ["--rpc-secret=s"], ["--lowest-speed", "fast"], ["--bogus"], ["--insecure=true"], ["--split"],
            ["--gid=0123456789abcdef"], ["-Z"],
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

    @Test("connection refused: exit 4 at once, no retry (a retry would wait 10 minutes, past the suite's limit)")
    func refused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let result = try await Binary.run([
            "get", refusing.url(), "-o", scratch.file("x"), "--max-tries", "5", "--retry-wait", "600", "--verbose",
        ])
        #expect(result.status == 4, "\(result.standardError)")
        #expect(result.standardError.contains("refused the connection"), "\(result.standardError)")
        #expect(!result.standardError.contains("retrying"), "\(result.standardError)")
        #expect(scratch.contents().isEmpty)
    }

    @Test("--retry-on-refused (curl's --retry-connrefused): a refused connection is tried again, then exit 4")
    func refusedRetriedWhenAsked() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        for flag in ["--retry-on-refused", "--retry-connrefused"] {
            let result = try await Binary.run([
                "get", refusing.url(), "-o", scratch.file("x"), "--max-tries", "2", "--retry-wait", "0.01", "--verbose",
                flag,
            ])
            #expect(result.status == 4, "\(result.standardError)")
            #expect(result.standardError.contains("Probe failed, retrying"), "\(flag): \(result.standardError)")
        }
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
