#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The size of the file system a file would go to: a length past it is a claim no disk there can hold, told as such
/// before a byte is reserved or fetched.
enum FileSystemCapacity {
    /// The whole size (not the free space) of the file system holding `directory`, or `nil` when it cannot be read.
    static func totalBytes(ofDirectory directory: String) -> Int64? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        let (bytes, overflow) = Int64(info.f_blocks).multipliedReportingOverflow(by: Int64(info.f_frsize))
        return overflow ? Int64.max : bytes
    }

    /// Throws when `length` is more than the whole file system holding `path` can hold.
    static func check(_ length: Int64, for path: String) throws(DownloadError) {
        let directory = FileOperations.directory(of: path)
        guard let total = totalBytes(ofDirectory: directory), total > 0, length > total else { return }
        throw DownloadError(
            code: .localIO,
            message: "The server says the file is \(length) bytes (\(ByteCount.format(length))), more than the whole "
                + "file system at '\(directory)' holds (\(ByteCount.format(total))): no disk there can hold it, and "
                + "nothing was reserved or fetched. A length like that is usually the server's mistake; if the file "
                + "is real, save it to a larger disk (--dir)."
        )
    }
}
