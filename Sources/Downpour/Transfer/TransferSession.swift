import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// What the connections of one download share: the ``TransferState`` behind one lock (held for microseconds:
/// every decision is the state's own), and the parts that do I/O: the transport, the file, the events, the
/// connection budget, pacing and the digests.
final class TransferSession: Sendable {
    let transport: HTTPTransport
    let file: OutputFile
    /// The configured headers and `User-Agent`; ``authorization`` adds credentials and cookies per request.
    let headers: [HTTPHeaderField]
    let configuration: DownloadConfiguration
    let logger: Logger
    let hub: DownloadEventHub
    /// Every request holds a permit of the ``Downloader``'s connection budget for ``host`` while it runs.
    let budget: ConnectionBudget
    /// The bandwidth limits the body bytes are paced by.
    let pacing: Pacing
    /// Hashes the file as its first bytes come in, when the download is verified against a digest.
    let hasher: PrefixHasher?
    /// Verifies the pieces as they come in, when the download has piece digests and a known length.
    let pieceChecker: PieceChecker?
    private let state: NIOLockedValueBox<TransferState>
    /// One per connection, made up front: ends that connection's current request from another task.
    private let aborts: [Int: RequestAbort]
    /// Credentials and cookies for each request; takes in the cookies the responses set.
    let authorization: RequestAuthorization

    init(
        transport: HTTPTransport,
        file: OutputFile,
        remoteFile: RemoteFile,
        mode: TransferState.Mode = .stream(received: 0),
        headers: [HTTPHeaderField],
        configuration: DownloadConfiguration,
        logger: Logger,
        hub: DownloadEventHub,
        budget: ConnectionBudget,
        pacing: Pacing,
        authorization: RequestAuthorization,
        hasher: PrefixHasher? = nil,
        pieceChecker: PieceChecker? = nil,
        mirrors: MirrorSet? = nil,
        probeResponse: RunningResponse? = nil,
        resumed: ByteRangeSet = ByteRangeSet()
    ) {
        self.transport = transport
        self.file = file
        self.headers = headers
        self.configuration = configuration
        self.logger = logger
        self.hub = hub
        self.budget = budget
        self.pacing = pacing
        self.authorization = authorization
        self.hasher = hasher
        self.pieceChecker = pieceChecker
        var state = TransferState(remoteFile: remoteFile, mode: mode, mirrors: mirrors, resumed: resumed)
        // The probe's response goes on as connection 1's first range, leased now, or as the stream's first attempt;
        // one with no place is ended.
        if let probeResponse {
            state.adopt(probeResponse: probeResponse, connections: max(configuration.connections, 1))?.end()
        }
        self.state = NIOLockedValueBox(state)
        self.aborts = Dictionary(
            uniqueKeysWithValues: (1...max(configuration.connections, 1)).map { ($0, RequestAbort()) }
        )
    }

    /// The file as the probe found it, without its ranges once the server turned out to ignore them.
    var remoteFile: RemoteFile {
        self.state.withLockedValue { $0.remoteFile }
    }

    /// How the bytes are fetched now.
    var mode: TransferState.Mode {
        self.state.withLockedValue { $0.mode }
    }

    /// Whether the bytes are fetched in ranges (the plan's done ranges are what the journal may record).
    var isSegmented: Bool {
        self.state.withLockedValue { $0.planner != nil }
    }

    /// The server ignores ranges: the file is fetched as one stream from byte 0, and nothing of the plan stays.
    func fallBackToStream() {
        let unused = self.state.withLockedValue { state in
            state.remoteFile.acceptsRanges = false
            return state.forgetTransfer(mode: .stream(received: 0))
        }
        for response in unused { response.end() }
    }

    /// The download begins again from nothing with `planner`, and its digest is made again from byte 0.
    func startOver(_ planner: SegmentPlanner) {
        let unused = self.state.withLockedValue { $0.forgetTransfer(mode: .segmented(planner)) }
        for response in unused { response.end() }
        self.hasher?.noteRewrite(from: 0)
        self.pieceChecker?.startOver()
    }

    // MARK: Mirrors

    /// The URLs of the file as they stand: which are in use, which were dropped and why.
    var mirrors: MirrorSet {
        self.state.withLockedValue { $0.mirrors }
    }

    /// See ``TransferState/assignMirror(connection:)``.
    func mirror(forConnection id: Int) -> TransferState.Source {
        self.state.withLockedValue { $0.assignMirror(connection: id) }
    }

    /// The file as mirror `index` must describe it now: its own validators once known.
    func remoteFile(forMirror index: Int) -> RemoteFile {
        self.state.withLockedValue { $0.mirrors.remoteFile(for: index, file: $0.remoteFile) }
    }

    /// Whether mirror `index` is still in use.
    func isLive(mirror index: Int) -> Bool {
        self.state.withLockedValue { $0.mirrors.mirrors[index].isLive }
    }

    /// See ``TransferState/checkPartial(_:asked:mirror:)``. Under the lock, so that two first responses from one
    /// mirror cannot both set its validators.
    func checkPartial(_ headers: HTTPHeaders, asked: Range<Int64>, mirror index: Int) throws(AttemptFailure) {
        if let failure = self.state.withLockedValue({ $0.checkPartial(headers, asked: asked, mirror: index) }) {
            throw failure
        }
    }

    /// Moves mirror `index`'s requests to `location`, where it redirected a range request (see
    /// ``MirrorSet/redirect(_:from:to:limit:)``). Returns why it cannot follow, as a sentence; `nil` when it moved.
    func redirectMirror(_ index: Int, from requested: URL, to location: URL) -> String? {
        let limit = self.configuration.maximumRedirects
        let failure = self.state.withLockedValue {
            $0.redirectMirror(index, from: requested, to: location, limit: limit)
        }
        if failure == nil {
            self.logger.debug("Following a mirror's redirect", metadata: ["to": "\(MirrorSet.key(location))"])
        }
        return failure
    }

    /// Drops mirror `index` for `reason` (a sentence), unless it is the last one in use; the notice names it.
    /// `true` when it is dropped (now or earlier): the caller moves its work to the others. `false` when it is
    /// the last: the caller's error ends the download.
    func dropMirror(_ index: Int, because reason: String) -> Bool {
        let outcome = self.state.withLockedValue { $0.dropMirror(index, because: reason) }
        self.announce(outcome.notice.map { [$0] } ?? [])
        return outcome.dropped
    }

    /// Drops the mirrors that wrote any byte of `range` in this run (a piece whose digest is wrong, to be fetched
    /// again), each with `reason` (a sentence), except the last one in use. Returns the URLs dropped.
    @discardableResult
    func dropMirrors(thatWrote range: Range<Int64>, reason: String) -> [URL] {
        let outcome = self.state.withLockedValue { $0.dropMirrors(thatWrote: range, reason: reason) }
        self.announce(outcome.notices)
        return outcome.urls
    }

    private func announce(_ notices: [String]) {
        for notice in notices {
            self.logger.info("\(notice)")
            self.emit(.notice(notice))
        }
    }

    /// `error`, the failure of the last mirror in use, with what became of the others when there were several.
    func lastMirrorFailed(_ error: DownloadError) -> DownloadError {
        let mirrors = self.mirrors
        guard mirrors.hasMirrors else { return error }
        var failure = error
        failure.message += " Every URL of the file failed: \(mirrors.summary)."
        return failure
    }

    // MARK: Segmented mode

    /// A new plan for the bytes that are not on disk (bad pieces to fetch again, taken out of the done ranges).
    func replan(_ planner: SegmentPlanner) {
        self.state.withLockedValue { $0.replan(planner) }?.end()
    }

    /// See ``TransferState/acquire(connection:takesOver:now:bufferSize:)``.
    func acquire(connection id: Int, takesOver: Bool = true) -> SegmentPlanner.Lease? {
        let now = ContinuousClock.now
        let bufferSize = self.configuration.writeBufferSize
        return self.state.withLockedValue {
            $0.acquire(connection: id, takesOver: takesOver, now: now, bufferSize: bufferSize)
        }
    }

    /// Connection 1's first range, leased for the probe's response as the plan was made, with the response; `nil`
    /// for another connection, or without a response.
    func acquireProbeRange(connection id: Int) -> (SegmentPlanner.Lease, RunningResponse)? {
        self.state.withLockedValue { $0.takeProbeRange(connection: id) }
    }

    /// The probe's `200`, still streaming, for the stream worker's first attempt; `nil` after the first call.
    func takeStreamStart() -> RunningResponse? {
        self.state.withLockedValue { $0.takeStreamStart() }
    }

    /// Ends the probe's response if no connection took it: its range back in the plan, or the stream's first
    /// attempt (a stream after a pause starts from byte 0 anyway).
    func dropProbeResponse() {
        for response in self.state.withLockedValue({ $0.dropProbeResponse() }) { response.end() }
    }

    /// See ``TransferState/mayTakeLater``.
    var mayTakeLater: Bool {
        self.state.withLockedValue { $0.mayTakeLater }
    }

    func release(_ lease: SegmentPlanner.LeaseID, connection id: Int) {
        self.state.withLockedValue { $0.release(lease, connection: id) }
    }

    /// What is left of a lease now.
    func remaining(_ lease: SegmentPlanner.LeaseID) -> Range<Int64>? {
        self.state.withLockedValue { $0.planner?.lease(lease)?.remaining }
    }

    /// Where connection `id`'s next request for `range` ends: the whole range, or under a bandwidth limit a
    /// tenth of a second of the connection's reading
    /// (see ``Pacing/requestEnd(of:rate:connectionRate:roundTrip:connections:)``).
    func requestEnd(for range: Range<Int64>, connection id: Int) -> Int64 {
        guard let rate = self.pacing.tightestRate else { return range.upperBound }
        let measured = self.state.withLockedValue { $0.pace(ofConnection: id) }
        return Pacing.requestEnd(
            of: range,
            rate: rate,
            connectionRate: measured.rate,
            roundTrip: measured.roundTrip,
            connections: self.configuration.connections
        )
    }

    /// A response's head came for connection `id`'s current request: its round trip, for the paced requests' size.
    func headArrived(connection id: Int) {
        let now = ContinuousClock.now
        self.state.withLockedValue { $0.headArrived(connection: id, now: now) }
    }

    /// See ``SegmentPlanner/claim(_:upTo:)``.
    func claim(_ lease: SegmentPlanner.LeaseID, upTo offset: Int64) -> Int64 {
        self.state.withLockedValue { $0.withPlanner { $0.claim(lease, upTo: offset) } ?? 0 }
    }

    /// Records bytes that came and were dropped unwritten (past what the plan still wanted).
    func dropped(_ count: Int64) {
        self.state.withLockedValue { $0.droppedBytes += count }
    }

    /// Records bytes written by connection `id`.
    func written(_ range: Range<Int64>, connection id: Int) {
        let now = ContinuousClock.now
        let rewrote = self.state.withLockedValue { $0.written(range, connection: id, now: now) }
        // Bytes written a second time (by a racing connection) may differ from the ones hashed already.
        if rewrote {
            self.hasher?.noteRewrite(from: range.lowerBound)
            self.pieceChecker?.noteRewrite(range)
        }
    }

    /// Bytes on disk, in either mode.
    var completedBytes: Int64 {
        self.state.withLockedValue { $0.completedBytes }
    }

    /// How far the file is on disk without a gap from its first byte: what can be hashed so far.
    var contiguousBytes: Int64 {
        self.state.withLockedValue { $0.contiguousBytes }
    }

    /// The bytes on disk, for the journal: the plan's done ranges (none when streaming).
    func doneRanges() -> ByteRangeSet {
        self.state.withLockedValue { $0.planner?.done ?? ByteRangeSet() }
    }

    /// The bytes on disk in either mode: the done ranges, or a stream's start.
    func bytesOnDisk() -> ByteRangeSet {
        self.state.withLockedValue { $0.done }
    }

    var isPlanComplete: Bool {
        self.state.withLockedValue { $0.planner?.isComplete ?? false }
    }

    /// See ``TransferState/prefetched(_:)``.
    func prefetched(_ range: Range<Int64>) {
        self.state.withLockedValue { $0.prefetched(range) }
    }

    // MARK: Stream mode

    func startStream() {
        self.state.withLockedValue { $0.startStream() }
        self.hasher?.noteRewrite(from: 0)
        self.pieceChecker?.noteRewrite(0..<Int64.max)
    }

    /// A stream restarting from byte 0 forgets what it wrote before (its bytes count as wasted).
    func restartStream() {
        self.state.withLockedValue { $0.mode = .stream(received: 0) }
        self.hasher?.noteRewrite(from: 0)
        self.pieceChecker?.noteRewrite(0..<Int64.max)
    }

    func streamed(_ count: Int64, connection id: Int) {
        self.state.withLockedValue { $0.streamed(count, connection: id) }
    }

    /// Records that connection `id` is being replaced by a new one (slow, dropped or failed).
    func noteRestart(connection id: Int) {
        self.state.withLockedValue { $0.noteRestart(connection: id) }
    }

    // MARK: Both

    /// See ``TransferState/setActive(_:connection:continuing:now:)``.
    func setActive(_ active: Bool, connection id: Int, continuing: Bool = false) {
        let now = ContinuousClock.now
        self.state.withLockedValue { $0.setActive(active, connection: id, continuing: continuing, now: now) }
    }

    func snapshot() -> TransferState.Snapshot {
        self.state.withLockedValue { $0.snapshot() }
    }

    /// Sends one `GET` for connection `connection` whose body is written as `target` says, then lets the
    /// writes of whatever arrived land, however the request ended: bytes that came before a failure stay
    /// written. Returns how far the bytes are on disk, whether the request was stopped because another
    /// connection took the rest over (which closed this connection), and the failure, if any. Throws only when
    /// the last writes failed. The watchdog can end the request through ``restart(_:)``.
    func fetch(
        _ target: FileBodyDelegate.Target,
        from url: URL,
        extraHeaders: [(String, String)],
        connection: Int,
        continuing running: RunningResponse? = nil
    ) async throws(AttemptFailure) -> (reached: Int64, stopped: Bool, failure: AttemptFailure?) {
        var target = target
        if !self.pacing.limiters.isEmpty {
            let pacing = self.pacing
            target.pace = { pacing.delay(after: $0) }
        }
        if let window = self.transport.window, running == nil {
            let check = target.checkHead
            target.checkHead = { head in
                do {
                    try check(try window.view(head, isHead: false, url: url))
                } catch let error as DownloadError {
                    throw AttemptFailure.fatal(error)
                }
            }
        }
        if let cookies = self.authorization.cookies {
            let check = target.checkHead
            target.checkHead = { head in
                cookies.absorb(head.headers, from: url)
                try check(head)
            }
        }
        let delegate = FileBodyDelegate(
            target: target,
            file: self.file,
            bufferSize: self.configuration.writeBufferSize,
            eventLoop: running?.eventLoop ?? self.transport.eventLoop(forConnection: connection)
        )
        var failure: AttemptFailure?
        var stopped = false
        do {
            if let running {
                try await running.stream(into: delegate, abort: self.aborts[connection])
            } else {
                try await self.transport.fetch(
                    url: url,
                    headers: self.authorization.headers(self.headers, for: url),
                    extraHeaders: extraHeaders,
                    connection: connection,
                    delegate: delegate,
                    abort: self.aborts[connection]
                )
            }
        } catch is FileBodyDelegate.Stop {
            stopped = true
        } catch {
            failure = SegmentWorker.classify(error, url: url)
        }
        do {
            return (try await delegate.finish().get(), stopped, failure)
        } catch {
            throw failure ?? SegmentWorker.classify(error, url: url)
        }
    }

    /// Ends the request the detector judged too slow, if it is still the one running on that connection.
    func restart(_ verdict: SlowConnectionDetector.Verdict) {
        guard self.state.withLockedValue({ $0.isCurrent(verdict) }) else { return }
        self.aborts[verdict.connection]?.abort(verdict)
    }

    /// What the active connections of a segmented download have done, for the ``SlowConnectionDetector``.
    func readings() -> [SlowConnectionDetector.Reading] {
        self.state.withLockedValue { $0.readings() }
    }

    func emit(_ event: DownloadEvent) {
        self.hub.emit(event)
    }

    /// The host whose connection budget a stream's requests count against.
    var host: String {
        self.state.withLockedValue { $0.remoteFile.url.host ?? "" }
    }

    /// Waits for a permit to open a connection to `host` (see ``ConnectionBudget``); give it back with
    /// ``releasePermit(host:)``.
    func acquirePermit(host: String) async throws(AttemptFailure) {
        do {
            try await self.budget.acquire(host: host)
        } catch {
            throw .fatal(.cancelled)
        }
    }

    func releasePermit(host: String) {
        self.budget.release(host: host)
    }

    /// After a failed attempt: gives up when the tries are used up (or the download is cancelled), else logs,
    /// reports and sleeps the back-off, at least what the server asked for in `Retry-After`.
    func waitBeforeRetry(
        connection: Int,
        failuresWithoutProgress: Int,
        error: DownloadError,
        retryAfter: Duration?
    ) async throws(AttemptFailure) {
        if Task.isCancelled { throw .fatal(.cancelled) }
        guard failuresWithoutProgress < self.configuration.retry.maximumTries else { throw .fatal(error) }
        let delay = RetryPolicy(configuration: self.configuration.retry).delay(
            beforeRetry: failuresWithoutProgress,
            retryAfter: retryAfter
        )
        self.logger.info(
            "Request failed, retrying",
            metadata: ["connection": "\(connection)", "error": "\(error)", "delay": "\(delay)"]
        )
        self.emit(
            .retrying(connection: connection, attempt: failuresWithoutProgress, delay: delay, reason: error.message)
        )
        do {
            try await Task.sleep(for: delay)
        } catch {
            throw .fatal(.cancelled)
        }
    }
}
