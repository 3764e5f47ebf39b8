import Downpour
import DownpourQueue
import Testing

@testable import DownpourFleet

/// The node's leases as a value, with the time given: claims, renewals, lost leases and the write permit.
@Suite struct FleetLeasesTests {
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { Self.start + .milliseconds(Int(seconds * 1000)) }

    static func claim(_ value: UInt64, fence: Int64) -> FleetQueue.Claim {
        FleetQueue.Claim(
            entry: QueueEntry(gid: DownloadID(value: value), uris: ["http://127.0.0.1/\(value)"], options: []),
            fence: fence,
            previousNode: nil
        )
    }

    static func gid(_ value: UInt64) -> DownloadID { DownloadID(value: value) }

    @Test func claimsFillTheRoomOneClaimAtATime() {
        var leases = FleetLeases(capacity: 3)
        #expect(leases.tick(at: Self.at(0)) == [.claim(count: 3)])
        #expect(leases.tick(at: Self.at(1)) == [], "a claim is in flight")
        let started = leases.claimed([Self.claim(1, fence: 10), Self.claim(2, fence: 11)], sentAt: Self.at(0))
        #expect(started == [.start(Self.claim(1, fence: 10)), .start(Self.claim(2, fence: 11))])
        #expect(leases.tick(at: Self.at(1.5)) == [.claim(count: 1)])
        leases.claimFailed()
        #expect(leases.tick(at: Self.at(2)) == [.claim(count: 1)], "a failed claim is tried again")
        _ = leases.claimed([Self.claim(3, fence: 12)], sentAt: Self.at(2))
        #expect(leases.tick(at: Self.at(3)) == [], "full, and no renewal due yet")
        leases.ended(Self.gid(2), fence: 11)
        #expect(leases.tick(at: Self.at(3.5)) == [.claim(count: 1)])
    }

    @Test func theWritePermitHoldsOnlyForTheFenceAndUntilTheLeaseMayRunOut() {
        var leases = FleetLeases(capacity: 1, leaseDuration: .seconds(15))
        _ = leases.tick(at: Self.at(0))
        _ = leases.claimed([Self.claim(1, fence: 7)], sentAt: Self.at(0))
        #expect(leases.mayWrite(Self.gid(1), fence: 7, at: Self.at(9.9)))
        #expect(
            !leases.mayWrite(Self.gid(1), fence: 7, at: Self.at(10)),
            "counted from when the claim was sent, with a third of the lease to spare for a write it allowed"
        )
        #expect(!leases.mayWrite(Self.gid(1), fence: 6, at: Self.at(1)), "an older claim's run")
        #expect(!leases.mayWrite(Self.gid(2), fence: 7, at: Self.at(1)))
    }

    @Test func renewalsComeEveryThirdOfALeaseAndStopWhatWasTaken() {
        var leases = FleetLeases(capacity: 2, leaseDuration: .seconds(15))
        _ = leases.tick(at: Self.at(0))
        _ = leases.claimed([Self.claim(1, fence: 1), Self.claim(2, fence: 2)], sentAt: Self.at(0))
        let asked: [DownloadID: Int64] = [Self.gid(1): 1, Self.gid(2): 2]
        #expect(leases.tick(at: Self.at(4.9)) == [], "confirmed by the claim")
        #expect(leases.tick(at: Self.at(5)) == [.renew(asked)])
        _ = leases.renewed([Self.gid(1), Self.gid(2)], asked: asked, sentAt: Self.at(5))
        #expect(leases.tick(at: Self.at(9.9)) == [])
        #expect(leases.tick(at: Self.at(10)) == [.renew(asked)])
        #expect(leases.tick(at: Self.at(11)) == [], "a renewal is in flight")
        // Download 2 was taken by another node after a stall: it stops; download 1 is sure for another lease.
        #expect(leases.renewed([Self.gid(1)], asked: asked, sentAt: Self.at(10)) == [.stop(Self.gid(2), fence: 2)])
        #expect(leases.mayWrite(Self.gid(1), fence: 1, at: Self.at(19.9)))
        #expect(!leases.mayWrite(Self.gid(1), fence: 1, at: Self.at(20)))
        #expect(!leases.mayWrite(Self.gid(2), fence: 2, at: Self.at(11)))
        #expect(leases.tick(at: Self.at(11)) == [.claim(count: 1)])
    }

    @Test func withoutTheDatabaseRunsGoOnUntilTheirLeasesMayHaveRunOut() {
        var leases = FleetLeases(capacity: 1, leaseDuration: .seconds(15))
        _ = leases.tick(at: Self.at(0))
        _ = leases.claimed([Self.claim(1, fence: 3)], sentAt: Self.at(0))
        #expect(leases.tick(at: Self.at(5)) == [.renew([Self.gid(1): 3])])
        leases.renewFailed()
        #expect(leases.tick(at: Self.at(6)) == [.renew([Self.gid(1): 3])], "tried again at the next tick")
        leases.renewFailed()
        #expect(leases.mayWrite(Self.gid(1), fence: 3, at: Self.at(9.9)))
        #expect(!leases.mayWrite(Self.gid(1), fence: 3, at: Self.at(10)))
        #expect(leases.tick(at: Self.at(14.9)) == [.renew([Self.gid(1): 3])])
        leases.renewFailed()
        #expect(leases.tick(at: Self.at(15)) == [.stop(Self.gid(1), fence: 3)], "no claim before its end is told")
        #expect(!leases.mayWrite(Self.gid(1), fence: 3, at: Self.at(15)))
        leases.ended(Self.gid(1), fence: 3)
        #expect(leases.tick(at: Self.at(16)) == [.claim(count: 1)])
    }

    /// A run may end (its file complete and named) just before a stalled loop finds its lease may have run out: its
    /// end is still to be recorded under its fence, not dropped (a dropped end ran the download a second time).
    @Test func aStoppedRunKeepsItsFenceUntilItsEndIsRecorded() {
        var leases = FleetLeases(capacity: 2, leaseDuration: .seconds(3))
        _ = leases.tick(at: Self.at(0))
        _ = leases.claimed([Self.claim(1, fence: 4), Self.claim(2, fence: 5)], sentAt: Self.at(0))
        #expect(leases.unrecorded.isEmpty)
        // No claim in the same turn: it would take the stopped downloads back before their ends were recorded.
        #expect(leases.tick(at: Self.at(3)) == [.stop(Self.gid(1), fence: 4), .stop(Self.gid(2), fence: 5)])
        #expect(leases.unrecorded == [Self.gid(1): 4, Self.gid(2): 5])
        #expect(!leases.mayWrite(Self.gid(1), fence: 4, at: Self.at(3)), "stopped: nothing more is written")
        // 1's end is recorded (or it turns out not to have ended); 2's is still to be: still no claim.
        leases.ended(Self.gid(1), fence: 4)
        #expect(leases.tick(at: Self.at(3.5)) == [])
        // A claim sent before the stop brings 2 back under a new fence: the new run has it.
        _ = leases.claimed([Self.claim(2, fence: 8)], sentAt: Self.at(4))
        #expect(leases.unrecorded.isEmpty)
        leases.ended(Self.gid(2), fence: 5)
        #expect(leases.held[Self.gid(2)]?.fence == 8, "the old fence's end frees nothing of the new run")
    }

    @Test func aLateAnswerForAnEndedOrReclaimedRunChangesNothing() {
        var leases = FleetLeases(capacity: 2, leaseDuration: .seconds(15))
        _ = leases.tick(at: Self.at(0))
        _ = leases.claimed([Self.claim(1, fence: 1), Self.claim(2, fence: 2)], sentAt: Self.at(0))
        let asked: [DownloadID: Int64] = [Self.gid(1): 1, Self.gid(2): 2]
        #expect(leases.tick(at: Self.at(5)) == [.renew(asked)])
        // Meanwhile 1 ended, and 2 was claimed again with a new fence (its lease had run out in the database): the
        // run under the old fence stops before the new one starts.
        leases.ended(Self.gid(1), fence: 1)
        #expect(
            leases.claimed([Self.claim(2, fence: 9)], sentAt: Self.at(6))
                == [.stop(Self.gid(2), fence: 2), .start(Self.claim(2, fence: 9))]
        )
        #expect(leases.renewed([], asked: asked, sentAt: Self.at(5)) == [])
        #expect(leases.mayWrite(Self.gid(2), fence: 9, at: Self.at(7)))
        #expect(!leases.mayWrite(Self.gid(2), fence: 2, at: Self.at(7)))
        leases.ended(Self.gid(2), fence: 2)
        #expect(leases.held.count == 1, "an end reported with an old fence frees nothing")
    }
}
