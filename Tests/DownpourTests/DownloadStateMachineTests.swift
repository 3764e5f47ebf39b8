import Testing

@testable import Downpour

@Suite("DownloadStateMachine")
struct DownloadStateMachineTests {
    typealias Machine = DownloadStateMachine
    typealias Action = DownloadStateMachine.Action
    typealias State = DownloadStateMachine.State

    static let diskFull = DownloadError(code: .localIO, message: "The disk is full.")
    static let reset = DownloadError(code: .network, message: "The connection was reset.")
    static let badPieces: [Range<Int64>] = [0..<4, 12..<16]
    static let mismatch = ChecksumMismatch(
        expected: Checksum(algorithm: .sha256, digest: String(repeating: "a", count: 64)),
        source: .configuration,
        actual: String(repeating: "b", count: 64)
    )
    static let badPiece = DownloadError(code: .checksumMismatch, message: "Piece 3 does not match after 3 fetches.")
    static let checked = Machine.Checks(pieces: true, digest: true)
    static let verdict = SlowConnectionDetector.Verdict(
        connection: 2,
        speed: 1000,
        belowFloor: false,
        reference: 1_000_000,
        attempt: 1
    )

    /// Every event, with fixed arguments.
    enum Event: String, CaseIterable, Codable, Sendable, CustomTestStringConvertible {
        case probeFinishedSegmentable
        case probeFinishedStream
        case workerFinished
        case workerFinishedPlanComplete
        case attemptFailedFatal
        case attemptFailedRetryable
        case attemptFailedSlow
        case attemptFailedRangesIgnored
        case workersStopped
        case pauseRequested
        case resumeRequested
        case cancelled
        case journalTick
        case journalSaved
        case journalSaveFailed
        case slowVerdict
        case probeFinishedAllBytesIn
        case piecesVerified
        case piecesBad
        case piecesFatal
        case piecesForgotten
        case digestMatch
        case digestMismatchOneResponse
        case digestMismatchSeveralResponses
        case checkFailed
        case startedOver
        case startOverFailed

        var testDescription: String { self.rawValue }

        /// The events of the checks after the transfer (and the probe that brings every byte): a bug in every
        /// state a row does not list them for.
        var isCheck: Bool {
            switch self {
            case .probeFinishedAllBytesIn, .piecesVerified, .piecesBad, .piecesFatal, .piecesForgotten, .digestMatch,
                .digestMismatchOneResponse, .digestMismatchSeveralResponses, .checkFailed, .startedOver,
                .startOverFailed:
                true
            default:
                false
            }
        }

        func send(to machine: inout Machine) -> [Action] {
            switch self {
            case .probeFinishedSegmentable: machine.probeFinished(segmentable: true)
            case .probeFinishedStream: machine.probeFinished(segmentable: false)
            case .workerFinished: machine.workerFinished(planComplete: false)
            case .workerFinishedPlanComplete: machine.workerFinished(planComplete: true)
            case .attemptFailedFatal: machine.attemptFailed(.fatal(DownloadStateMachineTests.diskFull))
            case .attemptFailedRetryable:
                machine.attemptFailed(.retryable(DownloadStateMachineTests.reset, retryAfter: .seconds(1)))
            case .attemptFailedSlow: machine.attemptFailed(.slow(DownloadStateMachineTests.verdict))
            case .attemptFailedRangesIgnored: machine.attemptFailed(.rangesIgnored)
            case .workersStopped: machine.workersStopped()
            case .pauseRequested: machine.pauseRequested()
            case .resumeRequested: machine.resumeRequested()
            case .cancelled: machine.cancelled()
            case .journalTick: machine.journalTick()
            case .journalSaved: machine.journalSaved()
            case .journalSaveFailed: machine.journalSaveFailed(DownloadStateMachineTests.diskFull)
            case .slowVerdict: machine.slowVerdict(DownloadStateMachineTests.verdict)
            case .probeFinishedAllBytesIn: machine.probeFinished(segmentable: true, allBytesIn: true)
            case .piecesVerified: machine.piecesChecked(.verified)
            case .piecesBad: machine.piecesChecked(.bad(DownloadStateMachineTests.badPieces))
            case .piecesFatal: machine.piecesChecked(.fatal(DownloadStateMachineTests.badPiece))
            case .piecesForgotten: machine.piecesForgotten()
            case .digestMatch: machine.digestChecked(.match)
            case .digestMismatchOneResponse:
                machine.digestChecked(.mismatch(DownloadStateMachineTests.mismatch, fromSeveralResponses: false))
            case .digestMismatchSeveralResponses:
                machine.digestChecked(.mismatch(DownloadStateMachineTests.mismatch, fromSeveralResponses: true))
            case .checkFailed: machine.checkFailed(DownloadStateMachineTests.diskFull)
            case .startedOver: machine.startedOver()
            case .startOverFailed: machine.startOverFailed(DownloadStateMachineTests.diskFull)
            }
        }
    }

    /// Every state a download can reach, each reached through events, with two connections.
    enum Fixture: String, CaseIterable, Codable, Sendable, CustomTestStringConvertible {
        case waitingForProbe
        case transferringSegmented
        case transferringStream
        case stoppingToFinish
        case stoppingToPause
        case stoppingToPauseStream
        case stoppingToFail
        case stoppingToFallBack
        case savingBeforePause
        case pausedSegmented
        case pausedStream
        case finished
        case failed
        case verifyingPieces
        case verifyingStreamPieces
        case refetchingPieces
        case verifyingDigest
        case startingOver

        var testDescription: String { self.rawValue }

        /// What the fixture's machine checks once every byte is in.
        var checks: Machine.Checks {
            switch self {
            case .verifyingPieces, .verifyingStreamPieces, .refetchingPieces, .verifyingDigest, .startingOver:
                DownloadStateMachineTests.checked
            default:
                .none
            }
        }

        var events: [Event] {
            switch self {
            case .waitingForProbe: []
            case .transferringSegmented: [.probeFinishedSegmentable]
            case .transferringStream: [.probeFinishedStream]
            case .stoppingToFinish: [.probeFinishedSegmentable, .workerFinishedPlanComplete]
            case .stoppingToPause: [.probeFinishedSegmentable, .pauseRequested]
            case .stoppingToPauseStream: [.probeFinishedStream, .pauseRequested]
            case .stoppingToFail: [.probeFinishedSegmentable, .attemptFailedFatal]
            case .stoppingToFallBack: [.probeFinishedSegmentable, .attemptFailedRangesIgnored]
            case .savingBeforePause: [.probeFinishedSegmentable, .pauseRequested, .workersStopped]
            case .pausedSegmented: [.probeFinishedSegmentable, .pauseRequested, .workersStopped, .journalSaved]
            case .pausedStream: [.probeFinishedStream, .pauseRequested, .workersStopped]
            case .finished: [.probeFinishedSegmentable, .workerFinishedPlanComplete, .workersStopped]
            case .failed: [.probeFinishedSegmentable, .attemptFailedFatal, .workersStopped]
            case .verifyingPieces: [.probeFinishedSegmentable, .workerFinishedPlanComplete, .workersStopped]
            case .verifyingStreamPieces: [.probeFinishedStream, .workerFinished, .workersStopped]
            case .refetchingPieces: Self.verifyingPieces.events + [.piecesBad]
            case .verifyingDigest: Self.verifyingPieces.events + [.piecesVerified]
            case .startingOver: Self.verifyingDigest.events + [.digestMismatchSeveralResponses]
            }
        }

        var machine: Machine {
            var machine = Machine(connections: 2, checks: self.checks)
            for event in self.events { _ = event.send(to: &machine) }
            return machine
        }
    }

    /// What an event does in a state.
    enum Outcome: Equatable {
        /// These actions, and the machine is then in this state.
        case answers([Action], then: State)
        /// No action, no change.
        case ignored
        /// The engine cannot send this here without a bug: a precondition stops the process.
        case precondition
    }

    static let tooSlow = Machine.tooSlow(verdict)
    static let startOverNotice =
        mismatch.summary + ". Its bytes came from several responses, which a changed or misbehaving server could have "
        + "mixed up; downloading it again from zero."

    /// The whole table: every event in every state. What a row does not list is its `otherwise`.
    static let table: [Fixture: (answers: [Event: Outcome], otherwise: Outcome)] = [
        .waitingForProbe: (
            [
                .probeFinishedSegmentable: .answers(
                    [.startSegmented, .scheduleJournalTick],
                    then: .transferring(.segmented, workersRunning: 2)
                ),
                .probeFinishedStream: .answers([.startStream], then: .transferring(.stream, workersRunning: 1)),
                .probeFinishedAllBytesIn: .answers([.finish], then: .finished),
            ],
            .precondition
        ),
        .transferringSegmented: (
            [
                .probeFinishedSegmentable: .precondition,
                .probeFinishedStream: .precondition,
                .workerFinished: .answers([], then: .transferring(.segmented, workersRunning: 1)),
                .workerFinishedPlanComplete: .answers([.cancelWorkers], then: .stopping(.segmented, then: .finish)),
                .attemptFailedFatal: .answers([.cancelWorkers], then: .stopping(.segmented, then: .fail(diskFull))),
                .attemptFailedRetryable: .answers([.cancelWorkers], then: .stopping(.segmented, then: .fail(reset))),
                .attemptFailedSlow: .answers([.cancelWorkers], then: .stopping(.segmented, then: .fail(tooSlow))),
                .attemptFailedRangesIgnored: .answers(
                    [.cancelWorkers],
                    then: .stopping(.segmented, then: .fallBackToStream)
                ),
                .workersStopped: .precondition,
                .pauseRequested: .answers([.cancelWorkers], then: .stopping(.segmented, then: .pause)),
                .cancelled: .answers([.cancelWorkers], then: .stopping(.segmented, then: .fail(.cancelled))),
                .journalTick: .answers([.saveJournal], then: .transferring(.segmented, workersRunning: 2)),
                .journalSaved: .answers([.scheduleJournalTick], then: .transferring(.segmented, workersRunning: 2)),
                .journalSaveFailed: .answers([.cancelWorkers], then: .stopping(.segmented, then: .fail(diskFull))),
                .slowVerdict: .answers(
                    [.restartConnection(verdict)],
                    then: .transferring(.segmented, workersRunning: 2)
                ),
            ],
            .ignored
        ),
        .transferringStream: (
            [
                .probeFinishedSegmentable: .precondition,
                .probeFinishedStream: .precondition,
                .workerFinished: .answers([.cancelWorkers], then: .stopping(.stream, then: .finish)),
                .workerFinishedPlanComplete: .answers([.cancelWorkers], then: .stopping(.stream, then: .finish)),
                .attemptFailedFatal: .answers([.cancelWorkers], then: .stopping(.stream, then: .fail(diskFull))),
                .attemptFailedRetryable: .answers([.cancelWorkers], then: .stopping(.stream, then: .fail(reset))),
                .attemptFailedSlow: .answers([.cancelWorkers], then: .stopping(.stream, then: .fail(tooSlow))),
                .attemptFailedRangesIgnored: .answers(
                    [.cancelWorkers],
                    then: .stopping(.stream, then: .fail(Machine.rangeIgnored))
                ),
                .workersStopped: .precondition,
                .pauseRequested: .answers([.cancelWorkers], then: .stopping(.stream, then: .pause)),
                .cancelled: .answers([.cancelWorkers], then: .stopping(.stream, then: .fail(.cancelled))),
                .journalSaved: .precondition,
                .journalSaveFailed: .precondition,
            ],
            .ignored
        ),
        .stoppingToFinish: (
            Self.stopping(workersStopped: .answers([.finish], then: .finished)),
            .ignored
        ),
        .stoppingToPause: (
            Self.stopping(workersStopped: .answers([.saveJournal], then: .savingBeforePause)),
            .ignored
        ),
        .stoppingToPauseStream: (
            Self.stopping(workersStopped: .answers([.reportPaused], then: .paused(.stream))),
            .ignored
        ),
        .stoppingToFail: (
            Self.stopping(workersStopped: .answers([.fail(diskFull)], then: .failed)),
            .ignored
        ),
        .stoppingToFallBack: (
            Self.stopping(
                workersStopped: .answers(
                    [.fallBackToStream, .startStream],
                    then: .transferring(.stream, workersRunning: 1)
                )
            ),
            .ignored
        ),
        .savingBeforePause: (
            Self.noWorkers.merging([
                .journalSaved: .answers([.reportPaused], then: .paused(.segmented)),
                .journalSaveFailed: .answers([.fail(diskFull)], then: .failed),
            ]) { $1 },
            .ignored
        ),
        .pausedSegmented: (
            Self.noWorkers.merging([
                .resumeRequested: .answers(
                    [.reportResumed, .startSegmented, .scheduleJournalTick],
                    then: .transferring(.segmented, workersRunning: 2)
                ),
                .cancelled: .answers([.fail(.cancelled)], then: .failed),
                .journalSaved: .precondition,
                .journalSaveFailed: .precondition,
            ]) { $1 },
            .ignored
        ),
        .pausedStream: (
            Self.noWorkers.merging([
                .resumeRequested: .answers(
                    [.reportResumed, .startStream],
                    then: .transferring(.stream, workersRunning: 1)
                ),
                .cancelled: .answers([.fail(.cancelled)], then: .failed),
                .journalSaved: .precondition,
                .journalSaveFailed: .precondition,
            ]) { $1 },
            .ignored
        ),
        .finished: (Self.stopping(workersStopped: .precondition), .ignored),
        .failed: (Self.stopping(workersStopped: .precondition), .ignored),
        .verifyingPieces: (
            Self.checking.merging([
                .piecesVerified: .answers([.verifyDigest], then: .verifyingDigest(.segmented)),
                .piecesBad: .answers([.refetchPieces(badPieces)], then: .refetchingPieces),
                .piecesFatal: .answers([.discard(badPiece)], then: .failed),
                .checkFailed: .answers([.fail(diskFull)], then: .failed),
            ]) { $1 },
            .precondition
        ),
        .verifyingStreamPieces: (
            Self.checking.merging([
                .piecesVerified: .answers([.verifyDigest], then: .verifyingDigest(.stream)),
                .piecesFatal: .answers([.discard(badPiece)], then: .failed),
                .checkFailed: .answers([.fail(diskFull)], then: .failed),
            ]) { $1 },
            .precondition
        ),
        .refetchingPieces: (
            Self.checking.merging([
                .piecesForgotten: .answers(
                    [.startSegmented, .scheduleJournalTick],
                    then: .transferring(.segmented, workersRunning: 2)
                ),
                .journalSaveFailed: .answers([.fail(diskFull)], then: .failed),
            ]) { $1 },
            .precondition
        ),
        .verifyingDigest: (
            Self.checking.merging([
                .digestMatch: .answers([.finish], then: .finished),
                .digestMismatchOneResponse: .answers([.discard(.checksumMismatch(mismatch))], then: .failed),
                .digestMismatchSeveralResponses: .answers(
                    [.startOver(notice: startOverNotice)],
                    then: .startingOver
                ),
                .checkFailed: .answers([.fail(diskFull)], then: .failed),
            ]) { $1 },
            .precondition
        ),
        .startingOver: (
            Self.checking.merging([
                .startedOver: .answers(
                    [.startSegmented, .scheduleJournalTick],
                    then: .transferring(.segmented, workersRunning: 2)
                ),
                .startOverFailed: .answers([.discard(diskFull)], then: .failed),
            ]) { $1 },
            .precondition
        ),
    ]

    /// While the bytes are checked no round runs; a pause or a cancel waits for the check's end.
    static let checking: [Event: Outcome] = [
        .pauseRequested: .ignored, .resumeRequested: .ignored, .cancelled: .ignored,
    ]

    /// While stopping and after the end, only these are not ignored.
    static func stopping(workersStopped: Outcome) -> [Event: Outcome] {
        [
            .probeFinishedSegmentable: .precondition, .probeFinishedStream: .precondition,
            .workersStopped: workersStopped,
        ]
    }

    /// While saving before a pause and while paused, no worker runs: a worker's report is a bug.
    static let noWorkers: [Event: Outcome] = [
        .probeFinishedSegmentable: .precondition,
        .probeFinishedStream: .precondition,
        .workerFinished: .precondition,
        .workerFinishedPlanComplete: .precondition,
        .attemptFailedFatal: .precondition,
        .attemptFailedRetryable: .precondition,
        .attemptFailedSlow: .precondition,
        .attemptFailedRangesIgnored: .precondition,
        .workersStopped: .precondition,
    ]

    static func outcome(_ fixture: Fixture, _ event: Event) -> Outcome {
        let row = Self.table[fixture]!
        if let outcome = row.answers[event] { return outcome }
        // A check's report where its row does not list it is a bug.
        return event.isCheck ? .precondition : row.otherwise
    }

    @Test("every fixture is in the state its name says")
    func fixtures() {
        let states: [Fixture: State] = [
            .waitingForProbe: .waitingForProbe,
            .transferringSegmented: .transferring(.segmented, workersRunning: 2),
            .transferringStream: .transferring(.stream, workersRunning: 1),
            .stoppingToFinish: .stopping(.segmented, then: .finish),
            .stoppingToPause: .stopping(.segmented, then: .pause),
            .stoppingToPauseStream: .stopping(.stream, then: .pause),
            .stoppingToFail: .stopping(.segmented, then: .fail(Self.diskFull)),
            .stoppingToFallBack: .stopping(.segmented, then: .fallBackToStream),
            .savingBeforePause: .savingBeforePause,
            .pausedSegmented: .paused(.segmented),
            .pausedStream: .paused(.stream),
            .finished: .finished,
            .failed: .failed,
            .verifyingPieces: .verifyingPieces(.segmented),
            .verifyingStreamPieces: .verifyingPieces(.stream),
            .refetchingPieces: .refetchingPieces,
            .verifyingDigest: .verifyingDigest(.segmented),
            .startingOver: .startingOver,
        ]
        for fixture in Fixture.allCases {
            #expect(fixture.machine.state == states[fixture], "\(fixture)")
        }
    }

    @Test("every event in every state answers as the table says", arguments: Fixture.allCases, Event.allCases)
    func table(_ fixture: Fixture, _ event: Event) {
        var machine = fixture.machine
        let before = machine.state
        switch Self.outcome(fixture, event) {
        case .answers(let actions, let state):
            #expect(event.send(to: &machine) == actions)
            #expect(machine.state == state)
        case .ignored:
            #expect(event.send(to: &machine) == [])
            #expect(machine.state == before)
        case .precondition:
            // Checked in a process of its own by `invalid`.
            break
        }
    }

    static let invalid = Fixture.allCases.flatMap { fixture in
        Event.allCases.filter { Self.outcome(fixture, $0) == .precondition }.map { (fixture, $0) }
    }

    @Test("an event the engine can send only by mistake stops the process", arguments: invalid)
    func invalidEvent(_ fixture: Fixture, _ event: Event) async {
        await #expect(processExitsWith: .failure) { [fixture, event] in
            var machine = fixture.machine
            _ = event.send(to: &machine)
        }
    }

    // MARK: Scenarios

    /// Sends `events` in order and checks each answer.
    static func expect(
        _ machine: inout Machine,
        _ steps: [(Event, [Action])],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (index, (event, actions)) in steps.enumerated() {
            #expect(event.send(to: &machine) == actions, "step \(index): \(event)", sourceLocation: sourceLocation)
        }
    }

    @Test("segmented happy path: journal ticks, a race won, the losers' exits ignored, finish")
    func segmentedHappyPath() {
        var machine = Machine(connections: 3)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.journalTick, [.saveJournal]),
                (.slowVerdict, [.restartConnection(Self.verdict)]),
                (.journalSaved, [.scheduleJournalTick]),
                (.workerFinished, []),
                (.journalTick, [.saveJournal]),
                (.journalSaved, [.scheduleJournalTick]),
                (.workerFinishedPlanComplete, [.cancelWorkers]),
                (.attemptFailedFatal, []),
                (.journalTick, []),
                (.pauseRequested, []),
                (.workersStopped, [.finish]),
            ]
        )
        #expect(machine.state == .finished)
    }

    @Test("stream happy path: one worker, no journal, finish")
    func streamHappyPath() {
        var machine = Machine(connections: 4)
        Self.expect(
            &machine,
            [
                (.probeFinishedStream, [.startStream]),
                (.journalTick, []),
                (.slowVerdict, []),
                (.workerFinished, [.cancelWorkers]),
                (.workersStopped, [.finish]),
            ]
        )
        #expect(machine.state == .finished)
    }

    @Test("every segment worker ended with bytes missing: the download fails as remote misbehaviour")
    func bytesMissing() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.workerFinished, []),
                (.workerFinished, [.cancelWorkers]),
                (.workersStopped, [.fail(Machine.bytesMissing)]),
            ]
        )
        #expect(Machine.bytesMissing.code == .remoteMisbehaved)
    }

    @Test("pause, resume, pause: the journal is saved before each pause; workers are counted afresh")
    func pauseResumePause() {
        var machine = Machine(connections: 2)
        let pause: [(Event, [Action])] = [
            (.pauseRequested, [.cancelWorkers]),
            (.attemptFailedFatal, []),
            (.workerFinished, []),
            (.workersStopped, [.saveJournal]),
            (.pauseRequested, []),
            (.journalSaved, [.reportPaused]),
            (.pauseRequested, []),
            (.journalTick, []),
            (.resumeRequested, [.reportResumed, .startSegmented, .scheduleJournalTick]),
        ]
        Self.expect(&machine, [(.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick])] + pause + pause)
        Self.expect(
            &machine,
            [
                (.resumeRequested, []),
                (.workerFinished, []),
                (.workerFinishedPlanComplete, [.cancelWorkers]),
                (.workersStopped, [.finish]),
            ]
        )
    }

    @Test("a paused stream starts again from byte 0 when resumed, without a journal")
    func streamPauseResume() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedStream, [.startStream]),
                (.pauseRequested, [.cancelWorkers]),
                (.workersStopped, [.reportPaused]),
                (.resumeRequested, [.reportResumed, .startStream]),
                (.workerFinished, [.cancelWorkers]),
                (.workersStopped, [.finish]),
            ]
        )
    }

    @Test("ranges ignored mid-way: the workers stop, the journal goes, one stream takes over")
    func rangesIgnoredMidway() {
        var machine = Machine(connections: 4)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.journalTick, [.saveJournal]),
                (.journalSaved, [.scheduleJournalTick]),
                (.workerFinished, []),
                (.attemptFailedRangesIgnored, [.cancelWorkers]),
                (.attemptFailedRangesIgnored, []),
                (.journalTick, []),
                (.workersStopped, [.fallBackToStream, .startStream]),
                (.journalTick, []),
                (.slowVerdict, []),
                (.pauseRequested, [.cancelWorkers]),
                (.workersStopped, [.reportPaused]),
                (.resumeRequested, [.reportResumed, .startStream]),
                (.attemptFailedRangesIgnored, [.cancelWorkers]),
                (.workersStopped, [.fail(Machine.rangeIgnored)]),
            ]
        )
        #expect(machine.state == .failed)
    }

    @Test("failures during a pause: a worker's on its way out is ignored; the journal's ends the download")
    func fatalFailureDuringPause() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.pauseRequested, [.cancelWorkers]),
                (.attemptFailedFatal, []),
                (.journalSaveFailed, []),
                (.workersStopped, [.saveJournal]),
                (.cancelled, []),
                (.journalSaveFailed, [.fail(Self.diskFull)]),
                (.resumeRequested, []),
            ]
        )
        #expect(machine.state == .failed)
    }

    @Test("cancelled while stopping for a pause: the pause is reported, then the cancellation ends it")
    func cancelledWhilePausing() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.pauseRequested, [.cancelWorkers]),
                (.cancelled, []),
                (.workersStopped, [.saveJournal]),
                (.journalSaved, [.reportPaused]),
                (.cancelled, [.fail(.cancelled)]),
            ]
        )
    }

    @Test("paused before a round began: nothing started, the journal is saved and the pause reported")
    func pausedAtTheStart() {
        // The engine sends both at once when the switch is already off as a round would begin.
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.pauseRequested, [.cancelWorkers]),
                (.workersStopped, [.saveJournal]),
                (.journalSaved, [.reportPaused]),
            ]
        )
    }

    @Test("the first reason to stop stands", arguments: [Event.attemptFailedFatal, .cancelled, .pauseRequested])
    func firstReasonStands(_ first: Event) {
        var machine = Fixture.transferringSegmented.machine
        #expect(first.send(to: &machine) == [.cancelWorkers])
        let stopping = machine.state
        for event in [
            Event.attemptFailedRetryable, .attemptFailedRangesIgnored, .workerFinishedPlanComplete, .cancelled,
        ] {
            #expect(event.send(to: &machine) == [])
        }
        #expect(machine.state == stopping)
    }

    @Test("a finished machine ignores late events")
    func finishedIgnoresLateEvents() {
        var machine = Fixture.finished.machine
        for event in Event.allCases where Self.outcome(.finished, event) != .precondition {
            #expect(event.send(to: &machine) == [], "\(event)")
        }
        #expect(machine.state == .finished)
    }

    @Test("bad pieces are fetched again, then the digest matches: the transfer, the checks and the refetch in turn")
    func refetchThenFinish() {
        var machine = Machine(connections: 2, checks: Self.checked)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, [.startSegmented, .scheduleJournalTick]),
                (.workerFinishedPlanComplete, [.cancelWorkers]),
                (.workersStopped, [.verifyPieces]),
                (.pauseRequested, []),
                (.piecesBad, [.refetchPieces(Self.badPieces)]),
                (.piecesForgotten, [.startSegmented, .scheduleJournalTick]),
                (.workerFinishedPlanComplete, [.cancelWorkers]),
                (.workersStopped, [.verifyPieces]),
                (.piecesVerified, [.verifyDigest]),
                (.digestMatch, [.finish]),
            ]
        )
        #expect(machine.state == .finished)
    }

    @Test("only a digest: no piece check; only pieces: no digest")
    func oneCheck() {
        var digestOnly = Machine(connections: 2, checks: Machine.Checks(pieces: false, digest: true))
        Self.expect(&digestOnly, [(.probeFinishedStream, [.startStream]), (.workerFinished, [.cancelWorkers])])
        Self.expect(&digestOnly, [(.workersStopped, [.verifyDigest]), (.digestMatch, [.finish])])
        var piecesOnly = Machine(connections: 2, checks: Machine.Checks(pieces: true, digest: false))
        Self.expect(&piecesOnly, [(.probeFinishedAllBytesIn, [.verifyPieces]), (.piecesVerified, [.finish])])
    }

    @Test(
        "a digest mismatch starts over once when the bytes came from an earlier run or several responses",
        arguments: [
            (resumed: false, event: Event.digestMismatchOneResponse, startsOver: false),
            (resumed: false, event: Event.digestMismatchSeveralResponses, startsOver: true),
            (resumed: true, event: Event.digestMismatchOneResponse, startsOver: true),
            (resumed: true, event: Event.digestMismatchSeveralResponses, startsOver: true),
        ]
    )
    func startOverOnce(resumed: Bool, event: Event, startsOver: Bool) throws {
        var machine = Machine(connections: 2, checks: Machine.Checks(pieces: false, digest: true), resumed: resumed)
        #expect(machine.hasEarlierBytes == resumed)
        Self.expect(&machine, [(.probeFinishedAllBytesIn, [.verifyDigest])])
        let answer = event.send(to: &machine)
        guard startsOver else {
            #expect(answer == [.discard(.checksumMismatch(Self.mismatch))])
            return
        }
        let only = try #require(answer.first)
        guard case .startOver(let notice) = only, answer.count == 1 else {
            Issue.record("expected a start over, got \(answer)")
            return
        }
        #expect(notice.contains(resumed ? "an earlier run and this one" : "several responses"))
        #expect(machine.startedOver() == [.startSegmented, .scheduleJournalTick])
        #expect(!machine.hasEarlierBytes && machine.hasStartedOver)
        Self.expect(
            &machine,
            [
                (.workerFinishedPlanComplete, [.cancelWorkers]),
                (.workersStopped, [.verifyDigest]),
                (.digestMismatchSeveralResponses, [.discard(.checksumMismatch(Self.mismatch))]),
            ]
        )
        #expect(machine.state == .failed)
    }

    @Test("a stream whose digest is wrong fails: it cannot start over in ranges")
    func streamMismatchFails() {
        var machine = Machine(connections: 2, checks: Machine.Checks(pieces: false, digest: true), resumed: true)
        Self.expect(
            &machine,
            [
                (.probeFinishedStream, [.startStream]),
                (.workerFinished, [.cancelWorkers]),
                (.workersStopped, [.verifyDigest]),
                (.digestMismatchSeveralResponses, [.discard(.checksumMismatch(Self.mismatch))]),
            ]
        )
    }

    @Test("a slow connection that ends the download fails it as a network error naming the speed")
    func tooSlowMessage() {
        #expect(Self.tooSlow.code == .network)
        #expect(Self.tooSlow.message.contains(ByteCount.formatRate(Self.verdict.speed)))
    }
}
