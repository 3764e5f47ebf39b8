import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Receives one response on the event loop of its connection: checks the head, then writes the body at its
/// file offset.
///
/// The body is written in the buffers NIO read it into, with no copy: they are gathered until `bufferSize`
/// bytes are in, then written with one `pwritev` right there on the event loop, while the bytes are still in
/// the CPU's cache. Measured on loopback this needs about a fifth less CPU than handing the write to a thread
/// pool, and it is the simplest backpressure there is: while the disk is slow, the connections of this loop
/// read nothing more and TCP slows the server down. The event loops are Downpour's own
/// (``HTTPTransport/eventLoopGroup``), so a slow disk never stalls anyone else's work. Bytes count as written
/// (and may enter the journal) once `pwritev` has returned.
///
/// Every callback and ``finish()`` run on ``eventLoop``, the one loop of the request's client (see
/// ``HTTPTransport``), where its connection lives too; that confinement is what makes it `Sendable`.
final class FileBodyDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void

    /// Ends the request early, closing the connection, because the planner wants no more of its bytes (another
    /// connection took the rest over).
    struct Stop: Error {}

    /// What to do with the bytes of one response.
    struct Target: Sendable {
        /// Where the first body byte goes.
        var offset: Int64
        /// No body byte may land at or past this offset.
        var limit: Int64?
        /// The error for a server that sends past `limit`.
        var overflow: @Sendable () -> DownloadError
        /// Checks the response head before any body byte is taken: throws an ``AttemptFailure`` to refuse it.
        var checkHead: @Sendable (HTTPResponseHead) throws -> Void
        /// How far the bytes up to the given offset may be written (less when the planner wants fewer).
        var claim: @Sendable (Int64) -> Int64
        /// Called, in order, for every range whose write has finished.
        var written: @Sendable (Range<Int64>) -> Void
        /// Bandwidth limits: told the size of every body part, returns the seconds to wait before the next read
        /// (the connection reads nothing meanwhile, so TCP slows the server down). `nil`: no limit.
        var pace: (@Sendable (Int) -> Double)? = nil
    }

    let eventLoop: any EventLoop
    private let target: Target
    private let file: OutputFile
    private let bufferSize: Int

    // Confined to `eventLoop`.
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

    init(target: Target, file: OutputFile, bufferSize: Int, eventLoop: any EventLoop) {
        self.target = target
        self.file = file
        self.bufferSize = max(bufferSize, 1)
        self.eventLoop = eventLoop
        self.offset = target.offset
        self.writebackStart = target.offset
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try self.target.checkHead(head)
            return self.eventLoop.makeSucceededVoidFuture()
        } catch {
            return self.eventLoop.makeFailedFuture(error)
        }
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        self.eventLoop.assertInEventLoop()
        if self.stopped {
            return self.eventLoop.makeFailedFuture(Stop())
        }
        if let limit = self.target.limit,
            self.offset + Int64(self.pendingBytes) + Int64(buffer.readableBytes) > limit
        {
            return self.eventLoop.makeFailedFuture(AttemptFailure.fatal(self.target.overflow()))
        }
        let count = buffer.readableBytes
        self.append(buffer)
        let written =
            self.pendingBytes >= self.bufferSize ? self.flush() : self.eventLoop.makeSucceededVoidFuture()
        guard let pace = self.target.pace else { return written }
        let delay = pace(count)
        guard delay > 0 else { return written }
        let eventLoop = self.eventLoop
        return written.flatMap {
            eventLoop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) {}.futureResult
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {}

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {}

    /// Once the request has ended, however it ended: writes the pending bytes that are still wanted, and
    /// starts writeback of the rest of its range. Returns the offset up to which the bytes are on disk.
    func finish() -> EventLoopFuture<Int64> {
        self.eventLoop.submit {
            _ = self.flush()
            if let failure = self.failure { throw failure }
            if self.offset > self.writebackStart {
                self.file.startWriteback(self.writebackStart..<self.offset)
                self.writebackStart = self.offset
            }
            return self.offset
        }
    }

    /// Small reads in large buffers are copied, so that a slow connection does not pin a large buffer for
    /// every few bytes; large reads are kept as they are.
    private func append(_ buffer: ByteBuffer) {
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

    /// Writes the pending bytes that are still wanted. The returned future fails with the write's error, or
    /// with ``Stop`` when the planner wanted fewer bytes than were pending.
    private func flush() -> EventLoopFuture<Void> {
        if let failure = self.failure { return self.eventLoop.makeFailedFuture(failure) }
        guard self.pendingBytes > 0 else { return self.eventLoop.makeSucceededVoidFuture() }
        let end = self.offset + Int64(self.pendingBytes)
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
                return self.eventLoop.makeFailedFuture(error)
            }
            self.offset = allowed
            self.target.written(range)
            if allowed - self.writebackStart >= Self.writebackBatch {
                self.file.startWriteback(self.writebackStart..<allowed)
                self.writebackStart = allowed
            }
        }
        if allowed < end {
            self.stopped = true
            return self.eventLoop.makeFailedFuture(Stop())
        }
        return self.eventLoop.makeSucceededVoidFuture()
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
