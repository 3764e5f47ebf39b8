import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// Why one attempt of a request ended without finishing its range.
enum AttemptFailure: Error {
    /// Worth another try after a pause: a network fault, a dropped connection, a 503.
    case retryable(DownloadError, retryAfter: Duration?)
    /// Final for the whole download.
    case fatal(DownloadError)
    /// The server answered a range request with the whole file: switch to one stream.
    case rangesIgnored
}

/// One connection of a segmented download: takes a range from the planner, fetches it with one `GET` and
/// `Range`, writes it at its offset, retries from the last written byte, and asks for more until none is left.
struct SegmentWorker: Sendable {
    let id: Int
    let session: TransferSession

    func run() async throws(AttemptFailure) {
        while let lease = self.session.acquire(connection: self.id) {
            defer { self.session.release(lease.id, connection: self.id) }
            try await self.fetch(lease.id)
        }
    }

    /// Fetches what is left of `lease`, retrying as the configuration allows.
    private func fetch(_ lease: SegmentPlanner.LeaseID) async throws(AttemptFailure) {
        var failuresWithoutProgress = 0
        while let range = self.session.remaining(lease), !range.isEmpty {
            if Task.isCancelled { throw .fatal(.cancelled) }
            do {
                try await self.attempt(lease, range: range)
            } catch .retryable(let error, let retryAfter) {
                let progressed = (self.session.remaining(lease)?.lowerBound ?? range.upperBound) > range.lowerBound
                failuresWithoutProgress = progressed ? 1 : failuresWithoutProgress + 1
                try await self.session.waitBeforeRetry(
                    connection: self.id,
                    failuresWithoutProgress: failuresWithoutProgress,
                    error: error,
                    retryAfter: retryAfter
                )
            }
        }
    }

    /// One request for `range`. Returns when the range is written or another connection took the rest over.
    private func attempt(_ lease: SegmentPlanner.LeaseID, range: Range<Int64>) async throws(AttemptFailure) {
        let remote = self.session.remoteFile
        var extraHeaders = [("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")]
        if let validator = remote.ifRangeValidator {
            extraHeaders.append(("If-Range", validator))
        }
        self.session.setActive(true, connection: self.id)
        defer { self.session.setActive(false, connection: self.id) }

        let response: HTTPClientResponse
        do {
            response = try await self.session.transport.send(
                method: .GET,
                url: remote.url,
                headers: self.session.headers,
                extraHeaders: extraHeaders
            )
        } catch {
            throw Self.classify(error, url: remote.url)
        }

        switch response.status.code {
        case 206:
            try ResponseValidator.checkPartial(response.headers, asked: range, remote: remote)
        case 200:
            try ResponseValidator.checkSameFile(response.headers, remote: remote)
            throw .rangesIgnored
        case 416:
            throw .fatal(
                DownloadError(
                    code: .remoteChanged,
                    message: "The server says bytes \(range.lowerBound)-\(range.upperBound - 1) do not exist: "
                        + "the remote file got shorter since the download started.",
                    httpStatus: 416
                )
            )
        default:
            throw ResponseValidator.failure(for: response, url: remote.url)
        }

        var writer = RangeWriter(
            lease: lease,
            offset: range.lowerBound,
            askedEnd: range.upperBound,
            bufferSize: self.session.configuration.writeBufferSize,
            session: self.session,
            connection: self.id
        )
        do {
            for try await chunk in response.body {
                guard try await writer.append(chunk) else {
                    // Another connection took over the rest; dropping the body closes this connection.
                    try await writer.finish()
                    return
                }
            }
        } catch let failure as AttemptFailure {
            // Whatever was written stays written: let the writes in flight land before giving up.
            _ = try? await writer.finish()
            throw failure
        } catch {
            try await writer.finish()
            throw Self.classify(error, url: remote.url)
        }
        try await writer.finish()
        if writer.offset < range.upperBound, let rest = self.session.remaining(lease), !rest.isEmpty {
            throw .retryable(
                DownloadError(
                    code: .network,
                    message: "The server ended the response at byte \(writer.offset), before byte "
                        + "\(range.upperBound - 1) it had promised."
                ),
                retryAfter: nil
            )
        }
    }

    static func classify(_ error: any Error, url: URL) -> AttemptFailure {
        if Task.isCancelled { return .fatal(.cancelled) }
        if let failure = error as? AttemptFailure { return failure }
        if let error = error as? DownloadError { return .fatal(error) }
        return .retryable(.network(error, url: url), retryAfter: nil)
    }
}

/// Gathers body bytes into large buffers and writes them at their offset on NIO's thread pool, one write in
/// flight while the next buffer fills, so the network never waits for the disk and the disk never stalls the
/// concurrency pool. Bytes count as written (and may enter the journal) only once their write has finished.
struct PipelinedFileWriter {
    let file: OutputFile
    let bufferSize: Int
    /// How far the bytes up to the given offset may be written (less when the planner wants fewer).
    let claim: (Int64) -> Int64
    /// Called, in order, for every range whose write has finished.
    let written: (Range<Int64>) -> Void
    /// The file offset of the first buffered byte.
    private(set) var offset: Int64
    private var pending: ByteBuffer
    private var spare: ByteBuffer?
    private var inFlight: (write: EventLoopFuture<Void>, range: Range<Int64>)?
    private let eventLoop: any EventLoop

    init(
        file: OutputFile,
        offset: Int64,
        bufferSize: Int,
        claim: @escaping (Int64) -> Int64,
        written: @escaping (Range<Int64>) -> Void
    ) {
        self.file = file
        self.offset = offset
        self.bufferSize = bufferSize
        self.claim = claim
        self.written = written
        self.pending = ByteBufferAllocator().buffer(capacity: bufferSize)
        self.eventLoop = MultiThreadedEventLoopGroup.singleton.next()
    }

    /// Bytes buffered, not yet handed to a write.
    var buffered: Int { self.pending.readableBytes }

    /// Buffers `chunk`, starting a write when the buffer is full. `false` once no more bytes are wanted.
    mutating func append(_ chunk: ByteBuffer) async throws(DownloadError) -> Bool {
        var chunk = chunk
        self.pending.writeBuffer(&chunk)
        if self.pending.readableBytes >= self.bufferSize {
            return try await self.flush()
        }
        return true
    }

    /// Starts writing the buffered bytes that are still wanted, once the previous write has finished.
    /// `false` when fewer were wanted than were buffered.
    @discardableResult
    mutating func flush() async throws(DownloadError) -> Bool {
        guard self.pending.readableBytes > 0 else { return true }
        let end = self.offset + Int64(self.pending.readableBytes)
        let allowed = self.claim(end)
        try await self.finishWriting()
        if allowed > self.offset {
            let slice = self.pending.getSlice(at: self.pending.readerIndex, length: Int(allowed - self.offset))!
            let (file, offset) = (self.file, self.offset)
            let write = NIOThreadPool.singleton.runIfActive(eventLoop: self.eventLoop) {
                try file.write(slice, at: offset)
            }
            self.inFlight = (write, offset..<allowed)
            self.offset = allowed
        }
        // The write holds the old buffer; the next bytes go to the other one, free since its write finished.
        let handedOver = self.pending
        self.pending = self.spare ?? ByteBufferAllocator().buffer(capacity: self.bufferSize)
        self.pending.clear()
        self.spare = handedOver
        return allowed == end
    }

    /// Waits for the write in flight, then reports its bytes as written.
    mutating func finishWriting() async throws(DownloadError) {
        guard let (write, range) = self.inFlight else { return }
        self.inFlight = nil
        do {
            try await write.get()
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .localIO("Cannot write to '\(self.file.path)'", underlying: error)
        }
        self.written(range)
    }

    /// Writes what is buffered and waits until every write has finished.
    @discardableResult
    mutating func finish() async throws(DownloadError) -> Bool {
        let wanted = try await self.flush()
        try await self.finishWriting()
        return wanted
    }
}

/// A ``PipelinedFileWriter`` for one range of a lease: never past what the planner allows, never past what was
/// asked for.
struct RangeWriter {
    let askedEnd: Int64
    private var writer: PipelinedFileWriter

    init(
        lease: SegmentPlanner.LeaseID,
        offset: Int64,
        askedEnd: Int64,
        bufferSize: Int,
        session: TransferSession,
        connection: Int
    ) {
        self.askedEnd = askedEnd
        self.writer = PipelinedFileWriter(
            file: session.file,
            offset: offset,
            bufferSize: bufferSize,
            claim: { session.claim(lease, upTo: $0) },
            written: { session.written($0, connection: connection) }
        )
    }

    /// How far the bytes are claimed (written, or being written).
    var offset: Int64 { self.writer.offset }

    /// Buffers `chunk`. `false` once the lease wants no more bytes.
    mutating func append(_ chunk: ByteBuffer) async throws(AttemptFailure) -> Bool {
        let end = self.writer.offset + Int64(self.writer.buffered) + Int64(chunk.readableBytes)
        guard end <= self.askedEnd else {
            throw .fatal(
                DownloadError(
                    code: .remoteMisbehaved,
                    message: "The server sent more bytes than the range it confirmed (up to byte \(self.askedEnd - 1))."
                )
            )
        }
        do {
            return try await self.writer.append(chunk)
        } catch {
            throw .fatal(error)
        }
    }

    /// Writes what is buffered and waits for every write.
    mutating func finish() async throws(AttemptFailure) {
        do {
            try await self.writer.finish()
        } catch {
            throw .fatal(error)
        }
    }
}

/// Checks responses against what was asked and what the probe found.
enum ResponseValidator {
    /// A `206` must carry exactly the asked range of a file of the probed length and validators.
    static func checkPartial(_ headers: HTTPHeaders, asked: Range<Int64>, remote: RemoteFile) throws(AttemptFailure) {
        try self.checkSameFile(headers, remote: remote)
        guard let header = headers.value("Content-Range"), let contentRange = ContentRange(header) else {
            throw .fatal(
                DownloadError(
                    code: .remoteMisbehaved,
                    message: "The server answered a range request without a valid Content-Range "
                        + "('\(headers.value("Content-Range") ?? "")'); nothing was written."
                )
            )
        }
        if let total = contentRange.completeLength, let length = remote.length, total != length {
            throw .fatal(
                DownloadError(
                    code: .remoteChanged,
                    message: "The remote file is now \(total) bytes long, not \(length): it changed during the "
                        + "download. Start it again."
                )
            )
        }
        guard contentRange.range == asked.lowerBound...(asked.upperBound - 1) else {
            throw .fatal(
                DownloadError(
                    code: .remoteMisbehaved,
                    message: "Asked for bytes \(asked.lowerBound)-\(asked.upperBound - 1), the server sent "
                        + "'\(header)'; nothing was written."
                )
            )
        }
    }

    /// The response's validators and length must match the probe's, where both sides have them.
    static func checkSameFile(_ headers: HTTPHeaders, remote: RemoteFile) throws(AttemptFailure) {
        var differences: [String] = []
        if let expected = remote.etag, let actual = headers.value("ETag"), expected != actual {
            differences.append("ETag \(expected) became \(actual)")
        }
        if let expected = remote.lastModified, let actual = headers.value("Last-Modified"), expected != actual {
            differences.append("Last-Modified '\(expected)' became '\(actual)'")
        }
        if headers.value("Content-Range") == nil, let expected = remote.length,
            let actual = headers.value("Content-Length").flatMap({ Int64(decimal: Substring($0)) }), expected != actual
        {
            differences.append("the length \(expected) became \(actual)")
        }
        guard differences.isEmpty else {
            throw .fatal(
                DownloadError(
                    code: .remoteChanged,
                    message: "The remote file changed during the download (\(differences.joined(separator: "; "))); "
                        + "the parts cannot be combined. Start the download again."
                )
            )
        }
    }

    /// The failure for a status that is neither 200 nor 206.
    static func failure(for response: HTTPClientResponse, url: URL) -> AttemptFailure {
        let error = DownloadError.httpStatus(response.status, url: url)
        guard StatusPolicy.isRetryable(response.status) else { return .fatal(error) }
        let retryAfter = response.headers.value("Retry-After").flatMap {
            RetryPolicy.parseRetryAfter($0, now: Date().timeIntervalSince1970)
        }
        return .retryable(error, retryAfter: retryAfter)
    }
}
