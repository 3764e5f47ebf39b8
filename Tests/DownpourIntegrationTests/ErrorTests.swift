import Downpour
import DownpourTestSupport
import Foundation
import Testing

@Suite("Errors lose nothing", .timeLimit(.minutes(10)))
struct ErrorTests {
    static let content = makeTestContent(count: 256 * 1024, seed: 3)

    @Test("404 is an HTTP error after one request and creates no file; max-file-not-found asks that many times")
    func notFound() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let outcome = try await runDownload(server.url("/status/404"), to: .file(directory.file("x.bin")))
            #expect(outcome.error?.code == .httpStatus)
            #expect(outcome.error?.httpStatus == 404)
            #expect(server.statistics().requests.count == 1)
            expectNothingLeft(in: directory)

            var configuration = testConfiguration()
            configuration.retry.fileNotFoundTries = 3
            let again = try await runDownload(
                server.url("/status/410"),
                to: .file(directory.file("y.bin")),
                configuration: configuration
            )
            #expect(again.error?.httpStatus == 410)
            #expect(server.statistics().requests.filter { $0.uri.hasPrefix("/status/410") }.count == 3)
            expectNothingLeft(in: directory)
        }
    }

    @Test("an existing output file is left alone; --overwrite replaces it")
    func existingOutput() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("mine.txt")
        let precious = Array("my precious data".utf8)
        _ = FileManager.default.createFile(atPath: path, contents: Data(precious))
        try await withServer(content: Self.content) { server in
            let outcome = try await runDownload(server.url(), to: .file(path))
            #expect(outcome.error?.code == .outputExists)
            // The library names no command-line flags; the CLI adds its own remedy.
            #expect(outcome.error?.message.contains("--") == false)
            #expect(outcome.error?.message.contains("exists already") == true)
            #expect(server.statistics().requests.isEmpty, "no traffic before refusing")
            try expectFile(path, equals: precious, in: directory)

            var configuration = testConfiguration()
            configuration.overwrite = true
            _ = try await runDownload(server.url(), to: .file(path), configuration: configuration).value
            try expectFile(path, equals: Self.content, in: directory)
        }
    }

    @Test("auto-file-renaming: an existing file is kept and the download saved as NAME.1.EXT, then NAME.2.EXT")
    func renamesExisting() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let precious = Array("my precious data".utf8)
        for name in ["f.tar.gz", "plain"] {
            _ = FileManager.default.createFile(atPath: directory.file(name), contents: Data(precious))
        }
        try await withServer(content: Self.content) { server in
            var configuration = testConfiguration()
            configuration.renamesExisting = true
            // `continue` (resume) is on: a file without a journal is still not taken as a partial download.
            configuration.resume = true
            let first = try await runDownload(
                server.url(),
                to: .named("f.tar.gz", in: directory.path),
                configuration: configuration
            ).value
            #expect(first.path == directory.file("f.tar.1.gz"))
            let second = try await runDownload(
                server.url(),
                to: .named("f.tar.gz", in: directory.path),
                configuration: configuration
            ).value
            #expect(second.path == directory.file("f.tar.2.gz"))
            let plain = try await runDownload(
                server.url(),
                to: .file(directory.file("plain")),
                configuration: configuration
            )
            .value
            #expect(plain.path == directory.file("plain.1"))
            for name in ["f.tar.gz", "plain"] {
                #expect(try sha256Hex(ofFileAt: directory.file(name)) == sha256Hex(precious), "\(name) changed")
            }
            for name in ["f.tar.1.gz", "f.tar.2.gz", "plain.1"] {
                #expect(try sha256Hex(ofFileAt: directory.file(name)) == sha256Hex(Self.content), "\(name)")
            }
            #expect(directory.contents().sorted() == ["f.tar.1.gz", "f.tar.2.gz", "f.tar.gz", "plain", "plain.1"])
            // Without it, the file stays in the way, as before.
            configuration.renamesExisting = false
            let refused = try await runDownload(
                server.url(),
                to: .file(directory.file("plain")),
                configuration: configuration
            )
            #expect(refused.error?.code == .outputExists)
        }
    }

    @Test(
        "a file finished by an earlier run with the same finish mark is taken as complete; another mark, or none, is in the way"
    )
    func finishMark() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("marked.bin")
        try await withServer(content: Self.content) { server in
            func run(mark: String?) async throws -> DownloadOutcome {
                var request = try DownloadRequest(
                    url: server.url(),
                    destination: .file(path),
                    configuration: testConfiguration()
                )
                request.finishMark = mark
                return try await retryingWhileLocked { await collect(testDownloader.download(request)) }
            }
            let first = try await run(mark: "gid-1")
            #expect(first.error == nil)
            try expectFile(path, equals: Self.content, in: directory)
            let before = server.statistics().requests.count
            // The same mark: complete at once, from the probe alone.
            let again = try await run(mark: "gid-1")
            #expect(again.error == nil)
            #expect(try again.value.wasSkipped)
            #expect(server.statistics().requests.count - before == 1)
            // Another download's mark, or none: the file is in the way, untouched.
            #expect(try await run(mark: "gid-2").error?.code == .outputExists)
            #expect(try await run(mark: nil).error?.code == .outputExists)
            try expectFile(path, equals: Self.content, in: directory)
            // A file of the right name that the mark is not on (someone else's) stays in the way too.
            let theirs = directory.file("theirs.bin")
            _ = FileManager.default.createFile(atPath: theirs, contents: Data(Self.content))
            var request = try DownloadRequest(
                url: server.url(),
                destination: .file(theirs),
                configuration: testConfiguration()
            )
            request.finishMark = "gid-1"
            #expect(await collect(testDownloader.download(request)).error?.code == .outputExists)
        }
    }

    @Test("an existing file under the server's suggested name is left alone too")
    func existingSuggestedName() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let precious = Array("keep me".utf8)
        _ = FileManager.default.createFile(atPath: directory.file("file.bin"), contents: Data(precious))
        try await withServer(content: Self.content) { server in
            let outcome = try await runDownload(server.url(), to: .directory(directory.path))
            #expect(outcome.error?.code == .outputExists)
            try expectFile(directory.file("file.bin"), equals: precious, in: directory)
        }
    }

    @Test("a refused connection to a host never reached is a network error at once (a retry would wait an hour)")
    func connectionRefused() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        var configuration = testConfiguration()
        configuration.retry = .init(maximumTries: 5, wait: .seconds(3600), maximumWait: .seconds(3600))
        let outcome = try await runDownload(
            refusing.url(),
            to: .file(directory.file("x.bin")),
            configuration: configuration
        )
        #expect(outcome.error?.code == .network, "\(String(describing: outcome.error))")
        #expect(outcome.error?.message.contains("refused the connection") == true)
        expectNothingLeft(in: directory)
    }

    @Test(
        "a length no disk can hold is named as such, before a byte is reserved or asked again",
        arguments: [("1000000000000000000", DownloadError.Code.localIO), ("100000000000000000000", .remoteMisbehaved)]
    )
    func impossibleLength(claimed: String, code: DownloadError.Code) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content, faults: [.claimLength(claimed)]) { server in
            let outcome = try await runDownload(server.url(), to: .file(directory.file("x.bin")))
            let message = outcome.error?.message ?? ""
            #expect(outcome.error?.code == code, "\(message)")
            #expect(message.contains("the file is \(claimed) bytes"), "\(message)")
            #expect(!message.contains("Content-Range"), "\(message)")
            #expect(server.statistics().getRequestsRecorded.count == 1, "only the probe asked")
            expectNothingLeft(in: directory)
        }
    }

    @Test("a missing output directory is a local I/O error")
    func missingDirectory() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let outcome = try await runDownload(server.url(), to: .file(directory.file("no/such/dir/x.bin")))
            #expect(outcome.error?.code == .localIO)
            #expect(outcome.error?.message.contains("No such file or directory") == true)
        }
    }

    @Test("credentials are not sent to another origin after a redirect")
    func credentialsStayHome() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { other in
            try await withServer(content: Self.content) { origin in
                let target = other.url("/file.bin").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                var configuration = testConfiguration()
                configuration.headers = [
                    HTTPHeaderField(name: "Authorization", value: "Bearer secret"),
                    HTTPHeaderField(name: "X-Trace", value: "kept"),
                ]
                let path = directory.file("moved.bin")
                _ = try await runDownload(
                    origin.url("/redirect-to?url=\(target)"),
                    to: .file(path),
                    configuration: configuration
                ).value
                try expectFile(path, equals: Self.content, in: directory)
                #expect(origin.statistics().requests.first?.header("Authorization") == "Bearer secret")
                let elsewhere = other.statistics().requests
                #expect(!elsewhere.isEmpty)
                for request in elsewhere {
                    #expect(request.header("Authorization") == nil, "credentials leaked to another origin")
                    #expect(request.header("X-Trace") == "kept")
                }
            }
        }
    }

    @Test("user:password in the URL becomes Basic authorization, not part of the request line")
    func urlCredentials() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        try await withServer(content: Self.content) { server in
            let url = server.url().replacingOccurrences(of: "http://", with: "http://user:p%40ss@")
            let path = directory.file("auth.bin")
            _ = try await runDownload(url, to: .file(path)).value
            try expectFile(path, equals: Self.content, in: directory)
            let expected = "Basic " + Data("user:p@ss".utf8).base64EncodedString()
            for request in server.statistics().requests {
                #expect(request.header("Authorization") == expected)
            }
        }
    }
}
