import Testing

@testable import Downpour

@Suite("DownloadStateMachine")
struct DownloadStateMachineTests {
    typealias Machine = DownloadStateMachine
    typealias Action = DownloadStateMachine.Action
    typealias RoundAction = DownloadStateMachine.RoundAction
    typealias State = DownloadStateMachine.State

    static let diskFull = DownloadError(code: .localIO, message: "The disk is full.")
    static let reset = DownloadError(code: .network, message: "The connection was reset.")
    static let changed = DownloadError(code: .remoteChanged, message: "The file changed on the server.")
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

    /// What the machine answered: an action of the engine, or of a round.
    enum Answer: Equatable, CustomStringConvertible {
        case engine(Action)
        case round(RoundAction)

        var description: String {
            switch self {
            case .engine(let action): "\(action)"
            case .round(let action): "round: \(action)"
            }
        }
    }

    /// Every event, with fixed arguments.
    enum Event: String, CaseIterable, Codable, Sendable, CustomTestStringConvertible {
        // The engine's.
        case probeFinishedSegmentable
        case probeFinishedStream
        case probeFinishedAllBytesIn
        case workersStopped
        case pauseSaved
        case pauseSaveFailed
        case pauseEndedResumed
        case pauseEndedCancelled
        case piecesVerified
        case piecesBad
        case piecesFatal
        case piecesForgotten
        case refetchFailed
        case digestMatch
        case digestMismatchOneResponse
        case digestMismatchSeveralResponses
        case checkFailed
        case startedOver
        case startOverFailed
        case finishRefused
        // A round's.
        case workerFinished
        case workerFinishedPlanComplete
        case attemptFailedFatal
        case attemptFailedRetryable
        case attemptFailedSlow
        case attemptFailedRangesIgnored
        case pauseRequested
        case cancelled
        case journalTick
        case journalSaved
        case journalSaveFailed
        case slowVerdict
        case permitWithdrawn

        var testDescription: String { self.rawValue }

        /// Whether a round sends it (``DownloadStateMachine/RoundAction`` answers).
        var isRounds: Bool {
            switch self {
            case .workerFinished, .workerFinishedPlanComplete, .attemptFailedFatal, .attemptFailedRetryable,
                .attemptFailedSlow, .attemptFailedRangesIgnored, .pauseRequested, .cancelled, .journalTick,
                .journalSaved, .journalSaveFailed, .slowVerdict, .permitWithdrawn:
                true
            default:
                false
            }
        }

        func send(to machine: inout Machine) -> Answer {
            typealias Tests = DownloadStateMachineTests
            switch self {
            case .probeFinishedSegmentable: return .engine(machine.probeFinished(segmentable: true))
            case .probeFinishedStream: return .engine(machine.probeFinished(segmentable: false))
            case .probeFinishedAllBytesIn: return .engine(machine.probeFinished(segmentable: true, allBytesIn: true))
            case .workersStopped: return .engine(machine.workersStopped(bytesOnDisk: true))
            case .pauseSaved: return .engine(machine.pauseSaved())
            case .pauseSaveFailed: return .engine(machine.pauseSaveFailed(Tests.diskFull))
            case .pauseEndedResumed: return .engine(machine.pauseEnded(cancelled: false))
            case .pauseEndedCancelled: return .engine(machine.pauseEnded(cancelled: true))
            case .piecesVerified: return .engine(machine.piecesChecked(.verified))
            case .piecesBad: return .engine(machine.piecesChecked(.bad(Tests.badPieces)))
            case .piecesFatal: return .engine(machine.piecesChecked(.fatal(Tests.badPiece)))
            case .piecesForgotten: return .engine(machine.piecesForgotten())
            case .refetchFailed: return .engine(machine.refetchFailed(Tests.diskFull))
            case .digestMatch: return .engine(machine.digestChecked(.match))
            case .digestMismatchOneResponse:
                return .engine(machine.digestChecked(.mismatch(Tests.mismatch, fromSeveralResponses: false)))
            case .digestMismatchSeveralResponses:
                return .engine(machine.digestChecked(.mismatch(Tests.mismatch, fromSeveralResponses: true)))
            case .checkFailed: return .engine(machine.checkFailed(Tests.diskFull))
            case .startedOver: return .engine(machine.startedOver())
            case .startOverFailed: return .engine(machine.startOverFailed(Tests.diskFull))
            case .finishRefused: return .engine(machine.finishRefused(.cancelled))
            case .workerFinished: return .round(machine.workerFinished(planComplete: false))
            case .workerFinishedPlanComplete: return .round(machine.workerFinished(planComplete: true))
            case .attemptFailedFatal: return .round(machine.attemptFailed(.fatal(Tests.diskFull)))
            case .attemptFailedRetryable:
                return .round(machine.attemptFailed(.retryable(Tests.reset, retryAfter: .seconds(1))))
            case .attemptFailedSlow: return .round(machine.attemptFailed(.slow(Tests.verdict)))
            case .attemptFailedRangesIgnored: return .round(machine.attemptFailed(.rangesIgnored))
            case .pauseRequested: return .round(machine.pauseRequested())
            case .cancelled: return .round(machine.cancelled())
            case .journalTick: return .round(machine.journalTick())
            case .journalSaved: return .round(machine.journalSaved())
            case .journalSaveFailed: return .round(machine.journalSaveFailed(Tests.diskFull))
            case .slowVerdict: return .round(machine.slowVerdicts([Tests.verdict]))
            case .permitWithdrawn: return .round(machine.permitWithdrawn())
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
        case finishedStream
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
            case .pausedSegmented: [.probeFinishedSegmentable, .pauseRequested, .workersStopped, .pauseSaved]
            case .pausedStream: [.probeFinishedStream, .pauseRequested, .workersStopped]
            case .finished: [.probeFinishedSegmentable, .workerFinishedPlanComplete, .workersStopped]
            case .finishedStream: [.probeFinishedStream, .workerFinished, .workersStopped]
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
        /// This answer, and the machine is then in this state.
        case answers(Answer, then: State)
        /// A round's event that changes nothing: ``DownloadStateMachine/RoundAction/none``, and the same state.
        case ignored
        /// The engine cannot send this here without a bug: a precondition stops the process.
        case precondition
    }

    static let tooSlow = Machine.tooSlow(verdict)
    static let startOverNotice =
        mismatch.summary + ". Its bytes came from several responses, which a changed or misbehaving server could have "
        + "mixed up; downloading it again from zero."

    static func engine(_ action: Action, then state: State) -> Outcome { .answers(.engine(action), then: state) }
    static func round(_ action: RoundAction, then state: State) -> Outcome { .answers(.round(action), then: state) }

    static let segmented2 = State.transferring(.segmented, workersRunning: 2)
    static let stream1 = State.transferring(.stream, workersRunning: 1)

    /// The whole table: every event in every state. What a row does not list stops the process.
    static let table: [Fixture: [Event: Outcome]] = [
        .waitingForProbe: [
            .probeFinishedSegmentable: engine(.startRound(.segmented), then: segmented2),
            .probeFinishedStream: engine(.startRound(.stream), then: stream1),
            .probeFinishedAllBytesIn: engine(.finish, then: .finished(.segmented)),
        ],
        .transferringSegmented: [
            .workerFinished: round(.none, then: .transferring(.segmented, workersRunning: 1)),
            .workerFinishedPlanComplete: round(.cancelWorkers, then: .stopping(.segmented, then: .finish)),
            .attemptFailedFatal: round(.cancelWorkers, then: .stopping(.segmented, then: .fail(diskFull))),
            .attemptFailedRetryable: round(.cancelWorkers, then: .stopping(.segmented, then: .fail(reset))),
            .attemptFailedSlow: round(.cancelWorkers, then: .stopping(.segmented, then: .fail(tooSlow))),
            .attemptFailedRangesIgnored: round(.cancelWorkers, then: .stopping(.segmented, then: .fallBackToStream)),
            .pauseRequested: round(.cancelWorkers, then: .stopping(.segmented, then: .pause)),
            .cancelled: round(.cancelWorkers, then: .stopping(.segmented, then: .fail(.cancelled))),
            .journalTick: round(.saveJournal, then: segmented2),
            .journalSaved: round(.scheduleJournalTick, then: segmented2),
            .journalSaveFailed: round(.cancelWorkers, then: .stopping(.segmented, then: .fail(diskFull))),
            .slowVerdict: round(.restartConnections([verdict]), then: segmented2),
            .permitWithdrawn: round(
                .cancelWorkers,
                then: .stopping(.segmented, then: .fail(Machine.superseded))
            ),
        ],
        .transferringStream: [
            .workerFinished: round(.cancelWorkers, then: .stopping(.stream, then: .finish)),
            .workerFinishedPlanComplete: round(.cancelWorkers, then: .stopping(.stream, then: .finish)),
            .attemptFailedFatal: round(.cancelWorkers, then: .stopping(.stream, then: .fail(diskFull))),
            .attemptFailedRetryable: round(.cancelWorkers, then: .stopping(.stream, then: .fail(reset))),
            .attemptFailedSlow: round(.cancelWorkers, then: .stopping(.stream, then: .fail(tooSlow))),
            .attemptFailedRangesIgnored: round(
                .cancelWorkers,
                then: .stopping(.stream, then: .fail(Machine.rangeIgnored))
            ),
            .pauseRequested: round(.cancelWorkers, then: .stopping(.stream, then: .pause)),
            .cancelled: round(.cancelWorkers, then: .stopping(.stream, then: .fail(.cancelled))),
            // A stream has no journal and no connection to race.
            .journalTick: .ignored,
            .slowVerdict: .ignored,
            // The permit watch stops a stream too: it has no journal save to ask the permit at.
            .permitWithdrawn: round(.cancelWorkers, then: .stopping(.stream, then: .fail(Machine.superseded))),
        ],
        .stoppingToFinish: stopping(.segmented, workersStopped: engine(.finish, then: .finished(.segmented))),
        .stoppingToPause: stopping(.segmented, workersStopped: engine(.saveBeforePause, then: .savingBeforePause)),
        .stoppingToPauseStream: stopping(.stream, workersStopped: engine(.reportPaused, then: .paused(.stream))),
        .stoppingToFail: stopping(
            .segmented,
            workersStopped: engine(.fail(diskFull, keepPartial: true), then: .failed)
        ),
        .stoppingToFallBack: stopping(.segmented, workersStopped: engine(.fallBackToStream, then: stream1)),
        .savingBeforePause: [
            .pauseSaved: engine(.reportPaused, then: .paused(.segmented)),
            .pauseSaveFailed: engine(.fail(diskFull, keepPartial: true), then: .failed),
        ],
        .pausedSegmented: [
            .pauseEndedResumed: engine(.resume(.segmented), then: segmented2),
            .pauseEndedCancelled: engine(.fail(.cancelled, keepPartial: true), then: .failed),
        ],
        .pausedStream: [
            .pauseEndedResumed: engine(.resume(.stream), then: stream1),
            // A stream keeps nothing: it starts again from byte 0.
            .pauseEndedCancelled: engine(.fail(.cancelled, keepPartial: false), then: .failed),
        ],
        .finished: [.finishRefused: engine(.fail(.cancelled, keepPartial: true), then: .failed)],
        .finishedStream: [.finishRefused: engine(.fail(.cancelled, keepPartial: false), then: .failed)],
        .failed: [:],
        .verifyingPieces: [
            .piecesVerified: engine(.verifyDigest, then: .verifyingDigest(.segmented)),
            .piecesBad: engine(.refetchPieces(badPieces), then: .refetchingPieces),
            .piecesFatal: engine(.fail(badPiece, keepPartial: false), then: .failed),
            .checkFailed: engine(.fail(diskFull, keepPartial: true), then: .failed),
        ],
        .verifyingStreamPieces: [
            .piecesVerified: engine(.verifyDigest, then: .verifyingDigest(.stream)),
            .piecesFatal: engine(.fail(badPiece, keepPartial: false), then: .failed),
            .checkFailed: engine(.fail(diskFull, keepPartial: false), then: .failed),
        ],
        .refetchingPieces: [
            .piecesForgotten: engine(.startRound(.segmented), then: segmented2),
            .refetchFailed: engine(.fail(diskFull, keepPartial: true), then: .failed),
        ],
        .verifyingDigest: [
            .digestMatch: engine(.finish, then: .finished(.segmented)),
            .digestMismatchOneResponse: engine(
                .fail(.checksumMismatch(mismatch), keepPartial: false),
                then: .failed
            ),
            .digestMismatchSeveralResponses: engine(.startOver(notice: startOverNotice), then: .startingOver),
            .checkFailed: engine(.fail(diskFull, keepPartial: true), then: .failed),
        ],
        .startingOver: [
            .startedOver: engine(.startRound(.segmented), then: segmented2),
            .startOverFailed: engine(.fail(diskFull, keepPartial: false), then: .failed),
        ],
    ]

    /// While the round stops, its events change nothing (a stream's journal events are still a bug); only the
    /// workers' stopping moves on.
    static func stopping(_ mode: Machine.Mode, workersStopped: Outcome) -> [Event: Outcome] {
        var row: [Event: Outcome] = [.workersStopped: workersStopped]
        for event in Event.allCases where event.isRounds {
            row[event] =
                mode == .stream && (event == .journalSaved || event == .journalSaveFailed) ? .precondition : .ignored
        }
        return row
    }

    static func outcome(_ fixture: Fixture, _ event: Event) -> Outcome {
        Self.table[fixture]![event] ?? .precondition
    }

    @Test("every fixture is in the state its name says")
    func fixtures() {
        let states: [Fixture: State] = [
            .waitingForProbe: .waitingForProbe,
            .transferringSegmented: Self.segmented2,
            .transferringStream: Self.stream1,
            .stoppingToFinish: .stopping(.segmented, then: .finish),
            .stoppingToPause: .stopping(.segmented, then: .pause),
            .stoppingToPauseStream: .stopping(.stream, then: .pause),
            .stoppingToFail: .stopping(.segmented, then: .fail(Self.diskFull)),
            .stoppingToFallBack: .stopping(.segmented, then: .fallBackToStream),
            .savingBeforePause: .savingBeforePause,
            .pausedSegmented: .paused(.segmented),
            .pausedStream: .paused(.stream),
            .finished: .finished(.segmented),
            .finishedStream: .finished(.stream),
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
        case .answers(let answer, let state):
            #expect(event.send(to: &machine) == answer)
            #expect(machine.state == state)
        case .ignored:
            #expect(event.send(to: &machine) == .round(.none))
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
        _ steps: [(Event, Answer)],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (index, (event, answer)) in steps.enumerated() {
            #expect(event.send(to: &machine) == answer, "step \(index): \(event)", sourceLocation: sourceLocation)
        }
    }

    static let startSegmented = Answer.engine(.startRound(.segmented))
    static let startStream = Answer.engine(.startRound(.stream))
    static let cancelWorkers = Answer.round(.cancelWorkers)
    static let nothing = Answer.round(.none)

    @Test("segmented happy path: journal ticks, a race won, the losers' exits ignored, finish")
    func segmentedHappyPath() {
        var machine = Machine(connections: 3)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, Self.startSegmented),
                (.journalTick, .round(.saveJournal)),
                (.slowVerdict, .round(.restartConnections([Self.verdict]))),
                (.journalSaved, .round(.scheduleJournalTick)),
                (.workerFinished, Self.nothing),
                (.journalTick, .round(.saveJournal)),
                (.journalSaved, .round(.scheduleJournalTick)),
                (.workerFinishedPlanComplete, Self.cancelWorkers),
                (.attemptFailedFatal, Self.nothing),
                (.journalTick, Self.nothing),
                (.pauseRequested, Self.nothing),
                (.workersStopped, .engine(.finish)),
            ]
        )
        #expect(machine.state == .finished(.segmented))
    }

    @Test("stream happy path: one worker, no journal, finish")
    func streamHappyPath() {
        var machine = Machine(connections: 4)
        Self.expect(
            &machine,
            [
                (.probeFinishedStream, Self.startStream),
                (.journalTick, Self.nothing),
                (.slowVerdict, Self.nothing),
                (.workerFinished, Self.cancelWorkers),
                (.workersStopped, .engine(.finish)),
            ]
        )
        #expect(machine.state == .finished(.stream))
    }

    @Test("every segment worker ended with bytes missing: the download fails as remote misbehaviour")
    func bytesMissing() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, Self.startSegmented),
                (.workerFinished, Self.nothing),
                (.workerFinished, Self.cancelWorkers),
                // Misbehaviour makes the bytes worth nothing: they go.
                (.workersStopped, .engine(.fail(Machine.bytesMissing, keepPartial: false))),
            ]
        )
        #expect(Machine.bytesMissing.code == .remoteMisbehaved)
    }

    @Test("pause, resume, pause: the journal is saved before each pause; workers are counted afresh")
    func pauseResumePause() {
        var machine = Machine(connections: 2)
        let pause: [(Event, Answer)] = [
            (.pauseRequested, Self.cancelWorkers),
            (.attemptFailedFatal, Self.nothing),
            (.workerFinished, Self.nothing),
            (.workersStopped, .engine(.saveBeforePause)),
            (.pauseSaved, .engine(.reportPaused)),
            (.pauseEndedResumed, .engine(.resume(.segmented))),
        ]
        Self.expect(&machine, [(.probeFinishedSegmentable, Self.startSegmented)] + pause + pause)
        Self.expect(
            &machine,
            [
                (.workerFinished, Self.nothing),
                (.workerFinishedPlanComplete, Self.cancelWorkers),
                (.workersStopped, .engine(.finish)),
            ]
        )
    }

    @Test("a paused stream starts again from byte 0 when resumed, without a journal")
    func streamPauseResume() {
        var machine = Machine(connections: 2)
        Self.expect(
            &machine,
            [
                (.probeFinishedStream, Self.startStream),
                (.pauseRequested, Self.cancelWorkers),
                (.workersStopped, .engine(.reportPaused)),
                (.pauseEndedResumed, .engine(.resume(.stream))),
                (.workerFinished, Self.cancelWorkers),
                (.workersStopped, .engine(.finish)),
            ]
        )
    }

    @Test("ranges ignored mid-way: the workers stop, the journal goes, one stream takes over")
    func rangesIgnoredMidway() {
        var machine = Machine(connections: 4)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, Self.startSegmented),
                (.journalTick, .round(.saveJournal)),
                (.journalSaved, .round(.scheduleJournalTick)),
                (.workerFinished, Self.nothing),
                (.attemptFailedRangesIgnored, Self.cancelWorkers),
                (.attemptFailedRangesIgnored, Self.nothing),
                (.journalTick, Self.nothing),
                (.workersStopped, .engine(.fallBackToStream)),
                (.journalTick, Self.nothing),
                (.slowVerdict, Self.nothing),
                (.pauseRequested, Self.cancelWorkers),
                (.workersStopped, .engine(.reportPaused)),
                (.pauseEndedResumed, .engine(.resume(.stream))),
                (.attemptFailedRangesIgnored, Self.cancelWorkers),
                (.workersStopped, .engine(.fail(Machine.rangeIgnored, keepPartial: false))),
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
                (.probeFinishedSegmentable, Self.startSegmented),
                (.pauseRequested, Self.cancelWorkers),
                (.attemptFailedFatal, Self.nothing),
                (.journalSaveFailed, Self.nothing),
                (.cancelled, Self.nothing),
                (.workersStopped, .engine(.saveBeforePause)),
                (.pauseSaveFailed, .engine(.fail(Self.diskFull, keepPartial: true))),
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
                (.probeFinishedSegmentable, Self.startSegmented),
                (.pauseRequested, Self.cancelWorkers),
                (.cancelled, Self.nothing),
                (.workersStopped, .engine(.saveBeforePause)),
                (.pauseSaved, .engine(.reportPaused)),
                (.pauseEndedCancelled, .engine(.fail(.cancelled, keepPartial: true))),
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
                (.probeFinishedSegmentable, Self.startSegmented),
                (.pauseRequested, Self.cancelWorkers),
                (.workersStopped, .engine(.saveBeforePause)),
                (.pauseSaved, .engine(.reportPaused)),
            ]
        )
    }

    @Test("the first reason to stop stands", arguments: [Event.attemptFailedFatal, .cancelled, .pauseRequested])
    func firstReasonStands(_ first: Event) {
        var machine = Fixture.transferringSegmented.machine
        #expect(first.send(to: &machine) == Self.cancelWorkers)
        let stopping = machine.state
        for event in [
            Event.attemptFailedRetryable, .attemptFailedRangesIgnored, .workerFinishedPlanComplete, .cancelled,
        ] {
            #expect(event.send(to: &machine) == Self.nothing)
        }
        #expect(machine.state == stopping)
    }

    @Test("bad pieces are fetched again, then the digest matches: the transfer, the checks and the refetch in turn")
    func refetchThenFinish() {
        var machine = Machine(connections: 2, checks: Self.checked)
        Self.expect(
            &machine,
            [
                (.probeFinishedSegmentable, Self.startSegmented),
                (.workerFinishedPlanComplete, Self.cancelWorkers),
                (.workersStopped, .engine(.verifyPieces)),
                (.piecesBad, .engine(.refetchPieces(Self.badPieces))),
                (.piecesForgotten, Self.startSegmented),
                (.workerFinishedPlanComplete, Self.cancelWorkers),
                (.workersStopped, .engine(.verifyPieces)),
                (.piecesVerified, .engine(.verifyDigest)),
                (.digestMatch, .engine(.finish)),
            ]
        )
        #expect(machine.state == .finished(.segmented))
    }

    @Test("only a digest: no piece check; only pieces: no digest")
    func oneCheck() {
        var digestOnly = Machine(connections: 2, checks: Machine.Checks(pieces: false, digest: true))
        Self.expect(&digestOnly, [(.probeFinishedStream, Self.startStream), (.workerFinished, Self.cancelWorkers)])
        Self.expect(&digestOnly, [(.workersStopped, .engine(.verifyDigest)), (.digestMatch, .engine(.finish))])
        var piecesOnly = Machine(connections: 2, checks: Machine.Checks(pieces: true, digest: false))
        Self.expect(
            &piecesOnly,
            [(.probeFinishedAllBytesIn, .engine(.verifyPieces)), (.piecesVerified, .engine(.finish))]
        )
    }

    @Test("everything came with the probe: the one finishing path, and a cancel at its last moment keeps the bytes")
    func everythingWithTheProbe() {
        var machine = Machine(connections: 4)
        Self.expect(
            &machine,
            [
                (.probeFinishedAllBytesIn, .engine(.finish)),
                (.finishRefused, .engine(.fail(.cancelled, keepPartial: true))),
            ]
        )
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
    func startOverOnce(resumed: Bool, event: Event, startsOver: Bool) {
        var machine = Machine(connections: 2, checks: Machine.Checks(pieces: false, digest: true), resumed: resumed)
        #expect(machine.hasEarlierBytes == resumed)
        Self.expect(&machine, [(.probeFinishedAllBytesIn, .engine(.verifyDigest))])
        let answer = event.send(to: &machine)
        let discard = Answer.engine(.fail(.checksumMismatch(Self.mismatch), keepPartial: false))
        guard startsOver else {
            #expect(answer == discard)
            return
        }
        guard case .engine(.startOver(let notice)) = answer else {
            Issue.record("expected a start over, got \(answer)")
            return
        }
        #expect(notice.contains(resumed ? "an earlier run and this one" : "several responses"))
        #expect(machine.startedOver() == .startRound(.segmented))
        #expect(!machine.hasEarlierBytes && machine.hasStartedOver && !machine.hasBytesOnDisk)
        Self.expect(
            &machine,
            [
                (.workerFinishedPlanComplete, Self.cancelWorkers),
                (.workersStopped, .engine(.verifyDigest)),
                (.digestMismatchSeveralResponses, discard),
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
                (.probeFinishedStream, Self.startStream),
                (.workerFinished, Self.cancelWorkers),
                (.workersStopped, .engine(.verifyDigest)),
                (.digestMismatchSeveralResponses, .engine(.fail(.checksumMismatch(Self.mismatch), keepPartial: false))),
            ]
        )
    }

    @Test(
        "a failed download keeps its .part file only in ranges, with bytes on disk, and bytes worth keeping",
        arguments: [
            (resumed: false, bytesOnDisk: true, error: diskFull, keeps: true),
            (resumed: false, bytesOnDisk: false, error: diskFull, keeps: false),
            (resumed: true, bytesOnDisk: false, error: diskFull, keeps: true),
            (resumed: true, bytesOnDisk: true, error: changed, keeps: false),
            (resumed: true, bytesOnDisk: true, error: Machine.rangeIgnored, keeps: false),
            (
                resumed: true, bytesOnDisk: true,
                error: DownloadError(code: .superseded, message: "Another writer took it over."), keeps: false
            ),
        ]
    )
    func keepsPartial(resumed: Bool, bytesOnDisk: Bool, error: DownloadError, keeps: Bool) {
        var machine = Machine(connections: 2, resumed: resumed)
        #expect(machine.probeFinished(segmentable: true) == .startRound(.segmented))
        #expect(machine.attemptFailed(.fatal(error)) == .cancelWorkers)
        #expect(machine.workersStopped(bytesOnDisk: bytesOnDisk) == .fail(error, keepPartial: keeps))
    }

    @Test("a slow connection that ends the download fails it as a network error naming the speed")
    func tooSlowMessage() {
        #expect(Self.tooSlow.code == .network)
        #expect(Self.tooSlow.message.contains(ByteCount.formatRate(Self.verdict.speed)))
    }
}
