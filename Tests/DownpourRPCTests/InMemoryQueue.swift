import Downpour
import DownpourQueue
import NIOConcurrencyHelpers
import NIOPosix

/// A small, real ``DownloadQueueService`` for the RPC tests: a real ``DownloadQueue`` (aria2's three lists, GID
/// prefixes, positions, results, events) that does not fill its slots itself, in memory. Downloads start, progress
/// and stop only when a test says so (``start(_:)``, ``progress(_:total:ranges:speed:connections:)``,
/// ``finish(_:errorCode:message:)``); what a running download reports lives beside the queue (``Live``).
actor InMemoryQueue: DownloadQueueService {
    /// What a test says a running download reports.
    struct Live {
        var completedRanges: [Range<Int64>] = []
        var speed: Int64 = 0
        var connections: Int = 0
    }

    private var queue = DownloadQueue(fillsFreeSlots: false)
    private var live: [DownloadID: Live] = [:]
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

    /// Changes the queue; its actions' events go to the listeners (starting and stopping is the tests' to say).
    private func change<Value>(
        _ body: (inout DownloadQueue) throws(QueueError) -> (Value, [QueueAction])
    ) throws(QueueError) -> Value {
        let (value, actions) = try body(&self.queue)
        self.queue.acceptChanges()
        for case .emit(let event) in actions { self.fanOut.send(event) }
        for case .stop(let gid, _) in actions { self.live[gid] = nil }
        return value
    }

    private func apply(_ body: (inout DownloadQueue) throws(QueueError) -> [QueueAction]) throws(QueueError) {
        try self.change { queue throws(QueueError) in ((), try body(&queue)) }
    }

    // MARK: Test controls

    /// Starts a waiting download.
    func start(_ gid: DownloadID) {
        try? self.apply { queue throws(QueueError) in try queue.start(gid) }
    }

    func progress(_ gid: DownloadID, total: Int64, ranges: [Range<Int64>], speed: Int64 = 0, connections: Int = 0) {
        guard self.queue.active.contains(gid) else { return }
        self.live[gid] = Live(completedRanges: ranges, speed: speed, connections: connections)
        self.queue.record(
            gid,
            path: "/downloads/file-\(gid)",
            totalLength: total,
            completedLength: ranges.reduce(0) { $0 + Int64($1.count) }
        )
        self.queue.acceptChanges()
    }

    /// Stops an active download: 0 complete, 31 removed, else an error.
    func finish(_ gid: DownloadID, errorCode: Int = 0, message: String = "") {
        guard self.queue.active.contains(gid), let download = self.queue.downloads[gid] else { return }
        try? self.apply { queue throws(QueueError) in
            switch errorCode {
            case Aria2ErrorCode.finished.rawValue:
                return queue.finish(
                    gid,
                    outcome: .complete(path: download.path ?? "/downloads/file-\(gid)", length: download.totalLength)
                )
            case Aria2ErrorCode.removed.rawValue:
                return try queue.remove(gid)
            default:
                return queue.finish(
                    gid,
                    outcome: .failed(code: Aria2ErrorCode(rawValue: errorCode) ?? .unknown, message: message)
                )
            }
        }
        self.live[gid] = nil
    }

    /// The lists as they are, read as aria2 shows them.
    struct Reader: QueueReader {
        var queue: DownloadQueue
        var live: [DownloadID: Live]
        var globals: [QueueOption]

        func status(of gid: String) throws(QueueError) -> DownloadStatus {
            let id = try self.queue.resolve(gid)
            guard let download = self.queue.downloads[id] else {
                return Self.status(result: self.queue.result(of: id)!)
            }
            return self.status(download, state: self.queue.status(of: id)!)
        }

        func activeDownloads() -> [DownloadStatus] {
            self.queue.active.map { self.status(self.queue.downloads[$0]!, state: .active) }
        }

        func waitingDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            let waiting = self.queue.waiting
            return waiting[range.clamped(to: waiting.indices)].map {
                self.status(self.queue.downloads[$0.gid]!, state: $0.isPaused ? .paused : .waiting)
            }
        }

        func stoppedDownloads(_ range: Range<Int>) -> [DownloadStatus] {
            let stopped = self.queue.stopped
            return stopped[range.clamped(to: stopped.indices)].map(Self.status(result:))
        }

        func globalStat() -> GlobalStat {
            GlobalStat(
                downloadSpeed: self.live.values.reduce(0) { $0 + $1.speed },
                numActive: self.queue.active.count,
                numWaiting: self.queue.waiting.count,
                numStopped: self.queue.stopped.count,
                numStoppedTotal: self.queue.stoppedTotal
            )
        }

        func options(of gid: String) throws(QueueError) -> [QueueOption] {
            let id = try self.queue.resolve(gid)
            return self.queue.downloads[id]?.entry.options ?? self.queue.result(of: id)?.entry.options ?? []
        }

        func globalOptions() -> [QueueOption] { self.globals }

        private static func directory(of entry: QueueEntry) -> String {
            entry.options.last(where: { $0.name == "dir" })?.value ?? "/downloads"
        }

        private func status(_ download: QueuedDownload, state: QueueStatus) -> DownloadStatus {
            let live = state == .active ? self.live[download.entry.gid] ?? Live() : Live()
            return DownloadStatus(
                gid: download.entry.gid,
                status: state,
                uris: download.entry.uris,
                options: download.entry.options,
                directory: Self.directory(of: download.entry),
                path: download.path,
                totalLength: download.totalLength,
                completedLength: download.completedLength,
                downloadSpeed: live.speed,
                connections: live.connections,
                connectionProgress: (0..<live.connections).map {
                    ConnectionProgress(
                        id: $0 + 1,
                        receivedBytes: 0,
                        bytesPerSecond: Double(live.speed) / Double(live.connections),
                        remainingRange: nil
                    )
                },
                completedRanges: live.completedRanges
            )
        }

        private static func status(result: StoppedResult) -> DownloadStatus {
            DownloadStatus(
                gid: result.gid,
                status: result.status,
                uris: result.entry.uris,
                options: result.entry.options,
                directory: Self.directory(of: result.entry),
                path: result.path,
                totalLength: result.totalLength,
                completedLength: result.completedLength,
                completedRanges: result.status == .complete && result.totalLength > 0 ? [0..<result.totalLength] : [],
                errorCode: result.errorCode,
                errorMessage: result.errorMessage
            )
        }
    }

    // MARK: DownloadQueueService

    func read<Value: Sendable, Failure: Error>(
        _ body: @Sendable (any QueueReader) throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        self.readsOnEventLoop.append(MultiThreadedEventLoopGroup.currentEventLoop != nil)
        return try body(Reader(queue: self.queue, live: self.live, globals: self.globals))
    }

    func add(uris: [String], options: [QueueOption], position: Int?) async throws(QueueError) -> DownloadID {
        guard !uris.isEmpty else { throw QueueError(.invalidRequest, message: "URI is not provided.") }
        for uri in uris where !(uri.hasPrefix("http://") || uri.hasPrefix("https://")) {
            throw QueueError(.invalidRequest, message: "Unsupported URI: \(uri)")
        }
        var gid = DownloadID()
        while self.queue.contains(gid) { gid = DownloadID() }
        var paused = false
        for option in options {
            switch option.name {
            case "gid":
                guard let forced = DownloadID(option.value.lowercased()) else {
                    throw QueueError(.invalidRequest, option: "gid")
                }
                gid = forced
            case "pause": paused = option.value == "true"
            case "split", "max-connection-per-server":
                guard Int(option.value) != nil else { throw QueueError(.invalidRequest, option: option.name) }
            default: break
            }
        }
        let entry = QueueEntry(gid: gid, uris: uris, options: options.filter { $0.name != "gid" && $0.name != "pause" })
        try self.apply { queue throws(QueueError) in try queue.add(entry, paused: paused, position: position) }
        return gid
    }

    func pause(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try self.queue.resolve(gid)
        try self.apply { queue throws(QueueError) in try queue.pause(id) }
        return id
    }

    func pauseAll(force: Bool) async throws(QueueError) {
        try self.apply { $0.pauseAll() }
    }

    func unpause(_ gid: String) async throws(QueueError) -> DownloadID {
        let id = try self.queue.resolve(gid)
        try self.apply { queue throws(QueueError) in try queue.unpause(id) }
        return id
    }

    func unpauseAll() async throws(QueueError) {
        try self.apply { $0.unpauseAll() }
    }

    func remove(_ gid: String, force: Bool) async throws(QueueError) -> DownloadID {
        let id = try self.queue.resolve(gid)
        try self.apply { queue throws(QueueError) in try queue.remove(id) }
        return id
    }

    func changePosition(_ gid: String, by position: Int, from origin: PositionOrigin) async throws(QueueError) -> Int {
        let id = try self.queue.resolve(gid)
        return try self.change { queue throws(QueueError) in try queue.changePosition(id, by: position, from: origin) }
    }

    func changeURIs(
        _ gid: String,
        remove: [String],
        add: [String],
        position: Int?
    ) async throws(QueueError) -> (removed: Int, added: Int) {
        let id = try self.queue.resolve(gid)
        return try self.change { queue throws(QueueError) in
            let (removed, added, actions) = try queue.changeURIs(id, remove: remove, add: add, position: position)
            return ((removed, added), actions)
        }
    }

    func changeOptions(_ gid: String, _ options: [QueueOption]) async throws(QueueError) {
        let id = try self.queue.resolve(gid)
        try self.apply { queue throws(QueueError) in try queue.changeOptions(id, options) }
    }

    func changeGlobalOptions(_ options: [QueueOption]) async throws(QueueError) {
        for option in options where option.name == "max-concurrent-downloads" && Int(option.value) == nil {
            throw QueueError(.invalidRequest, option: option.name)
        }
        for option in options {
            self.globals.removeAll { $0.name == option.name }
            self.globals.append(option)
        }
        if let limit = options.last(where: { $0.name == "max-concurrent-downloads" }).flatMap({ Int($0.value) }) {
            try self.apply { $0.setMaxConcurrentDownloads(limit) }
        } else {
            self.fanOut.send(.optionsChanged)
        }
    }

    func purgeResults() async throws(QueueError) {
        try self.apply { $0.purgeResults() }
    }

    func removeResult(_ gid: String) async throws(QueueError) {
        let id = try self.queue.resolve(gid)
        try self.apply { queue throws(QueueError) in try queue.removeResult(id) }
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
