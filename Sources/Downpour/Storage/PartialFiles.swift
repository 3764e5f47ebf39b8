#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files a download keeps beside its destination until it finishes: `NAME.part`, the bytes so far, and its
/// resume journal. Their names are the library's; a program that removes a download it will not resume asks here
/// instead of spelling them.
///
/// ```swift
/// let removed = await PartialFiles.remove(forDestination: "/downloads/big.iso")
/// ```
public enum PartialFiles {
    /// The paths of the partial files for a download saved to `path`.
    public static func paths(forDestination path: String) -> [String] {
        let partPath = path + ".part"
        let journal = JournalStore(partPath: partPath)
        return [partPath, journal.path, journal.unsyncedPath]
    }

    /// Removes the partial files for a download saved to `path`, on the library's blocking-I/O threads (also when
    /// the calling task is cancelled). Returns the paths that were removed; one that is not there is passed over.
    @discardableResult
    public static func remove(forDestination path: String) async -> [String] {
        let paths = Self.paths(forDestination: path)
        let removed = try? await BlockingIO.runEvenIfCancelled { () -> [String] in
            paths.filter { unlink($0) == 0 }
        }
        return removed ?? []
    }
}
