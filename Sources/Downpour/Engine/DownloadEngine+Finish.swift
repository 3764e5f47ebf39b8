import Foundation
import Logging
import NIOCore

/// The finish stage: the point of no return, then the final name (or the Metalink document read); and what a
/// download that ends early leaves on disk.
extension DownloadEngine {
    /// Every byte is in and checked: commits to finishing (``mayFinish``), then syncs the file and gives it its name,
    /// or reads the Metalink document it is.
    func finish(
        _ session: TransferSession,
        _ output: PreparedOutput,
        machine: DownloadStateMachine
    ) async throws(DownloadError) -> DownloadResult {
        // Every byte is in: the bytes on disk are the length (a stream's is known only now, and checked now against
        // what was described).
        let length = session.completedBytes
        if session.remoteFile.length == nil, output.probed.product == .file {
            do throws(DownloadError) {
                try self.checkLength(length)
            } catch {
                throw await self.discard(output, error: error)
            }
        }
        if output.finishedAtOnce == nil {
            do throws(DownloadError) {
                try await self.checkWritePermit()
            } catch {
                throw await self.abandon(session, output, error: error, machine: machine)
            }
            guard self.mayFinish() else {
                throw await self.abandon(session, output, error: .cancelled, machine: machine)
            }
            await self.willFinish?()
        }
        let remote = session.remoteFile
        var metalink: Metalink?
        switch output.probed.product {
        case .metalinkDocument:
            metalink = try await self.readMetalink(output, length: length, url: remote.url)
        case .file:
            let finisher = DownloadFinisher(
                file: output.file,
                journal: output.journal,
                partPath: output.partPath,
                path: output.path,
                overwrite: output.replacing,
                modificationTime: self.request.configuration.setsRemoteTime
                    ? remote.lastModified.flatMap(HTTPDate.parse).map { Int64($0) } : nil,
                mark: self.request.finishMark
            )
            let resumable = session.isSegmented
            if let finished = output.finishedAtOnce {
                // Synced and renamed already, in the trip that wrote the probe's bytes.
                try await BlockingIO.runEvenIfCancelled { () throws(DownloadError) in
                    try finisher.conclude(finished, resumable: resumable)
                }
            } else {
                try await finisher.finish(truncatingTo: remote.length == nil ? length : nil, resumable: resumable)
            }
        }
        let snapshot = session.snapshot()
        return DownloadResult(
            path: output.path,
            length: length,
            remoteFile: remote,
            downloadedBytes: snapshot.bytesThisRun,
            wastedBytes: snapshot.wastedBytes,
            elapsed: ContinuousClock.now - output.probed.startedAt,
            connectionsUsed: max(1, snapshot.mostActiveConnections),
            checksum: output.expected?.checksum,
            metalink: metalink
        )
    }

    /// Ends a download whose transfer failed: keeps the `.part` file and its journal (after a last save) when the
    /// download is in ranges, some bytes are on disk and the error does not make them worthless; else removes
    /// both. Returns the error, marked resumable when they were kept. Without a write permit any more, it only
    /// closes the file: what is on disk is the new writer's.
    func abandon(
        _ session: TransferSession,
        _ output: PreparedOutput,
        error: DownloadError,
        machine: DownloadStateMachine
    ) async -> DownloadError {
        guard error.code != .superseded, await self.writePermitted() else {
            session.file.close()
            var failure = error
            failure.resumable = false
            return failure
        }
        let keep =
            session.remoteFile.isSegmentable && (session.completedBytes > 0 || machine.hasEarlierBytes)
            && error.code != .remoteChanged && error.code != .remoteMisbehaved
        let journal = output.journal
        if keep {
            // The last save may be up to one interval old; bring it up to date if the disk lets us. In a task of
            // its own, so that the cancellation that stopped the download does not stop this too. Before the plan
            // is in place the journal on disk is still true, and there is nothing to add.
            if session.isSegmented {
                let finalSave = Task { try await self.saveJournal(journal, session: session) }
                _ = await finalSave.result
            }
        } else {
            let path = session.file.path
            try? await BlockingIO.runEvenIfCancelled {
                journal.remove()
                FileOperations.remove(path)
            }
        }
        session.file.close()
        var failure = error
        failure.resumable = keep
        return failure
    }

    /// Removes the `.part` file and its journal, and closes the file; returns `error`, not resumable.
    func discard(_ output: PreparedOutput, error: DownloadError) async -> DownloadError {
        await self.remove(output)
        var failure = error
        failure.resumable = false
        return failure
    }

    /// Removes the `.part` file and its journal, and closes the file; only closes it without a write permit any
    /// more (what is on disk is the new writer's).
    private func remove(_ output: PreparedOutput) async {
        let (journal, file) = (output.journal, output.file)
        guard await self.writePermitted() else {
            file.close()
            return
        }
        try? await BlockingIO.runEvenIfCancelled {
            journal.remove()
            FileOperations.remove(file.path)
        }
        file.close()
    }

    /// After a failure to ready the `.part` file: keeps it while an earlier run's journal vouches for its bytes
    /// (a segmentable file), else removes it; closes it. Returns whether it was kept.
    func removeUnlessJournaled(_ file: OutputFile, journal: JournalStore, segmentable: Bool) async -> Bool {
        guard await self.writePermitted() else {
            file.close()
            return true
        }
        let kept =
            (try? await BlockingIO.runEvenIfCancelled { () -> Bool in
                let kept: Bool
                if segmentable, case .loaded = journal.load() { kept = true } else { kept = false }
                if !kept { FileOperations.remove(file.path) }
                return kept
            }) ?? false
        file.close()
        return kept
    }

    /// Reads the downloaded Metalink document into memory and parses it; the `.part` file and its journal are
    /// removed whatever happens.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when the document is too long or not a Metalink,
    ///   ``DownloadError/Code/localIO`` when it cannot be read.
    private func readMetalink(_ output: PreparedOutput, length: Int64, url: URL) async throws(DownloadError) -> Metalink
    {
        let data: Data
        do {
            try Self.checkMetalinkLength(length, url: url)
            let file = output.file
            data = try await BlockingIO.run { () throws(DownloadError) -> Data in
                let buffer = try file.read(count: Int(length), at: 0)
                return Data(buffer.readableBytesView)
            }
        } catch {
            throw await self.discard(output, error: error)
        }
        await self.remove(output)
        do {
            let metalink = try Metalink(parsing: data)
            self.logger.info(
                "Read a Metalink document",
                metadata: ["url": "\(url)", "files": "\(metalink.files.count)"]
            )
            return metalink
        } catch {
            throw DownloadError(code: .invalidRequest, message: "\(url.absoluteString): \(error.message)")
        }
    }
}
