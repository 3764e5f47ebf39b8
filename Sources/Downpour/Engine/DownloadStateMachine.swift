/// The control flow of one download after its probe, up to a verified file or an error, as a value: events in,
/// one action out; no I/O, no clocks, no tasks. ``DownloadEngine`` tells it what its workers, timers, the pause
/// switch and the checks of the finished bytes report and does what it answers; the tests drive it through tables
/// (as AsyncHTTPClient's `HTTPConnectionPool.StateMachine`).
///
/// ```
/// waitingForProbe ── probeFinished ──► transferring (segmented, or a stream) | verifying… | finished
/// transferring ── every byte in, pause, cancel, a failure, ranges ignored ──► stopping
/// stopping ── workersStopped ──► verifying… | finished | failed | transferring (a stream) | paused (a stream)
///                                | savingBeforePause
/// savingBeforePause ── pauseSaved ──► paused (segmented)
/// paused ── pauseEnded ──► transferring | failed (cancelled)
/// verifyingPieces ── piecesChecked ──► verifyingDigest | finished | refetchingPieces | failed (discard)
/// refetchingPieces ── piecesForgotten ──► transferring (segmented: only the bad pieces are missing)
/// verifyingDigest ── digestChecked ──► finished | startingOver (once, bytes from several sources) | failed (discard)
/// startingOver ── startedOver ──► transferring (segmented, from nothing)
/// finished ── finishRefused ──► failed (cancelled at the last moment, or the write permit withdrawn)
/// ```
///
/// Two kinds of events, two kinds of answers. The events of a round (its workers, its timers, the pause switch
/// while it runs) answer a ``RoundAction``, which ``TransferRound`` does. Every other event answers an
/// ``Action``, which the engine does; a round's own end (``workersStopped(bytesOnDisk:)``) is one of those. A
/// round event that comes once the round is stopping (a pause asked for while the workers already stop, the
/// losers of a race returning) answers ``RoundAction/none``; an event the engine can only send by mistake (workers
/// reported stopped that were never asked to stop, a round's report while no round runs) stops the process with a
/// precondition failure.
struct DownloadStateMachine: Sendable {
    /// How the bytes are fetched.
    enum Mode: Sendable, Hashable {
        /// In ranges over several connections, recorded in the journal.
        case segmented
        /// As one plain `GET` from byte 0: the server has no ranges or no length, or ignored a range.
        case stream
    }

    /// What the engine does next: one answer to each of its events.
    enum Action: Sendable, Equatable {
        /// Run a round (``TransferRound``): in ranges, one segment worker per connection on the plan as it stands
        /// and the journal's timer; a stream, one worker from byte 0 (a stream cannot continue where it stopped).
        /// Its events go to the machine until it has stopped its workers; then ``workersStopped(bytesOnDisk:)``.
        case startRound(Mode)
        /// Emit ``DownloadEvent/resumed``, then as ``startRound(_:)``.
        case resume(Mode)
        /// Tell that the server ignores ranges, remove the journal and forget the plan; then as
        /// ``startRound(_:)`` with one stream.
        case fallBackToStream
        /// Sync the data and record what is on disk before the pause is reported; then ``pauseSaved()`` or
        /// ``pauseSaveFailed(_:)``.
        case saveBeforePause
        /// Emit ``DownloadEvent/paused`` and wait until resumed or cancelled; then ``pauseEnded(cancelled:)``.
        case reportPaused
        /// Hash the pieces not verified yet against their digests; then ``piecesChecked(_:)`` or
        /// ``checkFailed(_:)``.
        case verifyPieces
        /// Hash the whole file and compare it with the expected digest; then ``digestChecked(_:)`` or
        /// ``checkFailed(_:)``.
        case verifyDigest
        /// Take these bad pieces out of the done ranges, record that in the journal and plan them again; then
        /// ``piecesForgotten()``, or ``refetchFailed(_:)``.
        case refetchPieces([Range<Int64>])
        /// Tell this notice, remove the journal, empty the file and plan it whole; then ``startedOver()``, or
        /// ``startOverFailed(_:)``.
        case startOver(notice: String)
        /// Every byte is in and checked: commit to finishing (the point of no return), then sync, name the file and
        /// remove the journal (``DownloadFinisher``). Refused before the point of no return:
        /// ``finishRefused(_:)``.
        case finish
        /// End the download with this error. `keepPartial`: the `.part` file and its journal stay (after a last
        /// save) for a resume; else both are removed, for their bytes are wrong or worth nothing.
        case fail(DownloadError, keepPartial: Bool)
    }

    /// What ``TransferRound`` does next, while its workers run: one answer to each of the round's events.
    enum RoundAction: Sendable, Equatable {
        /// Nothing: the event changes nothing, or the round is stopping already.
        case none
        /// Cancel every task of the round and wait for them all; then ``workersStopped(bytesOnDisk:)``.
        case cancelWorkers
        /// One journal interval from now, ``journalTick()``.
        case scheduleJournalTick
        /// Sync the data and record what is on disk; then ``journalSaved()`` or ``journalSaveFailed(_:)``.
        case saveJournal
        /// End the requests the verdicts name, if they are still the ones running: new ones take their ranges over.
        case restartConnections([SlowConnectionDetector.Verdict])
    }

    /// What the download's bytes are checked against once they are all in.
    struct Checks: Sendable, Hashable {
        /// Each piece against its own digest.
        var pieces: Bool
        /// The whole file against one digest.
        var digest: Bool

        static let none = Checks(pieces: false, digest: false)
    }

    /// What hashing the pieces found.
    enum PieceCheck: Sendable, Equatable {
        /// Every piece matches its digest.
        case verified
        /// These pieces do not, and can be fetched again alone (the download is segmented).
        case bad([Range<Int64>])
        /// A piece did not match after its last fetch, the length is wrong, or a bad piece cannot be fetched
        /// again alone: the download fails and its bytes are removed.
        case fatal(DownloadError)
    }

    /// What hashing the whole file found.
    enum DigestCheck: Sendable, Equatable {
        case match
        /// The digest differs. `fromSeveralResponses` says whether this run's bytes came in more than one
        /// response (which a changed or misbehaving server could have mixed up).
        case mismatch(ChecksumMismatch, fromSeveralResponses: Bool)
    }

    /// Why the workers are being stopped: what follows once they all have.
    enum Stop: Sendable, Equatable {
        case finish
        case pause
        case fail(DownloadError)
        case fallBackToStream
    }

    enum State: Sendable, Equatable {
        /// Made; the probe has not finished.
        case waitingForProbe
        /// A round of workers runs.
        case transferring(Mode, workersRunning: Int)
        /// The round's tasks were cancelled; the engine waits for them.
        case stopping(Mode, then: Stop)
        /// Paused while segmented: the journal is being saved before the pause is reported.
        case savingBeforePause
        /// No worker runs until the pause ends.
        case paused(Mode)
        /// Every byte is in; the pieces are being hashed.
        case verifyingPieces(Mode)
        /// Bad pieces are being taken out of the journal before they are fetched again.
        case refetchingPieces
        /// Every byte is in; the whole file is being hashed.
        case verifyingDigest(Mode)
        /// The journal and the file are being emptied to download again from zero.
        case startingOver
        /// Every byte is in and checked; the engine finishes the file.
        case finished(Mode)
        /// Ended with an error.
        case failed
    }

    /// How many segment workers a segmented round starts.
    let connections: Int
    /// What the bytes are checked against once they are all in.
    let checks: Checks
    private(set) var state: State = .waitingForProbe
    /// Whether bytes of an earlier run are on disk (resumed): until the download starts over, they count among the
    /// sources a digest mismatch may come from.
    private(set) var hasEarlierBytes: Bool
    /// Whether any byte of the file is on disk, from an earlier run or this one (as the last round's end said):
    /// what makes the `.part` file worth keeping when the download fails.
    private(set) var hasBytesOnDisk: Bool
    /// Whether the download started over once already (it does so at most once).
    private(set) var hasStartedOver = false

    init(connections: Int, checks: Checks = .none, resumed: Bool = false) {
        precondition(connections >= 1, "a download needs at least one connection, not \(connections)")
        self.connections = connections
        self.checks = checks
        self.hasEarlierBytes = resumed
        self.hasBytesOnDisk = resumed
    }

    // MARK: Events of the engine

    /// The probe found what is at the URL: ranges over several connections when the server has them and a
    /// length, else one stream. `allBytesIn` says that the bytes resumed and the probe's own make the whole file:
    /// no round runs; the checks follow at once, or the finish.
    mutating func probeFinished(segmentable: Bool, allBytesIn: Bool = false) -> Action {
        guard case .waitingForProbe = self.state else {
            preconditionFailure("probeFinished in \(self.state): the probe finishes once")
        }
        let mode: Mode = segmentable ? .segmented : .stream
        guard allBytesIn else { return self.start(mode) }
        self.hasBytesOnDisk = true
        return self.transferEnded(mode)
    }

    /// Every task of the round has ended after ``RoundAction/cancelWorkers``. `bytesOnDisk` says whether any byte
    /// of the file is on disk now.
    mutating func workersStopped(bytesOnDisk: Bool) -> Action {
        guard case .stopping(let mode, let then) = self.state else {
            preconditionFailure("workersStopped in \(self.state): the workers were not asked to stop")
        }
        self.hasBytesOnDisk = bytesOnDisk || self.hasEarlierBytes
        switch then {
        case .finish:
            return self.transferEnded(mode)
        case .pause where mode == .segmented:
            self.state = .savingBeforePause
            return .saveBeforePause
        case .pause:
            // A stream keeps nothing across a pause: it starts again from byte 0.
            self.state = .paused(mode)
            return .reportPaused
        case .fail(let error):
            return self.fail(error, mode)
        case .fallBackToStream:
            self.state = .transferring(.stream, workersRunning: 1)
            return .fallBackToStream
        }
    }

    /// The save before a pause (``Action/saveBeforePause``) is on disk.
    mutating func pauseSaved() -> Action {
        guard case .savingBeforePause = self.state else {
            preconditionFailure("pauseSaved in \(self.state): no save before a pause was asked for")
        }
        self.state = .paused(.segmented)
        return .reportPaused
    }

    /// The save before a pause failed: the download cannot promise to resume.
    mutating func pauseSaveFailed(_ error: DownloadError) -> Action {
        guard case .savingBeforePause = self.state else {
            preconditionFailure("pauseSaveFailed in \(self.state): no save before a pause was asked for")
        }
        return self.fail(error, .segmented)
    }

    /// The pause reported (``Action/reportPaused``) ended: ``Download/resume()`` was called, or the task running
    /// the download was cancelled.
    mutating func pauseEnded(cancelled: Bool) -> Action {
        guard case .paused(let mode) = self.state else {
            preconditionFailure("pauseEnded in \(self.state): no pause was reported")
        }
        guard !cancelled else { return self.fail(.cancelled, mode) }
        _ = self.start(mode)
        return .resume(mode)
    }

    /// The pieces were hashed (``Action/verifyPieces``).
    mutating func piecesChecked(_ check: PieceCheck) -> Action {
        guard case .verifyingPieces(let mode) = self.state else {
            preconditionFailure("piecesChecked in \(self.state): no pieces were being hashed")
        }
        switch check {
        case .verified:
            return self.checkDigest(mode)
        case .bad(let ranges):
            precondition(mode == .segmented && !ranges.isEmpty, "bad pieces \(ranges) that cannot be fetched alone")
            self.state = .refetchingPieces
            return .refetchPieces(ranges)
        case .fatal(let error):
            return self.discard(error)
        }
    }

    /// The bad pieces are out of the journal and planned again (``Action/refetchPieces(_:)``).
    mutating func piecesForgotten() -> Action {
        guard case .refetchingPieces = self.state else {
            preconditionFailure("piecesForgotten in \(self.state): no pieces were being fetched again")
        }
        return self.start(.segmented)
    }

    /// Recording that the bad pieces are to be fetched again failed: the download cannot promise to resume.
    mutating func refetchFailed(_ error: DownloadError) -> Action {
        guard case .refetchingPieces = self.state else {
            preconditionFailure("refetchFailed in \(self.state): no pieces were being fetched again")
        }
        return self.fail(error, .segmented)
    }

    /// The whole file was hashed (``Action/verifyDigest``). A mismatch starts the download over once when its
    /// bytes came from an earlier run or from several responses (different versions of the file could have been
    /// mixed up: a changed server, servers behind a load balancer that disagree, a lying one), else it fails the
    /// download: bytes from one response would come the same way again.
    mutating func digestChecked(_ check: DigestCheck) -> Action {
        guard case .verifyingDigest(let mode) = self.state else {
            preconditionFailure("digestChecked in \(self.state): no digest was being made")
        }
        switch check {
        case .match:
            self.state = .finished(mode)
            return .finish
        case .mismatch(let mismatch, let severalResponses):
            guard !self.hasStartedOver, mode == .segmented, self.hasEarlierBytes || severalResponses else {
                return self.discard(.checksumMismatch(mismatch))
            }
            self.hasStartedOver = true
            self.state = .startingOver
            let notice =
                mismatch.summary + ". Its bytes came from "
                + (self.hasEarlierBytes ? "an earlier run and this one" : "several responses")
                + ", which a changed or misbehaving server could have mixed up; downloading it again from zero."
            return .startOver(notice: notice)
        }
    }

    /// Hashing the pieces or the file failed (the file could not be read, or the download was cancelled): the
    /// bytes on disk are not known to be bad.
    mutating func checkFailed(_ error: DownloadError) -> Action {
        switch self.state {
        case .verifyingPieces(let mode), .verifyingDigest(let mode):
            return self.fail(error, mode)
        case .waitingForProbe, .transferring, .stopping, .savingBeforePause, .paused, .refetchingPieces, .startingOver,
            .finished, .failed:
            preconditionFailure("checkFailed in \(self.state): nothing was being hashed")
        }
    }

    /// The journal and the file are empty and the whole file is planned again (``Action/startOver(notice:)``).
    mutating func startedOver() -> Action {
        guard case .startingOver = self.state else {
            preconditionFailure("startedOver in \(self.state): the download was not starting over")
        }
        self.hasEarlierBytes = false
        self.hasBytesOnDisk = false
        return self.start(.segmented)
    }

    /// Emptying the journal or the file to start over failed: what is on disk is known to be wrong.
    mutating func startOverFailed(_ error: DownloadError) -> Action {
        guard case .startingOver = self.state else {
            preconditionFailure("startOverFailed in \(self.state): the download was not starting over")
        }
        return self.discard(error)
    }

    /// The finish (``Action/finish``) stopped short of its point of no return: the download was cancelled, the
    /// write permit was withdrawn, or a stream's length was not what was described.
    mutating func finishRefused(_ error: DownloadError) -> Action {
        guard case .finished(let mode) = self.state else {
            preconditionFailure("finishRefused in \(self.state): no finish was asked for")
        }
        return self.fail(error, mode)
    }

    // MARK: Events of a round

    /// A worker returned without error: its share is done, or there is nothing left for it. `planComplete`
    /// says whether every byte of the plan is in now (always `false` for a stream). The round ends when every
    /// byte is in (a racing duplicate has won; the loser may stop) or no worker is left.
    mutating func workerFinished(planComplete: Bool) -> RoundAction {
        let (mode, running) = self.roundRunning("workerFinished")
        guard let running else { return .none }
        if mode == .segmented && planComplete {
            return self.stop(mode, then: .finish)
        }
        guard running <= 1 else {
            self.state = .transferring(mode, workersRunning: running - 1)
            return .none
        }
        // The stream worker returns once every byte is in; segment workers may all end with some missing.
        return self.stop(mode, then: mode == .stream ? .finish : .fail(Self.bytesMissing))
    }

    /// A worker gave up: the error ends the download, or (ranges ignored while segmented) the workers stop and
    /// one stream takes over. While the round stops already, the first reason to stop stands: what the cancelled
    /// workers say on their way out does not count.
    mutating func attemptFailed(_ failure: AttemptFailure) -> RoundAction {
        let (mode, running) = self.roundRunning("attemptFailed")
        guard running != nil else { return .none }
        switch failure {
        case .fatal(let error), .retryable(let error, _):
            return self.stop(mode, then: .fail(error))
        case .slow(let verdict):
            return self.stop(mode, then: .fail(Self.tooSlow(verdict)))
        case .rangesIgnored:
            return self.stop(mode, then: mode == .segmented ? .fallBackToStream : .fail(Self.rangeIgnored))
        case .redirected(let location):
            // Workers follow a mirror's redirects themselves; one that reaches here has nowhere to go.
            let error = DownloadError(
                code: .httpStatus,
                message: "The server redirected a range request to \(location)."
            )
            return self.stop(mode, then: .fail(error))
        }
    }

    /// ``Download/pause()`` was called while the round runs (or before it began: the engine then sends
    /// ``workersStopped(bytesOnDisk:)`` at once, nothing having started).
    mutating func pauseRequested() -> RoundAction {
        let (mode, running) = self.roundRunning("pauseRequested")
        guard running != nil else { return .none }
        return self.stop(mode, then: .pause)
    }

    /// The task running the download was cancelled. While stopping for another reason, that reason stands (a
    /// pause reports the cancellation once paused).
    mutating func cancelled() -> RoundAction {
        let (mode, running) = self.roundRunning("cancelled")
        guard running != nil else { return .none }
        return self.stop(mode, then: .fail(.cancelled))
    }

    /// A journal interval has passed since the segmented round started or the journal was last saved.
    mutating func journalTick() -> RoundAction {
        let (mode, running) = self.roundRunning("journalTick")
        // A stream has no journal; a pause saves its own; a finished download needs none.
        return mode == .segmented && running != nil ? .saveJournal : .none
    }

    /// The save that ``RoundAction/saveJournal`` asked for is on disk.
    mutating func journalSaved() -> RoundAction {
        let (mode, running) = self.roundRunning("journalSaved")
        precondition(mode == .segmented, "journalSaved in \(self.state): a stream saves no journal")
        return running != nil ? .scheduleJournalTick : .none
    }

    /// The save that ``RoundAction/saveJournal`` asked for failed: the download cannot promise to resume.
    mutating func journalSaveFailed(_ error: DownloadError) -> RoundAction {
        let (mode, running) = self.roundRunning("journalSaveFailed")
        precondition(mode == .segmented, "journalSaveFailed in \(self.state): a stream saves no journal")
        // Stopping already: a pause saves again, a finished download needs no journal.
        return running != nil ? self.stop(mode, then: .fail(error)) : .none
    }

    /// The write permit was withdrawn while the round runs (another writer took the download over): the workers
    /// stop, and the download fails, leaving its files to that writer (nothing is removed without the permit).
    mutating func permitWithdrawn() -> RoundAction {
        let (mode, running) = self.roundRunning("permitWithdrawn")
        return running != nil ? self.stop(mode, then: .fail(Self.superseded)) : .none
    }

    /// The ``SlowConnectionDetector`` judged these connections too slow.
    mutating func slowVerdicts(_ verdicts: [SlowConnectionDetector.Verdict]) -> RoundAction {
        let (mode, running) = self.roundRunning("slowVerdicts")
        return mode == .segmented && running != nil && !verdicts.isEmpty ? .restartConnections(verdicts) : .none
    }

    /// The round's mode, and how many workers run (`nil` once it stops); a precondition failure when no round
    /// runs: its events cannot come then.
    private func roundRunning(_ event: String) -> (Mode, Int?) {
        switch self.state {
        case .transferring(let mode, let running):
            return (mode, running)
        case .stopping(let mode, _):
            return (mode, nil)
        case .waitingForProbe, .savingBeforePause, .paused, .verifyingPieces, .refetchingPieces, .verifyingDigest,
            .startingOver, .finished, .failed:
            preconditionFailure("\(event) in \(self.state): no round runs")
        }
    }

    // MARK: Transitions

    /// Every byte is in: the checks follow, the pieces' first.
    private mutating func transferEnded(_ mode: Mode) -> Action {
        guard self.checks.pieces else { return self.checkDigest(mode) }
        self.state = .verifyingPieces(mode)
        return .verifyPieces
    }

    private mutating func checkDigest(_ mode: Mode) -> Action {
        guard self.checks.digest else {
            self.state = .finished(mode)
            return .finish
        }
        self.state = .verifyingDigest(mode)
        return .verifyDigest
    }

    private mutating func start(_ mode: Mode) -> Action {
        // A segmented round saves nothing before its first interval: until then the journal on disk (if any) is
        // still true, and a fresh download has nothing to lose.
        self.state = .transferring(mode, workersRunning: mode == .segmented ? self.connections : 1)
        return .startRound(mode)
    }

    private mutating func stop(_ mode: Mode, then: Stop) -> RoundAction {
        self.state = .stopping(mode, then: then)
        return .cancelWorkers
    }

    /// Ends the download, keeping the `.part` file and its journal when the download is in ranges, some bytes
    /// are on disk and the error does not make them worthless (a changed or misbehaving server's, or another
    /// writer's, whose bytes these are now).
    private mutating func fail(_ error: DownloadError, _ mode: Mode) -> Action {
        self.state = .failed
        let worthless: Set<DownloadError.Code> = [.remoteChanged, .remoteMisbehaved, .superseded]
        let keep = mode == .segmented && self.hasBytesOnDisk && !worthless.contains(error.code)
        return .fail(error, keepPartial: keep)
    }

    /// Ends the download and removes its bytes: they are known to be wrong.
    private mutating func discard(_ error: DownloadError) -> Action {
        self.state = .failed
        return .fail(error, keepPartial: false)
    }

    // MARK: Errors

    static let superseded = DownloadError.superseded

    static let bytesMissing = DownloadError(
        code: .remoteMisbehaved,
        message: "The download ended with bytes missing."
    )

    static let rangeIgnored = DownloadError(
        code: .remoteMisbehaved,
        message: "The server ignored a range request it had accepted."
    )

    static func tooSlow(_ verdict: SlowConnectionDetector.Verdict) -> DownloadError {
        DownloadError(code: .network, message: "The connection was too slow (\(ByteCount.formatRate(verdict.speed))).")
    }
}
