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

    /// Syncs `file` (after cutting it to `truncatingTo`, for a download whose length was unknown), sets its
    /// times, renames it and removes the journal. On failure the `.part` file and the journal are removed too: the bytes were
    /// complete, but they cannot be put where they belong.
    func finish(truncatingTo length: Int64?) async throws(DownloadError) {
        let step = self
        try await BlockingIO.run { () throws(DownloadError) in
            if let length { try step.file.truncate(to: length) }
            if let time = step.modificationTime { try step.file.setTimes(time) }
            try step.file.sync()
        }
        do {
            try await BlockingIO.run { () throws(DownloadError) in
                try FileOperations.move(step.partPath, to: step.path, replacing: step.overwrite)
            }
        } catch {
            self.file.close()
            self.journal.remove()
            FileOperations.remove(self.partPath)
            throw error
        }
        self.file.close()
        self.journal.remove()
    }
}
