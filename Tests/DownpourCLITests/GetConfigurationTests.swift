import DownpourTestSupport
import Foundation
import Testing

/// `downpour get` with an aria2 user's setup: the configuration file (`--conf-path`, the XDG default, `--no-conf`),
/// aria2's spellings on the command line, and the hooks.
@Suite("downpour get takes aria2's configuration file and hooks", .timeLimit(.minutes(10)))
struct GetConfigurationTests {
    static let content = makeTestContent(count: 256 * 1024 + 3, seed: 27)

    /// A hook that records the moment it stands for and its three arguments in `log`.
    static func recordingHook(_ moment: String, log: String, in scratch: Scratch) throws -> String {
        try scratch.recordingHook("hook-\(moment).sh", log: log, prefix: moment + "|")
    }

    /// The lines of `log` once it has `count` of them (hooks are not waited for).
    static func lines(of log: String, count: Int) async throws -> [String] {
        func lines() -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        try await waitUntil("\(count) lines in \(log)") { lines().count >= count }
        return lines()
    }

    @Test("--conf-path: the file's options apply, the command line wins by name, unknown ones are named once")
    func configurationFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let configuration = scratch.file("aria2.conf")
            try """
            # an aria2 user's file
            header=X-From-File: yes
            user-agent=from-the-file
            max-connection-per-server=2
            bt-max-peers=55
            rpc-secret=not-for-get
            input-file=/nonexistent/the-daemons-session
            disk-cache=32M
            bt-max-peers=56

            """.write(toFile: configuration, atomically: true, encoding: .utf8)
            let result = try await Binary.run(
                [
                    "get", "--conf-path", configuration, server.url(), "-d", scratch.path, "-o", "out.bin", "--quiet",
                    "--user-agent=from-the-command-line",
                ]
            )
            #expect(result.status == 0, "\(result.standardError)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.file("out.bin"))) == Data(Self.content))
            // One notice, each unknown name once; the daemon's own options (its session as input-file too) are passed
            // over quietly.
            #expect(
                result.standardError == "downpour: \(configuration): ignoring options Downpour does not have: "
                    + "bt-max-peers, disk-cache\n"
            )
            let gets = server.statistics().requests.filter { $0.method == "GET" }
            #expect(!gets.isEmpty)
            for request in gets {
                #expect(request.header("X-From-File") == "yes")
                #expect(request.header("User-Agent") == "from-the-command-line")
            }
        }
    }

    @Test("$XDG_CONFIG_HOME/downpour/downpour.conf is read without --conf-path; --no-conf skips it")
    func defaultFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            try FileManager.default.createDirectory(
                atPath: scratch.file("config/downpour"),
                withIntermediateDirectories: true
            )
            try "user-agent=from-xdg\n".write(
                toFile: scratch.file("config/downpour/downpour.conf"),
                atomically: true,
                encoding: .utf8
            )
            let environment = ["XDG_CONFIG_HOME": scratch.file("config")]
            let first = try await Binary.run(
                ["get", server.url(), "-o", scratch.file("a.bin"), "-q"],
                environment: environment
            )
            #expect(first.status == 0, "\(first.standardError)")
            let second = try await Binary.run(
                ["get", "--no-conf", server.url(), "-o", scratch.file("b.bin"), "-q"],
                environment: environment
            )
            #expect(second.status == 0, "\(second.standardError)")
            let agents = server.statistics().requests.map { $0.header("User-Agent") ?? "" }
            #expect(agents.contains("from-xdg"))
            #expect(agents.contains { $0.hasPrefix("downpour/") })
            #expect(Set(agents).count == 2, "\(agents)")
        }
    }

    @Test("a bad value in the configuration file is a usage error naming the file and the line; nothing is fetched")
    func badValue() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let configuration = scratch.file("bad.conf")
            try "dir=\(scratch.path)\n\nsplit=many\n".write(toFile: configuration, atomically: true, encoding: .utf8)
            let result = try await Binary.run(["get", "--conf-path", configuration, server.url()])
            #expect(result.status == 2)
            #expect(result.standardError.contains("\(configuration): line 3:"), "\(result.standardError)")
            #expect(result.standardError.contains("'split'"))
            #expect(server.statistics().requests.isEmpty)
            #expect(scratch.contents() == ["bad.conf"])
        }
    }

    @Test("aria2's spellings: -s, -x8, -k, -m, -c alone, -o inside -d; the old ones (--connections, --overwrite) too")
    func spellings() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let aria2Style = try await Binary.run(
                [
                    "get", "-x8", "-s", "8", "-k", "1M", "-m", "3", "-c", server.url(), "-d", scratch.path, "-o",
                    "sub/a.bin", "-q",
                ]
            )
            #expect(aria2Style.status == 0, "\(aria2Style.standardError)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.file("sub/a.bin"))) == Data(Self.content))
            let old = try await Binary.run(
                [
                    "get", "--connections", "2", "--overwrite", server.url(), "--output", scratch.file("sub/a.bin"),
                    "--quiet",
                ]
            )
            #expect(old.status == 0, "\(old.standardError)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.file("sub/a.bin"))) == Data(Self.content))
        }
    }

    @Test("hooks: start and complete with the GID, 1 and the path; a failure runs on-download-error; no shell")
    func hooks() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let log = scratch.file("hooks.log")
            let start = try Self.recordingHook("start", log: log, in: scratch)
            let complete = try Self.recordingHook("complete", log: log, in: scratch)
            let error = try Self.recordingHook("error", log: log, in: scratch)
            // A file name a shell would run: the hook gets it as one argument, and nothing runs it.
            let hostile = "x;touch pwned;y.bin"
            let result = try await Binary.run(
                [
                    "get", server.url(), "-d", scratch.path, "-o", hostile, "-q", "--on-download-start=\(start)",
                    "--on-download-complete", complete, "--on-download-error=\(error)",
                ],
                in: scratch.path
            )
            #expect(result.status == 0, "\(result.standardError)")
            let lines = try await Self.lines(of: log, count: 2).sorted()
            #expect(lines.count == 2)
            let fields = lines.map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
            #expect(fields.map { $0[0] } == ["complete", "start"])
            #expect(fields.allSatisfy { $0.count == 4 && $0[2] == "1" && $0[3] == scratch.file(hostile) })
            #expect(fields[0][1].count == 16 && fields[0][1] == fields[1][1], "one GID for one download: \(lines)")
            #expect(!FileManager.default.fileExists(atPath: scratch.file("pwned")))

            // A 404: the error hook.
            let failed = try await Binary.run(
                ["get", server.url("/status/404"), "-d", scratch.path, "-q", "-m", "1", "--on-download-error=\(error)"]
            )
            #expect(failed.status == 3, "\(failed.standardError)")
            let after = try await Self.lines(of: log, count: 3)
            #expect(after.contains { $0.hasPrefix("error|") })
        }
    }

    @Test(
        "hooks in a batch (-i): each download its own GID; a hook named without a path is found in PATH; one that fails changes nothing"
    )
    func batchHooks() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            let log = scratch.file("hooks.log")
            let complete = try Self.recordingHook("complete", log: log, in: scratch)
            let failing = try scratch.script("failing.sh", "exit 3")
            let input = scratch.file("list.txt")
            try "\(server.url("/a.bin"))\n\(server.url("/b.bin"))\n\(server.url("/c.bin"))\n".write(
                toFile: input,
                atomically: true,
                encoding: .utf8
            )
            // The complete hook by its name alone, found in PATH as aria2 finds it.
            let path = scratch.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            let result = try await Binary.run(
                [
                    "get", "-i", input, "-d", scratch.file("out"), "-q",
                    "--on-download-complete=\((complete as NSString).lastPathComponent)",
                    "--on-download-start=\(failing)",
                ],
                environment: ["PATH": path]
            )
            #expect(result.status == 0, "\(result.standardError)")
            let lines = try await Self.lines(of: log, count: 3)
            let gids = Set(lines.map { $0.split(separator: "|")[1] })
            #expect(gids.count == 3)
            let paths = Set(lines.map { String($0.split(separator: "|")[3]) })
            #expect(paths == Set(["a.bin", "b.bin", "c.bin"].map { scratch.file("out/\($0)") }))
        }
    }
}
