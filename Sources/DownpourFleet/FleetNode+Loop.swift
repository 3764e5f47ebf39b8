import Downpour
import DownpourAria2
import DownpourQueue
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

extension FleetNode {
    // MARK: - The loop

    func runLoop() async {
        for await _ in self.wakes {
            guard !Task.isCancelled else { return }
            await self.step()
        }
    }

    /// One turn of the loop (see the type's description).
    func step() async {
        let actions = self.leases.withLockedValue { $0.tick(at: .now) }
        await self.perform(actions)
        await self.carryOutRequests()
        await self.report()
        await self.announceNow()
        await self.heartbeat()
        await self.saveSessionIfDue()
    }

    /// Carries out what the leases asked, and what their answers ask in turn.
    func perform(_ actions: [FleetLeases.Action]) async {
        var pending = actions
        while !pending.isEmpty {
            let action = pending.removeFirst()
            switch action {
            case .claim(let count):
                let sentAt = ContinuousClock.now
                let duration = self.leases.withLockedValue { $0.leaseDuration }
                do {
                    // One at a time, and again at once while there is room: nodes woken together by new work
                    // take turns, so a batch is shared among them rather than filling the first node that woke.
                    let claims = try await self.queue.claim(node: self.name, count: min(count, 1), lease: duration)
                    self.databaseLost = false
                    if !claims.isEmpty {
                        self.rowsChanged()
                        if count > 1 { self.waker.yield() }
                    }
                    pending += self.leases.withLockedValue { $0.claimed(claims, sentAt: sentAt) }
                } catch {
                    self.leases.withLockedValue { $0.claimFailed() }
                    self.lost(error)
                }
            case .renew(let fences):
                let sentAt = ContinuousClock.now
                let duration = self.leases.withLockedValue { $0.leaseDuration }
                do {
                    let kept = try await self.queue.renew(node: self.name, fences: fences, lease: duration)
                    self.databaseLost = false
                    pending += self.leases.withLockedValue { $0.renewed(kept, asked: fences, sentAt: sentAt) }
                } catch {
                    self.leases.withLockedValue { $0.renewFailed() }
                    self.lost(error)
                }
            case .start(let claim):
                await self.startRun(claim)
            case .stop(let gid, let fence):
                // A run that ended on its own before its lease may have run out here is not dropped: `report()`
                // records its end under its fence.
                let ended = await self.manager.read { reader in
                    (try? reader.status(of: gid.description)).map { [.complete, .error, .removed].contains($0.status) }
                }
                if ended == true, self.leases.withLockedValue({ $0.unrecorded[gid] == fence }) {
                    self.logger.notice(
                        "Download ended before its lease may have run out; its end is recorded under its fence",
                        metadata: ["gid": "\(gid)", "fence": "\(fence)"]
                    )
                    continue
                }
                self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                self.logger.notice(
                    "Download stopped: its lease ran out or was taken",
                    metadata: ["gid": "\(gid)", "fence": "\(fence)"]
                )
                self.recorded[gid] = nil
                self.untoldEnds[gid] = nil
                await self.manager.forget(gid)
            }
        }
    }

    func startRun(_ claim: FleetQueue.Claim) async {
        let gid = claim.entry.gid
        if let previous = claim.previousNode {
            // The `.part` and journal are resumed when this node sees the storage the other one wrote to (one
            // machine, NFS); otherwise the download starts over.
            let message: Logger.Message =
                previous == self.name
                ? "Download taken back after a restart: resumes from its .part file"
                : "Download taken over from another node: resumes from its .part file where this node sees it, starts over otherwise"
            self.logger.notice(message, metadata: ["gid": "\(gid)", "from": "\(previous)"])
        }
        do {
            try await self.manager.run(claim.entry)
        } catch {
            self.logger.notice("Download cannot run here", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            if error.reason == .invalidRequest {
                // An option that cannot apply: a result, as a queue of one daemon gives.
                _ = try? await self.queue.finish(
                    gid,
                    fence: claim.fence,
                    outcome: .failed(code: .badOption, message: error.message)
                )
            } else {
                // This node cannot run it (its own store, or it is stopping): another may.
                _ = try? await self.queue.release(gid, fence: claim.fence, paused: false)
            }
            self.rowsChanged()
            self.leases.withLockedValue { $0.ended(gid, fence: claim.fence) }
            self.settled(gid, recorded: true)
        }
    }

    /// Carries out what other nodes asked of this one's runs.
    func carryOutRequests() async {
        let requests: [(entry: QueueEntry, fence: Int64, FleetQueue.Request)]
        do {
            requests = try await self.queue.requests(for: self.name)
            self.databaseLost = false
        } catch {
            self.lost(error)
            return
        }
        for (entry, fence, request) in requests {
            let gid = entry.gid
            guard self.leases.withLockedValue({ $0.held[gid]?.fence }) == fence else { continue }
            do {
                switch request {
                case .pause: _ = try await self.manager.pause(gid.description, force: false)
                case .remove: _ = try await self.manager.remove(gid.description, force: false)
                case .change: await self.apply(entry, fence: fence)
                }
            } catch {
                // It ended meanwhile: its end is reported below, and the request goes with it.
                self.logger.debug("Request not carried out", metadata: ["gid": "\(gid)", "error": "\(error.message)"])
            }
        }
    }

    /// Applies the URIs and options another node stored for a run of this node, as a single daemon applies a
    /// client's changes (a restart, keeping the bytes, where an option needs one), and notes that it did.
    func apply(_ entry: QueueEntry, fence: Int64) async {
        let gid = entry.gid.description
        do throws(QueueError) {
            let running = try await self.manager.status(of: gid)
            // Only the options whose values changed, as a client's changeOption gives them: a run restarts only
            // for those that need it (a speed limit changes live).
            let changed = Set(entry.options.map(\.name)).filter { name in
                entry.options.filter { $0.name == name } != running.options.filter { $0.name == name }
            }
            if !changed.isEmpty {
                try await self.manager.changeOptions(gid, entry.options.filter { changed.contains($0.name) })
            }
            if running.uris != entry.uris {
                _ = try await self.manager.changeURIs(gid, remove: running.uris, add: entry.uris, position: nil)
            }
        } catch {
            // It ended meanwhile (its end is reported next), or the change cannot apply to this run: the row keeps
            // it for the download's next run.
            self.logger.notice(
                "A change asked through another node was not applied to the run",
                metadata: ["gid": "\(gid)", "error": "\(error.message)"]
            )
        }
        do {
            try await self.queue.changed(entry.gid, fence: fence, to: entry)
        } catch {
            self.lost(error)
        }
    }

    /// Tells the database how each run stands, and gives back what ended.
    func report() async {
        // The runs held, and those stopped after they had ended (their ends are still to be recorded).
        let held = self.leases.withLockedValue { leases in
            leases.held.mapValues(\.fence).merging(leases.unrecorded) { current, _ in current }
        }
        guard !held.isEmpty else { return }
        let orphans = await self.manager.orphans()
        let read = { @Sendable (reader: any QueueReader) in
            held.keys.map { gid in (gid, try? reader.status(of: gid.description)) }
        }
        var statuses = await self.manager.read(read)
        // A run that was stopped or ended lets go of its file first (a removed one deletes its .part, a paused one
        // saves its journal; each asks its write permit, which ends with the lease): then it is told as it is now.
        let ending = statuses.filter { $0.1.map { $0.status != .active } ?? false }.map(\.0)
        if !ending.isEmpty {
            for gid in ending { await self.manager.waitForRun(gid) }
            statuses = await self.manager.read(read)
        }
        var finished = false
        defer { if finished { self.waker.yield() } }
        for (gid, status) in statuses {
            guard let fence = held[gid] else { continue }
            do {
                if orphans.contains(gid) {
                    // Its permit was withdrawn: another node may hold it now. Nothing is written for it.
                    self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                    self.recorded[gid] = nil
                    self.untoldEnds[gid] = nil
                    await self.manager.forget(gid)
                    continue
                }
                guard let status else {
                    try await self.giveBack(gid, fence: fence, paused: false)
                    continue
                }
                let recorded: Bool
                switch status.status {
                case .active:
                    try await self.record(status, fence: fence)
                    continue
                case .complete:
                    // A Metalink URL: the files it lists join the fleet's queue before its end is recorded (a
                    // second try after a failure finds them added already).
                    try await self.handOver(status.followedBy)
                    recorded = try await self.queue.finish(
                        gid,
                        fence: fence,
                        outcome: .complete(path: status.path ?? "", length: status.totalLength, audio: status.audio)
                    )
                case .error, .removed:
                    let code = status.errorCode.flatMap(Aria2ErrorCode.init(rawValue:)) ?? .unknown
                    recorded = try await self.queue.finish(
                        gid,
                        fence: fence,
                        outcome: .failed(
                            code: status.status == .removed ? .removed : code,
                            message: status.errorMessage ?? ""
                        )
                    )
                case .paused, .waiting:
                    try await self.giveBack(gid, fence: fence, paused: status.status == .paused)
                    continue
                }
                self.leases.withLockedValue { $0.ended(gid, fence: fence) }
                self.recorded[gid] = nil
                self.rowsChanged()
                self.settled(gid, recorded: recorded)
                await self.manager.forget(gid)
                finished = true
            } catch {
                self.lost(error)
                return
            }
        }
        if finished { await self.trimResults() }
    }

    /// Keeps the fleet's newest results, as many as this node's `max-download-result` (aria2's default: 1000).
    func trimResults() async {
        let globals = await self.manager.globalOptions()
        let keep = globals.last { $0.name == Aria2Option.maxDownloadResult.name }.flatMap { Int($0.value) } ?? 1000
        do {
            for gid in try await self.queue.trimResults(keeping: keep) { self.announce(.resultsRemoved(gid)) }
        } catch {
            self.lost(error)
        }
    }

    /// Moves the downloads this node's manager added (the files of a Metalink document) into the fleet's queue.
    func handOver(_ gids: [DownloadID]) async throws(FleetError) {
        guard !gids.isEmpty else { return }
        let entries = await self.manager.read { reader in
            gids.compactMap { gid in
                (try? reader.status(of: gid.description)).map {
                    QueueEntry(gid: $0.gid, uris: $0.uris, options: $0.options)
                }
            }
        }
        _ = try await self.queue.add(entries.map { ($0, paused: false) })
        for entry in entries {
            await self.manager.forget(entry.gid)
            self.announce(.added(entry.gid))
        }
    }

    func giveBack(_ gid: DownloadID, fence: Int64, paused: Bool) async throws(FleetError) {
        let given = try await self.queue.release(gid, fence: fence, paused: paused)
        self.rowsChanged()
        self.leases.withLockedValue { $0.ended(gid, fence: fence) }
        self.settled(gid, recorded: given)
        self.recorded[gid] = nil
        await self.manager.forget(gid)
        self.waker.yield()
    }

    func record(_ status: DownloadStatus, fence: Int64) async throws(FleetError) {
        let progress = Progress(
            path: status.path,
            audioPath: status.audio?.path,
            total: status.totalLength,
            completed: status.completedLength,
            speed: status.downloadSpeed
        )
        guard self.recorded[status.gid] != progress else { return }
        _ = try await self.queue.record(
            status.gid,
            fence: fence,
            path: status.path,
            totalLength: status.totalLength,
            completedLength: status.completedLength,
            downloadSpeed: status.downloadSpeed,
            audioPath: status.audio?.path
        )
        self.recorded[status.gid] = progress
    }

    /// A change through this node (a client's, or the loop's: a claim, an end): the next read reads the fleet
    /// again first.
    func rowsChanged() {
        self.lastRowsReadAt = nil
        self.pendingRead = nil
    }

    func lost(_ error: FleetError) {
        if !self.databaseLost {
            self.logger.error(
                "The fleet's database cannot be reached; running downloads go on, changes are refused",
                metadata: ["error": "\(error.message)"]
            )
        }
        self.databaseLost = true
    }
}
