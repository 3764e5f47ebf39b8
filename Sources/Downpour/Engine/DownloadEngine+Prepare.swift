import Foundation
import Logging
import NIOCore

/// The prepare stage: where the file goes, whether there is anything to download (a conditional GET, an earlier
/// run that finished), and the `.part` file readied for a resume or a fresh start, with the probe's bytes in it.
extension DownloadEngine {
    /// What the prepare stage decided.
    enum Preparation: Sendable {
        /// Nothing to download: the file at the destination is the one wanted.
        case alreadyDone(DownloadResult)
        /// The `.part` file is open and ready.
        case ready(PreparedOutput)
    }

    /// The download's output, ready for the transfer.
    struct PreparedOutput: Sendable {
        let probed: Probed
        /// The final name.
        let path: String
        let partPath: String
        let journal: JournalStore
        let file: OutputFile
        /// Whether a file at ``path`` may be replaced.
        let replacing: Bool
        /// The bytes of an earlier run on disk, to resume from.
        let resumed: ByteRangeSet
        /// The validators the journal recorded for each mirror (the bytes resumed came from those versions).
        let recordedMirrors: [String: ResumeJournal.MirrorValidators]
        /// The digest of the whole file, when it is checked.
        let expected: ExpectedChecksum?
        /// The bytes the probe's own request brought, written at their offsets already.
        let prefetched: Range<Int64>?
    }

    /// Where the file goes, as decided on the blocking-I/O threads (it looks at the disk).
    private enum Destination: Sendable {
        /// The file at `path` is the one wanted: nothing to download.
        case skip(path: String, size: Int64, reason: String)
        /// Save to `path`; `replacing` says whether a file there may be replaced.
        case save(path: String, replacing: Bool, renamingNotice: String?)
    }

    func prepare(_ probed: Probed) async throws(DownloadError) -> Preparation {
        let configuration = self.request.configuration
        let remote = probed.remote
        let engine = self
        let destination = try await BlockingIO.run { () throws(DownloadError) -> Destination in
            try engine.destination(for: remote, product: probed.product)
        }
        let path: String
        let replacing: Bool
        let renamingNotice: String?
        switch destination {
        case .skip(let skipped, let size, let reason):
            self.logger.info("\(reason)", metadata: ["path": "\(skipped)"])
            return .alreadyDone(
                DownloadResult(
                    path: skipped,
                    length: size,
                    remoteFile: remote,
                    downloadedBytes: 0,
                    elapsed: ContinuousClock.now - probed.startedAt,
                    connectionsUsed: 0,
                    wasSkipped: true
                )
            )
        case .save(let target, let mayReplace, let notice):
            (path, replacing, renamingNotice) = (target, mayReplace, notice)
        }
        let partPath = path + ".part"
        let journal = JournalStore(partPath: partPath)
        // The digests describe the files a Metalink lists, not the document.
        let (expected, checksumNotice) =
            probed.product == .file ? self.expectedChecksum(server: probed.outcome.serverChecksum) : (nil, nil)
        let firstBytes = probed.outcome.firstBytes
        let isWholeFile =
            firstBytes.map { remote.isSegmentable ? Int64($0.readableBytes) == remote.length : true } ?? false
        // Nothing is written before this: the `.part` file may be another writer's now.
        try await self.checkWritePermit()
        // All the bytes in hand, nothing to verify, no file to replace: written unseen and linked under its name
        // when it finishes (one change to the directory); else the named `.part` file.
        let unseen =
            expected == nil && configuration.pieceChecksums == nil && probed.product == .file && isWholeFile
            && !replacing
        let (file, opened) = try await self.openPart(
            partPath,
            journal: journal,
            probed: probed,
            unseen: unseen,
            reserving: !isWholeFile
        )
        // A file with no name leaves no `NAME.part` behind for a cancel to remove.
        if !file.isUnnamed { self.partPathKnown(partPath) }
        let resumption: Resumption
        do {
            resumption = try opened.get()
        } catch {
            // Nothing of this run is on disk. An earlier run's bytes stay as long as their journal does (a
            // cancel before the preparation ran, say); without one the `.part` file holds nothing of use.
            let kept = await self.removeUnlessJournaled(file, journal: journal, segmentable: remote.isSegmentable)
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
                    resumedBytes: resumption.done.byteCount
                )
            )
        )
        for notice in resumption.notices + [checksumNotice, renamingNotice].compactMap({ $0 }) {
            self.logger.info("\(notice)")
            self.hub.emit(.notice(notice))
        }
        return .ready(
            PreparedOutput(
                probed: probed,
                path: path,
                partPath: partPath,
                journal: journal,
                file: file,
                replacing: replacing,
                resumed: resumption.done,
                recordedMirrors: resumption.mirrors,
                expected: expected,
                prefetched: firstBytes.map { 0..<Int64($0.readableBytes) }
            )
        )
    }

    /// Opens, locks and readies the `.part` file (unnamed when `unseen` and the system allows) and writes the
    /// probe's bytes, in one trip to the blocking-I/O threads. Returns the file, and the ``Resumption`` or what
    /// failed once it was open.
    private func openPart(
        _ partPath: String,
        journal: JournalStore,
        probed: Probed,
        unseen: Bool,
        reserving: Bool
    ) async throws(DownloadError) -> (OutputFile, Result<Resumption, DownloadError>) {
        let (engine, remote, probedURL) = (self, probed.remote, probed.urls[probed.index])
        let firstBytes = probed.outcome.firstBytes
        return try await BlockingIO.run { () throws(DownloadError) -> (OutputFile, Result<Resumption, DownloadError>) in
            let unnamed = unseen ? OutputFile.openUnnamed(for: partPath) : nil
            let file: OutputFile
            if let unnamed { file = unnamed } else { file = try OutputFile.openLocked(at: partPath) }
            do throws(DownloadError) {
                // Space is reserved so that a full disk shows up now; the write of a whole file shows it as soon.
                let resumption = try engine.resumption(
                    file,
                    journal: journal,
                    remote: remote,
                    probedURL: probedURL,
                    reserving: reserving
                )
                if let firstBytes, firstBytes.readableBytes > 0 {
                    try file.write(firstBytes, at: 0)
                }
                return (file, .success(resumption))
            } catch {
                return (file, .failure(error))
            }
        }
    }

    /// Decides where the file goes. Blocks (it looks at the disk and may make the directory): called on the
    /// blocking-I/O threads.
    private func destination(for remote: RemoteFile, product: Product) throws(DownloadError) -> Destination {
        let configuration = self.request.configuration
        let proposedPath = try self.destinationPath(for: remote)
        var replacing = configuration.overwrite
        if configuration.conditionalGet, product == .file,
            let local = FileOperations.sizeAndModificationTime(proposedPath)
        {
            switch ConditionalGet(localModified: local.modified, remoteLastModified: remote.lastModified) {
            case .keep:
                return .skip(
                    path: proposedPath,
                    size: local.size,
                    reason: "The output file is as new as the remote one; nothing to download"
                )
            case .replace:
                replacing = true
            case .undecided:
                break
            }
        }
        // A Metalink document is read, never saved: a file of its name does not stand in the way (nor is it "as new").
        guard product == .file else { return .save(path: proposedPath, replacing: replacing, renamingNotice: nil) }
        if !replacing, let size = self.finishedEarlier(proposedPath, remote: remote) {
            return .skip(
                path: proposedPath,
                size: size,
                reason: "The file was finished by an earlier run (it carries this download's mark); nothing to download"
            )
        }
        var path = proposedPath
        var renamingNotice: String?
        if !replacing, configuration.renamesExisting, let free = try self.freeName(for: proposedPath) {
            renamingNotice = "'\(proposedPath)' exists and is not a partial download of this one; saving as '\(free)'."
            path = free
        }
        try self.checkFree(path, replacing: replacing)
        if let length = remote.length { try FileSystemCapacity.check(length, for: path) }
        return .save(path: path, replacing: replacing, renamingNotice: renamingNotice)
    }

    /// What ``resumption(_:journal:remote:probedURL:reserving:)`` found: the bytes on disk, what a person should be
    /// told, and the validators the journal recorded for each mirror (the bytes on disk came from those versions).
    struct Resumption: Sendable {
        var done: ByteRangeSet
        var notices: [String]
        var mirrors: [String: ResumeJournal.MirrorValidators] = [:]
    }

    /// Decides between resuming and starting over (``ResumeDecision``), and readies the `.part` file for it
    /// (starting over, it reserves the file's length on disk when `reserving`).
    /// Blocks: called on the blocking-I/O threads. Returns the bytes already on disk, and what a person should be
    /// told about it.
    private func resumption(
        _ file: OutputFile,
        journal: JournalStore,
        remote: RemoteFile,
        probedURL: URL,
        reserving: Bool
    ) throws(DownloadError) -> Resumption {
        let resume = self.request.configuration.resume
        var notices: [String] = []
        func startOver(_ notice: String?) throws(DownloadError) -> Resumption {
            if let notice { notices.append(notice) }
            journal.remove()
            try file.startOver(length: remote.isSegmentable && reserving ? remote.length : nil)
            return Resumption(done: ByteRangeSet(), notices: notices)
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
                return Resumption(done: saved.doneRanges, notices: notices, mirrors: saved.mirrors ?? [:])
            }
        }
    }

    /// The path to save to, before any renaming; makes the directory when the request names one. Blocks.
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

    /// Whether the file at `path` carries this request's finish mark (``DownloadRequest/finishMark``). Blocks.
    func isMarkedAsFinished(_ path: String) -> Bool {
        guard let mark = self.request.finishMark else { return false }
        return FinishMark.mark(of: path) == mark
    }

    /// The size of the file at `path` when an earlier run of this download finished it (it carries the mark and
    /// is as long as the remote file), else `nil`. Blocks.
    private func finishedEarlier(_ path: String, remote: RemoteFile) -> Int64? {
        guard self.isMarkedAsFinished(path), !FileOperations.exists(path + ".part"),
            let size = FileOperations.sizeAndModificationTime(path)?.size
        else { return nil }
        if let length = remote.length, length != size { return nil }
        return size
    }

    /// With ``DownloadConfiguration/renamesExisting``: the name to save as when a file is at `path` and no journal
    /// of ours is beside it: `NAME.1.EXT`, `NAME.2.EXT`, ..., the first name that is free (its own `.part` and
    /// journal, if an interrupted run left them, are continued as usual); `nil` when `path` itself will do. Blocks.
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

    /// - Throws: ``DownloadError/Code/invalidRequest`` when `path` is a directory,
    ///   ``DownloadError/Code/outputExists`` when a file is there and may not be replaced. Blocks.
    func checkFree(_ path: String, replacing: Bool) throws(DownloadError) {
        if FileOperations.isDirectory(path) {
            throw .invalidRequest("'\(path)' is a directory; name a file to save to, or save into the directory.")
        }
        if !replacing && FileOperations.exists(path) {
            throw .outputExists(path)
        }
    }
}
