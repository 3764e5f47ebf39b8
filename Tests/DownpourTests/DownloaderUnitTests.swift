import DownpourTestSupport
import Foundation
import NIOCore
import Testing

@testable import Downpour
@testable import DownpourAria2

#if canImport(Glibc)
import Glibc
#endif

@Suite("Connection budget")
struct ConnectionBudgetTests {
    enum Step: Sendable, CustomStringConvertible {
        case acquire(String, id: Int, granted: Bool)
        case release(String, grants: [Int])
        case cancel(id: Int, wasWaiting: Bool)
        case limits(total: Int, perHost: Int, grants: [Int])
        case move(from: String, to: String, moved: Bool, grants: [Int])

        var description: String {
            switch self {
            case .acquire(let host, let id, let granted): "acquire \(host) #\(id) → \(granted)"
            case .release(let host, let grants): "release \(host) → \(grants)"
            case .cancel(let id, let was): "cancel #\(id) → \(was)"
            case .limits(let total, let perHost, let grants): "limits \(total)/\(perHost) → \(grants)"
            case .move(let from, let to, let moved, let grants): "move \(from) → \(to): \(moved), \(grants)"
            }
        }
    }

    static let tables: [(String, total: Int, perHost: Int, [Step])] = [
        (
            "per-host limit, FIFO within a host", 10, 2,
            [
                .acquire("a", id: 1, granted: true), .acquire("a", id: 2, granted: true),
                .acquire("a", id: 3, granted: false), .acquire("a", id: 4, granted: false),
                .release("a", grants: [3]), .release("a", grants: [4]),
            ]
        ),
        (
            "a full host never holds up another host", 10, 1,
            [
                .acquire("a", id: 1, granted: true), .acquire("a", id: 2, granted: false),
                .acquire("b", id: 3, granted: true), .release("b", grants: []), .release("a", grants: [2]),
            ]
        ),
        (
            "the total limit across hosts, first come first served", 2, 5,
            [
                .acquire("a", id: 1, granted: true), .acquire("b", id: 2, granted: true),
                .acquire("c", id: 3, granted: false), .acquire("a", id: 4, granted: false),
                .release("b", grants: [3]), .release("c", grants: [4]),
            ]
        ),
        (
            "a cancelled waiter is skipped", 1, 1,
            [
                .acquire("a", id: 1, granted: true), .acquire("a", id: 2, granted: false),
                .acquire("a", id: 3, granted: false), .cancel(id: 2, wasWaiting: true),
                .cancel(id: 1, wasWaiting: false), .release("a", grants: [3]),
            ]
        ),
        (
            "raising the limits grants waiters at once; lowering keeps open ones", 1, 1,
            [
                .acquire("a", id: 1, granted: true), .acquire("a", id: 2, granted: false),
                .acquire("b", id: 3, granted: false), .limits(total: 3, perHost: 2, grants: [2, 3]),
                .limits(total: 1, perHost: 1, grants: []), .acquire("c", id: 4, granted: false),
                .release("a", grants: []), .release("a", grants: []), .release("b", grants: [4]),
            ]
        ),
        (
            // The probe's permit follows its response to the host a redirect led to.
            "a permit moves to a host with room, freeing its own", 2, 1,
            [
                .acquire("a", id: 1, granted: true), .acquire("a", id: 2, granted: false),
                .move(from: "a", to: "a", moved: true, grants: []),
                .move(from: "a", to: "b", moved: true, grants: [2]),
                .move(from: "b", to: "a", moved: false, grants: []),
                .acquire("c", id: 3, granted: false), .move(from: "b", to: "c", moved: false, grants: []),
                .move(from: "x", to: "d", moved: false, grants: []),
                .release("b", grants: [3]),
            ]
        ),
    ]

    @Test("event → grant tables", arguments: tables)
    func table(_ table: (String, total: Int, perHost: Int, [Step])) {
        var state = ConnectionBudgetState(total: table.total, perHost: table.perHost)
        for step in table.3 {
            switch step {
            case .acquire(let host, let id, let granted):
                #expect(state.acquire(host: host, id: id) == granted, "\(table.0): \(step)")
            case .release(let host, let grants):
                #expect(state.release(host: host) == grants, "\(table.0): \(step)")
            case .cancel(let id, let wasWaiting):
                #expect(state.cancel(id: id) == wasWaiting, "\(table.0): \(step)")
            case .limits(let total, let perHost, let grants):
                #expect(state.setLimits(total: total, perHost: perHost) == grants, "\(table.0): \(step)")
            case .move(let from, let to, let moved, let grants):
                #expect(state.move(from: from, to: to) == (moved, grants), "\(table.0): \(step)")
            }
            #expect(state.inUseTotal <= max(state.total, state.inUseTotal), "\(table.0): \(step)")
            #expect(state.inUseTotal == state.inUse.values.reduce(0, +), "\(table.0): \(step)")
        }
    }

    @Test("a waiting task gets its permit when another is released, and cancellation stops the wait")
    func asyncBudget() async throws {
        let budget = ConnectionBudget(total: 1, perHost: 1)
        try await budget.acquire(host: "h")
        let waiter = Task { try await budget.acquire(host: "h") }
        try await waitUntil("the waiter to queue") { !budget.state.waiting.isEmpty }
        budget.release(host: "h")
        try await waiter.value
        #expect(budget.state.inUseTotal == 1)

        let cancelled = Task { try await budget.acquire(host: "h") }
        try await waitUntil("the second waiter to queue") { !budget.state.waiting.isEmpty }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(budget.state.waiting.isEmpty)
        budget.release(host: "h")
        #expect(budget.state.inUseTotal == 0)
    }
}

@Suite("aria2 options, download IDs, stored requests")
struct Aria2DownloadSettingsTests {
    @Test("options by aria2's names become a request")
    func options() throws {
        var options = Aria2DownloadSettings(directory: "base")
        for (name, value) in [
            ("dir", "sub/dir"), ("out", "name.iso"), ("header", "X-A: 1"), ("header", "X-B: 2"), ("split", "8"),
            ("min-split-size", "2M"), ("max-download-limit", "10M"), ("user-agent", "ua/1"), ("max-tries", "9"),
            ("retry-wait", "1.5"), ("timeout", "7"), ("allow-overwrite", "true"), ("continue", "false"),
        ] {
            try options.apply(name: name, value: value)
        }
        let request = try options.request(uris: ["http://127.0.0.1:8080/x.iso"])
        #expect(request.destination == .named("name.iso", in: "sub/dir"))
        let configuration = request.configuration
        #expect(configuration.headers.map(\.name) == ["X-A", "X-B"])
        #expect(configuration.connections == 8)
        #expect(configuration.minimumSplitSize == 2 * 1024 * 1024)
        #expect(configuration.maximumRate == Int64(10 * 1024 * 1024))
        #expect(configuration.userAgent == "ua/1")
        #expect(configuration.retry.maximumTries == 9)
        #expect(configuration.retry.wait == .milliseconds(1500))
        #expect(configuration.timeouts == .init(connect: .seconds(7), idleRead: .seconds(7)))
        #expect(configuration.overwrite)
        #expect(!configuration.resume)
    }

    @Test(
        "bad names and values are errors that name the option",
        arguments: [
            ("no-such-option", "1"), ("split", "0"), ("split", "65"), ("split", "x"), ("min-split-size", "1"),
            ("max-download-limit", "fast"), ("header", "no colon"), ("allow-overwrite", "yes"), ("timeout", "0"),
            ("out", "../escape"), ("out", "/etc/passwd"), ("out", "a/../../b"), ("out", ""), ("dir", ""),
        ]
    )
    func badOptions(_ option: (String, String)) {
        var options = Aria2DownloadSettings()
        #expect {
            try options.apply(name: option.0, value: option.1)
        } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .invalidRequest && error.message.contains("'\(option.0)'")
        }
    }

    @Test("no out: the directory, under the server's or the URL's name; several URLs are mirrors")
    func destinations() throws {
        let request = try Aria2DownloadSettings(directory: "d").request(uris: ["http://127.0.0.1/f"])
        #expect(request.destination == .directory("d"))
        #expect(request.mirrors.isEmpty)
        let mirrored = try Aria2DownloadSettings().request(uris: ["http://127.0.0.1/a", "http://127.0.0.1/b"])
        #expect(mirrored.mirrors == [URL(string: "http://127.0.0.1/b")!])
        #expect(throws: DownloadError.self) { try Aria2DownloadSettings().request(uris: []) }
    }

    @Test("download IDs: 16 lowercase hex digits, parsed back, nothing else accepted")
    func ids() throws {
        var seen = Set<DownloadID>()
        for _ in 0..<100 {
            let id = DownloadID()
            #expect(id.description.count == 16)
            #expect(id.description.allSatisfy { $0.isHexDigit && !$0.isUppercase })
            #expect(DownloadID(id.description) == id)
            seen.insert(id)
        }
        #expect(seen.count == 100)
        #expect(DownloadID(value: 1).description == "0000000000000001")
        for bad in ["", "123", "00000000000000001", "000000000000000g", "+000000000000001", "-000000000000001"] {
            #expect(DownloadID(bad) == nil, "\(bad)")
        }
        let data = try JSONEncoder().encode([DownloadID(value: 0xabc)])
        #expect(String(decoding: data, as: UTF8.self) == #"["0000000000000abc"]"#)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([DownloadID].self, from: Data(#"["xyz"]"#.utf8))
        }
    }

    @Test("a request survives a JSON round trip; a stored bad URL is refused")
    func codable() throws {
        var configuration = DownloadConfiguration(connections: 7, maximumRate: 1000)
        configuration.headers = [HTTPHeaderField(name: "X-Y", value: "z")]
        configuration.slowConnections.lowestSpeed = 10
        let request = try DownloadRequest(
            url: "https://127.0.0.1/a.iso",
            destination: .file("a.iso"),
            configuration: configuration
        )
        let decoded = try JSONDecoder().decode(DownloadRequest.self, from: try JSONEncoder().encode(request))
        #expect(decoded == request)

        // Stored by an older version: missing options keep their defaults.
        let old =
            #"{"url":"https://127.0.0.1/a","destination":{"directory":{"_0":"."}},"configuration":{"connections":3}}"#
        let restored = try JSONDecoder().decode(DownloadRequest.self, from: Data(old.utf8))
        var expected = DownloadConfiguration()
        expected.connections = 3
        #expect(restored.configuration == expected)
        // Every field is written, and read back.
        let keys =
            try JSONSerialization.jsonObject(with: try JSONEncoder().encode(DownloadConfiguration())) as? [String: Any]
        let optionalFields: Set<String> = [
            "maximumRate", "credentials", "netrcPath", "cookies", "checksum", "pieceChecksums", "expectedLength",
        ]
        #expect(
            Set(keys?.keys ?? [:].keys).union(optionalFields)
                == Set(Mirror(reflecting: DownloadConfiguration()).children.compactMap(\.label))
        )

        let stored = #"{"url":"ftp://127.0.0.1/a","destination":{"directory":{"_0":"."}}}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DownloadRequest.self, from: Data(stored.utf8)) }
    }

    @Test("errors: equal by content; resumability is the engine's to set")
    func errors() {
        let a = DownloadError(code: .network, message: "m")
        #expect(a == DownloadError(code: .network, message: "m"))
        #expect(a != DownloadError(code: .network, message: "other"))
        #expect(a != DownloadError(code: .localIO, message: "m"))
        let io = DownloadError.localIO("Cannot write", systemCall: "pwritev", errno: ENOSPC)
        #expect(io.systemCallError == SystemCallError(systemCall: "pwritev", errno: ENOSPC))
        #expect(io.systemCallError?.isNoSpace == true)
        #expect(!io.message.contains("--"))
    }
}

@Suite("Output file lock")
struct OutputFileLockTests {
    @Test("one process: a second open of the same file is refused until the first closes it")
    func inProcess() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("lock-\(UUID().uuidString)").path
        defer { unlink(path) }
        let first = try OutputFile.openLocked(at: path)
        #expect {
            _ = try OutputFile.openLocked(at: path)
        } throws: { error in
            (error as? DownloadError)?.code == .alreadyRunning
        }
        first.close()
        first.close()  // a second close does nothing, and does not release another's lock
        let second = try OutputFile.openLocked(at: path)
        first.close()
        #expect {
            _ = try OutputFile.openLocked(at: path)
        } throws: { error in
            (error as? DownloadError)?.code == .alreadyRunning
        }
        second.close()
    }
}

@Suite("Final name")
struct FinalNameTests {
    static func scratchDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("name-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    #if os(Linux)
    @Test("a file with all its bytes in hand is written unseen and linked under its name, never over another file")
    func unnamedFile() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let opened = OutputFile.openUnnamed(for: directory + "/a.part")
        let file = try #require(opened)
        defer { file.close() }
        try file.write(ByteBuffer(string: "bytes"), at: 0)
        try file.sync()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        try file.link(as: directory + "/a")
        #expect(try String(contentsOfFile: directory + "/a", encoding: .utf8) == "bytes")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["a"])

        try Data("theirs".utf8).write(to: URL(fileURLWithPath: directory + "/b"))
        let openedOther = OutputFile.openUnnamed(for: directory + "/b.part")
        let other = try #require(openedOther)
        defer { other.close() }
        try other.write(ByteBuffer(string: "new"), at: 0)
        #expect {
            try other.link(as: directory + "/b")
        } throws: { error in
            (error as? DownloadError)?.code == .outputExists
        }
        #expect(try String(contentsOfFile: directory + "/b", encoding: .utf8) == "theirs")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["a", "b"])
    }

    @Test("NAME.part already there (an earlier run's, another process's): no unnamed file, the named one is used")
    func unnamedFileStepsAside() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("earlier".utf8).write(to: URL(fileURLWithPath: directory + "/c.part"))
        let besidePart = OutputFile.openUnnamed(for: directory + "/c.part")
        #expect(besidePart == nil)
        let noDirectory = OutputFile.openUnnamed(for: directory + "/missing/c.part")
        #expect(noDirectory == nil)
    }

    @Test("a link the system refuses (a /proc without it): the bytes go to NAME.part, synced and renamed")
    func unnamedFileFallsBackToThePartFile() throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let opened = OutputFile.openUnnamed(for: directory + "/d.part", linkAt: { _, _ in EPERM })
        let file = try #require(opened)
        defer { file.close() }
        try file.write(ByteBuffer(string: "fallback"), at: 0)
        try file.sync()
        try file.link(as: directory + "/d")
        #expect(try String(contentsOfFile: directory + "/d", encoding: .utf8) == "fallback")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["d"])
    }
    #endif

    @Test("the final rename never replaces a file that appeared meanwhile; with replacing it does")
    func noReplace() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("move-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let part = directory + "/f.part"
        let final = directory + "/f"
        try Data("new".utf8).write(to: URL(fileURLWithPath: part))
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: final))
        #expect {
            try FileOperations.move(part, to: final, replacing: false)
        } throws: { error in
            (error as? DownloadError)?.code == .outputExists
        }
        #expect(try String(contentsOfFile: final, encoding: .utf8) == "theirs")
        #expect(try String(contentsOfFile: part, encoding: .utf8) == "new")

        try FileOperations.move(part, to: final, replacing: true)
        #expect(try String(contentsOfFile: final, encoding: .utf8) == "new")
        #expect(!FileManager.default.fileExists(atPath: part))

        try Data("again".utf8).write(to: URL(fileURLWithPath: part))
        try FileOperations.move(part, to: directory + "/g", replacing: false)
        #expect(try String(contentsOfFile: directory + "/g", encoding: .utf8) == "again")
        #expect(!FileManager.default.fileExists(atPath: part))
    }

    @Test(
        "a name that leaves its directory is refused when the request is made",
        arguments: ["../x", "/etc/x", "a/../../x", ""]
    )
    func escapingName(_ name: String) {
        #expect {
            try DownloadRequest(url: "http://127.0.0.1/f", destination: .named(name, in: "d"))
        } throws: { error in
            (error as? DownloadError)?.code == .invalidRequest
        }
    }
}
