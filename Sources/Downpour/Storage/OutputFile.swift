import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The file being downloaded into: positional writes from many connections at once, preallocation, sync.
///
/// Thread-safe because `pwrite` is: every write names its own offset and no state is shared.
final class OutputFile: Sendable {
    /// The vectored positional write, with the arguments (descriptor, vectors, vector count, offset), result and
    /// `errno` of `pwritev`.
    typealias VectorWrite = @Sendable (Int32, UnsafePointer<iovec>, Int32, off_t) -> Int
    /// Links an unnamed file (its descriptor) under a path; returns 0 or an `errno`.
    typealias LinkAt = @Sendable (Int32, String) -> Int32

    let path: String
    /// A file with no name yet (``openUnnamed(for:vectorWrite:linkAt:)``): ``link(as:)`` gives it one.
    var isUnnamed: Bool { self.linkAt != nil }
    /// For an unnamed file, how it is linked under a name: `linkat` through `/proc/self/fd`, returning 0 or an
    /// `errno`.
    private let linkAt: LinkAt?
    private let descriptor: Int32
    private let vectorWrite: VectorWrite
    /// The file's identity in ``LockedFiles`` while it is open.
    private let identity: LockedFiles.Identity
    private let isClosed = NIOLockedValueBox(false)

    private init(
        path: String,
        descriptor: Int32,
        identity: LockedFiles.Identity,
        linkAt: LinkAt? = nil,
        vectorWrite: @escaping VectorWrite
    ) {
        self.path = path
        self.descriptor = descriptor
        self.identity = identity
        self.linkAt = linkAt
        self.vectorWrite = vectorWrite
    }

    /// Opens (creating when missing) the file at `path` and takes an exclusive lock on it, so that a second
    /// download aiming at the same output, in this process or another, stops at once. The contents are left as
    /// they are.
    ///
    /// The lock is a POSIX record lock (`fcntl(F_SETLK)`): it belongs to this process, so the kernel drops it
    /// when the process dies (a crash leaves no stale lock), and a child process this one spawns does not hold
    /// it (as it would hold a `flock` lock until it executes its program). Within this process, ``LockedFiles``
    /// keeps two downloads off one file.
    ///
    /// `vectorWrite` is `pwritev`; tests pass one that writes less, or fails, to check the retries.
    static func openLocked(
        at path: String,
        vectorWrite: @escaping VectorWrite = OutputFile.systemVectorWrite
    ) throws(DownloadError) -> OutputFile {
        let descriptor = DirectoryLocks.withLock(around: path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else {
            throw .localIO("Cannot create '\(path)'", systemCall: "open", errno: errno)
        }
        let busy = DownloadError(
            code: .alreadyRunning,
            message: "Another download is writing to '\(path)' right now; wait for it to finish or stop it first."
        )
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let failure = errno
            _ = SystemCall.close(descriptor)
            throw .localIO("Cannot lock '\(path)'", systemCall: "fstat", errno: failure)
        }
        let identity = LockedFiles.Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        guard LockedFiles.insert(identity) else {
            _ = SystemCall.close(descriptor)
            throw busy
        }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 0
        if fcntl(descriptor, F_SETLK, &lock) != 0 {
            let failure = errno
            _ = SystemCall.close(descriptor)
            LockedFiles.remove(identity)
            if failure == EACCES || failure == EAGAIN {
                throw busy
            }
            throw .localIO("Cannot lock '\(path)'", systemCall: "fcntl", errno: failure)
        }
        return OutputFile(path: path, descriptor: descriptor, identity: identity, vectorWrite: vectorWrite)
    }

    /// A file with no name in the directory of `partPath` (Linux's `O_TMPFILE`), for a download whose bytes are
    /// all in hand: it is written and synced unseen, then ``link(as:)`` gives it its final name, one change to the
    /// directory where creating `NAME.part` and renaming it make two (1,000 files of 64 KiB, 16 at a time, where
    /// every create and rename waits for the directory: 14 % fewer context switches, 10 % less time). No other
    /// process can open it, so it needs no lock; if the process dies, the kernel frees it and nothing is left.
    ///
    /// `nil` where this cannot be used, and the caller takes the named `.part` file: on other systems, on file
    /// systems without `O_TMPFILE`, without `/proc/self/fd`, or when `partPath` exists (an earlier run's file, or
    /// another process's download, which ``openLocked(at:vectorWrite:)`` handles).
    static func openUnnamed(
        for partPath: String,
        vectorWrite: @escaping VectorWrite = OutputFile.systemVectorWrite,
        linkAt: @escaping LinkAt = OutputFile.systemLinkAt
    ) -> OutputFile? {
        #if os(Linux)
        guard Self.procFileDescriptorsExist else { return nil }
        var status = stat()
        guard lstat(partPath, &status) != 0, errno == ENOENT else { return nil }
        let descriptor = open(FileOperations.directory(of: partPath), Self.unnamedFileFlags, 0o644)
        guard descriptor >= 0 else { return nil }
        guard fstat(descriptor, &status) == 0 else {
            _ = SystemCall.close(descriptor)
            return nil
        }
        let identity = LockedFiles.Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        guard LockedFiles.insert(identity) else {
            _ = SystemCall.close(descriptor)
            return nil
        }
        return OutputFile(
            path: partPath,
            descriptor: descriptor,
            identity: identity,
            linkAt: linkAt,
            vectorWrite: vectorWrite
        )
        #else
        return nil
        #endif
    }

    #if os(Linux)
    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`: Glibc's macro is not imported) with `O_RDWR | O_CLOEXEC`.
    private static let unnamedFileFlags: Int32 = 0o20_000_000 | O_DIRECTORY | O_RDWR | O_CLOEXEC
    private static let procFileDescriptorsExist = access("/proc/self/fd", F_OK) == 0
    static let systemLinkAt: LinkAt = { descriptor, destination in
        linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, destination, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno
    }
    #else
    static let systemLinkAt: LinkAt = { _, _ in ENOSYS }
    #endif

    /// Gives a file from ``openUnnamed(for:vectorWrite:linkAt:)`` the name `destination`, never replacing a file
    /// there. Call it after ``sync()``. Where the link is refused for another reason than an existing file (a
    /// `/proc` that does not allow it), the bytes are copied into the named `.part` file, which is synced and
    /// renamed as usual.
    ///
    /// - Throws: ``DownloadError/outputExists(_:)`` when `destination` exists; a local I/O error otherwise.
    func link(as destination: String) throws(DownloadError) {
        guard let linkAt = self.linkAt else { preconditionFailure("link(as:) is for a file from openUnnamed(for:)") }
        let failure = DirectoryLocks.withLock(around: destination) { linkAt(self.descriptor, destination) }
        switch failure {
        case 0:
            return
        case EEXIST:
            throw DownloadError.outputExists(destination)
        default:
            try self.copyToPartFile(then: destination)
        }
    }

    /// The fallback of ``link(as:)``: the bytes into `NAME.part` (created, locked), synced, renamed.
    private func copyToPartFile(then destination: String) throws(DownloadError) {
        let named = try OutputFile.openLocked(at: self.path, vectorWrite: self.vectorWrite)
        defer { named.close() }
        do throws(DownloadError) {
            let size = try self.size()
            try named.startOver(length: nil)
            if size > 0 { try named.write(try self.read(count: Int(size), at: 0), at: 0) }
            try named.sync()
            try FileOperations.move(self.path, to: destination, replacing: false)
        } catch {
            FileOperations.remove(self.path)
            throw error
        }
    }

    #if os(Linux)
    static let systemVectorWrite: VectorWrite = { pwritev($0, $1, $2, $3) }
    #else
    /// Unused: elsewhere the buffers of a vectored write go one by one through `pwrite`.
    static let systemVectorWrite: VectorWrite = { _, _, _, _ in
        errno = ENOSYS
        return -1
    }
    #endif

    /// Empties the file, then reserves `length` bytes so a full disk shows up now, not halfway through.
    func startOver(length: Int64?) throws(DownloadError) {
        guard ftruncate(self.descriptor, 0) == 0 else {
            throw .localIO("Cannot empty '\(self.path)'", systemCall: "ftruncate", errno: errno)
        }
        if let length, length > 0 {
            try self.preallocate(length)
        }
    }

    /// The file's current size in bytes.
    func size() throws(DownloadError) -> Int64 {
        var status = stat()
        guard fstat(self.descriptor, &status) == 0 else {
            throw .localIO("Cannot read the size of '\(self.path)'", systemCall: "fstat", errno: errno)
        }
        return Int64(status.st_size)
    }

    private func preallocate(_ length: Int64) throws(DownloadError) {
        #if os(Linux)
        let result = posix_fallocate(self.descriptor, 0, off_t(length))
        if result == 0 { return }
        // File systems without fallocate (EOPNOTSUPP, EINVAL) still take a sparse file.
        guard result == EOPNOTSUPP || result == EINVAL || result == ENOSYS else {
            throw .localIO(
                "Cannot reserve \(ByteCount.format(length)) for '\(self.path)'",
                systemCall: "posix_fallocate",
                errno: result
            )
        }
        #endif
        guard ftruncate(self.descriptor, off_t(length)) == 0 else {
            throw .localIO("Cannot size '\(self.path)' to \(length) bytes", systemCall: "ftruncate", errno: errno)
        }
    }

    /// Writes all of `buffer` at `offset`.
    func write(_ buffer: ByteBuffer, at offset: Int64) throws(DownloadError) {
        let failure: Int32? = buffer.withUnsafeReadableBytes { bytes in
            var written = 0
            while written < bytes.count {
                let result = pwrite(
                    self.descriptor,
                    bytes.baseAddress! + written,
                    bytes.count - written,
                    off_t(offset + Int64(written))
                )
                if result < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += result
            }
            return nil
        }
        if let failure {
            throw .localIO("Cannot write to '\(self.path)' at byte \(offset)", systemCall: "pwrite", errno: failure)
        }
    }

    /// Writes the readable bytes of `buffers`, one after the other, starting at `offset`: one `pwritev` for
    /// as many buffers as the system takes at once, with no copy into a larger buffer first.
    func write(_ buffers: [ByteBuffer], at offset: Int64) throws(DownloadError) {
        #if os(Linux)
        var vectors: [iovec] = []
        vectors.reserveCapacity(buffers.count)
        for buffer in buffers where buffer.readableBytes > 0 {
            // The array holds every buffer until the end of this call, so the pointers stay valid.
            buffer.withUnsafeReadableBytes { bytes in
                vectors.append(
                    iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
                )
            }
        }
        var position = offset
        var first = 0
        while first < vectors.count {
            let count = min(vectors.count - first, Self.maximumVectors)
            let result = vectors.withUnsafeBufferPointer { all in
                self.vectorWrite(self.descriptor, all.baseAddress! + first, Int32(count), off_t(position))
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw .localIO(
                    "Cannot write to '\(self.path)' at byte \(position)",
                    systemCall: "pwritev",
                    errno: errno
                )
            }
            if result == 0 {
                throw .localIO("Cannot write to '\(self.path)' at byte \(position)", systemCall: "pwritev", errno: EIO)
            }
            // Skip what was written: whole vectors, then part of the next one.
            position += Int64(result)
            var left = result
            while left > 0, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base += left
                vectors[first].iov_len -= left
            }
        }
        withExtendedLifetime(buffers) {}
        #else
        var position = offset
        for buffer in buffers {
            try self.write(buffer, at: position)
            position += Int64(buffer.readableBytes)
        }
        #endif
    }

    /// Reads `count` bytes at `offset` (fewer only at the end of the file).
    func read(count: Int, at offset: Int64) throws(DownloadError) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        try self.read(into: &buffer, count: count, at: offset)
        return buffer
    }

    /// Reads up to `count` bytes at `offset` onto the end of `buffer` (fewer only at the end of the file): a
    /// caller that reads again and again can clear and reuse one buffer.
    func read(into buffer: inout ByteBuffer, count: Int, at offset: Int64) throws(DownloadError) {
        var failure: Int32?
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { bytes in
            var done = 0
            while done < count {
                let position = off_t(offset + Int64(done))
                let result = pread(self.descriptor, bytes.baseAddress! + done, count - done, position)
                if result < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if result == 0 { break }
                done += result
            }
            return done
        }
        if let failure {
            throw .localIO("Cannot read '\(self.path)' at byte \(offset)", systemCall: "pread", errno: failure)
        }
    }

    /// The most vectors one `pwritev` takes (`IOV_MAX` on Linux).
    private static let maximumVectors = 1024

    /// Sets the length (for downloads whose length was unknown until the end).
    func truncate(to length: Int64) throws(DownloadError) {
        guard ftruncate(self.descriptor, off_t(length)) == 0 else {
            throw .localIO("Cannot size '\(self.path)' to \(length) bytes", systemCall: "ftruncate", errno: errno)
        }
    }

    /// Starts writing the dirty pages of `range` to the device without waiting, so that a later ``sync()`` has
    /// little left to do. Linux only; elsewhere a no-op.
    func startWriteback(_ range: Range<Int64>) {
        #if os(Linux)
        // POSIX_FADV_DONTNEED starts asynchronous writeback of the range's dirty pages (and drops clean ones).
        _ = posix_fadvise(self.descriptor, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_DONTNEED)
        #endif
    }

    /// Gives the file its ``FinishMark``; `false` when the file system takes none.
    @discardableResult
    func setFinishMark(_ mark: String) -> Bool {
        FinishMark.set(mark, descriptor: self.descriptor)
    }

    /// Forces written data to the storage device.
    func sync() throws(DownloadError) {
        #if canImport(Darwin)
        let result = fsync(self.descriptor)
        #else
        let result = fdatasync(self.descriptor)
        #endif
        guard result == 0 else {
            throw .localIO("Cannot flush '\(self.path)' to disk", systemCall: "fdatasync", errno: errno)
        }
    }

    /// Sets the access and modification times to `seconds` since 1970 (after the last write, which would
    /// change them again).
    func setTimes(_ seconds: Int64) throws(DownloadError) {
        let time = timespec(tv_sec: time_t(seconds), tv_nsec: 0)
        let times = [time, time]
        guard futimens(self.descriptor, times) == 0 else {
            throw .localIO("Cannot set the modification time of '\(self.path)'", systemCall: "futimens", errno: errno)
        }
    }

    /// Closes the file, which releases its lock. Later calls do nothing.
    func close() {
        let first = self.isClosed.withLockedValue { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        _ = SystemCall.close(self.descriptor)
        LockedFiles.remove(self.identity)
    }
}

/// The output files this process has open and locked. A POSIX record lock does not keep a second lock of the
/// same process off a file (and closing any descriptor of the file would release it), so two downloads of one
/// process aiming at one file are kept apart here.
enum LockedFiles {
    struct Identity: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    private static let open = NIOLockedValueBox(Set<Identity>())

    /// `false` when the file is open already.
    static func insert(_ identity: Identity) -> Bool {
        self.open.withLockedValue { $0.insert(identity).inserted }
    }

    static func remove(_ identity: Identity) {
        _ = self.open.withLockedValue { $0.remove(identity) }
    }
}

enum SystemCall {
    #if canImport(Glibc)
    static let close = Glibc.close
    #elseif canImport(Musl)
    static let close = Musl.close
    #elseif canImport(Darwin)
    static let close = Darwin.close
    #endif
}

/// File-system steps around the output file.
enum FileOperations {
    /// The directory a path names a file in: `.` for a bare name, `/` for a file at the root.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    static func remove(_ path: String) {
        unlink(path)
    }

    /// Moves `source` to `destination`. Without `replacing`, fails with ``DownloadError/Code/outputExists``
    /// rather than replace a file that appeared meanwhile (a hard link cannot overwrite).
    static func move(_ source: String, to destination: String, replacing: Bool) throws(DownloadError) {
        try DirectoryLocks.withLock(around: destination) { () throws(DownloadError) in
            try self.moveUnlocked(source, to: destination, replacing: replacing)
        }
    }

    private static func moveUnlocked(_ source: String, to destination: String, replacing: Bool) throws(DownloadError) {
        if replacing {
            guard rename(source, destination) == 0 else {
                throw .localIO("Cannot rename '\(source)' to '\(destination)'", systemCall: "rename", errno: errno)
            }
            return
        }
        // One atomic step where the kernel and the file system offer it; else a hard link, which cannot
        // replace a file either, and the unlink of the old name.
        switch Self.renameWithoutReplacing(source, destination) {
        case 0:
            return
        case EEXIST:
            throw DownloadError.outputExists(destination)
        default:
            break
        }
        if link(source, destination) == 0 {
            unlink(source)
            return
        }
        let linkError = errno
        if linkError == EEXIST {
            throw DownloadError.outputExists(destination)
        }
        // File systems without hard links: check, then rename (a small window, but no silent overwrite of a
        // file that was there before the download started).
        guard !exists(destination) else { throw DownloadError.outputExists(destination) }
        guard rename(source, destination) == 0 else {
            throw .localIO("Cannot rename '\(source)' to '\(destination)'", systemCall: "rename", errno: errno)
        }
    }

    /// `renameat2(RENAME_NOREPLACE)`: 0 when renamed, else its `errno` (`EEXIST` when the destination
    /// exists; `ENOSYS` where there is no such call, `EINVAL` where the file system does not offer it). Looked up
    /// at run time: the C library declares it only for `_GNU_SOURCE`, and older ones lack it.
    static func renameWithoutReplacing(_ source: String, _ destination: String) -> Int32 {
        #if os(Linux) && canImport(Glibc)
        guard let renameat2 = Self.renameat2 else { return ENOSYS }
        let noReplace: UInt32 = 1  // RENAME_NOREPLACE
        return renameat2(AT_FDCWD, source, AT_FDCWD, destination, noReplace) == 0 ? 0 : errno
        #else
        return ENOSYS
        #endif
    }

    #if os(Linux) && canImport(Glibc)
    private typealias RenameAt2 =
        @convention(c) (
            Int32, UnsafePointer<CChar>?, Int32, UnsafePointer<CChar>?, UInt32
        ) -> Int32

    private static let renameat2: RenameAt2? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()
    #endif

    /// Creates `path` and its parents when missing.
    static func createDirectory(_ path: String) throws(DownloadError) {
        if isDirectory(path) { return }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component + "/"
            if isDirectory(prefix) { continue }
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw .localIO("Cannot create the directory '\(prefix)'", systemCall: "mkdir", errno: errno)
            }
        }
    }
}

extension DownloadError {
    static func outputExists(_ path: String) -> DownloadError {
        DownloadError(
            code: .outputExists,
            message: "'\(path)' exists already; it was left untouched. Choose another name, or allow "
                + "overwriting it."
        )
    }
}
