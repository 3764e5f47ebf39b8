import Foundation

/// What the connections of one download share: the plan (or the stream), each connection's counters and speed, the
/// mirrors, and the bytes of this run. A value with no I/O and no clock of its own: every decision that depends on
/// time takes `now`, and the responses it lets go of are returned for the caller to end. ``TransferSession`` holds
/// it behind its lock; the tests drive it as a table.
struct TransferState {
    /// One connection's counters and speed.
    struct Connection {
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
        /// Bytes per second while reading: ``reading``'s bytes over its seconds.
        var readingRate: Double? { self.reading.map { $0.bytes / $0.seconds } }

        /// `average` with a write of `bytes` over the `seconds` since `last` taken in. A moving average of bytes
        /// and of time, not of rates: writes that come in bursts and gaps (a server that paces its sends) average
        /// to the speed that was had, where an average of each write's rate would count the bursts' rates up to
        /// several times over.
        static func averaged(
            _ average: (bytes: Double, seconds: Double)?,
            bytes: Int,
            since last: ContinuousClock.Instant,
            now: ContinuousClock.Instant
        ) -> (bytes: Double, seconds: Double) {
            let seconds = max((now - last).inSeconds, 1e-6)
            let bytes = Double(bytes)
            return average.map { (0.7 * $0.bytes + bytes, 0.7 * $0.seconds + seconds) } ?? (bytes, seconds)
        }
        /// When its current request started, or last wrote.
        var lastProgress: ContinuousClock.Instant?
        /// When its current request started, and whether it has written since.
        var requestStarted: ContinuousClock.Instant?
        var wroteSinceRequest = false
        /// Whether its current request was sent by it (not a response already on its way, taken on), so that the
        /// wait for its first bytes says how near its server is.
        var timesFirstBytes = false
        /// The shortest wait of its requests for their first bytes: a round trip and the server's answer, so
        /// how near its server is.
        var quickestFirstBytes: Duration?
        /// The shortest wait of its requests for a response's head: a round trip and the server's answer, unlike
        /// ``quickestFirstBytes`` untouched by a bandwidth limit's pauses.
        var quickestHead: Duration?
        /// When its current request's response head came, or it last wrote since.
        var lastRead: ContinuousClock.Instant?
        /// Like ``recent``, but over the time its responses were being read, not the waits for their heads: the
        /// speed a paced connection reads at, for the size of its next request.
        var reading: (bytes: Double, seconds: Double)?
        /// The mirror (an index in ``TransferState/mirrors``) its current or last request went to.
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

    /// Where one connection's requests go for now (see ``assignMirror(connection:)``).
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
    var connections: [Int: Connection] = [:]
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

    init(remoteFile: RemoteFile, mode: Mode, mirrors: MirrorSet? = nil, resumed: ByteRangeSet = ByteRangeSet()) {
        self.remoteFile = remoteFile
        self.mode = mode
        self.mirrors = mirrors ?? MirrorSet(remote: remoteFile, url: remoteFile.url)
        self.carried = resumed
        self.carriedBytes = resumed.byteCount
    }

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

    /// How far the file is on disk without a gap from its first byte: what can be hashed so far.
    var contiguousBytes: Int64 {
        guard case .segmented(let planner) = self.mode else { return self.completedBytes }
        guard let first = planner.done.ranges.first, first.lowerBound == 0 else { return 0 }
        return first.upperBound
    }

    /// Bytes that came in this run and are not new bytes of the file: a range fetched twice (a racing copy, a
    /// piece that failed its check, a transfer started over) or dropped past what the plan wanted.
    var wastedBytes: Int64 {
        max(0, self.bytesThisRun + self.droppedBytes - (self.completedBytes - self.carriedBytes))
    }

    /// Changes the plan in place, when segmented; `nil` when streaming. The mode lets go of the planner while
    /// `body` runs, so that its storage is not copied on every write.
    mutating func withPlanner<Result>(_ body: (inout SegmentPlanner) -> Result) -> Result? {
        guard case .segmented(var planner) = self.mode else { return nil }
        self.mode = .stream(received: 0)
        defer { self.mode = .segmented(planner) }
        return body(&planner)
    }

    // MARK: The probe's response

    /// Takes the probe's response on: as connection 1's first range, leased now, or as the stream's first
    /// attempt. Returns it when it has no place (its first bytes are done, or it does not fit the mode): the
    /// caller ends it.
    mutating func adopt(probeResponse: RunningResponse, connections: Int) -> RunningResponse? {
        switch self.mode {
        case .stream(received: 0) where probeResponse.isWholeFile:
            self.streamStart = probeResponse
            return nil
        case .segmented where !probeResponse.isWholeFile:
            return self.reserve(probeResponse, connections: connections) ? nil : probeResponse
        default:
            return probeResponse
        }
    }

    /// Leases the bytes `running` carries from its first, up to one connection's share of the missing bytes or
    /// on to the end of the free range that share ends in (``SegmentPlanner/acquire(covering:)``); a response
    /// longer than its lease is cut at the lease's end, for the others to have theirs. `false` when its first
    /// bytes are not free.
    private mutating func reserve(_ running: RunningResponse, connections: Int) -> Bool {
        guard let planner = self.planner else { return false }
        let share = max(planner.minimumSplitSize, (planner.length - planner.completedBytes) / Int64(connections))
        let covered = running.range.clamped(to: running.range.lowerBound..<(running.range.lowerBound + share))
        guard let lease = self.withPlanner({ $0.acquire(covering: covered) }) ?? nil else { return false }
        self.probeRange = (lease, running)
        return true
    }

    /// Connection 1's first range, leased for the probe's response as the plan was made, with the response;
    /// `nil` for another connection, or without a response.
    mutating func takeProbeRange(connection id: Int) -> (SegmentPlanner.Lease, RunningResponse)? {
        guard id == 1, let reserved = self.probeRange else { return nil }
        self.probeRange = nil
        self.connections[id, default: Connection()].lease = reserved.lease.id
        return (reserved.lease, reserved.running)
    }

    /// The probe's `200`, still streaming, for the stream worker's first attempt; `nil` after the first call.
    mutating func takeStreamStart() -> RunningResponse? {
        defer { self.streamStart = nil }
        return self.streamStart
    }

    /// Lets go of the probe's response if no connection took it (its range back in the plan); returns the
    /// responses for the caller to end.
    mutating func dropProbeResponse() -> [RunningResponse] {
        defer { self.streamStart = nil }
        guard let reserved = self.probeRange else { return self.streamStart.map { [$0] } ?? [] }
        self.probeRange = nil
        self.withPlanner { $0.release(reserved.lease.id) }
        return [reserved.running] + (self.streamStart.map { [$0] } ?? [])
    }

    // MARK: Transfers

    /// A new transfer in `mode`: the connections' counters and the bytes each mirror wrote belong to the one
    /// before (dropped mirrors stay dropped); the bytes of this run are still counted. Returns the probe's
    /// responses nobody took, for the caller to end.
    mutating func forgetTransfer(mode: Mode) -> [RunningResponse] {
        let unused = [self.probeRange?.running, self.streamStart].compactMap { $0 }
        self.probeRange = nil
        self.streamStart = nil
        self.mode = mode
        self.carried = ByteRangeSet()
        self.carriedBytes = 0
        self.connections = [:]
        self.mostActiveConnections = 0
        self.prefetchRequests = 0
        self.mirrors = self.mirrors.forgettingWrites()
        return unused
    }

    /// A new plan for the bytes that are not on disk (bad pieces to fetch again, taken out of the done ranges).
    /// Returns the probe's response if it still waited, for the caller to end.
    mutating func replan(_ planner: SegmentPlanner) -> RunningResponse? {
        defer { self.probeRange = nil }
        self.mode = .segmented(planner)
        // What is left of the resumed bytes: those of the pieces fetched again no longer count.
        self.carriedBytes = self.carried.ranges.reduce(0) { sum, range in
            sum + Int64(range.count) - planner.done.gaps(in: range).reduce(0) { $0 + Int64($1.count) }
        }
        return self.probeRange?.running
    }

    /// Records the bytes the probe's own request brought, written before any connection ran (the plan or the
    /// stream has them already as done): they count as bytes of this run, from one more request.
    mutating func prefetched(_ range: Range<Int64>) {
        if case .stream = self.mode { self.mode = .stream(received: range.upperBound) }
        self.mirrors.noteWritten(range, by: self.mirrors.primary)
        self.bytesThisRun += Int64(range.count)
        self.prefetchRequests += 1
    }

    /// The transfer goes on as one stream from byte 0: the connections let go of their leases.
    mutating func startStream() {
        self.mode = .stream(received: 0)
        for id in self.connections.keys {
            self.connections[id]?.lease = nil
        }
    }

    mutating func streamed(_ count: Int64, connection id: Int) {
        if case .stream(let received) = self.mode { self.mode = .stream(received: received + count) }
        self.bytesThisRun += count
        self.connections[id, default: Connection()].receivedBytes += count
    }

    // MARK: Connections

    /// Connection `id` starts a request (`active`), or has none running. A request that goes on with a response
    /// already on its way (`continuing`) does not time its first bytes.
    mutating func setActive(
        _ active: Bool,
        connection id: Int,
        continuing: Bool = false,
        now: ContinuousClock.Instant
    ) {
        var connection = self.connections[id, default: Connection()]
        connection.active = active
        if active {
            connection.attempts += 1
            connection.lastProgress = now
            connection.requestStarted = now
            connection.wroteSinceRequest = false
            connection.timesFirstBytes = !continuing
            // A response already on its way has its head: it is read from now on.
            connection.lastRead = continuing ? now : nil
        }
        self.connections[id] = connection
        let count = self.connections.values.filter(\.active).count
        self.mostActiveConnections = max(self.mostActiveConnections, count)
    }

    /// Records bytes written by connection `id`; `true` when some of them were written before (by a racing
    /// connection), which may differ from the ones hashed already.
    mutating func written(_ range: Range<Int64>, connection id: Int, now: ContinuousClock.Instant) -> Bool {
        let rewrote = self.planner?.done.overlaps(range) == true
        self.withPlanner { $0.markDone(range) }
        self.bytesThisRun += Int64(range.count)
        var connection = self.connections[id, default: Connection()]
        if let mirror = connection.mirror {
            self.mirrors.noteWritten(range, by: mirror)
        }
        connection.receivedBytes += Int64(range.count)
        if let last = connection.lastProgress {
            connection.recent = Connection.averaged(connection.recent, bytes: range.count, since: last, now: now)
        }
        if let lastRead = connection.lastRead {
            connection.reading = Connection.averaged(connection.reading, bytes: range.count, since: lastRead, now: now)
            connection.lastRead = now
        }
        if !connection.wroteSinceRequest, connection.timesFirstBytes, let started = connection.requestStarted {
            connection.quickestFirstBytes = min(connection.quickestFirstBytes ?? .seconds(3600), now - started)
        }
        connection.lastProgress = now
        connection.wroteSinceRequest = true
        self.connections[id] = connection
        return rewrote
    }

    /// Connection `id`'s speed while reading in bytes per second (`nil` before it wrote), and its quickest wait for a
    /// response's head in seconds (a round trip and the server's answer; `nil` before it had one).
    func pace(ofConnection id: Int) -> (rate: Double?, roundTrip: Double?) {
        let connection = self.connections[id]
        return (connection?.readingRate, connection?.quickestHead?.inSeconds)
    }

    /// A response's head came for connection `id`'s current request.
    mutating func headArrived(connection id: Int, now: ContinuousClock.Instant) {
        guard var connection = self.connections[id], let started = connection.requestStarted else { return }
        connection.quickestHead = min(connection.quickestHead ?? .seconds(3600), now - started)
        connection.lastRead = now
        self.connections[id] = connection
    }

    mutating func noteRestart(connection id: Int) {
        self.connections[id, default: Connection()].restarts += 1
    }

    /// Whether `verdict` judged the request connection `id` still runs.
    func isCurrent(_ verdict: SlowConnectionDetector.Verdict) -> Bool {
        self.connections[verdict.connection].map { $0.active && $0.attempts == verdict.attempt } ?? false
    }

    /// What the active connections of a segmented download have done, for the ``SlowConnectionDetector``.
    func readings() -> [SlowConnectionDetector.Reading] {
        guard let planner = self.planner else { return [] }
        return self.connections.compactMap { id, connection in
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

    // MARK: Leases

    /// Work for connection `id`, or `nil` when there is none left for it. A connection that was closed because
    /// another took its work over (`takesOver` false) gets only free ranges: splitting or racing from a new
    /// connection means a TCP handshake and a slow start, which on a long link costs more than it saves, and
    /// would cut one more warm connection in turn.
    mutating func acquire(
        connection id: Int,
        takesOver: Bool = true,
        now: ContinuousClock.Instant,
        bufferSize: Int
    ) -> SegmentPlanner.Lease? {
        let connections = self.connections
        // Also a holder between two requests of its lease (waiting to retry): its silence may be worth a racer.
        let holders = Dictionary(
            connections.compactMap { key, value in value.lease.map { ($0, key) } },
            uniquingKeysWith: { first, _ in first }
        )
        let others = { (holder: Int?) in connections.filter { $0.key != holder }.compactMap(\.value.rate) }
        let worthRacing = { (lease: SegmentPlanner.Lease) -> Bool in
            guard let holder = holders[lease.id], let state = connections[holder] else { return false }
            return Self.isWorthRacing(
                state,
                remaining: Int64(lease.remaining.count),
                others: others(holder),
                now: now,
                bufferSize: bufferSize
            )
        }
        let probeLease = self.probeRange?.lease.id
        let keeps = { (lease: SegmentPlanner.Lease) -> Int64? in
            // The probe's response carries its lease already, until connection 1 takes it on.
            if lease.id == probeLease { return nil }
            let holder = holders[lease.id]
            return Self.bytesKept(
                by: holder.flatMap { connections[$0] },
                remaining: Int64(lease.remaining.count),
                others: others(holder),
                now: now,
                bufferSize: bufferSize
            )
        }
        guard
            let lease = self.withPlanner({
                $0.acquire(takesOver: takesOver, keeping: keeps, isWorthRacing: worthRacing)
            }) ?? nil
        else {
            return nil
        }
        self.connections[id, default: Connection()].lease = lease.id
        return lease
    }

    /// Whether a connection with nothing to do should look again soon: a lease could still be raced or split, only
    /// it is not worth it yet (its connection not slow enough, or its server judged to have sent it ahead).
    var mayTakeLater: Bool {
        guard let planner = self.planner else { return false }
        return !planner.raceCandidates().isEmpty
            || planner.leases.values.contains {
                $0.raceGroup == nil && Int64($0.remaining.count) >= 2 * planner.minimumSplitSize
            }
    }

    mutating func release(_ lease: SegmentPlanner.LeaseID, connection id: Int) {
        self.withPlanner { $0.release(lease) }
        self.connections[id]?.lease = nil
    }

    /// Whether the tail a connection (`holder`) still has to fetch, `remaining` bytes, is worth a racer: only with
    /// evidence that it comes slowly, since the server then sends those bytes twice. The holder's speed
    /// (``Connection/racingRate(now:bufferSize:)``) must be under half the median of the `others`' speeds,
    /// and the tail must still need ``minimumRaceGain`` at it. No speed yet is no evidence, nor is a request still
    /// waiting for its first bytes, until ``firstBytesGrace`` has passed (that wait is a round trip and the
    /// server's, not a transfer). A holder with no other connection to compare with, or between two requests
    /// (waiting to retry), is raced once it has been silent that long.
    static func isWorthRacing(
        _ holder: Connection,
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
        let secondsLeft = Double(remaining) / max(rate, 1)
        return rate < 0.5 * Self.median(others) && secondsLeft >= Self.minimumRaceGain.inSeconds
    }

    /// How many bytes past its cursor a lease's `holder` keeps when another connection takes the back of it, or
    /// `nil` when it is not to be split at all. The server of a running request has sent some of the lease ahead
    /// of what was read: those bytes are in the sockets (and in the network between), and a split before them
    /// asks for them twice. How far ahead the server is cannot be read, so it is judged:
    /// - No request running (none yet, or waiting to retry): nothing is on its way; 0.
    /// - A request sent but no bytes yet, within ``firstBytesGrace``: its server may be sending the whole lease
    ///   already. It is judged as a running holder at the `others`' median speed; with no other speed to go by,
    ///   not split yet (`nil`: the idle connection looks again, ``mayTakeLater``).
    /// - A running holder that will be done within ``minimumSplitGain`` at its speed: `nil` (its response carries
    ///   that part already, and taking it gains nothing a person notices).
    /// - Otherwise ``minimumSplitGain`` of its bytes (a round trip of a far link, at its speed), and on a near
    ///   link (its first bytes within ``nearLink``) where the holder runs at the others' pace, up to
    ///   ``nearLinkAhead``: a fast server there fills both ends' socket buffers at once, and this connection is
    ///   no slower than the rest, so a split would only buy its bytes twice.
    static func bytesKept(
        by holder: Connection?,
        remaining: Int64,
        others: [Double],
        now: ContinuousClock.Instant,
        bufferSize: Int
    ) -> Int64? {
        guard let holder, holder.active else { return 0 }
        let rate: Double
        if holder.wroteSinceRequest, let own = holder.racingRate(now: now, bufferSize: bufferSize) {
            guard Double(remaining) / max(own, 1) >= Self.minimumSplitGain.inSeconds else { return nil }
            rate = own
        } else if let started = holder.requestStarted, now - started < Self.firstBytesGrace {
            guard !others.isEmpty else { return nil }
            rate = Self.median(others)
        } else {
            return 0
        }
        var kept = Int64(rate * Self.minimumSplitGain.inSeconds)
        let near = holder.quickestFirstBytes.map { $0 < Self.nearLink } ?? false
        if near, others.isEmpty || rate >= 0.5 * Self.median(others) {
            kept = max(kept, Self.nearLinkAhead)
        }
        return min(kept, remaining)
    }

    private static func median(_ values: [Double]) -> Double {
        values.sorted()[values.count / 2]
    }

    /// The least time a lease must still need at its connection's speed to be split: a few round trips of a far
    /// link (a split there still halves a tail worth it), and far more than what a loopback or LAN range needs.
    static let minimumSplitGain = Duration.milliseconds(200)
    /// A first byte within this long is from a server on the same machine or network.
    static let nearLink = Duration.milliseconds(5)
    /// How far a fast server on a near link may be ahead of the bytes read: Linux lets a socket's receive buffer
    /// grow to 6 MiB and a sender's to 4 MiB (`tcp_rmem`, `tcp_wmem`).
    static let nearLinkAhead: Int64 = 6 << 20
    /// How long a request may wait for its first bytes before its connection counts as slow for racing.
    static let firstBytesGrace = Duration.seconds(2)
    /// The least time a tail must still need at its connection's speed to be raced.
    static let minimumRaceGain = Duration.milliseconds(500)

    // MARK: Reports

    /// What the transfer has done so far, for progress and the result.
    struct Snapshot {
        var completedBytes: Int64
        var completedRanges: [Range<Int64>]
        var bytesThisRun: Int64
        /// See ``TransferState/wastedBytes``.
        var wastedBytes: Int64
        var connections: [(id: Int, state: Connection, remaining: Range<Int64>?, source: URL?)]
        var mostActiveConnections: Int
        /// Requests whose bytes were written before any connection ran (the probe's).
        var prefetchRequests: Int

        /// Requests started, over all connections, and the probe's when its bytes were kept.
        var requests: Int {
            self.connections.reduce(self.prefetchRequests) { $0 + $1.state.attempts }
        }
    }

    func snapshot() -> Snapshot {
        Snapshot(
            completedBytes: self.completedBytes,
            completedRanges: Array(self.done.ranges),
            bytesThisRun: self.bytesThisRun,
            wastedBytes: self.wastedBytes,
            connections: self.connections.keys.sorted().map { id in
                let connection = self.connections[id]!
                return (
                    id, connection, connection.lease.flatMap { self.planner?.lease($0)?.remaining },
                    connection.mirror.map { self.mirrors.mirrors[$0].fetchURL }
                )
            },
            mostActiveConnections: self.mostActiveConnections,
            prefetchRequests: self.prefetchRequests
        )
    }
}
