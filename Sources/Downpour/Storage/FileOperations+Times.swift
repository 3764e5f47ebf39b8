#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileOperations {
    /// The size and whole seconds of the modification time of the regular file at `path`; `nil` when there is
    /// none.
    static func sizeAndModificationTime(_ path: String) -> (size: Int64, modified: Int64)? {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        #if canImport(Darwin)
        return (Int64(status.st_size), Int64(status.st_mtimespec.tv_sec))
        #else
        return (Int64(status.st_size), Int64(status.st_mtim.tv_sec))
        #endif
    }
}
