#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file that another module assembles from parts (the HLS module, from a playlist's segments) and names as the
/// engine names a download's: written to `NAME.part`, synced, then renamed, never over a file it may not replace.
package enum AssembledFile {
    /// Syncs the `.part` file at `partPath` and gives it the name `path`, then syncs the directory. Without
    /// `replacing`, a file at `path` stays as it is and the call fails.
    ///
    /// - Throws: ``DownloadError/Code/outputExists`` when `path` exists and `replacing` is false; a local I/O error
    ///   when the file cannot be synced or renamed.
    package static func commit(_ partPath: String, to path: String, replacing: Bool) async throws(DownloadError) {
        try await BlockingIO.run { () throws(DownloadError) in
            let descriptor = open(partPath, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw .localIO("Cannot open '\(partPath)'", systemCall: "open", errno: errno)
            }
            let synced = fsync(descriptor) == 0 ? 0 : errno
            _ = SystemCall.close(descriptor)
            guard synced == 0 else {
                throw .localIO("Cannot sync '\(partPath)' to the disk", systemCall: "fsync", errno: synced)
            }
            try FileOperations.move(partPath, to: path, replacing: replacing)
            JournalStore.syncDirectory(of: path)
        }
    }

    /// Runs blocking file work on the engine's I/O threads, off the concurrency pool.
    package static func run<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        try await BlockingIO.run(work)
    }
}
