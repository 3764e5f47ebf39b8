import Downpour
import DownpourAria2
import DownpourQueue
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

extension FleetNode {
    // MARK: - Telling the others

    /// Sets where this node's RPC listens, for the list of nodes (once the port is bound).
    public func advertise(address: String) {
        self.address = address
        self.lastHeartbeat = nil
        self.waker.yield()
    }

    /// A change made through this node: told to its own clients at once, and to the other nodes' at the end of
    /// the loop's turn.
    func announce(_ event: QueueEvent) {
        self.broadcaster.send(event)
        self.announcer.send(event)
        self.unannounced.append(event)
        self.waker.yield()
    }

    /// An event of one of this node's runs (hooks were told already): a start is told to clients now (the
    /// download was claimed first), an end once it is recorded (``settled(_:)``), so that a client told of it
    /// reads it through any node.
    func ranEvent(_ event: QueueEvent) {
        switch event {
        case .started:
            self.announcer.send(event)
            self.unannounced.append(event)
        case .paused(let gid), .stopped(let gid), .completed(let gid), .failed(let gid):
            if self.leases.withLockedValue({ $0.held[gid] == nil && $0.unrecorded[gid] == nil }) {
                self.rowsChanged()
                self.announcer.send(event)
                self.unannounced.append(event)
            } else {
                self.untoldEnds[gid] = event
            }
        case .added, .changed, .resultsRemoved, .optionsChanged:
            return
        }
        self.waker.yield()
    }

    /// The run of `gid` is over here (its lease ended, the rows read again at the next read): its end is told if
    /// the database `recorded` it; if not, another node held the download by then, and it tells what comes of it.
    func settled(_ gid: DownloadID, recorded: Bool) {
        guard let event = self.untoldEnds.removeValue(forKey: gid), recorded else { return }
        self.announcer.send(event)
        self.unannounced.append(event)
    }

    /// Tells the other nodes of the changes made here since the last time; while the database is lost, they are
    /// not told (their clients see the changes at their next read).
    func announceNow() async {
        guard !self.unannounced.isEmpty else { return }
        let events = self.unannounced
        self.unannounced = []
        let first = self.announced
        self.announced += events.count
        do {
            try await self.queue.announce(
                events.enumerated().map { FleetQueue.Announcement(node: self.name, event: $1, serial: first + $0) }
            )
        } catch {
            self.logger.debug("Changes not told to the other nodes", metadata: ["error": "\(error.message)"])
        }
    }

    /// Tells the fleet how this node stands, once a tick.
    func heartbeat() async {
        let now = ContinuousClock.now
        if let last = self.lastHeartbeat, now - last < self.tick { return }
        let stat = await self.manager.read { $0.globalStat() }
        do {
            try await self.queue.heartbeat(
                node: self.name,
                address: self.address,
                downloadSpeed: stat.downloadSpeed,
                active: stat.numActive
            )
            self.lastHeartbeat = now
        } catch {
            self.lost(error)
        }
    }

    /// Another node's change: the next read reads the fleet again, and this node's clients are told.
    func heard(_ event: QueueEvent) {
        self.rowsChanged()
        self.announcer.send(event)
    }

    // MARK: - Waking

    /// Listens on ``FleetQueue/wakeChannel`` and wakes the loop for work to claim or a request for this node, and
    /// on ``FleetQueue/eventChannel`` for the other nodes' changes; connects again after a failure.
    nonisolated func listen(whenListening listening: AsyncStream<Void>.Continuation) async {
        while !Task.isCancelled {
            do {
                try await self.queue.client.withConnection { connection in
                    try await connection.listen(on: FleetQueue.wakeChannel) { notifications in
                        try await connection.listen(on: FleetQueue.eventChannel) { announcements in
                            listening.yield()
                            try await withThrowingDiscardingTaskGroup { group in
                                group.addTask {
                                    for try await notification in notifications
                                    where notification.payload == "*" || notification.payload == self.name {
                                        self.waker.yield()
                                    }
                                }
                                for try await notification in announcements {
                                    guard let announcement = FleetQueue.Announcement(payload: notification.payload),
                                        announcement.node != self.name
                                    else { continue }
                                    await self.heard(announcement.event)
                                }
                                group.cancelAll()
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                self.logger.debug("Listening for the fleet again", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: self.tick)
        }
    }

    /// Passes on aria2's notifications for this node's runs, and wakes the loop when a run ends.
    nonisolated func forward(_ events: AsyncStream<QueueEvent>) async {
        for await event in events {
            switch event {
            case .started, .paused, .stopped, .completed, .failed:
                self.broadcaster.send(event)
                await self.ranEvent(event)
            case .added, .changed, .resultsRemoved, .optionsChanged:
                break
            }
        }
    }

    static func refusal(_ error: FleetError) -> QueueError {
        QueueError(
            .storage,
            message: "The fleet's database cannot be reached (\(error.message)); the change was not confirmed "
                + "(a database that is slow, not gone, may still make it): look at the queue before trying again."
        )
    }
}
