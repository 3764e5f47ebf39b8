import Downpour
import DownpourJSON
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@testable import DownpourRPC

/// The fuzzed requests of ``DispatcherFuzzTests`` against the real queue: a `DownloadManager` over a real SQLite
/// store. Every request gets well-formed JSON-RPC, and afterwards the store still opens and holds exactly the
/// queue the manager reports. Downloads are kept paused (``PausedOnly``), so nothing is fetched from the made-up
/// hosts of the requests.
@Suite struct ManagerFuzzTests {
    @Test func theRealQueueAnswersEveryRequestAndKeepsItsStore() async throws {
        var random = SplitMix64(seed: 0x00D0_3B70_0126)
        for round in 0..<4 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "downpour-manager-fuzz-\(UUID().uuidString)"
            ).path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let downloader = Downloader()
            let manager = try await startedManager(in: directory, downloader: downloader)
            let dispatcher = RPCDispatcher(service: PausedOnly(manager), secret: "s")
            var answeredAtOnce = 0
            for iteration in 0..<(2_000 * DispatcherFuzzTests.scale) {
                let input = DispatcherFuzzTests.request(&random)
                // On the queue's loop, first: what it answers at once must be what the task would answer.
                let immediate = try await dispatcher.handleNow(body: input, on: manager)
                let reply = await dispatcher.handle(body: input)
                switch immediate {
                case .answered(let early):
                    answeredAtOnce += 1
                    #expect(
                        early.body == reply.body && early.httpStatus == reply.httpStatus
                            && early.isUnauthorized == reply.isUnauthorized,
                        Comment(
                            rawValue: "round \(round) iteration \(iteration): at once "
                                + "\(String(decoding: early.body, as: UTF8.self)), "
                                + "later \(String(decoding: reply.body, as: UTF8.self))"
                        )
                    )
                case .pending(let request):
                    #expect(!request.onlyReads, "round \(round) iteration \(iteration): a read waited")
                }
                let json = try #require(
                    try? JSONParser.parse(reply.body),
                    "round \(round) iteration \(iteration): \(String(decoding: reply.body, as: UTF8.self))"
                )
                if let responses = json.arrayValue {
                    for response in responses { try DispatcherFuzzTests.checkResponse(response, iteration: iteration) }
                } else {
                    try DispatcherFuzzTests.checkResponse(json, iteration: iteration)
                }
            }
            // The fuzzed requests are reads often enough for the comparison to mean something.
            #expect(answeredAtOnce > 500, "only \(answeredAtOnce) of 5,000 answered at once")
            let stat = await manager.globalStat()
            #expect(stat.numActive == 0, "a download started although every one was added paused")
            let waiting = await manager.waitingDownloads(0..<Int.max).map(\.gid)
            let stopped = await manager.stoppedDownloads(0..<Int.max).map(\.gid)
            // The mutated adds that stayed valid made real downloads: the queue was exercised, not only refused.
            #expect(!waiting.isEmpty)
            await manager.shutdown()

            // A second manager over the same file sees the same queue.
            let reopened = try await startedManager(in: directory, downloader: downloader)
            #expect(await reopened.waitingDownloads(0..<Int.max).map(\.gid) == waiting)
            #expect(await reopened.stoppedDownloads(0..<Int.max).map(\.gid) == stopped)
            await reopened.shutdown()
            await downloader.shutdown()
        }
    }
}

/// A real queue, started: a `DownloadManager` over a SQLite store in `directory`, downloading to
/// `directory/downloads`, on one of NIO's shared loops, logging nothing.
func startedManager(in directory: String, downloader: Downloader) async throws -> DownloadManager {
    let manager = DownloadManager(
        downloader: downloader,
        store: try QueueStore(directory: directory),
        defaults: .init(directory: directory + "/downloads"),
        logger: Logger(label: "downpour.rpc.tests", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    try await manager.start()
    return manager
}

/// A started real queue in a fresh scratch directory (``startedManager(in:downloader:)``) for the length of
/// `body`; the queue, its downloader and the directory are shut down and removed afterwards, whatever happens.
func withStartedManager(_ body: (DownloadManager, _ directory: String) async throws -> Void) async throws {
    let scratch = try ScratchDirectory()
    defer { scratch.remove() }
    let downloader = Downloader()
    let manager = try await startedManager(in: scratch.path, downloader: downloader)
    do {
        try await body(manager, scratch.path)
    } catch {
        await manager.shutdown()
        await downloader.shutdown()
        throw error
    }
    await manager.shutdown()
    await downloader.shutdown()
}

/// A queue whose downloads never run: every add is paused, unpausing does nothing.
struct PausedOnly: DownloadQueueService {
    let base: DownloadManager

    init(_ base: DownloadManager) { self.base = base }

    func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID {
        try await self.base.add(
            uris: uris,
            options: options.filter { $0.name != "pause" } + [QueueOption(name: "pause", value: "true")],
            position: position
        )
    }
    func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        try await self.base.pause(gid, force: force)
    }
    func pauseAll(force: Bool) async throws(QueueError) { try await self.base.pauseAll(force: force) }
    func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        try await self.base.status(of: gid).gid
    }
    func unpauseAll() async throws(QueueError) {}
    func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        try await self.base.remove(gid, force: force)
    }
    func changePosition(_ gid: String, by position: Int, from origin: PositionOrigin) async throws(QueueError) -> Int {
        try await self.base.changePosition(gid, by: position, from: origin)
    }
    func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (
        removed: Int, added: Int
    ) {
        try await self.base.changeURIs(gid, remove: remove, add: add, position: position)
    }
    func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        try await self.base.changeOptions(gid, options.filter { $0.name != "pause" })
    }
    func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        try await self.base.changeGlobalOptions(options)
    }
    func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        try await self.base.read(body)
    }
    func readIfIsolated<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) throws(Failure) -> Value? {
        try self.base.readIfIsolated(body)
    }
    func purgeResults() async throws(QueueError) { try await self.base.purgeResults() }
    func removeResult(_ gid: String) async throws(QueueError) { try await self.base.removeResult(gid) }
    var events: AsyncStream<QueueEvent> { self.base.events }
    func shutdown() async { await self.base.shutdown() }
    func saveSession() async throws(QueueError) { try await self.base.saveSession() }
}
