import NIOConcurrencyHelpers
import NIOCore

/// A file that another module assembles from parts (the HLS module, from a playlist's segments) and names as the
/// engine names a download's: `NAME.part`, locked as a download's is (a second writer of the same name stops at
/// once), written from the start, synced, then renamed, never over a file it may not replace.
///
/// Its methods block: call them in ``run(_:)``.
package final class AssembledFile: Sendable {
    /// The `.part` file's path.
    package let path: String
    private let file: OutputFile
    /// The bytes written, and how far writeback was started (``append(_:)``).
    private let written = NIOLockedValueBox<(length: Int64, writeback: Int64)>((0, 0))

    /// How many written bytes wait before their writeback starts: the sync before the name then has little left.
    static let writebackChunk: Int64 = 8 << 20

    /// Opens (creating when missing) and locks `partPath`; what it holds stays until ``startOver()``.
    ///
    /// - Throws: ``DownloadError/Code/alreadyRunning`` when another download writes to it; a local I/O error.
    package init(locking partPath: String) throws(DownloadError) {
        self.path = partPath
        self.file = try OutputFile.openLocked(at: partPath)
    }

    /// Empties the file: the next ``append(_:)`` writes at its start.
    package func startOver() throws(DownloadError) {
        try self.file.startOver(length: nil)
        self.written.withLockedValue { $0 = (0, 0) }
    }

    /// Writes `bytes` after what was written so far; starts the writeback of every ``writebackChunk`` written.
    package func append(_ bytes: some Collection<UInt8>) throws(DownloadError) {
        let offset = self.written.withLockedValue { $0.length }
        try self.file.write(ByteBuffer(bytes: bytes), at: offset)
        let flush: Range<Int64>? = self.written.withLockedValue { written in
            written.length = offset + Int64(bytes.count)
            guard written.length - written.writeback >= Self.writebackChunk else { return nil }
            defer { written.writeback = written.length }
            return written.writeback..<written.length
        }
        if let flush { self.file.startWriteback(flush) }
    }

    /// The bytes written since ``startOver()``.
    package var count: Int64 { self.written.withLockedValue { $0.length } }

    /// Syncs the file, gives it the name `path` and syncs the directory; then closes it. Without `replacing`, a file
    /// at `path` stays as it is and the call fails. With `mark`, the file carries it (as a download's carries its
    /// ``DownloadRequest/finishMark``): a run started again after a kill before its owner recorded the end knows it.
    /// `mayName`, called once the file is synced, stops it there by throwing (a write permit withdrawn meanwhile).
    ///
    /// - Throws: ``DownloadError/Code/outputExists`` when `path` exists and `replacing` is false; a local I/O error
    ///   when the file cannot be synced or renamed; what `mayName` throws.
    package func commit(
        to path: String,
        replacing: Bool,
        mark: String? = nil,
        mayName: () throws(DownloadError) -> Void = {}
    ) throws(DownloadError) {
        if let mark { self.file.setFinishMark(mark) }
        try self.file.sync()
        try mayName()
        try FileOperations.move(self.path, to: path, replacing: replacing)
        JournalStore.syncDirectory(of: path)
        self.file.close()
    }

    /// The length of the file at `path` when it was committed with `mark` (``commit(to:replacing:mark:)``) and no
    /// `.part` of it is there; `nil` otherwise. Blocks.
    package static func committed(_ path: String, mark: String) -> Int64? {
        guard FinishMark.mark(of: path) == mark, !FileOperations.exists(path + ".part") else { return nil }
        return FileOperations.sizeAndModificationTime(path)?.size
    }

    /// Closes the file (releasing its lock) and leaves it as it is. Later calls do nothing.
    package func close() {
        self.file.close()
    }

    /// Runs blocking file work on the engine's I/O threads, off the concurrency pool.
    package static func run<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        try await BlockingIO.run(work)
    }

    /// ``run(_:)``, even when the calling task is cancelled: the clean-up a cancel leaves to do.
    package static func runEvenIfCancelled<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        try await BlockingIO.runEvenIfCancelled(work)
    }
}
