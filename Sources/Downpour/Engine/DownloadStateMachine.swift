/// The control flow of one download after its probe, up to a verified file or an error, as a value: events in,
/// actions out; no I/O, no clocks, no tasks. ``DownloadEngine`` tells it what its workers, timers, the pause switch
/// and the checks of the finished bytes report and does what it answers; the tests drive it through tables (as
/// AsyncHTTPClient's `HTTP1ConnectionStateMachine`).
///
/// ```
/// waitingForProbe ── probeFinished ──► transferring (segmented, or a stream) | verifying (the probe brought it all)
/// transferring ── every byte in, pause, cancel, a failure, ranges ignored ──► stopping (cancelWorkers)
/// stopping ── workersStopped ──► verifying… | failed | transferring (a stream) | paused (a stream) | savingBeforePause
/// savingBeforePause ── journalSaved ──► paused (segmented)
/// paused ── resumeRequested ──► transferring;  paused ── cancelled ──► failed
/// verifyingPieces ── piecesChecked ──► verifyingDigest | finished | refetchingPieces | failed (discard)
/// refetchingPieces ── piecesForgotten ──► transferring (segmented: only the bad pieces are missing)
/// verifyingDigest ── digestChecked ──► finished | startingOver (once, bytes from several sources) | failed (discard)
/// startingOver ── startedOver ──► transferring (segmented, from nothing)
/// ```
///
/// Each event returns the actions to take, in order. An event that does not apply in the current state (a pause
/// asked for while the workers already stop, a tick after the end) returns no action; one that the engine can
/// only send by mistake (workers reported stopped that were never asked to stop) stops the process with a
/// precondition failure.
struct DownloadStateMachine: Sendable {
    /// How the bytes are fetched.
    enum Mode: Sendable, Hashable {
        /// In ranges over several connections, recorded in the journal.
        case segmented
        /// As one plain `GET` from byte 0: the server has no ranges or no length, or ignored a range.
        case stream
    }

    /// What the engine does next.
    enum Action: Sendable, Equatable {
        /// Start a round: one segment worker per connection on the plan as it stands, beside the pause watch,
        /// the progress reports and the slow-connection watch.
        case startSegmented
        /// Start a round with one stream worker, from byte 0: a stream cannot continue where it stopped.
        case startStream
        /// Cancel every task of the round and wait for them all; then ``workersStopped()``.
        case cancelWorkers
        /// One journal interval from now, ``journalTick()``.
        case scheduleJournalTick
        /// Sync the data and record what is on disk; then ``journalSaved()`` or ``journalSaveFailed(_:)``.
        case saveJournal
        /// End the request the verdict names, if it is still the one running: a new one takes its range over.
        case restartConnection(SlowConnectionDetector.Verdict)
        /// Tell that the server ignores ranges, remove the journal and forget the plan; a stream follows.
        case fallBackToStream
        /// Emit ``DownloadEvent/paused``, then wait for ``resumeRequested()`` or ``cancelled()``.
        case reportPaused
        /// Emit ``DownloadEvent/resumed``.
        case reportResumed
        /// Hash the pieces not verified yet against their digests; then ``piecesChecked(_:)`` or
        /// ``checkFailed(_:)``.
        case verifyPieces
        /// Hash the whole file and compare it with the expected digest; then ``digestChecked(_:)`` or
        /// ``checkFailed(_:)``.
        case verifyDigest
        /// Take these bad pieces out of the done ranges, record that in the journal and plan them again; then
        /// ``piecesForgotten()``, or ``journalSaveFailed(_:)``.
        case refetchPieces([Range<Int64>])
        /// Tell this notice, remove the journal, empty the file and plan it whole; then ``startedOver()``, or
        /// ``startOverFailed(_:)``.
        case startOver(notice: String)
        /// Every byte is in and checked: sync, rename and remove the journal (``DownloadFinisher``).
        case finish
        /// End the download with this error; the bytes on disk are kept for a resume when they are worth it.
        case fail(DownloadError)
        /// End the download with this error, and remove the `.part` file and its journal: their bytes are wrong.
        case discard(DownloadError)
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
        /// No worker runs until ``resumeRequested()``.
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
        case finished
        /// Ended with an error.
        case failed
    }

    /// How many segment workers a segmented round starts.
    let connections: Int
    /// What the bytes are checked against once they are all in.
    let checks: Checks
    private(set) var state: State = .waitingForProbe
    /// Whether bytes of an earlier run are on disk (resumed): until the download starts over, they count among the
    /// sources a digest mismatch may come from, and make the `.part` file worth keeping.
    private(set) var hasEarlierBytes: Bool
    /// Whether the download started over once already (it does so at most once).
    private(set) var hasStartedOver = false

    init(connections: Int, checks: Checks = .none, resumed: Bool = false) {
        precondition(connections >= 1, "a download needs at least one connection, not \(connections)")
        self.connections = connections
        self.checks = checks
        self.hasEarlierBytes = resumed
    }

    // MARK: Events

    /// The probe found what is at the URL: ranges over several connections when the server has them and a
    /// length, else one stream. `allBytesIn` says that the bytes resumed and the probe's own make the whole file:
    /// no transfer runs, and the checks follow at once.
    mutating func probeFinished(segmentable: Bool, allBytesIn: Bool = false) -> [Action] {
        guard case .waitingForProbe = self.state else {
            preconditionFailure("probeFinished in \(self.state): the probe finishes once")
        }
        let mode: Mode = segmentable ? .segmented : .stream
        return allBytesIn ? self.transferEnded(mode) : self.start(mode)
    }

    /// A worker returned without error: its share is done, or there is nothing left for it. `planComplete`
    /// says whether every byte of the plan is in now (always `false` for a stream). The round ends when every
    /// byte is in (a racing duplicate has won; the loser may stop) or no worker is left.
    mutating func workerFinished(planComplete: Bool) -> [Action] {
        switch self.state {
        case .transferring(let mode, let running):
            if mode == .segmented && planComplete {
                return self.stop(mode, then: .finish)
            }
            guard running <= 1 else {
                self.state = .transferring(mode, workersRunning: running - 1)
                return []
            }
            // The stream worker returns once every byte is in; segment workers may all end with some missing.
            return self.stop(mode, then: mode == .stream ? .finish : .fail(Self.bytesMissing))
        case .stopping, .finished, .failed:
            return []
        case .waitingForProbe, .savingBeforePause, .paused, .verifyingPieces, .refetchingPieces, .verifyingDigest,
            .startingOver:
            preconditionFailure("workerFinished in \(self.state): no worker runs")
        }
    }

    /// A worker gave up: the error ends the download, or (ranges ignored while segmented) the workers stop and
    /// one stream takes over.
    mutating func attemptFailed(_ failure: AttemptFailure) -> [Action] {
        switch self.state {
        case .transferring(let mode, _):
            switch failure {
            case .fatal(let error), .retryable(let error, _):
                return self.stop(mode, then: .fail(error))
            case .slow(let verdict):
                return self.stop(mode, then: .fail(Self.tooSlow(verdict)))
            case .rangesIgnored:
                return self.stop(mode, then: mode == .segmented ? .fallBackToStream : .fail(Self.rangeIgnored))
            case .redirected(let location):
                // Workers follow a mirror's redirects themselves; one that reaches here has nowhere to go.
                return self.stop(
                    mode,
                    then: .fail(
                        DownloadError(
                            code: .httpStatus,
                            message: "The server redirected a range request to \(location)."
                        )
                    )
                )
            }
        case .stopping, .finished, .failed:
            // The first reason to stop stands; what the cancelled workers say on their way out does not count.
            return []
        case .waitingForProbe, .savingBeforePause, .paused, .verifyingPieces, .refetchingPieces, .verifyingDigest,
            .startingOver:
            preconditionFailure("attemptFailed in \(self.state): no worker runs")
        }
    }

    /// Every task of the round has ended after ``Action/cancelWorkers``.
    mutating func workersStopped() -> [Action] {
        guard case .stopping(let mode, let then) = self.state else {
            preconditionFailure("workersStopped in \(self.state): the workers were not asked to stop")
        }
        switch then {
        case .finish:
            return self.transferEnded(mode)
        case .pause where mode == .segmented:
            self.state = .savingBeforePause
            return [.saveJournal]
        case .pause:
            // A stream keeps nothing across a pause: it starts again from byte 0.
            self.state = .paused(mode)
            return [.reportPaused]
        case .fail(let error):
            self.state = .failed
            return [.fail(error)]
        case .fallBackToStream:
            return [.fallBackToStream] + self.start(.stream)
        }
    }

    /// ``Download/pause()`` was called.
    mutating func pauseRequested() -> [Action] {
        switch self.state {
        case .transferring(let mode, _):
            return self.stop(mode, then: .pause)
        case .stopping, .savingBeforePause, .paused, .finished, .failed, .verifyingPieces, .refetchingPieces,
            .verifyingDigest, .startingOver:
            // Stopping or stopped already; a pause asked for during a fall-back pauses the stream at its start,
            // one asked for while the bytes are checked pauses a transfer that follows at its start.
            return []
        case .waitingForProbe:
            preconditionFailure("pauseRequested before the probe finished")
        }
    }

    /// ``Download/resume()`` was called after the pause was reported.
    mutating func resumeRequested() -> [Action] {
        switch self.state {
        case .paused(let mode):
            return [.reportResumed] + self.start(mode)
        case .transferring, .stopping, .savingBeforePause, .finished, .failed, .verifyingPieces, .refetchingPieces,
            .verifyingDigest, .startingOver:
            return []
        case .waitingForProbe:
            preconditionFailure("resumeRequested before the probe finished")
        }
    }

    /// The task running the download was cancelled. While stopping for another reason, that reason stands
    /// (a pause reports the cancellation once paused).
    mutating func cancelled() -> [Action] {
        switch self.state {
        case .transferring(let mode, _):
            return self.stop(mode, then: .fail(.cancelled))
        case .paused:
            self.state = .failed
            return [.fail(.cancelled)]
        case .stopping, .savingBeforePause, .finished, .failed:
            return []
        case .verifyingPieces, .refetchingPieces, .verifyingDigest, .startingOver:
            // Hashing notices the cancellation itself (``checkFailed(_:)``); the steps between are short.
            return []
        case .waitingForProbe:
            preconditionFailure("cancelled before the probe finished")
        }
    }

    /// A journal interval has passed since the segmented round started or the journal was last saved.
    mutating func journalTick() -> [Action] {
        switch self.state {
        case .transferring(.segmented, _):
            return [.saveJournal]
        case .transferring(.stream, _), .stopping, .savingBeforePause, .paused, .finished, .failed:
            // A stream has no journal; a pause saves its own; after the end there is nothing to save.
            return []
        case .waitingForProbe, .verifyingPieces, .refetchingPieces, .verifyingDigest, .startingOver:
            preconditionFailure("journalTick in \(self.state): no round runs")
        }
    }

    /// The save that ``Action/saveJournal`` asked for is on disk.
    mutating func journalSaved() -> [Action] {
        switch self.state {
        case .transferring(.segmented, _):
            return [.scheduleJournalTick]
        case .savingBeforePause:
            self.state = .paused(.segmented)
            return [.reportPaused]
        case .stopping, .finished, .failed:
            return []
        case .waitingForProbe, .transferring(.stream, _), .paused, .verifyingPieces, .refetchingPieces,
            .verifyingDigest, .startingOver:
            preconditionFailure("journalSaved in \(self.state): no save was asked for")
        }
    }

    /// The save that ``Action/saveJournal`` asked for failed: the download cannot promise to resume.
    mutating func journalSaveFailed(_ error: DownloadError) -> [Action] {
        switch self.state {
        case .transferring(.segmented, _):
            return self.stop(.segmented, then: .fail(error))
        case .savingBeforePause, .refetchingPieces:
            self.state = .failed
            return [.fail(error)]
        case .stopping, .finished, .failed:
            // Stopping already: a pause saves again, a finished download needs no journal.
            return []
        case .waitingForProbe, .transferring(.stream, _), .paused, .verifyingPieces, .verifyingDigest, .startingOver:
            preconditionFailure("journalSaveFailed in \(self.state): no save was asked for")
        }
    }

    /// The ``SlowConnectionDetector`` judged a connection too slow.
    mutating func slowVerdict(_ verdict: SlowConnectionDetector.Verdict) -> [Action] {
        switch self.state {
        case .transferring(.segmented, _):
            return [.restartConnection(verdict)]
        case .transferring(.stream, _), .stopping, .savingBeforePause, .paused, .finished, .failed:
            return []
        case .waitingForProbe, .verifyingPieces, .refetchingPieces, .verifyingDigest, .startingOver:
            preconditionFailure("slowVerdict in \(self.state): no round runs")
        }
    }

    /// The pieces were hashed (``Action/verifyPieces``).
    mutating func piecesChecked(_ check: PieceCheck) -> [Action] {
        guard case .verifyingPieces(let mode) = self.state else {
            preconditionFailure("piecesChecked in \(self.state): no pieces were being hashed")
        }
        switch check {
        case .verified:
            return self.checkDigest(mode)
        case .bad(let ranges):
            precondition(mode == .segmented && !ranges.isEmpty, "bad pieces \(ranges) that cannot be fetched alone")
            self.state = .refetchingPieces
            return [.refetchPieces(ranges)]
        case .fatal(let error):
            self.state = .failed
            return [.discard(error)]
        }
    }

    /// The bad pieces are out of the journal and planned again (``Action/refetchPieces(_:)``).
    mutating func piecesForgotten() -> [Action] {
        guard case .refetchingPieces = self.state else {
            preconditionFailure("piecesForgotten in \(self.state): no pieces were being fetched again")
        }
        return self.start(.segmented)
    }

    /// The whole file was hashed (``Action/verifyDigest``). A mismatch starts the download over once when its
    /// bytes came from an earlier run or from several responses (different versions of the file could have been
    /// mixed up: a changed server, servers behind a load balancer that disagree, a lying one), else it fails the
    /// download: bytes from one response would come the same way again.
    mutating func digestChecked(_ check: DigestCheck) -> [Action] {
        guard case .verifyingDigest(let mode) = self.state else {
            preconditionFailure("digestChecked in \(self.state): no digest was being made")
        }
        switch check {
        case .match:
            self.state = .finished
            return [.finish]
        case .mismatch(let mismatch, let severalResponses):
            guard !self.hasStartedOver, mode == .segmented, self.hasEarlierBytes || severalResponses else {
                self.state = .failed
                return [.discard(.checksumMismatch(mismatch))]
            }
            self.hasStartedOver = true
            self.state = .startingOver
            let notice =
                mismatch.summary + ". Its bytes came from "
                + (self.hasEarlierBytes ? "an earlier run and this one" : "several responses")
                + ", which a changed or misbehaving server could have mixed up; downloading it again from zero."
            return [.startOver(notice: notice)]
        }
    }

    /// Hashing the pieces or the file failed (the file could not be read, or the download was cancelled): the
    /// bytes on disk are not known to be bad.
    mutating func checkFailed(_ error: DownloadError) -> [Action] {
        switch self.state {
        case .verifyingPieces, .verifyingDigest:
            self.state = .failed
            return [.fail(error)]
        case .waitingForProbe, .transferring, .stopping, .savingBeforePause, .paused, .refetchingPieces, .startingOver,
            .finished, .failed:
            preconditionFailure("checkFailed in \(self.state): nothing was being hashed")
        }
    }

    /// The journal and the file are empty and the whole file is planned again (``Action/startOver(notice:)``).
    mutating func startedOver() -> [Action] {
        guard case .startingOver = self.state else {
            preconditionFailure("startedOver in \(self.state): the download was not starting over")
        }
        self.hasEarlierBytes = false
        return self.start(.segmented)
    }

    /// Emptying the journal or the file to start over failed: what is on disk is known to be wrong.
    mutating func startOverFailed(_ error: DownloadError) -> [Action] {
        guard case .startingOver = self.state else {
            preconditionFailure("startOverFailed in \(self.state): the download was not starting over")
        }
        self.state = .failed
        return [.discard(error)]
    }

    // MARK: Transitions

    /// Every byte is in: the checks follow, the pieces' first.
    private mutating func transferEnded(_ mode: Mode) -> [Action] {
        guard self.checks.pieces else { return self.checkDigest(mode) }
        self.state = .verifyingPieces(mode)
        return [.verifyPieces]
    }

    private mutating func checkDigest(_ mode: Mode) -> [Action] {
        guard self.checks.digest else {
            self.state = .finished
            return [.finish]
        }
        self.state = .verifyingDigest(mode)
        return [.verifyDigest]
    }

    private mutating func start(_ mode: Mode) -> [Action] {
        switch mode {
        case .segmented:
            // No save before the first interval: until then the journal on disk (if any) is still true, and a
            // fresh download has nothing to lose.
            self.state = .transferring(.segmented, workersRunning: self.connections)
            return [.startSegmented, .scheduleJournalTick]
        case .stream:
            self.state = .transferring(.stream, workersRunning: 1)
            return [.startStream]
        }
    }

    private mutating func stop(_ mode: Mode, then: Stop) -> [Action] {
        self.state = .stopping(mode, then: then)
        return [.cancelWorkers]
    }

    // MARK: Errors

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
