/// The last step of a download: the data is synced to disk, `NAME.part` becomes `NAME` (without replacing a
/// file that appeared meanwhile, unless overwriting was asked for), and the journal goes. Runs on NIO's thread
/// pool: a sync can take long, and the cooperative pool must not wait for a disk.
struct DownloadFinisher: Sendable {
    let file: OutputFile
    let journal: JournalStore
    let partPath: String
    let path: String
    let overwrite: Bool
    /// The access and modification time to give the file (seconds since 1970), before the rename so that the
    /// file appears under its name with it; `nil` leaves the time of the last write.
    var modificationTime: Int64? = nil

    /// Syncs `file` (after cutting it to `truncatingTo`, for a download whose length was unknown), renames it
    /// sets its times (``modificationTime``) and removes the journal, in one trip to the blocking-I/O threads.
    ///
    /// When the sync fails, the `.part` file and the journal stay: the journal claims only bytes synced at
    /// earlier saves, so a later run resumes from it (the error is ``DownloadError/resumable`` when the download
    /// is in ranges). When the rename fails, both are removed: the bytes were complete, but they cannot be put
    /// where they belong.
    func finish(truncatingTo length: Int64?, resumable: Bool) async throws(DownloadError) {
        enum Failure: Error {
            case sync(DownloadError)
            case move(DownloadError)
        }
        let step = self
        let outcome: Result<Void, Failure> = try await BlockingIO.run { () throws(DownloadError) in
            do throws(DownloadError) {
                if let length { try step.file.truncate(to: length) }
                if let time = step.modificationTime { try step.file.setTimes(time) }
                try step.file.sync()
            } catch {
                return .failure(.sync(error))
            }
            do throws(DownloadError) {
                try FileOperations.move(step.partPath, to: step.path, replacing: step.overwrite)
            } catch {
                return .failure(.move(error))
            }
            return .success(())
        }
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
