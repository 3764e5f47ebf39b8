import NIOConcurrencyHelpers

/// Serializes this process's changes to one directory: creating a file in it, renaming within it.
///
/// The kernel already serializes them (the directory's own lock), but its waiters spin on the CPU while the
/// holder works, and the holder can work long: ext4 without a journal, for one, looks past every inode deleted in
/// the last seconds before it hands out a new one. Many small downloads finishing at once in one directory (`get
/// -i` with `-j 16`, the daemon) then spent as much CPU spinning as creating, CPU the network needed: 1,000 files
/// of 64 KiB took 1.5 to 1.9 CPU-s, 1.1 with this lock (`scripts/bench/bench.sh --cases manyfiles`). Here a waiter sleeps.
///
/// Sixteen locks, chosen by the directory's path, so that downloads into different directories seldom wait for
/// each other.
enum DirectoryLocks {
    private static let locks = (0..<16).map { _ in NIOLock() }

    /// Runs `body` holding the lock of the directory that holds `path`.
    static func withLock<T, Failure: Error>(around path: String, _ body: () throws(Failure) -> T) throws(Failure) -> T {
        let lock = self.locks[self.stripe(for: path)]
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// The lock of the directory that holds `path`: its text up to the last `/` (none: the current directory).
    static func stripe(for path: String) -> Int {
        let directory = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { path.utf8[..<$0] } ?? ""[...].utf8
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in directory {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int(hash % UInt64(self.locks.count))
    }
}
