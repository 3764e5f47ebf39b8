import NIOConcurrencyHelpers
import NIOCore

/// Hashes a download's file from its first byte on, as far as the bytes are in, while the download goes on, so
/// that at the end only the tail is left to read: the bytes are read back with `pread` (they are still in the
/// page cache) on `BlockingIO`'s threads, in chunks of ``chunkSize``, into one buffer used again and again (a new buffer
/// per chunk, freed on another thread than the one that made it, left tens of MiB in the allocator's per-thread
/// arenas), and hashed here.
///
/// A byte that is written again after it was hashed (a racing connection writing its copy of a tail, a stream
/// that starts again from byte 0) makes the hash start over: the writer reports it with ``noteRewrite(from:)``,
/// which may come at any time, from any thread. Before each chunk is hashed and after it was read, the hasher
/// looks for such a report; a read that overlapped a write is reported after it, so it is never trusted for
/// long: the hash covers exactly the bytes that are on disk once no more writes come.
actor PrefixHasher {
    /// How far the hasher has read or is reading, and whether a byte below that was written again since.
    private struct Watch: Sendable {
        var readUpTo: Int64 = 0
        var invalidated = false
    }

    /// Bytes read back at once.
    static let chunkSize = 4 * 1024 * 1024

    let algorithm: Checksum.Algorithm
    private let file: OutputFile
    private let watch = NIOLockedValueBox(Watch())
    /// The read buffer: filled on the blocking-I/O threads, hashed here, one chunk at a time.
    private let buffer = NIOLockedValueBox(ByteBuffer())
    private var digest: RunningDigest
    /// The first byte not hashed yet.
    private(set) var hashedBytes: Int64 = 0

    init(algorithm: Checksum.Algorithm, file: OutputFile) {
        self.algorithm = algorithm
        self.file = file
        self.digest = RunningDigest(algorithm)
    }

    /// Bytes from `offset` on were written again: if the hasher has read past `offset`, it starts over.
    nonisolated func noteRewrite(from offset: Int64) {
        self.watch.withLockedValue { watch in
            if offset < watch.readUpTo { watch.invalidated = true }
        }
    }

    /// Hashes the bytes before `target`, which must all be on disk, at most `limit` of them. Returns `false` when
    /// there was nothing to do. After a rewrite it starts over at byte 0 and returns at once: the caller asks
    /// again with a target taken after the rewrite.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read, ``DownloadError/Code/cancelled``.
    @discardableResult
    func advance(to target: Int64, atMost limit: Int64 = .max) async throws(DownloadError) -> Bool {
        var budget = limit
        var worked = false
        while self.hashedBytes < target, budget > 0 {
            if self.startOverIfRewritten() { return true }
            if Task.isCancelled { throw .cancelled }
            let offset = self.hashedBytes
            let count = Int(min(Int64(Self.chunkSize), target - offset, budget))
            self.watch.withLockedValue { $0.readUpTo = max($0.readUpTo, offset + Int64(count)) }
            let (file, buffer) = (self.file, self.buffer)
            let read = try await BlockingIO.run { () throws(DownloadError) -> Int in
                try buffer.withLockedValue { buffer -> Result<Int, DownloadError> in
                    buffer.clear(minimumCapacity: count)
                    do throws(DownloadError) {
                        try file.read(into: &buffer, count: count, at: offset)
                    } catch {
                        return .failure(error)
                    }
                    return .success(buffer.readableBytes)
                }.get()
            }
            guard read == count else {
                throw DownloadError(
                    code: .localIO,
                    message: "'\(file.path)' ends at byte \(offset + Int64(read)), before the "
                        + "\(target) bytes written to it: something else changed the file."
                )
            }
            if self.startOverIfRewritten() { return true }
            buffer.withLockedValue { buffer in buffer.withUnsafeReadableBytes { self.digest.update($0) } }
            self.hashedBytes = offset + Int64(count)
            budget -= Int64(count)
            worked = true
        }
        return self.startOverIfRewritten() || worked
    }

    /// The digest of the first `length` bytes, reading what is not hashed yet. Call once nothing writes any more.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read, ``DownloadError/Code/cancelled``.
    func finish(length: Int64) async throws(DownloadError) -> Checksum {
        repeat {
            try await self.advance(to: length)
        } while self.hashedBytes < length
        precondition(self.hashedBytes == length, "hashed \(self.hashedBytes) bytes of a file of \(length)")
        return self.digest.finalize()
    }

    /// Starts over at byte 0 when a byte that was read has been written again since; `true` if so.
    private func startOverIfRewritten() -> Bool {
        let rewritten = self.watch.withLockedValue { watch in
            guard watch.invalidated else { return false }
            watch = Watch()
            return true
        }
        if rewritten {
            self.digest = RunningDigest(self.algorithm)
            self.hashedBytes = 0
        }
        return rewritten
    }
}
