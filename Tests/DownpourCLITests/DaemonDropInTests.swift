import AsyncHTTPClient
import DownpourTestSupport
import Foundation
import Testing

/// An aria2 user's setup, brought to `downpour daemon` as it is: the configuration file (with options Downpour does
/// not have), a session file aria2 wrote, `save-session`, a hook, and a file that is already there.
@Suite("The daemon takes an aria2 user's configuration, session and hooks", .timeLimit(.minutes(10)))
struct DaemonDropInTests {
    static let content = makeTestContent(count: 300 * 1024, seed: 26)

    @Test("aria2.conf with input-file, save-session, on-download-complete and continue=true starts the daemon")
    func aria2Setup() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await RangeTestServer.withServer(content: Self.content) { server in
            try await withHTTPClient { client in
                let downloads = scratch.file("downloads")
                try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
                let theirs = Data("a file of the user's".utf8)
                try theirs.write(to: URL(fileURLWithPath: downloads + "/b.bin"))
                let hookLog = scratch.file("hooks.log")
                let hook = try scratch.recordingHook("hook.sh", log: hookLog)
                let session = scratch.file("aria2.session")
                // As aria2c writes it: URIs each followed by a TAB, then the GID, pause and the download's options.
                try """
                \(server.url("/a.bin"))\t
                 gid=2089b05ecca3d829
                 pause=true
                 split=2
                \(server.url("/b.bin"))\t
                 gid=d2703803b52216d1
                 out=b.bin

                """.write(toFile: session, atomically: true, encoding: .utf8)
                let configuration = scratch.file("aria2.conf")
                try """
                # an aria2 user's file
                enable-rpc=true
                rpc-listen-port=1
                dir=\(downloads)
                continue=true
                input-file=\(session)
                save-session=\(session)
                on-download-complete=\(hook)
                max-connection-per-server=2
                bt-max-peers=55
                disk-cache=32M

                """.write(toFile: configuration, atomically: true, encoding: .utf8)
                let arguments = ["--conf-path", configuration, "--state-dir", scratch.file("state")]
                // The command line (`--rpc-listen-port 0`) wins over the file's port.
                var daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
                #expect(
                    daemon.standardError.contains("ignoring options Downpour does not have: bt-max-peers, disk-cache")
                )
                var rpc = RPCClient(url: daemon.url, secret: nil, client: client)
                let paused = try await rpc.statuses("aria2.tellWaiting", [0, 10, ["gid", "status"]])
                #expect(paused.map { $0["gid"] as? String } == ["2089b05ecca3d829"])
                #expect(paused.first?["status"] as? String == "paused")

                // The session's other download: the user's b.bin stays, the download is saved as b.1.bin.
                let done = try await eventually("the download to stop") { () async throws -> [String: Any]? in
                    let status = try await rpc.call("aria2.tellStatus", ["d2703803b52216d1"]) as? [String: Any] ?? [:]
                    return ["complete", "error"].contains(status["status"] as? String ?? "") ? status : nil
                }
                #expect(done["status"] as? String == "complete", "\(done)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: downloads + "/b.bin")) == theirs)
                #expect(try sha256Hex(ofFileAt: downloads + "/b.1.bin") == sha256Hex(Self.content))
                let line = try await eventually("the hook") { () -> String? in
                    let text = (try? String(contentsOfFile: hookLog, encoding: .utf8)) ?? ""
                    return text.isEmpty ? nil : text
                }
                #expect(line == "d2703803b52216d1|1|\(downloads)/b.1.bin\n")

                // aria2's getOption: the effective options, `dir` among them, the file's over the defaults.
                let options = try await rpc.call("aria2.getOption", ["2089b05ecca3d829"]) as? [String: String] ?? [:]
                #expect(options["dir"] == downloads)
                #expect(options["split"] == "2")
                #expect(options["max-connection-per-server"] == "2")
                #expect(options["continue"] == "true")
                #expect(options["auto-file-renaming"] == "true")
                let globals = try await rpc.call("aria2.getGlobalOption") as? [String: String] ?? [:]
                #expect(globals["save-session"] == session)
                #expect(globals["on-download-complete"] == hook)

                // At exit the session is written in aria2's form: the paused one; the completed one is not kept.
                #expect(await daemon.stop() == 0, "\(daemon.standardError)")
                let saved = try String(contentsOfFile: session, encoding: .utf8)
                #expect(saved == "\(server.url("/a.bin"))\t\n gid=2089b05ecca3d829\n pause=true\n split=2\n")

                // Started again with the same file, nothing is added twice: the queue has it already.
                daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
                rpc = RPCClient(url: daemon.url, secret: nil, client: client)
                let again = try await rpc.statuses("aria2.tellWaiting", [0, 10, ["gid"]])
                #expect(again.map { $0["gid"] as? String } == ["2089b05ecca3d829"])
                let stopped = try await rpc.statuses("aria2.tellStopped", [0, 10, ["gid"]])
                #expect(stopped.map { $0["gid"] as? String } == ["d2703803b52216d1"])
                #expect(try await rpc.string("aria2.saveSession") == "OK")
                #expect(await daemon.stop() == 0, "\(daemon.standardError)")
            }
        }
    }

    @Test("a bad value in the configuration file names the file and the line; nothing starts")
    func badValue() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let configuration = scratch.file("aria2.conf")
        try "dir=/tmp\n# fine so far\nsplit=lots\n".write(toFile: configuration, atomically: true, encoding: .utf8)
        let child = try ChildProcess(
            executable: Binary.path,
            arguments: ["daemon", "--conf-path", configuration, "--state-dir", scratch.file("state")],
            environment: Binary.environment(),
            standardOutput: scratch.file("out"),
            standardError: scratch.file("err")
        )
        let status = await child.wait(limit: .seconds(60))
        #expect(status == 2)
        let errors = try String(contentsOfFile: scratch.file("err"), encoding: .utf8)
        #expect(errors.contains("\(configuration): line 3: The option 'split' takes"), "\(errors)")
    }
}
