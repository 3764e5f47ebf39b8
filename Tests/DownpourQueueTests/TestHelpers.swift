import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

/// The manager tests' settings (``testConfiguration(connections:minimumSplitSize:idleRead:journalInterval:)`` with
/// these values): several downloads run at once on a loaded machine, so a connection may wait a minute for a byte;
/// the journal is saved every 100 ms, so a stop finds it recent.
func managerTestConfiguration() -> DownloadConfiguration {
    testConfiguration(minimumSplitSize: 256 * 1024, idleRead: .seconds(60), journalInterval: .milliseconds(100))
}

/// A downloader of its own for a test (a test may change its overall limit), with no connection limits that would
/// make one test wait for another.
func makeTestDownloader() -> Downloader {
    Downloader(configuration: .init(maximumConnections: 10_000, maximumConnectionsPerHost: 10_000))
}

/// A manager over the store in `directory`'s state directory, saving files into `directory`.
func makeManager(
    in directory: ScratchDirectory,
    downloader: Downloader,
    configuration: DownloadConfiguration = managerTestConfiguration(),
    options: [QueueOption] = []
) throws -> DownloadManager {
    DownloadManager(
        downloader: downloader,
        store: try QueueStore(directory: directory.stateDirectory),
        defaults: .init(directory: directory.path, configuration: configuration, options: options),
        logger: Logger(label: "downpour.queue.tests", factory: { _ in SwiftLogNoOpLogHandler() })
    )
}

/// Every event a manager sends from the moment it is made, kept for the test to look at.
final class EventLog: Sendable {
    private let box: NIOLockedValueBox<[QueueEvent]>
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<QueueEvent>) {
        let box = NIOLockedValueBox<[QueueEvent]>([])
        self.box = box
        self.task = Task {
            for await event in stream { box.withLockedValue { $0.append(event) } }
        }
    }

    var events: [QueueEvent] { self.box.withLockedValue { $0 } }

    func count(of event: QueueEvent) -> Int { self.events.filter { $0 == event }.count }

    /// Waits until `event` has been sent `times` times in all.
    func wait(for event: QueueEvent, times: Int = 1, limit: Duration = .seconds(120)) async throws {
        try await waitUntil("\(event) × \(times); got \(self.events)", limit: limit) {
            self.count(of: event) >= times
        }
    }
}

/// The bytes asked for by GET requests for `path`, from `index` of the request log on.
func requestedBytes(_ server: RangeTestServer, path: String, from index: Int = 0, total: Int) -> Int {
    let requests = server.statistics().requests
    guard index < requests.count else { return 0 }
    return requests[index...].filter { $0.method == "GET" && $0.uri == path }.reduce(0) { sum, request in
        sum + (request.requestedRange.map { min($0.upperBound, total) - $0.lowerBound } ?? total)
    }
}

/// The messages a logger was given, at every level, for a test to wait on.
final class LogRecord: Sendable {
    private let messages = NIOLockedValueBox<[String]>([])

    /// A logger at debug level that records here.
    var logger: Logger {
        var logger = Logger(label: "downpour.queue.tests") { _ in Handler(record: self) }
        logger.logLevel = .debug
        return logger
    }

    func contains(_ text: String) -> Bool {
        self.messages.withLockedValue { $0.contains { $0.contains(text) } }
    }

    private struct Handler: LogHandler {
        let record: LogRecord
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            self.record.messages.withLockedValue { $0.append(event.message.description) }
        }
    }
}

/// What a manager test works with: a started manager over a scratch directory, with a downloader of its own, a
/// test server, and every event the manager sent.
struct ManagerFixture: Sendable {
    let manager: DownloadManager
    let server: RangeTestServer
    let events: EventLog
    let directory: ScratchDirectory
    let downloader: Downloader
}

/// Runs `body` with a started manager (``makeManager(in:downloader:configuration:options:)``) and a
/// ``RangeTestServer`` serving `content` with `faults`. Afterwards, also when `body` throws, the manager and the
/// downloader shut down, the server stops and the directory is removed.
func withManager<Value: Sendable>(
    content: [UInt8],
    faults: [RangeTestServer.Fault] = [],
    configuration: DownloadConfiguration = managerTestConfiguration(),
    options: [QueueOption] = [],
    _ body: (ManagerFixture) async throws -> Value
) async throws -> Value {
    let directory = try ScratchDirectory()
    defer { directory.remove() }
    let downloader = makeTestDownloader()
    let outcome: Result<Value, any Error>
    do {
        outcome = .success(
            try await RangeTestServer.withServer(content: content, faults: faults) { server in
                let manager = try makeManager(
                    in: directory,
                    downloader: downloader,
                    configuration: configuration,
                    options: options
                )
                let fixture = ManagerFixture(
                    manager: manager,
                    server: server,
                    events: EventLog(manager.events),
                    directory: directory,
                    downloader: downloader
                )
                let value: Result<Value, any Error>
                do {
                    try await manager.start()
                    value = .success(try await body(fixture))
                } catch {
                    value = .failure(error)
                }
                await manager.shutdown()
                return try value.get()
            }
        )
    } catch {
        outcome = .failure(error)
    }
    await downloader.shutdown()
    return try outcome.get()
}

/// What `kill -9` leaves of the queue's store in `directory` at this moment: a copy of its SQLite files (not the
/// shared-memory index) in a state directory of its own, for the next manager to open. Returns that directory.
func copyStoreAsKilled(_ directory: ScratchDirectory) throws -> String {
    let restarted = directory.file("restarted-state")
    try FileManager.default.createDirectory(atPath: restarted, withIntermediateDirectories: true)
    for name in try FileManager.default.contentsOfDirectory(atPath: directory.stateDirectory)
    where name.hasPrefix("downpour.sqlite") && !name.hasSuffix("-shm") {
        try FileManager.default.copyItem(atPath: directory.stateDirectory + "/" + name, toPath: restarted + "/" + name)
    }
    return restarted
}
