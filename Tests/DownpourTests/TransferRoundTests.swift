import DownpourTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import Downpour

/// ``TransferRound`` against the test server on loopback: what the round's tasks report reaches the machine, and
/// the round returns the machine's answer once its tasks have stopped. Each row is compared with the same machine
/// driven by hand through the events the row's situation must produce (its twin).
@Suite struct TransferRoundTests {
    static let content = makeTestContent(count: 1024 * 1024, seed: 43)
    static let diskFull = DownloadError(code: .localIO, message: "The disk is full.")

    enum Situation: String, CaseIterable, Sendable {
        /// Paused before the round began.
        case pausedBefore
        /// Every byte comes.
        case allBytes
        /// Half the file comes, and the journal's first save fails.
        case journalSaveFails
        /// Half the file comes, then a pause.
        case pausedMidway
    }

    /// The twin's answer: the machine's, driven by hand through what `situation` must bring about.
    static func expected(_ situation: Situation, bytesOnDisk: Bool) -> DownloadStateMachine.Action {
        var twin = DownloadStateMachine(connections: 2)
        _ = twin.probeFinished(segmentable: true)
        switch situation {
        case .pausedBefore, .pausedMidway:
            _ = twin.pauseRequested()
        case .allBytes:
            _ = twin.workerFinished(planComplete: false)
            _ = twin.workerFinished(planComplete: true)
        case .journalSaveFails:
            _ = twin.journalTick()
            _ = twin.journalSaveFailed(Self.diskFull)
        }
        return twin.workersStopped(bytesOnDisk: bytesOnDisk)
    }

    @Test(arguments: Situation.allCases)
    func aRoundEndsWithTheMachinesAnswer(_ situation: Situation) async throws {
        let server = try await RangeTestServer.start(content: Self.content)
        defer { Task { try? await server.shutdown() } }
        if situation == .journalSaveFails || situation == .pausedMidway {
            // The first half of the file, then nothing until released: the round cannot end on its own.
            server.holdBodies(lastBytes: Self.content.count / 2)
        }
        let downloader = Downloader(configuration: .init())
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("round.bin")
        let file = try OutputFile.openLocked(at: path)
        let configuration = testConfiguration(
            connections: 2,
            journalInterval: situation == .journalSaveFails ? .milliseconds(10) : .seconds(3600)
        )
        let url = try #require(URL(string: server.url()))
        let remote = RemoteFile(
            url: url,
            length: Int64(Self.content.count),
            acceptsRanges: true,
            etag: "\"downpour-test-v1\"",
            lastModified: "Wed, 21 Oct 2026 07:28:00 GMT"
        )
        let session = TransferSession(
            transport: try downloader.transport(for: configuration, logger: Logger(label: "test")),
            file: file,
            remoteFile: remote,
            mode: .segmented(
                SegmentPlanner(
                    length: Int64(Self.content.count),
                    connections: 2,
                    minimumSplitSize: configuration.minimumSplitSize
                )
            ),
            headers: [],
            configuration: configuration,
            logger: Logger(label: "test"),
            hub: DownloadEventHub(),
            budget: downloader.connectionBudget,
            pacing: .unlimited,
            authorization: RequestAuthorization(origin: Origin(url), credentials: nil, cookies: nil)
        )
        let gate = PauseGate()
        if situation == .pausedBefore { gate.pause() }
        let saves = NIOLockedValueBox(0)
        let round = TransferRound(session: session, gate: gate) { () throws(DownloadError) in
            saves.withLockedValue { $0 += 1 }
            if situation == .journalSaveFails { throw Self.diskFull }
        }
        var machine = DownloadStateMachine(connections: 2)
        #expect(machine.probeFinished(segmentable: true) == .startRound(.segmented))

        let answer: DownloadStateMachine.Action
        if situation == .pausedMidway {
            async let ended = { [machine] in
                var machine = machine
                return await round.run(.segmented, machine: &machine)
            }()
            try await waitUntil("the first bytes on disk") { session.completedBytes > 0 }
            gate.pause()
            answer = await ended
        } else {
            answer = await round.run(.segmented, machine: &machine)
        }
        server.releaseBodies()

        #expect(answer == Self.expected(situation, bytesOnDisk: session.completedBytes > 0))
        switch situation {
        case .pausedBefore:
            #expect(server.statistics().requests.isEmpty, "nothing is started for a round paused before it began")
            #expect(saves.withLockedValue { $0 } == 0)
        case .allBytes:
            #expect(answer == .finish)
            #expect(session.completedBytes == Int64(Self.content.count))
            try file.sync()
            #expect(try sha256Hex(ofFileAt: path) == sha256Hex(Self.content))
        case .journalSaveFails:
            // The save may fail before a connection was made: the round ends either way.
            #expect(saves.withLockedValue { $0 } == 1, "the first failed save ends the round")
        case .pausedMidway:
            #expect(answer == .saveBeforePause)
            #expect(session.completedBytes > 0 && session.completedBytes < Int64(Self.content.count))
        }
        file.close()
        await downloader.shutdown()
    }
}
