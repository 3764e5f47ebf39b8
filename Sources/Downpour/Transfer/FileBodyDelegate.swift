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
/// read nothing more and TCP slows the server down. The event loops are the ``Downloader``'s (Downpour's own
/// unless the application gave it a group), so a slow disk stalls downloads only. Bytes count as written (and
/// may enter the journal) once `pwritev` has returned. Bandwidth limits work the same way: after a body part the
/// returned future completes only when the ``Pacing`` allows the next read.
///
/// Every callback and ``finish()`` run on ``eventLoop``, the one loop of the request's client (see
/// ``HTTPTransport``), where its connection lives too. The ``FileBodyWriter`` that does the work is bound to that
/// loop with `NIOLoopBoundBox`, which checks the confinement and makes the delegate `Sendable`.
final class FileBodyDelegate: HTTPClientResponseDelegate, Sendable {
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
        /// Told how many bytes came and were dropped unwritten, past what ``claim`` allowed.
        var dropped: @Sendable (Int64) -> Void
        /// Bandwidth limits: told the size of every body part, returns the seconds to wait before the next read
        /// (the connection reads nothing meanwhile, so TCP slows the server down). `nil`: no limit.
        var pace: (@Sendable (Int) -> Double)? = nil
    }

    let eventLoop: any EventLoop
    private let checkHead: @Sendable (HTTPResponseHead) throws -> Void
    private let pace: (@Sendable (Int) -> Double)?
    private let writer: NIOLoopBoundBox<FileBodyWriter>

    init(target: Target, file: OutputFile, bufferSize: Int, eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.checkHead = target.checkHead
        self.pace = target.pace
        self.writer = .makeBoxSendingValue(
            FileBodyWriter(target: target, file: file, bufferSize: bufferSize),
            as: FileBodyWriter.self,
            eventLoop: eventLoop
        )
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.receiveHead(head)
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        self.receiveBodyPart(buffer)
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {}

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {}

    /// The work of `didReceiveHead`, which needs no task: checks the head before any body byte is taken.
    func receiveHead(_ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        do {
            try self.checkHead(head)
            return self.eventLoop.makeSucceededVoidFuture()
        } catch {
            return self.eventLoop.makeFailedFuture(error)
        }
    }

    /// The work of `didReceiveBodyPart`, which needs no task: takes the part, and writes once `bufferSize`
    /// bytes are pending. The future fails with ``Stop`` once the planner wants no more, or with the failure
    /// that ends the request.
    func receiveBodyPart(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let count = buffer.readableBytes
        do {
            try self.writer.withValue { try $0.receive(buffer) }
        } catch {
            return self.eventLoop.makeFailedFuture(error)
        }
        // Bandwidth limits: the connection reads nothing more until the delay is over, so TCP slows the server.
        guard let pace = self.pace else { return self.eventLoop.makeSucceededVoidFuture() }
        let delay = pace(count)
        guard delay > 0 else { return self.eventLoop.makeSucceededVoidFuture() }
        return self.eventLoop.scheduleTask(in: .nanoseconds(Int64(min(delay, 3600) * 1e9))) {}.futureResult
    }

    /// Once the request has ended, however it ended: writes the pending bytes that are still wanted, and
    /// starts writeback of the rest of its range. Returns the offset up to which the bytes are on disk.
    func finish() -> EventLoopFuture<Int64> {
        self.eventLoop.submit {
            try self.writer.withValue { try $0.finish() }
        }
    }
}
