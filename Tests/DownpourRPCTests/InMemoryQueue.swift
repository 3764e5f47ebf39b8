import Downpour
import DownpourQueue
import NIOConcurrencyHelpers
import NIOPosix

/// A small, real ``DownloadQueueService`` for the RPC tests: aria2's three lists (active, waiting with paused
/// flags, stopped results) in memory, GID prefixes, events. Downloads start, progress and stop only when a test
/// says so (``start(_:)``, ``progress(_:total:ranges:speed:connections:)``, ``finish(_:errorCode:message:)``).
actor InMemoryQueue: DownloadQueueService {
    struct Item {
        var entry: QueueEntry
        var status: QueueStatus
        var path: String?
        var totalLength: Int64 = 0
        var completedRanges: [Range<Int64>] = []
        var speed: Int64 = 0
        var connections: Int = 0
        var errorCode: Int?
        var errorMessage: String?
    }

    private var active: [Item] = []
    private var waiting: [Item] = []
    private var stopped: [Item] = []
    private var stoppedTotal = 0
    private var globals: [QueueOption] = [
        QueueOption(name: "dir", value: "/downloads"),
        QueueOption(name: "max-concurrent-downloads", value: "5"),
        QueueOption(name: "rpc-secret", value: "hidden"),
    ]
    private(set) var isShutDown = false
    /// The sizes of the batches ``add(batch:)`` was given, in order.
    private(set) var batchSizes: [Int] = []
    private let fanOut = EventFanOut()
    /// For each ``read(_:)``, whether it ran on one of NIO's event loops (the queue, a default actor, runs on the
    /// preferred executor of the task that calls it).
    private(set) var readsOnEventLoop: [Bool] = []

    nonisolated var events: AsyncStream<QueueEvent> { self.fanOut.stream() }

    func add(batch: [AddRequest]) async -> [Result<DownloadID, QueueError>] {
        self.batchSizes.append(batch.count)
        return await self.addEach(of: batch)
    }

    // MARK: Test controls

    /// Starts a waiting download.
    func start(_ gid: DownloadID) {
        guard let index = self.waiting.firstIndex(where: { $0.entry.gid == gid }) else { return }
        var item = self.waiting.remove(at: index)
        item.status = .active
        self.active.append(item)
        self.fanOut.send(.started(gid))
    }

    func progress(_ gid: DownloadID, total: Int64, ranges: [Range<Int64>], speed: Int64 = 0, connections: Int = 0) {
        for index in self.active.indices where self.active[index].entry.gid == gid {
            self.active[index].totalLength = total
            self.active[index].completedRanges = ranges
            self.active[index].speed = speed
            self.active[index].connections = connections
            self.active[index].path = "/downloads/file-\(gid)"
        }
    }

    /// Stops an active download: 0 complete, 31 removed, else an error.
    func finish(_ gid: DownloadID, errorCode: Int = 0, message: String = "") {
        guard let index = self.active.firstIndex(where: { $0.entry.gid == gid }) else { return }
        var item = self.active.remove(at: index)
        item.status = errorCode == 0 ? .complete : errorCode == 31 ? .removed : .error
        item.errorCode = errorCode
        item.errorMessage = message
        if errorCode == 0 { item.completedRanges = item.totalLength > 0 ? [0..<item.totalLength] : [] }
        item.speed = 0
        item.connections = 0
        self.stopped.append(item)
        self.stoppedTotal += 1
        self.fanOut.send(errorCode == 0 ? .completed(gid) : errorCode == 31 ? .stopped(gid) : .failed(gid))
    }

    // MARK: GIDs

    private func resolve(_ gid: String) throws(QueueError) -> DownloadID {
        try Self.resolve(gid, in: self.active + self.waiting + self.stopped)
    }

    static func resolve(_ gid: String, in items: [Item]) throws(QueueError) -> DownloadID {
        let hexDigits = gid.utf8.allSatisfy { byte in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
        }
        guard !gid.isEmpty, gid.utf8.count <= 16, hexDigits else { throw QueueError(.invalidGID, gid: gid) }
        let prefix = gid.lowercased()
        let matches = items.map(\.entry.gid).filter {
            $0.description.hasPrefix(prefix)
        }
        guard let first = matches.first else { throw QueueError(.notFound, gid: gid) }
        guard matches.count == 1 else { throw QueueError(.notUnique, gid: gid) }
        return first
    }

    /// The lists as they are, read as aria2 shows them.
    struct Reader: QueueReader {
        var active: [Item]
        var waiting: [Item]
        var stopped: [Item]
        var stoppedTotal: Int
        var globals: [QueueOption]

        func status(of gid: String) throws(QueueError) -> DownloadStatus {
            let id = try InMemoryQueue.resolve(gid, in: self.active + self.waiting + self.stopped)
            return Self.snapshot((self.active + self.waiting + self.stopped).first { $0.entry.gid == id }!)
        }

        func activeDownloads() -> [DownloadStatus] { self.active.map(Self.snapshot) }

        func waitingDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            range.clamped(to: self.waiting.indices).map { Self.snapshot(self.waiting[$0]) }
        }

        func stoppedDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            range.clamped(to: self.stopped.indices).map { Self.snapshot(self.stopped[$0]) }
        }

        func globalStat() -> GlobalStat {
            GlobalStat(
                downloadSpeed: self.active.reduce(0) { $0 + $1.speed },
                numActive: self.active.count,
                numWaiting: self.waiting.count,
                numStopped: self.stopped.count,
                numStoppedTotal: self.stoppedTotal
            )
        }

        func options(of gid: String) throws(QueueError) -> [QueueOption] {
            let id = try InMemoryQueue.resolve(gid, in: self.active + self.waiting + self.stopped)
            return (self.active + self.waiting + self.stopped).first { $0.entry.gid == id }!.entry.options
        }

        func globalOptions() -> [QueueOption] { self.globals }

        static func snapshot(_ item: Item) -> DownloadStatus {
            let completed = item.completedRanges.reduce(Int64(0)) { $0 + Int64($1.count) }
            return DownloadStatus(
                gid: item.entry.gid,
                status: item.status,
                uris: item.entry.uris,
                options: item.entry.options,
                directory: item.entry.options.last(where: { $0.name == "dir" })?.value ?? "/downloads",
                path: item.path,
                totalLength: item.totalLength,
                completedLength: completed,
                downloadSpeed: item.speed,
                connections: item.connections,
                connectionProgress: (0..<item.connections).map {
                    ConnectionProgress(
                        id: $0 + 1,
                        receivedBytes: 0,
                        bytesPerSecond: Double(item.speed) / Double(item.connections),
                        remainingRange: nil
                    )
                },
                completedRanges: item.completedRanges,
                errorCode: item.errorCode,
                errorMessage: item.errorMessage
            )
        }
    }

    // MARK: DownloadQueueService

    func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        self.readsOnEventLoop.append(MultiThreadedEventLoopGroup.currentEventLoop != nil)
        return try body(
            Reader(
                active: self.active,
                waiting: self.waiting,
                stopped: self.stopped,
                stoppedTotal: self.stoppedTotal,
                globals: self.globals
            )
        )
    }

    func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID {
        guard !uris.isEmpty else { throw QueueError(.invalidRequest, message: "URI is not provided.") }
        for uri in uris where !(uri.hasPrefix("http://") || uri.hasPrefix("https://")) {
            throw QueueError(.invalidRequest, message: "Unsupported URI: \(uri)")
        }
        var gid = DownloadID()
        var paused = false
        for option in options {
            switch option.name {
            case "gid":
                guard let forced = DownloadID(option.value.lowercased()) else {
                    throw QueueError(.invalidRequest, option: "gid")
                }
                if (self.active + self.waiting + self.stopped).contains(where: { $0.entry.gid == forced }) {
                    throw QueueError(.duplicateGID, gid: option.value)
                }
                gid = forced
            case "pause": paused = option.value == "true"
            case "split", "max-connection-per-server":
                guard Int(option.value) != nil else { throw QueueError(.invalidRequest, option: option.name) }
            default: break
            }
        }
        let item = Item(
            entry: QueueEntry(gid: gid, uris: uris, options: options.filter { $0.name != "gid" && $0.name != "pause" }),
            status: paused ? .paused : .waiting
        )
        self.waiting.insert(item, at: min(position ?? self.waiting.count, self.waiting.count))
        self.fanOut.send(.added(gid))
        return gid
    }

    func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try self.resolve(gid)
        if let index = self.active.firstIndex(where: { $0.entry.gid == id }) {
            var item = self.active.remove(at: index)
            item.status = .paused
            item.speed = 0
            item.connections = 0
            self.waiting.insert(item, at: 0)
            self.fanOut.send(.paused(id))
            return id
        }
        if let index = self.waiting.firstIndex(where: { $0.entry.gid == id }), self.waiting[index].status == .waiting {
            self.waiting[index].status = .paused
            self.fanOut.send(.changed(id))
            return id
        }
        throw QueueError(.cannotPause, gid: id.description)
    }

    func pauseAll(force: Bool) async throws(QueueError) {
        for item in self.active { _ = try await self.pause(item.entry.gid.description, force: force) }
        for index in self.waiting.indices { self.waiting[index].status = .paused }
    }

    func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        let id = try self.resolve(gid)
        guard let index = self.waiting.firstIndex(where: { $0.entry.gid == id }), self.waiting[index].status == .paused
        else { throw QueueError(.cannotUnpause, gid: id.description) }
        self.waiting[index].status = .waiting
        self.fanOut.send(.changed(id))
        return id
    }

    func unpauseAll() async throws(QueueError) {
        for index in self.waiting.indices { self.waiting[index].status = .waiting }
    }

    func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try self.resolve(gid)
        if self.active.contains(where: { $0.entry.gid == id }) {
            self.finish(id, errorCode: 31)
            return id
        }
        if let index = self.waiting.firstIndex(where: { $0.entry.gid == id }) {
            self.waiting.remove(at: index)
            self.fanOut.send(.changed(id))
            return id
        }
        throw QueueError(.notActive, gid: id.description)
    }

    func changePosition(_ gid: String, by position: Int, from origin: PositionOrigin) async throws(QueueError) -> Int {
        let id = try self.resolve(gid)
        guard let current = self.waiting.firstIndex(where: { $0.entry.gid == id }) else {
            throw QueueError(.notWaiting, gid: id.description)
        }
        let last = self.waiting.count - 1
        let wanted: Int
        switch origin {
        case .set: wanted = position
        case .current: wanted = current + position
        case .end: wanted = last + position
        }
        let destination = max(0, min(last, wanted))
        let item = self.waiting.remove(at: current)
        self.waiting.insert(item, at: destination)
        return destination
    }

    func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (removed: Int, added: Int) {
        let id = try self.resolve(gid)
        func change(_ item: inout Item) -> (Int, Int) {
            var removed = 0
            for uri in remove {
                if let index = item.entry.uris.firstIndex(of: uri) {
                    item.entry.uris.remove(at: index)
                    removed += 1
                }
            }
            let at = min(position ?? item.entry.uris.count, item.entry.uris.count)
            item.entry.uris.insert(contentsOf: add, at: at)
            return (removed, add.count)
        }
        if let index = self.active.firstIndex(where: { $0.entry.gid == id }) { return change(&self.active[index]) }
        if let index = self.waiting.firstIndex(where: { $0.entry.gid == id }) { return change(&self.waiting[index]) }
        throw QueueError(.invalidRequest, gid: gid, message: "No URI to change for GID#\(id)")
    }

    func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        let id = try self.resolve(gid)
        func apply(_ item: inout Item) {
            for option in options {
                item.entry.options.removeAll { $0.name == option.name }
            }
            item.entry.options += options
        }
        if let index = self.active.firstIndex(where: { $0.entry.gid == id }) {
            apply(&self.active[index])
        } else if let index = self.waiting.firstIndex(where: { $0.entry.gid == id }) {
            apply(&self.waiting[index])
        } else {
            throw QueueError(.cannotChangeOption, gid: id.description)
        }
    }

    func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        for option in options where option.name == "max-concurrent-downloads" && Int(option.value) == nil {
            throw QueueError(.invalidRequest, option: option.name)
        }
        for option in options {
            self.globals.removeAll { $0.name == option.name }
            self.globals.append(option)
        }
        self.fanOut.send(.optionsChanged)
    }

    func purgeResults() async throws(QueueError) {
        self.stopped.removeAll()
        self.fanOut.send(.resultsRemoved(nil))
    }

    func removeResult(_ gid: String) async throws(QueueError) {
        let id = try self.resolve(gid)
        guard let index = self.stopped.firstIndex(where: { $0.entry.gid == id }) else {
            throw QueueError(.noResult, gid: id.description)
        }
        self.stopped.remove(at: index)
        self.fanOut.send(.resultsRemoved(id))
    }

    func saveSession() async throws(QueueError) {
        throw QueueError(.invalidRequest, message: "Filename is not given.")
    }

    func shutdown() async {
        self.isShutDown = true
    }
}

/// Every listener's stream of the queue's events.
final class EventFanOut: Sendable {
    private let continuations = NIOLockedValueBox<[AsyncStream<QueueEvent>.Continuation]>([])

    func stream() -> AsyncStream<QueueEvent> {
        let (stream, continuation) = AsyncStream<QueueEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        self.continuations.withLockedValue { $0.append(continuation) }
        return stream
    }

    func send(_ event: QueueEvent) {
        for continuation in self.continuations.withLockedValue({ $0 }) { continuation.yield(event) }
    }

    /// How many listeners have asked for a stream.
    var listenerCount: Int { self.continuations.withLockedValue { $0.count } }
}
