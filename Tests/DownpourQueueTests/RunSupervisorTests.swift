import Downpour
import Testing

@testable import DownpourQueue

/// The manager's runs as a table of steps: tokens, a stop asked, a late run's end, a superseded download. Each run is a
/// real ``Download`` that is never started (the supervisor only keeps it), and a task that does nothing.
@Suite("Run supervisor")
struct RunSupervisorTests {
    static let gid = DownloadID(value: 0x2089_b05e_cca3_d829)
    static let other = DownloadID(value: 7)
    static let downloader = makeTestDownloader()

    static func run(_ supervisor: inout RunSupervisor, _ gid: DownloadID) throws -> Int {
        let download = Self.downloader.download(try DownloadRequest(url: "http://127.0.0.1:1/\(gid)"), id: gid)
        let token = supervisor.nextToken()
        supervisor.started(
            gid,
            RunSupervisor.Run(
                download: download,
                playlist: PlaylistStage(concurrentSegments: 1, maximumRate: nil),
                task: Task {},
                token: token
            )
        )
        return token
    }

    @Test("each run gets a new token; only the current run's end is its download's end")
    func tokens() throws {
        var supervisor = RunSupervisor()
        let first = try Self.run(&supervisor, Self.gid)
        #expect(supervisor.isCurrent(Self.gid, token: first))
        // A pause and an unpause: the second run replaces the first, which ends late.
        let asked = supervisor.requestStop(Self.gid)
        let askedAgain = supervisor.requestStop(Self.gid)
        #expect(asked?.token == first)
        #expect(askedAgain == nil, "asked once")
        #expect(supervisor[Self.gid]?.stopRequested == true)
        let second = try Self.run(&supervisor, Self.gid)
        #expect(second > first)
        #expect(supervisor[Self.gid]?.stopRequested == false, "the new run was not asked to stop")
        let late = supervisor.ended(Self.gid, token: first)
        #expect(late == nil, "the first run's late end says nothing")
        #expect(supervisor.isCurrent(Self.gid, token: second))
        let end = supervisor.ended(Self.gid, token: second)
        #expect(end?.token == second)
        #expect(supervisor[Self.gid] == nil && supervisor.runs.isEmpty)
        let again = supervisor.ended(Self.gid, token: second)
        #expect(again == nil, "an end is taken once")
    }

    @Test("runs of different downloads are apart; a superseded download waits until run again or forgotten")
    func superseded() throws {
        var supervisor = RunSupervisor()
        let mine = try Self.run(&supervisor, Self.gid)
        let theirs = try Self.run(&supervisor, Self.other)
        #expect(mine != theirs)
        let stopping = supervisor.requestStop(Self.other)
        #expect(stopping != nil)
        #expect(supervisor[Self.gid]?.stopRequested == false)
        _ = supervisor.ended(Self.gid, token: mine)
        supervisor.supersede(Self.gid)
        #expect(supervisor.superseded == [Self.gid])
        let cleared = supervisor.clearSuperseded(Self.gid)
        let clearedAgain = supervisor.clearSuperseded(Self.gid)
        #expect(cleared)
        #expect(!clearedAgain, "once")
        #expect(supervisor.superseded.isEmpty)
        #expect(Set(supervisor.runs.keys) == [Self.other])
    }
}
