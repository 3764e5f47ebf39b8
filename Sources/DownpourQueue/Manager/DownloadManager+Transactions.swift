import Downpour
import Logging

/// The transactions: every change of the queue holds the ``TransactionGate`` from its first step to the end of its
/// actions, and is stored (``QueueStore/commit(_:)``, on the store's writer thread) before it counts; the loop
/// answers reads meanwhile. The queue itself lives in the ``QueueLedger``.
extension DownloadManager {
    /// Runs `operation` as one transaction: nothing else changes the queue meanwhile, and what the queue changed by
    /// itself on the way (a run that could not start) is stored before the gate opens again. When it throws, the
    /// runs in `stopped` (see ``stopRuns(for:_:)``) start again where the queue still has them active.
    func transaction<Result>(
        restartingOnFailure stopped: [DownloadID] = [],
        _ operation: () async throws(QueueError) -> Result
    ) async throws(QueueError) -> Result {
        let outcome = await self.selfMadeTransaction { () async -> Swift.Result<Result, QueueError> in
            do throws(QueueError) {
                return .success(try await operation())
            } catch {
                self.restartRuns(stopped)
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// ``transaction(restartingOnFailure:_:)`` for work that cannot fail: what the manager does by itself (a run's
    /// end, a shutdown).
    func selfMadeTransaction<Result>(_ operation: () async -> Result) async -> Result {
        await self.gate.enter()
        let result = await operation()
        await self.storeSelfMade()
        self.gate.leave()
        return result
    }

    /// Within a transaction: changes the queue in place and stores the rows it changed (and `options`, when given)
    /// in one transaction of the store. If `body` throws or the store refuses, the queue is reverted: the change was
    /// never made.
    ///
    /// The queue is changed in place rather than on a copy: a copy of a queue of 10,000 downloads would be copied
    /// whole by the first write to it.
    func change<Result>(
        options: [QueueOption]? = nil,
        _ body: (inout DownloadQueue) throws(QueueError) -> Result
    ) async throws(QueueError) -> Result {
        // A shutdown may have come while this one waited for the gate.
        try self.checkRunning()
        // A run's waiting record is stored first, so that a change refused below does not take it back too.
        await self.storeSelfMade()
        let result: Result
        do {
            result = try body(&self.ledger.queue)
        } catch {
            self.ledger.refused()
            throw error
        }
        guard let write = self.ledger.write(options: options, current: self.overrides) else { return result }
        do {
            try await self.ledger.store.commit(write)
        } catch {
            self.ledger.refused()
            throw error
        }
        self.ledger.stored()
        self.cancelRecordTimer()
        return result
    }

    /// Within a transaction: stores the changes the queue made by itself (a run's record, its end). They stand
    /// even if the store refuses them, since the download did what it did; the next write then stores the whole
    /// queue.
    func storeSelfMade() async {
        guard let write = self.ledger.write(options: nil, current: self.overrides) else { return }
        do {
            try await self.ledger.store.commit(write)
            self.ledger.stored()
        } catch {
            self.ledger.fellBehind()
            self.logger.error("The queue could not be stored", metadata: ["error": "\(error.message)"])
        }
        self.cancelRecordTimer()
    }

    /// A run's record waits for the next change; if none comes within `recordDelay`, it is stored on its own.
    func scheduleRecord() {
        guard self.recordTimer == nil, self.ledger.hasPendingRecord else { return }
        let delay = self.recordDelay
        self.recordTimer = Task {
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled else { return }
            await self.storeWaitingRecord()
        }
    }

    /// Stores what waits: between transactions, the queue's only unstored changes are runs' records.
    private func storeWaitingRecord() async {
        await self.gate.enter()
        if !self.isShutDown { await self.storeSelfMade() }
        self.gate.leave()
    }

    /// No record waits any more.
    private func cancelRecordTimer() {
        self.recordTimer?.cancel()
        self.recordTimer = nil
    }
}
