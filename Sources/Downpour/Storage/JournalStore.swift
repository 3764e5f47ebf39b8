import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads and writes a ``ResumeJournal`` crash-safely: the data file is synced first, then the journal is
/// written to a temporary file, synced, and renamed over the old one, so a crash at any moment leaves either
/// the old journal or the new one, and never one that claims bytes the disk does not have.
///
/// Between those syncs, a journal of what is written so far is kept without a sync (`NAME.part.downpour.unsynced`,
/// ``saveUnsynced(_:)``, removed by each synced save), marked with the boot it was written in. A process killed on this machine leaves its
/// written bytes in the kernel's page cache, so the next run of the same boot trusts that journal and asks for less
/// again; after a reboot it is passed over, and only the synced one counts.
///
/// It remembers whether a journal can be on disk (until a ``load()`` found none, it may be), so that a
/// download that never saved one does not ask the file system to remove it: in a directory where many small
/// downloads finish at once, every needless lookup and unlink waits for the directory's lock.
final class JournalStore: Sendable {
    let path: String
    private let mayExist = NIOLockedValueBox(true)

    /// The journal written without a sync, trusted in the boot ``bootID`` only.
    let unsyncedPath: String
    /// This boot's id (``BootSession/current``; tests give their own); `nil`: no unsynced journal is written or read.
    let bootID: String?
    /// What the unsynced saves go by, behind a lock that also orders them.
    private struct Unsynced {
        /// The checksum of the synced journal on disk, as this store last read or wrote it; `nil`: none.
        var follows: String?
        /// The ranges the newest journal on disk records (the unsynced one, or the synced one that replaced it):
        /// an unsynced journal with the same ranges says nothing new and is not written.
        var lastDone: [[Int64]]?
    }

    private let unsynced = NIOLockedValueBox(Unsynced())

    init(partPath: String, bootID: String? = BootSession.current) {
        self.path = partPath + ".downpour"
        self.unsyncedPath = self.path + ".unsynced"
        self.bootID = bootID
    }

    enum LoadResult {
        case missing
        case loaded(ResumeJournal)
        case unreadable(String)
    }

    /// The unsynced journal when it is of this boot and follows the synced journal on disk (no synced save came
    /// after it), else the synced one.
    func load() -> LoadResult {
        let (synced, checksum) = Self.readJournal(at: self.path)
        let unsynced = self.bootID == nil ? .missing : Self.readJournal(at: self.unsyncedPath).result
        if case .loaded(var journal) = unsynced, journal.bootID == self.bootID, journal.follows == checksum {
            self.unsynced.withLockedValue { $0 = Unsynced(follows: checksum, lastDone: journal.done) }
            journal.bootID = nil
            journal.follows = nil
            return .loaded(journal)
        }
        let done: [[Int64]]? = if case .loaded(let journal) = synced { journal.done } else { nil }
        self.unsynced.withLockedValue { $0 = Unsynced(follows: checksum, lastDone: done) }
        // A `.tmp` left by a crash mid-save is removed with the journal when one is saved.
        if case .missing = synced, case .missing = unsynced {
            self.mayExist.withLockedValue { $0 = false }
        }
        return synced
    }

    /// The journal at `path`, and the checksum its header names when it was read.
    private static func readJournal(at path: String) -> (result: LoadResult, checksum: String?) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let failure = errno
            if failure == ENOENT { return (.missing, nil) }
            return (.unreadable("cannot open it: \(describeErrno(failure))"), nil)
        }
        defer { _ = SystemCall.close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return (.unreadable("cannot read it: \(describeErrno(errno))"), nil)
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            guard bytes.count <= 64 * 1024 * 1024 else { return (.unreadable("it is implausibly large"), nil) }
        }
        do {
            return (.loaded(try ResumeJournal.decode(bytes)), ResumeJournal.checksum(ofEncoded: bytes))
        } catch {
            return (.unreadable(error.description), ResumeJournal.checksum(ofEncoded: bytes))
        }
    }

    /// Syncs `file`, then replaces the journal with `journal`, then removes the unsynced journal, so that a paused
    /// download leaves its `.part` and this journal only.
    ///
    /// The unsynced journal goes last: until the synced one is replaced it is still the newer record (and the one a
    /// failed save leaves), and it needs no free space to stay. Removed first, it would free the blocks the new
    /// synced journal then takes, and on a full disk every save would find room again: the download would never
    /// hear of the full disk and stall instead of pausing. One it wrote after the rename names the old synced
    /// journal and is not trusted.
    func save(_ journal: ResumeJournal, syncing file: OutputFile) throws(DownloadError) {
        try file.sync()
        self.mayExist.withLockedValue { $0 = true }
        let bytes = journal.encode()
        try Self.replace(self.path, with: bytes, syncing: true)
        self.unsynced.withLockedValue { state in
            _ = unlink(self.unsyncedPath)
            state.follows = ResumeJournal.checksum(ofEncoded: bytes)
            state.lastDone = journal.done
        }
        Self.syncDirectory(of: self.path)
    }

    /// Whether the newest journal on disk (synced or not) records `done` already: an unsynced save of it would
    /// write nothing, so a caller need not build one.
    func records(_ done: ByteRangeSet) -> Bool {
        self.unsynced.withLockedValue { state in
            guard let last = state.lastDone, last.count == done.ranges.count else { return false }
            return zip(last, done.ranges).allSatisfy { $0 == [$1.lowerBound, $1.upperBound] }
        }
    }

    /// Replaces the unsynced journal with `journal`, marked with this boot and with the synced journal it follows:
    /// the ranges it names must have been written to the file (not synced). Nothing without a boot id, nor when the
    /// ranges are the ones the unsynced journal on disk has.
    func saveUnsynced(_ journal: ResumeJournal) throws(DownloadError) {
        guard let bootID else { return }
        self.mayExist.withLockedValue { $0 = true }
        let outcome = self.unsynced.withLockedValue { state -> Result<Void, DownloadError> in
            guard state.lastDone != journal.done else { return .success(()) }
            var journal = journal
            journal.bootID = bootID
            journal.follows = state.follows
            do throws(DownloadError) {
                try Self.replace(self.unsyncedPath, with: journal.encode(), syncing: false)
            } catch {
                return .failure(error)
            }
            state.lastDone = journal.done
            return .success(())
        }
        try outcome.get()
    }

    /// Writes `bytes` to `path.tmp`, syncs it when `syncing`, and renames it over `path`.
    private static func replace(_ path: String, with bytes: [UInt8], syncing: Bool) throws(DownloadError) {
        let temporary = path + ".tmp"
        let descriptor = DirectoryLocks.withLock(around: temporary) {
            open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        guard descriptor >= 0 else {
            throw .localIO("Cannot write the resume journal '\(temporary)'", systemCall: "open", errno: errno)
        }
        var failure: Int32?
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                written += result
            }
        }
        if failure == nil && syncing && fsync(descriptor) != 0 {
            failure = errno
        }
        _ = SystemCall.close(descriptor)
        if let failure {
            unlink(temporary)
            throw .localIO("Cannot write the resume journal '\(temporary)'", systemCall: "write", errno: failure)
        }
        guard DirectoryLocks.withLock(around: path, { rename(temporary, path) }) == 0 else {
            let failure = errno
            unlink(temporary)
            throw .localIO("Cannot replace the resume journal '\(path)'", systemCall: "rename", errno: failure)
        }
    }

    /// Removes the journal (and a temporary file a crash mid-save may have left), unless none can be there.
    func remove() {
        let mayExist = self.mayExist.withLockedValue { mayExist in
            defer { mayExist = false }
            return mayExist
        }
        self.unsynced.withLockedValue { $0 = Unsynced() }
        guard mayExist else { return }
        unlink(self.unsyncedPath)
        unlink(self.unsyncedPath + ".tmp")
        unlink(self.path)
        unlink(self.path + ".tmp")
    }

    /// Makes a rename durable. Best effort: some file systems refuse to open directories for this.
    static func syncDirectory(of path: String) {
        let descriptor = open(FileOperations.directory(of: path), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = SystemCall.close(descriptor)
    }
}

/// Runs blocking file-system work (an `fdatasync` that waits for the device, opening and preallocating the
/// `.part`, the final rename) on threads of its own instead of the few threads of the concurrency pool, so a slow
/// disk never stalls the network.
///
/// The pool has more threads than cores: its threads mostly wait for the device, and the syncs of many small
/// downloads finishing at once should overlap (a device flushes several as cheaply as one), not queue behind two.
enum BlockingIO {
    static let threadPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(8, System.coreCount * 2))
        pool.start()
        return pool
    }()

    static func run<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        let result: Result<T, DownloadError>
        do {
            result = try await Self.threadPool.runIfActive { () -> Result<T, DownloadError> in
                do throws(DownloadError) {
                    return .success(try work())
                } catch {
                    return .failure(error)
                }
            }
        } catch is CancellationError {
            throw .cancelled
        } catch {
            throw DownloadError(code: .localIO, message: "The file I/O threads are not running.", underlying: error)
        }
        return try result.get()
    }

    /// Runs `work` there even when the calling task is cancelled (work a cancelled task submits is dropped before
    /// it starts): the clean-up a cancel leaves to do.
    static func runEvenIfCancelled<T: Sendable>(
        _ work: @escaping @Sendable () throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        let outcome = await Task { () async -> Result<T, DownloadError> in
            do throws(DownloadError) {
                return .success(try await Self.run(work))
            } catch {
                return .failure(error)
            }
        }.value
        return try outcome.get()
    }
}
