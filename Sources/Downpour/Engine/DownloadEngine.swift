import Foundation
import Logging
import NIOCore

/// Runs one download from probe to final name: the work behind ``Download/run()``.
struct DownloadEngine: Sendable {
    let request: DownloadRequest
    let downloader: Downloader
    let hub: DownloadEventHub
    let gate: PauseGate
    let limiter: BandwidthLimiter
    /// The download's cookie jar, when it uses cookies.
    let cookies: CookieStore?
    let logger: Logger
    /// Told the `.part` path as soon as it is known, so that a cancel can remove it.
    let partPathKnown: @Sendable (String) -> Void
    /// Asked at the point of no return, just before the file is synced and given its final name: `false` when
    /// the download was cancelled, and it stops there instead; `true` commits it to finishing, and a cancel
    /// after that comes too late (``Download/cancel(keepingPartialFile:)``).
    let mayFinish: @Sendable () -> Bool
    /// Awaited once the download is committed to finishing.
    let willFinish: (@Sendable () async -> Void)?

    func run() async throws(DownloadError) -> DownloadResult {
        do {
            return try await self.perform()
        } catch {
            if Task.isCancelled && error.code != .localIO {
                throw DownloadError(
                    code: .cancelled,
                    message: error.resumable
                        ? "The download was stopped; what arrived is kept and the same request resumes it."
                        : "The download was cancelled.",
                    resumable: error.resumable
                )
            }
            throw error
        }
    }

    private func perform() async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        try configuration.validate()
        try self.request.destination.validate()
        for mirror in self.request.mirrors {
            try DownloadRequest.validate(mirror)
        }
        if let path = self.request.destination.fixedPath {
            // With a conditional GET an existing file is judged once the probe has said how new the remote is; a
            // file with this download's finish mark, once the probe has said how long the remote is.
            try self.checkFree(
                path,
                replacing: configuration.overwrite || configuration.conditionalGet || configuration.renamesExisting
                    || self.isMarkedAsFinished(path)
            )
        }
        let transport = try self.downloader.transport(for: configuration, logger: self.logger)
        let clock = ContinuousClock()
        let startedAt = clock.now
        let authorization = await self.authorization()
        let probe = ResourceProbe(
            transport: transport,
            configuration: configuration,
            authorization: authorization,
            logger: self.logger
        )
        let budget = self.downloader.connectionBudget
        let urls = self.request.urls
        let (probedIndex, outcome, failedMirrors) = try await self.probeFirstWorking(urls, probe: probe, budget: budget)
        let remote = outcome.remoteFile
        self.logger.info(
            "Probed",
            metadata: [
                "url": "\(remote.url.absoluteString)", "length": "\(remote.length.map(String.init) ?? "unknown")",
                "ranges": "\(remote.acceptsRanges)", "etag": "\(remote.etag ?? "-")",
            ]
        )

        let readsMetalink =
            configuration.followsMetalink
            && (remote.contentType.map(Metalink.isMetalink(contentType:)) ?? false
                || Metalink.isMetalink(path: self.request.url.path) || Metalink.isMetalink(path: remote.url.path))
        if let length = remote.length {
            if readsMetalink {
                try Self.checkMetalinkLength(length, url: remote.url)
            } else {
                try self.checkLength(length)
            }
        }
        let proposedPath = try self.destinationPath(for: remote)
        var replacing = configuration.overwrite
        if configuration.conditionalGet, let local = FileOperations.sizeAndModificationTime(proposedPath) {
            switch ConditionalGet(localModified: local.modified, remoteLastModified: remote.lastModified) {
            case .keep:
                self.logger.info(
                    "The output file is as new as the remote one; nothing to download",
                    metadata: ["path": "\(proposedPath)"]
                )
                return DownloadResult(
                    path: proposedPath,
                    length: local.size,
                    remoteFile: remote,
                    downloadedBytes: 0,
                    elapsed: clock.now - startedAt,
                    connectionsUsed: 0,
                    wasSkipped: true
                )
            case .replace:
                replacing = true
            case .undecided:
                break
            }
        }
        if !replacing, !readsMetalink, let size = self.finishedEarlier(proposedPath, remote: remote) {
            self.logger.info(
                "The file was finished by an earlier run (it carries this download's mark); nothing to download",
                metadata: ["path": "\(proposedPath)"]
            )
            return DownloadResult(
                path: proposedPath,
                length: size,
                remoteFile: remote,
                downloadedBytes: 0,
                elapsed: clock.now - startedAt,
                connectionsUsed: 0,
                wasSkipped: true
            )
        }
        var renamingNotice: String?
        var renamed: String?
        if !replacing, !readsMetalink, configuration.renamesExisting, let free = try self.freeName(for: proposedPath) {
            renamingNotice = "'\(proposedPath)' exists and is not a partial download of this one; saving as '\(free)'."
            renamed = free
        }
        let path = renamed ?? proposedPath
        // A Metalink document is read, never saved: a file of its name does not stand in the way.
        if !readsMetalink { try self.checkFree(path, replacing: replacing) }
        let partPath = path + ".part"
        let journal = JournalStore(partPath: partPath)
        // Opening, locking and readying the `.part` file, and writing the probe's bytes, in one trip to the
        // blocking-I/O threads. When those bytes are the whole file and there is no digest to verify, the same trip
        // finishes the download too (sync and rename).
        let firstBytes = outcome.firstBytes
        // The digests describe the files a Metalink lists, not the document.
        let (expected, checksumNotice) =
            readsMetalink ? (nil, nil) : self.expectedChecksum(server: outcome.serverChecksum)
        let isWholeFile =
            firstBytes.map { remote.isSegmentable ? Int64($0.readableBytes) == remote.length : true } ?? false
        // Committed to finishing here (a cancel that came first leaves it to the way below, which stops).
        let finishesAtOnce =
            expected == nil && configuration.pieceChecksums == nil && !readsMetalink && isWholeFile
            && self.mayFinish()
        if finishesAtOnce { await self.willFinish?() }
        let modificationTime = configuration.setsRemoteTime ? remote.lastModified.flatMap(HTTPDate.parse) : nil
        let overwrite = replacing
        let mark = self.request.finishMark
        let (file, prepared, finished) = try await BlockingIO.run {
            () throws(DownloadError) -> (
                OutputFile, Result<Prepared, DownloadError>, Result<Void, DownloadFinisher.Failure>?
            ) in
            // All the bytes in hand, nothing to verify, no file to replace: written unseen and linked under its
            // name (one change to the directory); else the named `.part` file.
            let unnamed = finishesAtOnce && !overwrite ? OutputFile.openUnnamed(for: partPath) : nil
            let file: OutputFile
            if let unnamed { file = unnamed } else { file = try OutputFile.openLocked(at: partPath) }
            do throws(DownloadError) {
                // Space is reserved so that a full disk shows up now; the write of a whole file shows it as soon.
                let prepared = try self.prepare(
                    file,
                    journal: journal,
                    remote: remote,
                    probedURL: urls[probedIndex],
                    reserving: !isWholeFile
                )
                if let firstBytes, firstBytes.readableBytes > 0 {
                    try file.write(firstBytes, at: 0)
                }
                guard finishesAtOnce else { return (file, .success(prepared), nil) }
                let finisher = DownloadFinisher(
                    file: file,
                    journal: journal,
                    partPath: partPath,
                    path: path,
                    overwrite: overwrite,
                    modificationTime: modificationTime.map { Int64($0) },
                    mark: mark
                )
                return (file, .success(prepared), finisher.syncAndMove(truncatingTo: nil))
            } catch {
                return (file, .failure(error), nil)
            }
        }
        let prefetched = firstBytes.map { 0..<Int64($0.readableBytes) }
        self.partPathKnown(partPath)
        var session = TransferSession(
            transport: transport,
            file: file,
            remoteFile: remote,
            headers: outcome.headers,
            configuration: configuration,
            logger: self.logger,
            hub: self.hub,
            budget: budget,
            pacing: Pacing(limiters: [self.downloader.overallLimiter, self.limiter]),
            authorization: authorization,
            hasher: expected.map { PrefixHasher(algorithm: $0.checksum.algorithm, file: file) },
            // With the length known now (it matched the digests), pieces are verified as they come in.
            pieceChecker: readsMetalink
                ? nil
                : configuration.pieceChecksums.flatMap { checksums in
                    remote.length.map { PieceChecker(checksums: checksums, length: $0, file: file) }
                },
            mirrors: MirrorSet(
                urls: urls,
                primary: probedIndex,
                remote: remote,
                failed: failedMirrors,
                recorded: (try? prepared.get())?.mirrors ?? [:]
            )
        )

        var resumed: ByteRangeSet
        let notices: [String]
        do {
            (resumed, notices) = try prepared.get().doneAndNotices
        } catch {
            // Nothing of this run is on disk. An earlier run's bytes stay as long as their journal does (a
            // cancel before the preparation ran, say); without one the `.part` file holds nothing of use.
            let kept: Bool
            if remote.isSegmentable, case .loaded = journal.load() { kept = true } else { kept = false }
            if !kept { FileOperations.remove(partPath) }
            file.close()
            var failure = error
            failure.resumable = kept
            throw failure
        }

        self.hub.emit(
            .started(
                DownloadStart(
                    remoteFile: remote,
                    destinationPath: path,
                    connections: remote.isSegmentable ? configuration.connections : 1,
                    resumedBytes: resumed.byteCount
                )
            )
        )
        for notice in notices + [checksumNotice, renamingNotice].compactMap({ $0 }) {
            self.logger.info("\(notice)")
            self.hub.emit(.notice(notice))
        }
        var length: Int64
        var earlierBytes: Int64 = 0
        var startedOver = false
        // What the next transfer starts from: the bytes resumed, later what is left after bad pieces were taken out.
        var done = resumed
        var refetching = false
        // Made with the session when the length was known; else (a stream) once the transfer gives it.
        var pieces = session.pieceChecker
        while true {
            do {
                length = try await self.transfer(
                    &session,
                    resumed: done,
                    prefetched: startedOver || refetching ? nil : prefetched,
                    journal: journal,
                    // A few pieces fetched again: each in one request, not cut up for the prefix hasher.
                    inPieces: !refetching
                )
            } catch {
                throw await self.abandon(session, error: error, resumed: resumed, journal: journal)
            }
            if let checksums = configuration.pieceChecksums, !readsMetalink {
                do {
                    try self.checkLength(length)
                } catch {
                    throw self.discard(file, journal: journal, error: error)
                }
                let checker = pieces ?? PieceChecker(checksums: checksums, length: length, file: file)
                pieces = checker
                let outcome: PieceOutcome
                do {
                    outcome = try await self.verifyPieces(checker, session: session)
                } catch {
                    throw await self.abandon(session, error: error, resumed: resumed, journal: journal)
                }
                switch outcome {
                case .verified:
                    break
                case .failed(let failure):
                    throw self.discard(file, journal: journal, error: failure)
                case .refetch(let ranges):
                    // Only these pieces are fetched again; the journal forgets them first, so that a crash before
                    // they are in again does not trust their bytes.
                    done = session.doneRanges()
                    for range in ranges { done.remove(range) }
                    do {
                        try await self.saveJournal(journal, session: session, done: done)
                    } catch {
                        throw await self.abandon(session, error: error, resumed: resumed, journal: journal)
                    }
                    // The whole-file hash may have taken in the bad bytes: it starts over once they are replaced.
                    if let lowest = ranges.map(\.lowerBound).min() {
                        session.hasher?.noteRewrite(from: lowest)
                    }
                    refetching = true
                    continue
                }
            }
            guard let expected else { break }
            let mismatch: ChecksumMismatch?
            do {
                mismatch = try await self.verify(session, length: length, against: expected)
            } catch {
                throw await self.abandon(session, error: error, resumed: resumed, journal: journal)
            }
            guard let mismatch else { break }
            // Bytes from several responses or an earlier run may have come from different versions of the file (a
            // changed server, a load balancer in front of servers that disagree, a lying one): once more from zero.
            // Bytes from one response would come the same way again.
            let snapshot = session.snapshot()
            if !startedOver, session.hasPlan, resumed.byteCount > 0 || snapshot.requests > 1 {
                startedOver = true
                let notice =
                    mismatch.summary + ". Its bytes came from "
                    + (resumed.byteCount > 0 ? "an earlier run and this one" : "several responses")
                    + ", which a changed or misbehaving server could have mixed up; downloading it again from zero."
                self.logger.info("\(notice)")
                self.hub.emit(.notice(notice))
                earlierBytes += snapshot.bytesThisRun
                let remote = session.remoteFile
                do {
                    try await BlockingIO.run { () throws(DownloadError) in
                        journal.remove()
                        try file.startOver(length: remote.isSegmentable ? remote.length : nil)
                    }
                } catch {
                    throw self.discard(file, journal: journal, error: error)
                }
                resumed = ByteRangeSet()
                done = ByteRangeSet()
                refetching = false
                pieces?.startOver()
                session = session.startingOver(
                    remoteFile: remote,
                    hasher: PrefixHasher(algorithm: expected.checksum.algorithm, file: file)
                )
                continue
            }
            throw self.discard(file, journal: journal, error: .checksumMismatch(mismatch))
        }

        func result(metalink: Metalink? = nil) -> DownloadResult {
            let snapshot = session.snapshot()
            return DownloadResult(
                path: path,
                length: length,
                remoteFile: session.remoteFile,
                downloadedBytes: earlierBytes + snapshot.bytesThisRun,
                elapsed: clock.now - startedAt,
                connectionsUsed: max(1, snapshot.mostActiveConnections),
                checksum: expected?.checksum,
                metalink: metalink
            )
        }
        if finished == nil {
            try await self.commitToFinish(session, resumed: resumed, journal: journal)
        }
        if readsMetalink {
            return result(
                metalink: try await self.readMetalink(from: file, length: length, journal: journal, session: session)
            )
        }
        let finisher = DownloadFinisher(
            file: file,
            journal: journal,
            partPath: partPath,
            path: path,
            overwrite: replacing,
            modificationTime: configuration.setsRemoteTime
                ? session.remoteFile.lastModified.flatMap(HTTPDate.parse).map { Int64($0) } : nil,
            mark: self.request.finishMark
        )
        if let finished {
            // Synced and renamed already, in the trip that wrote the probe's bytes.
            try finisher.conclude(finished, resumable: session.remoteFile.isSegmentable && session.hasPlan)
        } else {
            try await finisher.finish(
                truncatingTo: session.remoteFile.length == nil ? length : nil,
                resumable: session.remoteFile.isSegmentable && session.hasPlan
            )
        }
        return result()
    }

    /// The point of no return (``mayFinish``): past it, a cancel comes too late and the download ends complete.
    /// A download cancelled before it stops here, and keeps its bytes and journal as any stopped download does.
    private func commitToFinish(
        _ session: TransferSession,
        resumed: ByteRangeSet,
        journal: JournalStore
    ) async throws(DownloadError) {
        guard self.mayFinish() else {
            throw await self.abandon(session, error: .cancelled, resumed: resumed, journal: journal)
        }
        await self.willFinish?()
    }

    /// Ends a download whose transfer failed: keeps the `.part` file and its journal (after a last save) when the
    /// download is in ranges, some bytes are on disk and the error does not make them worthless; else removes
    /// both. Returns the error, marked resumable when they were kept.
    private func abandon(
        _ session: TransferSession,
        error: DownloadError,
        resumed: ByteRangeSet,
        journal: JournalStore
    ) async -> DownloadError {
        let keep =
            session.remoteFile.isSegmentable && (session.completedBytes > 0 || resumed.byteCount > 0)
            && error.code != .remoteChanged && error.code != .remoteMisbehaved
        if keep {
            // The last save may be up to one interval old; bring it up to date if the disk lets us. In a task of
            // its own, so that the cancellation that stopped the download does not stop this too. Before the plan
            // is in place the journal on disk is still true, and there is nothing to add.
            if session.hasPlan {
                let finalSave = Task { try await self.saveJournal(journal, session: session) }
                _ = await finalSave.result
            }
        } else {
            journal.remove()
            FileOperations.remove(session.file.path)
        }
        session.file.close()
        var failure = error
        failure.resumable = keep
        return failure
    }

    /// Removes the `.part` file and its journal; returns `error`, not resumable.
    private func discard(_ file: OutputFile, journal: JournalStore, error: DownloadError) -> DownloadError {
        self.remove(file, journal: journal)
        var failure = error
        failure.resumable = false
        return failure
    }

    /// Removes the `.part` file and its journal, and closes the file.
    private func remove(_ file: OutputFile, journal: JournalStore) {
        journal.remove()
        FileOperations.remove(file.path)
        file.close()
    }

    /// The digest to verify the download against: the configuration's, else the server's; and a notice when both
    /// are there and disagree.
    private func expectedChecksum(server: ExpectedChecksum?) -> (ExpectedChecksum?, String?) {
        guard let given = self.request.configuration.checksum else { return (server, nil) }
        var notice: String?
        if let server, server.checksum.algorithm == given.algorithm, server.checksum.digest != given.digest {
            let source = server.source.description
            notice =
                source.prefix(1).uppercased() + source.dropFirst() + " is \(server.checksum.digest), but the expected "
                + "\(given.algorithm) digest is \(given.digest); the file is checked against the expected one."
        }
        return (ExpectedChecksum(checksum: given, source: .configuration), notice)
    }

    /// Hashes what the hasher has not hashed yet and compares; `nil` when the digest matches.
    private func verify(
        _ session: TransferSession,
        length: Int64,
        against expected: ExpectedChecksum
    ) async throws(DownloadError) -> ChecksumMismatch? {
        guard let hasher = session.hasher else { return nil }
        let actual = try await hasher.finish(length: length)
        let matches = actual.digest == expected.checksum.digest
        self.logger.info(
            "Verified the digest",
            metadata: [
                "algorithm": "\(actual.algorithm)", "expected": "\(expected.checksum.digest)",
                "actual": "\(actual.digest)", "source": "\(expected.source)", "matches": "\(matches)",
            ]
        )
        guard !matches else { return nil }
        return ChecksumMismatch(expected: expected.checksum, source: expected.source, actual: actual.digest)
    }

    /// What hashing the pieces found.
    private enum PieceOutcome {
        /// Every piece matches its digest.
        case verified
        /// These pieces do not: fetch them again.
        case refetch([Range<Int64>])
        /// A piece still did not match after its last fetch, or cannot be fetched alone: the download fails.
        case failed(DownloadError)
    }

    /// Hashes every piece that is not verified yet (all its bytes are on disk once the transfer ended; most were
    /// verified while it ran) and compares it with its digest; a bad one is reported
    /// (``pieceFailed(_:range:mismatch:verdict:session:)``).
    private func verifyPieces(
        _ checker: PieceChecker,
        session: TransferSession
    ) async throws(DownloadError) -> PieceOutcome {
        var refetch: [Range<Int64>] = []
        let done = session.hasPlan ? session.doneRanges() : ByteRangeSet([0..<checker.length])
        let before = checker.progress.verified
        var bad: Set<Int> = []
        // Until every piece is verified or known bad (a hash that did not count is made again).
        while true {
            let pieces = checker.piecesToHash(done: done, final: true).filter { !bad.contains($0) }
            if pieces.isEmpty { break }
            for index in pieces {
                if Task.isCancelled { throw .cancelled }
                let (verdict, mismatch) = try await checker.check(index, final: true)
                guard let verdict, verdict != .verified, let mismatch else { continue }
                let range = checker.range(ofPiece: index)
                let failure = self.pieceFailed(
                    index,
                    range: range,
                    mismatch: mismatch,
                    verdict: verdict,
                    session: session
                )
                if let failure { return .failed(failure) }
                bad.insert(index)
                refetch.append(range)
            }
        }
        let progress = checker.progress
        self.logger.info(
            "Verified the pieces",
            metadata: [
                "verified": "\(progress.verified)", "pieces": "\(progress.pieces)",
                "whileTransferring": "\(before)", "refetch": "\(refetch.count)",
            ]
        )
        return refetch.isEmpty ? .verified : .refetch(refetch)
    }

    /// A piece did not match its digest: says so, and returns the error that ends the download when the piece
    /// cannot be fetched again (its last try, or a server without ranges); `nil` when it will be fetched again.
    private func pieceFailed(
        _ index: Int,
        range: Range<Int64>,
        mismatch: ChecksumMismatch,
        verdict: PieceVerification.Verdict,
        session: TransferSession
    ) -> DownloadError? {
        // A mirror that sent bytes of a bad piece gets no more work; the piece is fetched again from the others
        // (the last mirror left is never dropped: it gets the piece once more).
        _ = session.dropMirrors(
            thatWrote: range,
            reason: "it sent bytes of piece \(index) that do not match its digest"
        )
        let tries = PieceVerification.maximumTries
        let canRefetch = session.remoteFile.isSegmentable && session.hasPlan
        if case .refetch = verdict, canRefetch {
            let notice = mismatch.summary + "; fetching it again (at most \(tries) fetches in all)."
            self.logger.info("\(notice)", metadata: ["piece": "\(index)", "range": "\(range)"])
            self.hub.emit(.notice(notice))
            return nil
        }
        let reason =
            canRefetch
            ? "after \(tries) fetches" : "and the server does not send ranges, so it cannot be fetched again alone"
        return DownloadError(
            code: .checksumMismatch,
            message: mismatch.summary + " " + reason + "; the file was removed.",
            underlying: mismatch
        )
    }

    /// Reads the downloaded Metalink document into memory and parses it; the `.part` file and its journal are
    /// removed whatever happens.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when the document is too long or not a Metalink,
    ///   ``DownloadError/Code/localIO`` when it cannot be read.
    private func readMetalink(
        from file: OutputFile,
        length: Int64,
        journal: JournalStore,
        session: TransferSession
    ) async throws(DownloadError) -> Metalink {
        let data: Data
        do {
            try Self.checkMetalinkLength(length, url: session.remoteFile.url)
            data = try await BlockingIO.run { () throws(DownloadError) -> Data in
                let buffer = try file.read(count: Int(length), at: 0)
                return Data(buffer.readableBytesView)
            }
        } catch {
            throw self.discard(file, journal: journal, error: error)
        }
        self.remove(file, journal: journal)
        do {
            let metalink = try Metalink(parsing: data)
            self.logger.info(
                "Read a Metalink document",
                metadata: ["url": "\(session.remoteFile.url)", "files": "\(metalink.files.count)"]
            )
            return metalink
        } catch {
            throw DownloadError(
                code: .invalidRequest,
                message: "\(session.remoteFile.url.absoluteString): \(error.message)"
            )
        }
    }

    /// - Throws: ``DownloadError/Code/invalidRequest`` when a Metalink document is longer than
    ///   ``Metalink/maximumDocumentLength``.
    private static func checkMetalinkLength(_ length: Int64, url: URL) throws(DownloadError) {
        guard length > Metalink.maximumDocumentLength else { return }
        throw .invalidRequest(
            "The Metalink document at \(url.absoluteString) is \(length) bytes long; at most "
                + "\(Metalink.maximumDocumentLength) bytes are read."
        )
    }

    /// Checks a length the server reported against the expected length and the piece digests.
    ///
    /// - Throws: ``DownloadError/Code/remoteChanged`` when they disagree.
    private func checkLength(_ length: Int64) throws(DownloadError) {
        let configuration = self.request.configuration
        if let expected = configuration.expectedLength, expected != length {
            throw DownloadError(
                code: .remoteChanged,
                message: "The server's file is \(length) bytes long, but the expected length is \(expected) bytes: "
                    + "it is not the file that was described."
            )
        }
        if let pieces = configuration.pieceChecksums, !pieces.possibleLengths.contains(length) {
            throw DownloadError(
                code: .remoteChanged,
                message: "The server's file is \(length) bytes long, but the \(pieces.count) piece digests of "
                    + "\(pieces.pieceLength) bytes describe \(pieces.possibleLengths.lowerBound)-"
                    + "\(pieces.possibleLengths.upperBound) bytes: it is not the file that was described."
            )
        }
    }

    /// Decides between resuming and starting over (``ResumeDecision``), and readies the `.part` file for it
    /// (starting over, it reserves the file's length on disk when `reserving`).
    /// Blocks: called on the blocking-I/O threads. Returns the bytes already on disk, and what a person should be
    /// told about it.
    private func prepare(
        _ file: OutputFile,
        journal: JournalStore,
        remote: RemoteFile,
        probedURL: URL,
        reserving: Bool
    ) throws(DownloadError) -> Prepared {
        let resume = self.request.configuration.resume
        var notices: [String] = []
        func startOver(_ notice: String?) throws(DownloadError) -> Prepared {
            if let notice { notices.append(notice) }
            journal.remove()
            try file.startOver(length: remote.isSegmentable && reserving ? remote.length : nil)
            return Prepared(done: ByteRangeSet(), notices: notices)
        }
        guard remote.isSegmentable, resume else {
            return try startOver(nil)
        }
        switch journal.load() {
        case .missing:
            let notice =
                try file.size() > 0 ? "'\(file.path)' has no resume journal beside it; starting over." : nil
            return try startOver(notice)
        case .unreadable(let reason):
            return try startOver("The resume journal '\(journal.path)' cannot be trusted (\(reason)); starting over.")
        case .loaded(let saved):
            // The mirror probed now may not be the one probed then: it is held to its own recorded validators.
            let seen = saved.asSeen(by: MirrorSet.key(probedURL))
            switch ResumeDecision(journal: seen, remote: remote, partSize: try file.size()) {
            case .startOver(let reason):
                return try startOver(reason)
            case .resume(let warning):
                if let warning { notices.append(warning) }
                if saved.sourceURL != self.request.url.absoluteString && saved.finalURL != remote.url.absoluteString
                    && saved.mirrors?[MirrorSet.key(probedURL)] == nil
                {
                    notices.append("Resuming from a different URL than the first run; length and validators match.")
                }
                return Prepared(done: saved.doneRanges, notices: notices, mirrors: saved.mirrors ?? [:])
            }
        }
    }

    /// What ``prepare(_:journal:remote:probedURL:reserving:)`` found: the bytes on disk, what a person should be
    /// told, and the validators the journal recorded for each mirror (the bytes on disk came from those versions).
    struct Prepared: Sendable {
        var done: ByteRangeSet
        var notices: [String]
        var mirrors: [String: ResumeJournal.MirrorValidators] = [:]

        var doneAndNotices: (ByteRangeSet, [String]) { (self.done, self.notices) }
    }

    /// Probes the URLs in order until one answers well: a mirror that is dead or refuses (a connection error, an
    /// error status after the retries) is skipped with a notice. Returns the index of the one probed, its outcome,
    /// and why the ones before it failed. With one URL its error is thrown as it is; when every URL fails, the last
    /// error, naming them all.
    private func probeFirstWorking(
        _ urls: [URL],
        probe: ResourceProbe,
        budget: ConnectionBudget
    ) async throws(DownloadError) -> (Int, ResourceProbe.Outcome, [Int: String]) {
        var failed: [Int: String] = [:]
        var lastError: DownloadError?
        for (index, url) in urls.enumerated() {
            let host = url.host ?? ""
            do {
                try await budget.acquire(host: host)
            } catch {
                throw .cancelled
            }
            do {
                let outcome = try await probe.probe(url)
                budget.release(host: host)
                return (index, outcome, failed)
            } catch {
                budget.release(host: host)
                guard urls.count > 1, SegmentWorker.isMirrorFault(error), !Task.isCancelled else { throw error }
                let reason = SegmentWorker.reason(error)
                failed[index] = reason
                lastError = error
                if index < urls.count - 1 {
                    let notice = "Dropped the mirror \(MirrorSet.key(url)): \(reason) Trying the next URL."
                    self.logger.info("\(notice)")
                    self.hub.emit(.notice(notice))
                }
            }
        }
        var failure = lastError ?? .cancelled
        let summary = urls.enumerated().map { "\(MirrorSet.key($1)) (\(failed[$0] ?? "-"))" }
        failure.message += " Every URL of the file failed: \(summary.joined(separator: "; "))."
        throw failure
    }

    /// Downloads in ranges when the server allows, else as one stream, as the ``DownloadStateMachine`` says;
    /// returns the length. Each answer of the machine is a list of actions done in order: a start action takes
    /// the rest of its list into its ``TransferRound``; an action that waits for an event (a save, a pause) ends
    /// its list, and the machine's answer to that event is the next list.
    ///
    /// `inPieces` lets the planner hand out small pieces front first when a prefix hasher follows the download.
    ///
    /// `prefetched` are the bytes the probe's own request brought, already on disk: the first bytes of a
    /// segmentable file, else the whole file. When they leave nothing to fetch, no round runs.
    private func transfer(
        _ session: inout TransferSession,
        resumed: ByteRangeSet,
        prefetched: Range<Int64>?,
        journal: JournalStore,
        inPieces: Bool = true
    ) async throws(DownloadError) -> Int64 {
        let configuration = session.configuration
        if session.remoteFile.isSegmentable {
            var done = resumed
            if let prefetched, !prefetched.isEmpty { done.insert(prefetched) }
            session.startSegmented(
                SegmentPlanner(
                    length: session.remoteFile.length ?? 0,
                    connections: configuration.connections,
                    minimumSplitSize: configuration.minimumSplitSize,
                    minimumRaceSize: configuration.minimumRaceSize,
                    done: done,
                    pieceSize: inPieces && session.hasher != nil && configuration.connections > 1
                        ? Self.pieceSize(
                            missing: (session.remoteFile.length ?? 0) - done.byteCount,
                            connections: configuration.connections
                        ) : nil
                )
            )
            if let prefetched {
                session.prefetched(prefetched)
                if session.isPlanComplete {
                    ProgressReporter(session: session).report()
                    return session.completedBytes
                }
            }
        } else if let prefetched {
            // The whole file came with the probe's response.
            session.startStream()
            session.prefetched(prefetched)
            ProgressReporter(session: session).report()
            return session.completedBytes
        }
        var machine = DownloadStateMachine(connections: configuration.connections)
        var actions = machine.probeFinished(segmentable: session.remoteFile.isSegmentable)
        while let action = actions.first {
            switch action {
            case .startSegmented, .startStream:
                let round = TransferRound(session: session, gate: self.gate) {
                    [self, session] () async throws(DownloadError) in
                    try await self.saveJournal(journal, session: session)
                }
                actions = await round.run(actions, machine: &machine)
            case .saveJournal:
                precondition(actions.count == 1, "a save ends its list: \(actions)")
                do throws(DownloadError) {
                    try await self.saveJournal(journal, session: session)
                    actions = machine.journalSaved()
                } catch {
                    actions = machine.journalSaveFailed(error)
                }
            case .reportPaused:
                precondition(actions.count == 1, "a pause ends its list: \(actions)")
                self.hub.emit(.paused)
                await self.gate.waitUntilResumed()
                actions = Task.isCancelled ? machine.cancelled() : machine.resumeRequested()
            case .reportResumed:
                self.hub.emit(.resumed)
                actions.removeFirst()
            case .fallBackToStream:
                self.logger.info("The server ignores ranges; downloading as one stream")
                self.hub.emit(.notice("The server ignores range requests; downloading as one stream."))
                journal.remove()
                var remote = session.remoteFile
                remote.acceptsRanges = false
                session = session.replacingRemoteFile(remote)
                actions.removeFirst()
            case .finish:
                // Every byte is in: the bytes on disk are the length (a stream's is known only now).
                return session.completedBytes
            case .fail(let error):
                throw error
            case .cancelWorkers, .scheduleJournalTick, .restartConnection:
                preconditionFailure("\(action) outside a round")
            }
        }
        preconditionFailure("the state machine left the download without an action")
    }

    /// Who the download says it is: Basic credentials from the URL's user info, else the configured ones, else
    /// the `.netrc` entry for the URL's host (a file others may read is ignored, with a notice); and the cookies.
    private func authorization() async -> RequestAuthorization {
        let configuration = self.request.configuration
        let url = self.request.url
        var credentials = Credentials(userInfoOf: url) ?? configuration.credentials
        let hasAuthorizationHeader = configuration.headers.contains { $0.name.lowercased() == "authorization" }
        if credentials == nil, !hasAuthorizationHeader, let path = configuration.netrcPath {
            switch await self.downloader.netrcFiles.load(path: path) {
            case .file(let netrc):
                credentials = netrc.credentials(forHost: url.host ?? "")
            case .refused(let reason):
                self.logger.info("\(reason)")
                self.hub.emit(.notice(reason))
            case .missing:
                break
            }
        }
        var authorization = RequestAuthorization(origin: Origin(url), credentials: credentials, cookies: self.cookies)
        // A mirror on another origin gets the credentials of its own URL or its own `.netrc` entry, never the
        // first URL's or the configured ones.
        var netrc: NetrcFile?
        for mirror in self.request.mirrors where Origin(mirror) != authorization.origin {
            var own = Credentials(userInfoOf: mirror)
            if own == nil, let path = configuration.netrcPath {
                if netrc == nil, case .file(let loaded)? = try? await BlockingIO.run({ NetrcFile.load(path: path) }) {
                    netrc = loaded
                }
                own = netrc?.credentials(forHost: mirror.host ?? "")
            }
            if let own, authorization.otherCredentials[Origin(mirror)] == nil {
                authorization.otherCredentials[Origin(mirror)] = own
            }
        }
        return authorization
    }

    /// The piece size when the file is hashed as it arrives: the connections work near the front of the file,
    /// so its gapless start grows at the speed of all of them together, and at the end only the last few pieces
    /// are left to hash. Pieces of a sixteenth of each connection's share (at most 16 MiB) keep that tail short
    /// and the extra requests few.
    static func pieceSize(missing: Int64, connections: Int) -> Int64 {
        min(16 * 1024 * 1024, max(1, missing / Int64(connections * 16)))
    }

    /// Syncs the data and records what is on disk.
    private func saveJournal(_ journal: JournalStore, session: TransferSession) async throws(DownloadError) {
        guard session.hasPlan else { return }
        try await self.saveJournal(journal, session: session, done: session.doneRanges())
    }

    /// Syncs the data and records `done` as what is on disk.
    private func saveJournal(
        _ journal: JournalStore,
        session: TransferSession,
        done: ByteRangeSet
    ) async throws(DownloadError) {
        guard let length = session.remoteFile.length else { return }
        let record = ResumeJournal(
            sourceURL: self.request.url.absoluteString,
            finalURL: session.remoteFile.url.absoluteString,
            length: length,
            etag: session.remoteFile.etag,
            lastModified: session.remoteFile.lastModified,
            done: done,
            mirrors: self.request.mirrors.isEmpty ? nil : session.mirrors.validatorsToRecord
        )
        let file = session.file
        try await BlockingIO.run { () throws(DownloadError) in
            try journal.save(record, syncing: file)
        }
    }

    private func destinationPath(for remote: RemoteFile) throws(DownloadError) -> String {
        switch self.request.destination {
        case .file(let path):
            return path
        case .named(let name, let directory):
            let path = self.request.destination.fixedPath ?? name
            let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? directory
            try FileOperations.createDirectory(parent.isEmpty ? "/" : parent)
            return path
        case .directory(let directory):
            try FileOperations.createDirectory(directory)
            let name =
                remote.suggestedFilename
                ?? SafeFileName.sanitize(self.request.url.lastPathComponent)
                ?? SafeFileName.sanitize(remote.url.lastPathComponent)
                ?? "index.html"
            return directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    /// Whether the file at `path` carries this request's finish mark (``DownloadRequest/finishMark``).
    private func isMarkedAsFinished(_ path: String) -> Bool {
        guard let mark = self.request.finishMark else { return false }
        return FinishMark.mark(of: path) == mark
    }

    /// The size of the file at `path` when an earlier run of this download finished it (it carries the mark and
    /// is as long as the remote file), else `nil`.
    private func finishedEarlier(_ path: String, remote: RemoteFile) -> Int64? {
        guard self.isMarkedAsFinished(path), !FileOperations.exists(path + ".part"),
            let size = FileOperations.sizeAndModificationTime(path)?.size
        else { return nil }
        if let length = remote.length, length != size { return nil }
        return size
    }

    /// With ``DownloadConfiguration/renamesExisting``: the name to save as when a file is at `path` and no journal
    /// of ours is beside it: `NAME.1.EXT`, `NAME.2.EXT`, ..., the first name that is free (its own `.part` and
    /// journal, if an interrupted run left them, are continued as usual); `nil` when `path` itself will do.
    private func freeName(for path: String) throws(DownloadError) -> String? {
        guard FileOperations.exists(path), !FileOperations.isDirectory(path),
            !FileOperations.exists(JournalStore(partPath: path + ".part").path)
        else { return nil }
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        let name = path[slash...]
        // aria2's form: the number goes before the last extension (`a.tar.gz` → `a.tar.1.gz`), else at the end.
        let dot = name.lastIndex(of: ".").flatMap { $0 > name.startIndex ? $0 : nil }
        let stem = dot.map { String(path[..<$0]) } ?? path
        let suffix = dot.map { String(path[$0...]) } ?? ""
        for number in 1...9999 {
            let candidate = "\(stem).\(number)\(suffix)"
            if !FileOperations.exists(candidate) { return candidate }
        }
        throw .outputExists(path)
    }

    private func checkFree(_ path: String, replacing: Bool) throws(DownloadError) {
        if FileOperations.isDirectory(path) {
            throw .invalidRequest("'\(path)' is a directory; name a file to save to, or save into the directory.")
        }
        if !replacing && FileOperations.exists(path) {
            throw .outputExists(path)
        }
    }
}
