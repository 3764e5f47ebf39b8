import Foundation
import Logging
import NIOCore

/// The finish stage: the point of no return, then the final name (or the Metalink document read); and what a
/// download that ends early leaves on disk.
extension DownloadEngine {
    /// Every byte is in and checked: commits to finishing, or says why not. A stream's length is known only now,
    /// and checked against what was described; then the write permit, and the point of no return
    /// (``mayFinish``), after which a cancel comes too late.
    ///
    /// - Throws: why the download cannot finish: the length, the write permit withdrawn, or a cancel that came
    ///   first (``DownloadError/Code/cancelled``).
    func commitToFinish(_ session: TransferSession, _ output: PreparedOutput) async throws(DownloadError) {
        if session.remoteFile.length == nil, output.probed.product == .file {
            try self.checkLength(session.completedBytes)
        }
        try await self.checkWritePermit()
        guard self.mayFinish() else { throw .cancelled }
        await self.willFinish?()
    }

    /// After ``commitToFinish(_:_:)``: syncs the file and gives it its name, or reads the document it is (a Metalink,
    /// a playlist).
    func finish(_ session: TransferSession, _ output: PreparedOutput) async throws(DownloadError) -> DownloadResult {
        // Every byte is in: the bytes on disk are the length (a stream's is known only now).
        let length = session.completedBytes
        let remote = session.remoteFile
        var metalink: Metalink?
        var playlist: PlaylistDocument?
        switch output.probed.product {
        case .metalinkDocument:
            metalink = try await self.readMetalink(output, length: length, url: remote.url)
        case .file where await self.isPlaylist(output, length: length):
            let data = try await self.readDocument(output, length: length) {}
            playlist = PlaylistDocument(url: remote.url, data: data)
            self.logger.info("Read a playlist", metadata: ["url": "\(remote.url)", "bytes": "\(data.count)"])
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
            try await finisher.finish(truncatingTo: remote.length == nil ? length : nil, resumable: session.isSegmented)
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
            metalink: metalink,
            playlist: playlist
        )
    }

    /// Ends a download that cannot finish. With `keepPartial` (the ``DownloadStateMachine``'s decision), keeps the
    /// `.part` file and its journal, after a last save; else removes both. Returns the error, marked resumable when
    /// the bytes were kept. A file with no name yet (``OutputFile/isUnnamed``) is only closed: the kernel frees it,
    /// and a `NAME.part` beside it is not this run's. Without a write permit any more, it only closes the file too:
    /// what is on disk is the new writer's.
    func abandon(
        _ session: TransferSession,
        _ output: PreparedOutput,
        error: DownloadError,
        keepPartial: Bool
    ) async -> DownloadError {
        var failure = error
        failure.resumable = false
        // Another writer's file, or one with no name (the kernel frees it once closed): only closed.
        guard error.code != .superseded, !session.file.isUnnamed, await self.writePermitted() else {
            session.file.close()
            return failure
        }
        guard keepPartial else { return await self.discard(output, error: error) }
        // The last save may be up to one interval old; bring it up to date if the disk lets us. In a task of its
        // own, so that the cancellation that stopped the download does not stop this too.
        let journal = output.journal
        let finalSave = Task { try await self.saveJournal(journal, session: session) }
        _ = await finalSave.result
        session.file.close()
        failure.resumable = true
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
        // A file with no name (the kernel frees it once closed): a `NAME.part` beside it is not this run's.
        guard !file.isUnnamed, await self.writePermitted() else {
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

    /// Whether the file is an HLS playlist, by what it holds (``PlaylistDocument/isPlaylist(prefix:)``), when
    /// ``DownloadConfiguration/followsPlaylists`` is set: then it is read, not saved. Its media type and name are not
    /// enough: an `.m3u8` or an `audio/mpegurl` answer may be an ordinary M3U list, which is saved.
    /// A file that cannot be read here is taken for a file: the finish that follows says what is wrong with it.
    private func isPlaylist(_ output: PreparedOutput, length: Int64) async -> Bool {
        guard self.request.configuration.followsPlaylists, length >= 7,
            length <= PlaylistDocument.maximumDocumentLength
        else { return false }
        let file = output.file
        // Past the point of no return: a cancel must not leave the file open.
        let prefix = try? await BlockingIO.runEvenIfCancelled { () throws(DownloadError) -> [UInt8] in
            let buffer = try file.read(count: Int(min(length, PlaylistDocument.prefixLength)), at: 0)
            return Array(buffer.readableBytesView)
        }
        return prefix.map { PlaylistDocument.isPlaylist(prefix: $0) } ?? false
    }

    /// Reads a downloaded document (a Metalink, a playlist) into memory after `check` allows its length; the
    /// `.part` file and its journal are removed whatever happens.
    ///
    /// - Throws: what `check` throws, ``DownloadError/Code/localIO`` when it cannot be read.
    private func readDocument(
        _ output: PreparedOutput,
        length: Int64,
        check: () throws(DownloadError) -> Void
    ) async throws(DownloadError) -> Data {
        let data: Data
        do {
            try check()
            let file = output.file
            data = try await BlockingIO.runEvenIfCancelled { () throws(DownloadError) -> Data in
                let buffer = try file.read(count: Int(length), at: 0)
                return Data(buffer.readableBytesView)
            }
        } catch {
            throw await self.discard(output, error: error)
        }
        await self.remove(output)
        return data
    }

    /// Reads the downloaded Metalink document into memory and parses it; the `.part` file and its journal are
    /// removed whatever happens.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when the document is too long or not a Metalink,
    ///   ``DownloadError/Code/localIO`` when it cannot be read.
    private func readMetalink(_ output: PreparedOutput, length: Int64, url: URL) async throws(DownloadError) -> Metalink
    {
        let data = try await self.readDocument(output, length: length) { () throws(DownloadError) in
            try Self.checkMetalinkLength(length, url: url)
        }
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
