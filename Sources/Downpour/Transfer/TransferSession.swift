import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The state the connections of one download share, behind one lock: the plan, per-connection counters,
/// and the event stream. Kept small so the lock is held for microseconds.
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
    private let state: NIOLockedValueBox<State>
    /// One per connection, made up front: ends that connection's current request from another task.
    private let aborts: [Int: RequestAbort]
    /// Credentials and cookies for each request; takes in the cookies the responses set.
    let authorization: RequestAuthorization

    struct ConnectionState {
        var receivedBytes: Int64 = 0
        var lease: SegmentPlanner.LeaseID?
        var active = false
        /// Counts the requests this connection has started.
        var attempts = 0
        /// Counts the times it was replaced by a new connection: restarted for being slow, or after a failure.
        var restarts = 0
        /// The bytes it wrote and the seconds they took, each a moving average over its writes (decaying by 0.3 a
        /// write); kept when the connection goes idle.
        var recent: (bytes: Double, seconds: Double)?
        /// Bytes per second: ``recent``'s bytes over its seconds.
        var rate: Double? { self.recent.map { $0.bytes / $0.seconds } }
        /// When its current request started, or last wrote.
        var lastProgress: ContinuousClock.Instant?
        /// When its current request started, and whether it has written since.
        var requestStarted: ContinuousClock.Instant?
        var wroteSinceRequest = false
        /// The mirror (an index in ``State/mirrors``) its current or last request went to.
        var mirror: Int?

        /// Its speed now: the moving average, but no more than one write buffer over the time since its last
        /// write (so a connection that stalled counts as slow at once).
        func currentRate(now: ContinuousClock.Instant, bufferSize: Int) -> Double? {
            guard let lastProgress else { return self.rate }
            let bound = Double(bufferSize) / max((now - lastProgress).inSeconds, 1e-6)
            return min(self.rate ?? bound, bound)
        }

        /// Its speed as racing judges it: the moving average while it wrote within ``pauseGrace``, its current
        /// rate after a longer pause. A pause of a few hundred milliseconds (the disk taking a burst of writes, a
        /// busy processor) is not a slow connection, and racing it would only ask for its bytes twice.
        func racingRate(now: ContinuousClock.Instant, bufferSize: Int) -> Double? {
            if let rate = self.rate, let lastProgress = self.lastProgress, now - lastProgress < Self.pauseGrace {
                return rate
            }
            return self.currentRate(now: now, bufferSize: bufferSize)
        }

        static let pauseGrace = Duration.milliseconds(500)
    }

    /// How the bytes are fetched, changed in place: in ranges, or as one plain stream from byte 0.
    enum Mode {
        /// In ranges over several connections: the plan, whose done ranges the journal records.
        case segmented(SegmentPlanner)
        /// As one stream: the bytes on disk are everything before `received`.
        case stream(received: Int64)
    }

    struct State {
        /// The file as the probe found it; it loses its ranges when the server turns out to ignore them.
        var remoteFile: RemoteFile
        var mode: Mode
        /// Bytes written in this run, over every transfer of it (a start over included).
        var bytesThisRun: Int64 = 0
        /// Bytes that came in this run and were dropped unwritten: past what the plan still wanted of a range.
        var droppedBytes: Int64 = 0
        /// The bytes of earlier runs (the journal's) the file still counts on: none after a start over, fewer after
        /// pieces are fetched again.
        var carried = ByteRangeSet()
        var carriedBytes: Int64 = 0
        var connections: [Int: ConnectionState] = [:]
        var mostActiveConnections = 0
        /// Requests whose bytes were written before any connection ran: the probe's.
        var prefetchRequests = 0
        /// The URLs the ranges come from, and which bytes each wrote in this run.
        var mirrors: MirrorSet
        /// The probe's response, still streaming, and the range leased for it, until connection 1 takes them on
        /// as its first range: leased as the plan is made, so that no other connection takes those bytes first.
        var probeRange: (lease: SegmentPlanner.Lease, running: RunningResponse)?
        /// The probe's `200`, still streaming, until the stream worker takes it on as its first attempt.
        var streamStart: RunningResponse?

        /// The plan, when segmented.
        var planner: SegmentPlanner? {
            guard case .segmented(let planner) = self.mode else { return nil }
            return planner
        }

        /// Bytes on disk, in either mode.
        var completedBytes: Int64 {
            switch self.mode {
            case .segmented(let planner): planner.completedBytes
            case .stream(let received): received
            }
        }

        /// The bytes on disk, in either mode: the done ranges, or a stream's start.
        var done: ByteRangeSet {
            switch self.mode {
            case .segmented(let planner): planner.done
            case .stream(let received): received > 0 ? ByteRangeSet([0..<received]) : ByteRangeSet()
            }
        }

        /// Bytes that came in this run and are not new bytes of the file: a range fetched twice (a racing copy, a
        /// piece that failed its check, a transfer started over) or dropped past what the plan wanted.
        var wastedBytes: Int64 {
            max(0, self.bytesThisRun + self.droppedBytes - (self.completedBytes - self.carriedBytes))
        }

        /// A new transfer in `mode`: the connections' counters and the bytes each mirror wrote belong to the one
        /// before (dropped mirrors stay dropped); the bytes of this run are still counted.
        mutating func forgetTransfer(mode: Mode) {
            self.probeRange?.running.end()
            self.probeRange = nil
            self.streamStart?.end()
            self.streamStart = nil
            self.mode = mode
            self.carried = ByteRangeSet()
            self.carriedBytes = 0
            self.connections = [:]
            self.mostActiveConnections = 0
            self.prefetchRequests = 0
            self.mirrors = self.mirrors.forgettingWrites()
        }

        /// Leases the bytes `running` carries from its first, up to one connection's share of the missing bytes or
        /// on to the end of the free range that share ends in (``SegmentPlanner/acquire(covering:)``); a response
        /// longer than its lease is cut at the lease's end, for the others to have theirs. `false` when its first
        /// bytes are not free.
        mutating func reserve(_ running: RunningResponse, connections: Int) -> Bool {
            guard let planner = self.planner else { return false }
            let share = max(planner.minimumSplitSize, (planner.length - planner.completedBytes) / Int64(connections))
            let covered = running.range.clamped(to: running.range.lowerBound..<(running.range.lowerBound + share))
            guard let lease = self.withPlanner({ $0.acquire(covering: covered) }) ?? nil else { return false }
            self.probeRange = (lease, running)
            return true
        }

        /// Changes the plan in place, when segmented; `nil` when streaming. The mode lets go of the planner while
        /// `body` runs, so that its storage is not copied on every write.
        mutating func withPlanner<Result>(_ body: (inout SegmentPlanner) -> Result) -> Result? {
            guard case .segmented(var planner) = self.mode else { return nil }
            self.mode = .stream(received: 0)
            defer { self.mode = .segmented(planner) }
            return body(&planner)
        }
    }

    /// Where one connection's requests go for now (see ``mirror(forConnection:)``).
    struct Source: Sendable {
        /// An index in the download's ``MirrorSet``.
        var index: Int
        var url: URL
        /// The file as this mirror must describe it: the length, and its own validators when known.
        var remote: RemoteFile
        /// Whether the download has more than one URL.
        var hasMirrors: Bool

        /// The host whose connection budget its requests count against.
        var host: String { self.url.host ?? "" }
    }

    init(
        transport: HTTPTransport,
        file: OutputFile,
        remoteFile: RemoteFile,
        mode: Mode = .stream(received: 0),
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
        var state = State(
            remoteFile: remoteFile,
            mode: mode,
            mirrors: mirrors ?? MirrorSet(remote: remoteFile, url: remoteFile.url)
        )
        state.carried = resumed
        state.carriedBytes = resumed.byteCount
        // The probe's response goes on as connection 1's first range, leased now (one whose first bytes are done
        // is ended), or as the stream's first attempt.
        if let probeResponse {
            switch mode {
            case .stream(received: 0) where probeResponse.isWholeFile:
                state.streamStart = probeResponse
            case .segmented where !probeResponse.isWholeFile:
                if !state.reserve(probeResponse, connections: max(configuration.connections, 1)) {
                    probeResponse.end()
                }
            default:
                probeResponse.end()
            }
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
    var mode: Mode {
        self.state.withLockedValue { $0.mode }
    }

    /// Whether the bytes are fetched in ranges (the plan's done ranges are what the journal may record).
    var isSegmented: Bool {
        self.state.withLockedValue { $0.planner != nil }
    }

    /// The server ignores ranges: the file is fetched as one stream from byte 0, and nothing of the plan stays.
    func fallBackToStream() {
        self.state.withLockedValue { state in
            state.remoteFile.acceptsRanges = false
            state.forgetTransfer(mode: .stream(received: 0))
        }
    }

    /// The download begins again from nothing with `planner`, and its digest is made again from byte 0.
    func startOver(_ planner: SegmentPlanner) {
        self.state.withLockedValue { $0.forgetTransfer(mode: .segmented(planner)) }
        self.hasher?.noteRewrite(from: 0)
        self.pieceChecker?.startOver()
    }

    // MARK: Mirrors

    /// The URLs of the file as they stand: which are in use, which were dropped and why.
    var mirrors: MirrorSet {
        self.state.withLockedValue { $0.mirrors }
    }

    /// The mirror connection `id` fetches from now: the one it had while that one lives, else the live one with
    /// the fewest connections.
    func mirror(forConnection id: Int) -> Source {
        self.state.withLockedValue { state in
            let index = state.mirrors.assign(connection: id)
            state.connections[id, default: ConnectionState()].mirror = index
            return Source(
                index: index,
                url: state.mirrors.mirrors[index].fetchURL,
                remote: state.mirrors.remoteFile(for: index, file: state.remoteFile),
                hasMirrors: state.mirrors.hasMirrors
            )
        }
    }

    /// The file as mirror `index` must describe it now: its own validators once known.
    func remoteFile(forMirror index: Int) -> RemoteFile {
        self.state.withLockedValue { $0.mirrors.remoteFile(for: index, file: $0.remoteFile) }
    }

    /// Whether mirror `index` is still in use.
    func isLive(mirror index: Int) -> Bool {
        self.state.withLockedValue { $0.mirrors.mirrors[index].isLive }
    }

    /// Checks a `206` from mirror `index` for `asked` against what that mirror must match (the file's length, its
    /// own validators once known), and records its validators when it is the mirror's first checked response.
    /// Under the lock, so that two first responses from one mirror cannot both set its validators.
    func checkPartial(_ headers: HTTPHeaders, asked: Range<Int64>, mirror index: Int) throws(AttemptFailure) {
        let failure: AttemptFailure? = self.state.withLockedValue { state in
            let remote = state.mirrors.remoteFile(for: index, file: state.remoteFile)
            if index != state.mirrors.primary, let length = remote.length,
                let total = headers.value("Content-Range").flatMap({ ContentRange($0) })?.completeLength,
                total != length
            {
                return .fatal(
                    DownloadError(
                        code: .remoteChanged,
                        message: "it serves a file of \(total) bytes, not \(length) as "
                            + "\(state.mirrors.mirrors[state.mirrors.primary].url.absoluteString) does."
                    )
                )
            }
            do throws(AttemptFailure) {
                try ResponseValidator.checkPartial(headers, asked: asked, remote: remote)
            } catch {
                return error
            }
            state.mirrors.recordChecked(
                index,
                etag: headers.value("ETag"),
                lastModified: headers.value("Last-Modified")
            )
            return nil
        }
        if let failure { throw failure }
    }

    /// Moves mirror `index`'s requests to `location`, where it redirected a range request (see
    /// ``MirrorSet/redirect(_:from:to:limit:)``). Returns why it cannot follow, as a sentence; `nil` when it moved.
    func redirectMirror(_ index: Int, from requested: URL, to location: URL) -> String? {
        let limit = self.configuration.maximumRedirects
        let failure = self.state.withLockedValue {
            $0.mirrors.redirect(index, from: requested, to: location, limit: limit)
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
        let outcome = self.state.withLockedValue { state -> (dropped: Bool, notices: [String]) in
            guard state.mirrors.mirrors[index].isLive else { return (true, []) }
            guard state.mirrors.drop(index, because: reason) else { return (false, []) }
            return (true, [Self.dropNotice(index, reason: reason, mirrors: state.mirrors)])
        }
        self.announce(outcome.notices)
        return outcome.dropped
    }

    /// Drops the mirrors that wrote any byte of `range` in this run (a piece whose digest is wrong, to be fetched
    /// again), each with `reason` (a sentence), except the last one in use. Returns the URLs dropped.
    @discardableResult
    func dropMirrors(thatWrote range: Range<Int64>, reason: String) -> [URL] {
        let (dropped, notices) = self.state.withLockedValue { state -> ([URL], [String]) in
            var dropped: [URL] = []
            var notices: [String] = []
            // One at a time, so that each notice counts the URLs left after it.
            for index in state.mirrors.writers(of: range) where state.mirrors.mirrors[index].isLive {
                guard state.mirrors.drop(index, because: reason) else { continue }
                dropped.append(state.mirrors.mirrors[index].url)
                notices.append(Self.dropNotice(index, reason: reason, mirrors: state.mirrors))
            }
            return (dropped, notices)
        }
        self.announce(notices)
        return dropped
    }

    private static func dropNotice(_ index: Int, reason: String, mirrors: MirrorSet) -> String {
        let left = mirrors.liveCount
        return "Dropped the mirror \(MirrorSet.key(mirrors.mirrors[index].url)): \(reason) \(left) URL"
            + (left == 1 ? "" : "s") + " left."
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
        let running = self.state.withLockedValue { state in
            defer { state.probeRange = nil }
            state.mode = .segmented(planner)
            // What is left of the resumed bytes: those of the pieces fetched again no longer count.
            state.carriedBytes = state.carried.ranges.reduce(0) { sum, range in
                sum + Int64(range.count) - planner.done.gaps(in: range).reduce(0) { $0 + Int64($1.count) }
            }
            return state.probeRange?.running
        }
        running?.end()
    }

    /// Work for connection `id`, or `nil` when there is none left for it. A connection that was closed because
    /// another took its work over (`takesOver` false) gets only free ranges: splitting or racing from a new
    /// connection means a TCP handshake and a slow start, which on a long link costs more than it saves, and
    /// would cut one more warm connection in turn.
    func acquire(connection id: Int, takesOver: Bool = true) -> SegmentPlanner.Lease? {
        let now = ContinuousClock.now
        let bufferSize = self.configuration.writeBufferSize
        return self.state.withLockedValue { state in
            let connections = state.connections
            // Also a holder between two requests of its lease (waiting to retry): its silence may be worth a racer.
            let holders = Dictionary(
                connections.compactMap { key, value in value.lease.map { ($0, key) } },
                uniquingKeysWith: { first, _ in first }
            )
            let worthRacing = { (lease: SegmentPlanner.Lease) -> Bool in
                guard let holder = holders[lease.id], let state = connections[holder] else { return false }
                return Self.isWorthRacing(
                    state,
                    remaining: Int64(lease.remaining.count),
                    others: connections.filter { $0.key != holder }.compactMap(\.value.rate),
                    now: now,
                    bufferSize: bufferSize
                )
            }
            let worthSplitting = { (lease: SegmentPlanner.Lease) -> Bool in
                Self.isWorthSplitting(
                    holders[lease.id].flatMap { connections[$0] },
                    remaining: Int64(lease.remaining.count),
                    now: now,
                    bufferSize: bufferSize
                )
            }
            guard
                let lease = state.withPlanner({
                    $0.acquire(takesOver: takesOver, isWorthSplitting: worthSplitting, isWorthRacing: worthRacing)
                }) ?? nil
            else {
                return nil
            }
            state.connections[id, default: ConnectionState()].lease = lease.id
            return lease
        }
    }

    /// Whether the tail a connection (`holder`) still has to fetch, `remaining` bytes, is worth a racer: only with
    /// evidence that it comes slowly, since the server then sends those bytes twice. The holder's speed
    /// (``ConnectionState/racingRate(now:bufferSize:)``) must be under half the median of the `others`' speeds,
    /// and the tail must still need ``minimumRaceGain`` at it. No speed yet is no evidence, nor is a request still
    /// waiting for its first bytes, until ``firstBytesGrace`` has passed (that wait is a round trip and the
    /// server's, not a transfer). A holder with no other connection to compare with, or between two requests
    /// (waiting to retry), is raced once it has been silent that long.
    static func isWorthRacing(
        _ holder: ConnectionState,
        remaining: Int64,
        others: [Double],
        now: ContinuousClock.Instant,
        bufferSize: Int
    ) -> Bool {
        // Between requests (waiting to retry), or with no other connection to compare with: its own silence, as long
        // as a first byte may take, is the evidence.
        guard holder.active, !others.isEmpty else {
            return holder.lastProgress.map { now - $0 >= Self.firstBytesGrace } ?? false
        }
        if !holder.wroteSinceRequest, let started = holder.requestStarted, now - started < Self.firstBytesGrace {
            return false
        }
        guard let rate = holder.racingRate(now: now, bufferSize: bufferSize) else { return false }
        let median = others.sorted()[others.count / 2]
        let secondsLeft = Double(remaining) / max(rate, 1)
        return rate < 0.5 * median && secondsLeft >= Self.minimumRaceGain.inSeconds
    }

    /// Whether the back half of a lease is worth taking from its `holder`: not when the holder, writing at its
    /// speed, will be done within ``minimumSplitGain``. Its response carries that half already, and a server that
    /// sends fast has written much of it into the sockets by now: taking it would ask for those bytes again and
    /// gain nothing a person notices. Without a speed to go by (no bytes yet in this request), it is taken.
    static func isWorthSplitting(
        _ holder: ConnectionState?,
        remaining: Int64,
        now: ContinuousClock.Instant,
        bufferSize: Int
    ) -> Bool {
        guard let holder, holder.active, holder.wroteSinceRequest,
            let rate = holder.racingRate(now: now, bufferSize: bufferSize)
        else { return true }
        return Double(remaining) / max(rate, 1) >= Self.minimumSplitGain.inSeconds
    }

    /// The least time a lease must still need at its connection's speed to be split: a few round trips of a far
    /// link (a split there still halves a tail worth it), and far more than what a loopback or LAN range needs.
    static let minimumSplitGain = Duration.milliseconds(200)

    /// How long a request may wait for its first bytes before its connection counts as slow for racing.
    static let firstBytesGrace = Duration.seconds(2)
    /// The least time a tail must still need at its connection's speed to be raced.
    static let minimumRaceGain = Duration.milliseconds(500)

    /// Connection 1's first range, leased for the probe's response as the plan was made, with the response; `nil`
    /// for another connection, or without a response.
    func acquireProbeRange(connection id: Int) -> (SegmentPlanner.Lease, RunningResponse)? {
        guard id == 1 else { return nil }
        return self.state.withLockedValue { state in
            guard let reserved = state.probeRange else { return nil }
            state.probeRange = nil
            state.connections[id, default: ConnectionState()].lease = reserved.lease.id
            return (reserved.lease, reserved.running)
        }
    }

    /// The probe's `200`, still streaming, for the stream worker's first attempt; `nil` after the first call.
    func takeStreamStart() -> RunningResponse? {
        self.state.withLockedValue { state in
            defer { state.streamStart = nil }
            return state.streamStart
        }
    }

    /// Ends the probe's response if no connection took it: its range back in the plan, or the stream's first
    /// attempt (a stream after a pause starts from byte 0 anyway).
    func dropProbeResponse() {
        let running = self.state.withLockedValue { state -> [RunningResponse] in
            defer { state.streamStart = nil }
            guard let reserved = state.probeRange else { return state.streamStart.map { [$0] } ?? [] }
            state.probeRange = nil
            state.withPlanner { $0.release(reserved.lease.id) }
            return [reserved.running] + (state.streamStart.map { [$0] } ?? [])
        }
        for response in running { response.end() }
    }

    /// Whether a connection with nothing to do should look again soon: some lease could be raced, only its
    /// connection is not (yet) slow enough to be worth it.
    var mayRaceLater: Bool {
        self.state.withLockedValue { !($0.planner?.raceCandidates().isEmpty ?? true) }
    }

    func release(_ lease: SegmentPlanner.LeaseID, connection id: Int) {
        self.state.withLockedValue { state in
            state.withPlanner { $0.release(lease) }
            state.connections[id]?.lease = nil
        }
    }

    /// What is left of a lease now.
    func remaining(_ lease: SegmentPlanner.LeaseID) -> Range<Int64>? {
        self.state.withLockedValue { $0.planner?.lease(lease)?.remaining }
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
        let watchesRewrites = self.hasher != nil || self.pieceChecker != nil
        let rewrote = self.state.withLockedValue { state in
            // Bytes written a second time (by a racing connection) may differ from the ones hashed already.
            let rewrote = watchesRewrites && state.planner?.done.overlaps(range) == true
            state.withPlanner { $0.markDone(range) }
            state.bytesThisRun += Int64(range.count)
            var connection = state.connections[id, default: ConnectionState()]
            if let mirror = connection.mirror {
                state.mirrors.noteWritten(range, by: mirror)
            }
            connection.receivedBytes += Int64(range.count)
            if let last = connection.lastProgress {
                // A moving average of bytes and of time, not of rates: writes that come in bursts and gaps (a
                // server that paces its sends) average to the speed that was had, where an average of each
                // write's rate would count the bursts' rates up to several times over.
                let seconds = max((now - last).inSeconds, 1e-6)
                let bytes = Double(range.count)
                let recent = connection.recent.map { (0.7 * $0.bytes + bytes, 0.7 * $0.seconds + seconds) }
                connection.recent = recent ?? (bytes, seconds)
            }
            connection.lastProgress = now
            connection.wroteSinceRequest = true
            state.connections[id] = connection
            return rewrote
        }
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
        self.state.withLockedValue { state in
            guard case .segmented(let planner) = state.mode else { return state.completedBytes }
            guard let first = planner.done.ranges.first, first.lowerBound == 0 else { return 0 }
            return first.upperBound
        }
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

    /// Records the bytes the probe's own request brought, written before any connection ran (the plan or the
    /// stream has them already as done): they count as bytes of this run, from one more request.
    func prefetched(_ range: Range<Int64>) {
        self.state.withLockedValue { state in
            if case .stream = state.mode { state.mode = .stream(received: range.upperBound) }
            state.mirrors.noteWritten(range, by: state.mirrors.primary)
            state.bytesThisRun += Int64(range.count)
            state.prefetchRequests += 1
        }
    }

    // MARK: Stream mode

    func startStream() {
        self.state.withLockedValue { state in
            state.mode = .stream(received: 0)
            for id in state.connections.keys {
                state.connections[id]?.lease = nil
            }
        }
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
        self.state.withLockedValue { state in
            if case .stream(let received) = state.mode { state.mode = .stream(received: received + count) }
            state.bytesThisRun += count
            state.connections[id, default: ConnectionState()].receivedBytes += count
        }
    }

    /// Records that connection `id` is being replaced by a new one (slow, dropped or failed).
    func noteRestart(connection id: Int) {
        self.state.withLockedValue { state in
            state.connections[id, default: ConnectionState()].restarts += 1
        }
    }

    // MARK: Both

    func setActive(_ active: Bool, connection id: Int) {
        self.state.withLockedValue { state in
            state.connections[id, default: ConnectionState()].active = active
            if active {
                let now = ContinuousClock.now
                state.connections[id]!.attempts += 1
                state.connections[id]!.lastProgress = now
                state.connections[id]!.requestStarted = now
                state.connections[id]!.wroteSinceRequest = false
            }
            let count = state.connections.values.filter(\.active).count
            state.mostActiveConnections = max(state.mostActiveConnections, count)
        }
    }

    struct Snapshot {
        var completedBytes: Int64
        var completedRanges: [Range<Int64>]
        var bytesThisRun: Int64
        /// See ``State/wastedBytes``.
        var wastedBytes: Int64
        var connections: [(id: Int, state: ConnectionState, remaining: Range<Int64>?, source: URL?)]
        var mostActiveConnections: Int
        /// Requests whose bytes were written before any connection ran (the probe's).
        var prefetchRequests: Int

        /// Requests started, over all connections, and the probe's when its bytes were kept.
        var requests: Int {
            self.connections.reduce(self.prefetchRequests) { $0 + $1.state.attempts }
        }
    }

    func snapshot() -> Snapshot {
        self.state.withLockedValue { state in
            Snapshot(
                completedBytes: state.completedBytes,
                completedRanges: Array(state.done.ranges),
                bytesThisRun: state.bytesThisRun,
                wastedBytes: state.wastedBytes,
                connections: state.connections.keys.sorted().map { id in
                    let connection = state.connections[id]!
                    return (
                        id, connection, connection.lease.flatMap { state.planner?.lease($0)?.remaining },
                        connection.mirror.map { state.mirrors.mirrors[$0].fetchURL }
                    )
                },
                mostActiveConnections: state.mostActiveConnections,
                prefetchRequests: state.prefetchRequests
            )
        }
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
        let current = self.state.withLockedValue { state in
            state.connections[verdict.connection].map { $0.active && $0.attempts == verdict.attempt } ?? false
        }
        guard current else { return }
        self.aborts[verdict.connection]?.abort(verdict)
    }

    /// What the active connections of a segmented download have done, for the ``SlowConnectionDetector``.
    func readings() -> [SlowConnectionDetector.Reading] {
        self.state.withLockedValue { state in
            guard let planner = state.planner else { return [] }
            return state.connections.compactMap { id, connection in
                guard connection.active, let lease = connection.lease, let remaining = planner.lease(lease)?.remaining
                else { return nil }
                return SlowConnectionDetector.Reading(
                    connection: id,
                    attempt: connection.attempts,
                    bytes: connection.receivedBytes,
                    remaining: Int64(remaining.count)
                )
            }
        }
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
