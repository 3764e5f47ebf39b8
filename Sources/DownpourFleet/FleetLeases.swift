import Downpour
import DownpourQueue

/// What one node of a fleet holds, and what it must do next, as a value: no I/O and no clock of its own (every
/// call is given the time). Its owner carries out the ``Action``s against ``FleetQueue`` and the downloads, and
/// reports back, the way `DownloadQueue` is driven.
///
/// A lease is sure to be held until `sent + leaseDuration`, where `sent` is when the claim or renewal that
/// confirmed it was sent: the database counts the lease from a later moment (its `now()` when it ran the
/// statement). So ``mayWrite(_:fence:at:)`` answers from memory, without a round trip, and never says yes to a
/// run whose lease could have run out, however the clocks of the node and the database are set (only their rates
/// matter). A lease is renewed once it was confirmed ``renewInterval`` ago; when renewals fail (the database is unreachable) the runs
/// go on until their leases may have run out, and then stop.
public struct FleetLeases: Sendable {
    /// A download this node runs.
    public struct Held: Sendable, Hashable {
        public var fence: Int64
        /// Until when the lease is sure to be held: when its last claim or renewal was sent, plus the duration.
        public var sureUntil: ContinuousClock.Instant
    }

    /// What the owner is to do.
    public enum Action: Sendable, Hashable {
        /// Claim up to this many downloads (``FleetQueue/claim(node:count:lease:)``), and report with
        /// ``claimed(_:sentAt:)`` or ``claimFailed()``.
        case claim(count: Int)
        /// Renew these leases (``FleetQueue/renew(node:fences:lease:)``), and report with
        /// ``renewed(_:asked:sentAt:)`` or ``renewFailed()``.
        case renew([DownloadID: Int64])
        /// Run this download, with ``mayWrite(_:fence:at:)`` as its write permit.
        case start(FleetQueue.Claim)
        /// Stop the run with this fence at once and write nothing more for it (cancel it keeping its files): its
        /// lease is lost or may have run out.
        case stop(DownloadID, fence: Int64)
    }

    /// How many downloads the node runs at once (its `max-concurrent-downloads`, at least 1).
    public var capacity: Int {
        didSet { self.capacity = max(1, self.capacity) }
    }
    public let leaseDuration: Duration
    /// How often leases are renewed: a third of the duration, so that two renewals may fail before one runs out.
    public var renewInterval: Duration { self.leaseDuration / 3 }
    /// How long before a lease may run out ``mayWrite(_:fence:at:)`` says no already (a third of the duration): a
    /// write it allowed (a sync, then the final rename) has that long to land.
    public var writeMargin: Duration { self.leaseDuration / 3 }

    public private(set) var held: [DownloadID: Held] = [:]
    /// Runs stopped because their lease may have run out, by fence: one that had ended on its own by then (its file
    /// complete and named, or its failure known) is still recorded under that fence, which succeeds when no other
    /// node has claimed the download since. Dropping it would run a finished download a second time.
    public private(set) var unrecorded: [DownloadID: Int64] = [:]
    private var claiming = false
    private var renewing = false

    public init(capacity: Int, leaseDuration: Duration = .seconds(15)) {
        precondition(leaseDuration > .zero, "a lease lasts for some time")
        self.capacity = max(1, capacity)
        self.leaseDuration = leaseDuration
    }

    /// Whether the run with `fence` may still write for `gid` at `now`: the node holds it with that fence and the
    /// lease is sure to last ``writeMargin`` more.
    public func mayWrite(_ gid: DownloadID, fence: Int64, at now: ContinuousClock.Instant) -> Bool {
        guard let held = self.held[gid], held.fence == fence else { return false }
        return now + self.writeMargin < held.sureUntil
    }

    /// Called every so often (a second, say): stops runs whose lease may have run out, asks for a renewal when one
    /// is due, and for claims while there is room.
    public mutating func tick(at now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        for (gid, held) in self.held.sorted(by: { $0.value.fence < $1.value.fence }) where now >= held.sureUntil {
            self.held[gid] = nil
            self.unrecorded[gid] = held.fence
            actions.append(.stop(gid, fence: held.fence))
        }
        // Due when a lease was last confirmed a renewal interval ago or more; all are renewed in one statement.
        let confirmedBefore = now + self.leaseDuration - self.renewInterval
        if !self.renewing, self.held.values.contains(where: { $0.sureUntil <= confirmedBefore }) {
            self.renewing = true
            actions.append(.renew(self.held.mapValues(\.fence)))
        }
        // No claim while a stopped run's end may still be recorded: the claim would take that very download back
        // (its lease has run out in the database too) and run it again before `report()` recorded it.
        let room = self.capacity - self.held.count
        if !self.claiming, room > 0, self.unrecorded.isEmpty {
            self.claiming = true
            actions.append(.claim(count: room))
        }
        return actions
    }

    /// The claim sent at `sentAt` came back with these downloads: each starts. A download this node still runs
    /// under an older fence (its lease ran out in the database before this node noticed, and the claim took it
    /// back) stops first.
    public mutating func claimed(_ claims: [FleetQueue.Claim], sentAt: ContinuousClock.Instant) -> [Action] {
        self.claiming = false
        var actions: [Action] = []
        for claim in claims {
            let gid = claim.entry.gid
            if let old = self.held[gid], old.fence != claim.fence { actions.append(.stop(gid, fence: old.fence)) }
            // Claimed again (by a claim sent before the stop): the new run has it.
            self.unrecorded[gid] = nil
            self.held[gid] = Held(fence: claim.fence, sureUntil: sentAt + self.leaseDuration)
            actions.append(.start(claim))
        }
        return actions
    }

    public mutating func claimFailed() {
        self.claiming = false
    }

    /// The renewal of `asked`, sent at `sentAt`, confirmed `kept`: those are sure for another lease; the others
    /// were taken by another node and stop.
    public mutating func renewed(
        _ kept: Set<DownloadID>,
        asked: [DownloadID: Int64],
        sentAt: ContinuousClock.Instant
    ) -> [Action] {
        self.renewing = false
        var actions: [Action] = []
        for (gid, fence) in asked.sorted(by: { $0.value < $1.value }) {
            // Ended or claimed again meanwhile: not this renewal's to judge.
            guard let held = self.held[gid], held.fence == fence else { continue }
            if kept.contains(gid) {
                self.held[gid]?.sureUntil = max(held.sureUntil, sentAt + self.leaseDuration)
            } else {
                self.held[gid] = nil
                actions.append(.stop(gid, fence: fence))
            }
        }
        return actions
    }

    /// The renewal failed (the database could not be reached): the leases stay until they may have run out, and
    /// the next ``tick(at:)`` asks again.
    public mutating func renewFailed() {
        self.renewing = false
    }

    /// A run ended on its own (complete, failed, paused, removed) and was given back: its place is free. Also
    /// for a stopped run in ``unrecorded``, once its end was recorded, or once it turned out not to have ended.
    public mutating func ended(_ gid: DownloadID, fence: Int64) {
        if self.unrecorded[gid] == fence { self.unrecorded[gid] = nil }
        guard self.held[gid]?.fence == fence else { return }
        self.held[gid] = nil
    }
}
