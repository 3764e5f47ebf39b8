/// The control flow of one download after its probe, as a value: events in, actions out; no I/O, no clocks, no
/// tasks. ``DownloadEngine`` tells it what its workers, timers and the pause switch report and does what it
/// answers; the tests drive it through tables (as AsyncHTTPClient's `HTTP1ConnectionStateMachine`).
///
/// ```
/// waitingForProbe ── probeFinished ──► transferring (segmented, or a stream)
/// transferring ── every byte in, pause, cancel, a failure, ranges ignored ──► stopping (cancelWorkers)
/// stopping ── workersStopped ──► finished | failed | transferring (a stream) | paused (a stream) | savingBeforePause
/// savingBeforePause ── journalSaved ──► paused (segmented)
/// paused ── resumeRequested ──► transferring;  paused ── cancelled ──► failed
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
        /// Every byte is in: verify, rename and remove the journal (``DownloadFinisher``).
        case finish
        /// End the download with this error.
        case fail(DownloadError)
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
        /// Every byte is in; the engine finishes the file.
        case finished
        /// Ended with an error.
        case failed
    }

    /// How many segment workers a segmented round starts.
    let connections: Int
    private(set) var state: State = .waitingForProbe

    init(connections: Int) {
        precondition(connections >= 1, "a download needs at least one connection, not \(connections)")
        self.connections = connections
    }

    // MARK: Events

    /// The probe found what is at the URL: ranges over several connections when the server has them and a
    /// length, else one stream.
    mutating func probeFinished(segmentable: Bool) -> [Action] {
        guard case .waitingForProbe = self.state else {
            preconditionFailure("probeFinished in \(self.state): the probe finishes once")
        }
        return self.start(segmentable ? .segmented : .stream)
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
        case .waitingForProbe, .savingBeforePause, .paused:
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
        case .waitingForProbe, .savingBeforePause, .paused:
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
            self.state = .finished
            return [.finish]
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
        case .stopping, .savingBeforePause, .paused, .finished, .failed:
            // Stopping or stopped already; a pause asked for during a fall-back pauses the stream at its start.
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
        case .transferring, .stopping, .savingBeforePause, .finished, .failed:
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
        case .waitingForProbe:
            preconditionFailure("journalTick before the probe finished")
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
        case .waitingForProbe, .transferring(.stream, _), .paused:
            preconditionFailure("journalSaved in \(self.state): no save was asked for")
        }
    }

    /// The save that ``Action/saveJournal`` asked for failed: the download cannot promise to resume.
    mutating func journalSaveFailed(_ error: DownloadError) -> [Action] {
        switch self.state {
        case .transferring(.segmented, _):
            return self.stop(.segmented, then: .fail(error))
        case .savingBeforePause:
            self.state = .failed
            return [.fail(error)]
        case .stopping, .finished, .failed:
            // Stopping already: a pause saves again, a finished download needs no journal.
            return []
        case .waitingForProbe, .transferring(.stream, _), .paused:
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
        case .waitingForProbe:
            preconditionFailure("slowVerdict before the probe finished")
        }
    }

    // MARK: Transitions

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
