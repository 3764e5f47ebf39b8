import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `.netrc` files a ``Downloader``'s downloads read, each kept while the file is unchanged: a download then
/// costs one `stat` of it, not a trip to the blocking-I/O threads to open and parse it (which a batch of a
/// thousand small files would make a thousand times). A file that is changed, replaced or re-permissioned is
/// read again.
final class NetrcCache: Sendable {
    /// What `stat` says of the file; any change means it is read again.
    private struct Stamp: Hashable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var mode: UInt32
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int

        init(_ status: stat) {
            self.device = UInt64(status.st_dev)
            self.inode = UInt64(status.st_ino)
            self.size = Int64(status.st_size)
            self.mode = UInt32(status.st_mode)
            #if canImport(Darwin)
            self.modifiedSeconds = status.st_mtimespec.tv_sec
            self.modifiedNanoseconds = status.st_mtimespec.tv_nsec
            #else
            self.modifiedSeconds = status.st_mtim.tv_sec
            self.modifiedNanoseconds = status.st_mtim.tv_nsec
            #endif
        }
    }

    private let files = NIOLockedValueBox<[String: (stamp: Stamp, loaded: NetrcFile.Loaded)]>([:])

    /// The file at `path` as ``NetrcFile/load(path:)`` reads it.
    func load(path: String) async -> NetrcFile.Loaded {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { return .missing }
            // Unreadable: the load says why, in a person's words.
            return (try? await BlockingIO.run { NetrcFile.load(path: path) }) ?? .missing
        }
        let stamp = Stamp(status)
        if let cached = self.files.withLockedValue({ $0[path] }), cached.stamp == stamp {
            return cached.loaded
        }
        guard let loaded = try? await BlockingIO.run({ NetrcFile.load(path: path) }) else { return .missing }
        self.files.withLockedValue { $0[path] = (stamp, loaded) }
        return loaded
    }
}
