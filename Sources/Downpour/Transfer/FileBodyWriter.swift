import NIOCore

/// The bytes of one response on their way into the file, for ``FileBodyDelegate``, which keeps it on its event
/// loop: gathers body parts, trims them to what the planner still wants, and writes them at their offset.
///
/// Parts are gathered in the buffers NIO read them into until `bufferSize` bytes are in, then written with one
/// `pwritev`. Small reads are copied together first (see ``append(_:)``).
struct FileBodyWriter {
    private let target: FileBodyDelegate.Target
    private let file: OutputFile
    private let bufferSize: Int

    private var pending: [ByteBuffer] = []
    private var pendingBytes = 0
    /// Whether the last pending buffer is a copy of small reads, with room for more.
    private var lastIsCopy = false
    /// The file offset of the first pending byte; everything before it is written.
    private var offset: Int64
    /// Set once a write failed: nothing more is written.
    private var failure: (any Error)?
    /// Where the bytes not yet handed to writeback start.
    private var writebackStart: Int64
    private var stopped = false

    init(target: FileBodyDelegate.Target, file: OutputFile, bufferSize: Int) {
        self.target = target
        self.file = file
        self.bufferSize = max(bufferSize, 1)
        self.offset = target.offset
        self.writebackStart = target.offset
    }

    /// Takes one body part, and writes the pending bytes once there are `bufferSize` of them.
    ///
    /// - Throws: ``FileBodyDelegate/Stop`` once the planner wanted fewer bytes than arrived; a fatal
    ///   ``AttemptFailure`` with the target's overflow error for a part that reaches past the limit; the error of a
    ///   failed write.
    mutating func receive(_ buffer: ByteBuffer) throws {
        if self.stopped {
            self.target.dropped(Int64(buffer.readableBytes))
            throw FileBodyDelegate.Stop()
        }
        if let limit = self.target.limit,
            self.offset + Int64(self.pendingBytes) + Int64(buffer.readableBytes) > limit
        {
            throw AttemptFailure.fatal(self.target.overflow())
        }
        self.append(buffer)
        guard self.pendingBytes >= self.bufferSize else { return }
        try self.flush()
    }

    /// Once the request has ended, however it ended: writes the pending bytes that are still wanted, and starts
    /// writeback of the rest of its range. Returns the offset up to which the bytes are on disk.
    ///
    /// - Throws: The error of a failed write, this one or an earlier one.
    mutating func finish() throws -> Int64 {
        try? self.flush()
        if let failure = self.failure { throw failure }
        if self.offset > self.writebackStart {
            self.file.startWriteback(self.writebackStart..<self.offset)
            self.writebackStart = self.offset
        }
        return self.offset
    }

    /// Small reads in large buffers are copied, so that a slow connection does not pin a large buffer for
    /// every few bytes; large reads are kept as they are.
    private mutating func append(_ buffer: ByteBuffer) {
        let count = buffer.readableBytes
        guard count > 0 else { return }
        self.pendingBytes += count
        if count >= Self.smallestKeptRead, count * 2 >= buffer.storageCapacity {
            self.pending.append(buffer)
            self.lastIsCopy = false
            return
        }
        if self.lastIsCopy, self.pending[self.pending.count - 1].writableBytes >= count {
            self.pending[self.pending.count - 1].writeImmutableBuffer(buffer)
            return
        }
        var copy = ByteBufferAllocator().buffer(capacity: max(count, Self.copyBufferSize))
        copy.writeImmutableBuffer(buffer)
        self.pending.append(copy)
        self.lastIsCopy = true
    }

    static let smallestKeptRead = 8 * 1024
    static let copyBufferSize = 16 * 1024
    /// Bytes after which one connection asks the kernel to start writing its range to the device, so that the
    /// syncs before a journal save and before the final rename find little left to do.
    static let writebackBatch: Int64 = 4 * 1024 * 1024

    /// Writes the pending bytes that are still wanted.
    ///
    /// - Throws: The write's error, or ``FileBodyDelegate/Stop`` when the planner wanted fewer bytes than were
    ///   pending.
    private mutating func flush() throws {
        if let failure = self.failure { throw failure }
        guard self.pendingBytes > 0 else { return }
        let start = self.offset
        let end = start + Int64(self.pendingBytes)
        let allowed = min(self.target.claim(end), end)
        var buffers = self.pending
        self.pending = []
        self.pendingBytes = 0
        self.lastIsCopy = false
        if allowed > self.offset {
            Self.trim(&buffers, to: Int(allowed - self.offset))
            let range = self.offset..<allowed
            do {
                try self.file.write(buffers, at: range.lowerBound)
            } catch {
                self.failure = error
                throw error
            }
            self.offset = allowed
            self.target.written(range)
            if allowed - self.writebackStart >= Self.writebackBatch {
                self.file.startWriteback(self.writebackStart..<allowed)
                self.writebackStart = allowed
            }
        }
        if allowed < end {
            self.target.dropped(end - max(allowed, start))
            self.stopped = true
            throw FileBodyDelegate.Stop()
        }
    }

    /// Drops bytes from the end of `buffers` until `count` are left.
    private static func trim(_ buffers: inout [ByteBuffer], to count: Int) {
        var kept = 0
        for index in buffers.indices {
            let size = buffers[index].readableBytes
            if kept + size >= count {
                buffers[index].moveWriterIndex(to: buffers[index].readerIndex + (count - kept))
                buffers.removeSubrange((index + 1)...)
                return
            }
            kept += size
        }
    }
}
