/// The last step of a download: the data is synced to disk, `NAME.part` becomes `NAME` (without replacing a
/// file that appeared meanwhile, unless overwriting was asked for), and the journal goes. Runs on `BlockingIO`'s
/// threads: a sync can take long, and the cooperative pool must not wait for a disk.
struct DownloadFinisher: Sendable {
    let file: OutputFile
    let journal: JournalStore
    let partPath: String
    let path: String
    let overwrite: Bool
    /// The access and modification time to give the file (seconds since 1970), before the rename so that the
    /// file appears under its name with it; `nil` leaves the time of the last write.
    var modificationTime: Int64? = nil
    /// The ``FinishMark`` to give the file before it is synced and takes its name.
    var mark: String? = nil

    /// Why finishing failed: the sync (the bytes may not be on disk), or the rename.
    enum Failure: Error {
        case sync(DownloadError)
        case move(DownloadError)
    }

    /// Syncs `file` (after cutting it to `truncatingTo`, for a download whose length was unknown), sets its times
    /// (``modificationTime``), renames it (or links it, a file with no name yet) and removes the journal, in one
    /// trip to the blocking-I/O threads.
    ///
    /// When the sync fails, the `.part` file and the journal stay: the journal claims only bytes synced at
    /// earlier saves, so a later run resumes from it (the error is ``DownloadError/resumable`` when the download
    /// is in ranges). When the rename fails, both are removed: the bytes were complete, but they cannot be put
    /// where they belong.
    func finish(truncatingTo length: Int64?, resumable: Bool) async throws(DownloadError) {
        let step = self
        // Past the point of no return a cancel comes too late: the file is finished (and closed) whatever happens.
        try await BlockingIO.runEvenIfCancelled { () throws(DownloadError) in
            try step.conclude(step.syncAndMove(truncatingTo: length), resumable: resumable)
        }
    }

    /// The blocking half of ``finish(truncatingTo:resumable:)``: cuts, sets the times, syncs and renames.
    private func syncAndMove(truncatingTo length: Int64?) -> Result<Void, Failure> {
        do throws(DownloadError) {
            if let length { try self.file.truncate(to: length) }
            if let time = self.modificationTime { try self.file.setTimes(time) }
            if let mark = self.mark { self.file.setFinishMark(mark) }
            try self.file.sync()
        } catch {
            return .failure(.sync(error))
        }
        do throws(DownloadError) {
            if self.file.isUnnamed {
                try self.file.link(as: self.path)
            } else {
                try FileOperations.move(self.partPath, to: self.path, replacing: self.overwrite)
            }
        } catch {
            return .failure(.move(error))
        }
        return .success(())
    }

    /// The rest of ``finish(truncatingTo:resumable:)`` after ``syncAndMove(truncatingTo:)``: closes the file, and
    /// removes the journal, or what a failure leaves of no use. Blocks: called on the blocking-I/O threads.
    private func conclude(_ outcome: Result<Void, Failure>, resumable: Bool) throws(DownloadError) {
        self.file.close()
        switch outcome {
        case .success:
            self.journal.remove()
        case .failure(.sync(var error)):
            if !resumable {
                self.journal.remove()
                FileOperations.remove(self.partPath)
            }
            error.resumable = resumable
            throw error
        case .failure(.move(let error)):
            self.journal.remove()
            FileOperations.remove(self.partPath)
            throw error
        }
    }
}
