import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// The whole file as one plain `GET`, for servers without ranges or without a length. A failed attempt
/// starts again from byte 0: without ranges there is no other way to get the missing part.
struct StreamWorker: Sendable {
    let id: Int
    let session: TransferSession

    /// Returns the number of bytes written.
    func run() async throws(AttemptFailure) -> Int64 {
        let policy = RetryPolicy(configuration: self.session.configuration.retry)
        var failuresWithoutProgress = 0
        var furthest: Int64 = 0
        while true {
            if Task.isCancelled { throw .fatal(.cancelled) }
            var reached: Int64 = 0
            do {
                return try await self.attempt(reached: &reached)
            } catch .retryable(let error, let retryAfter) {
                if Task.isCancelled { throw .fatal(.cancelled) }
                failuresWithoutProgress = reached > furthest ? 1 : failuresWithoutProgress + 1
                furthest = max(furthest, reached)
                guard failuresWithoutProgress < self.session.configuration.retry.maximumTries else {
                    throw .fatal(error)
                }
                let delay = policy.delay(beforeRetry: failuresWithoutProgress, retryAfter: retryAfter)
                self.session.emit(
                    .retrying(
                        connection: self.id,
                        attempt: failuresWithoutProgress,
                        delay: delay,
                        reason: error.message
                    )
                )
                self.session.restartStream()
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    throw .fatal(.cancelled)
                }
            }
        }
    }

    private func attempt(reached: inout Int64) async throws(AttemptFailure) -> Int64 {
        let remote = self.session.remoteFile
        self.session.setActive(true, connection: self.id)
        defer { self.session.setActive(false, connection: self.id) }
        let response: HTTPClientResponse
        do {
            response = try await self.session.transport.send(
                method: .GET,
                url: remote.url,
                headers: self.session.headers
            )
        } catch {
            throw SegmentWorker.classify(error, url: remote.url)
        }
        guard response.status.code == 200 else {
            if response.status.code == 206 {
                throw .fatal(
                    DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server answered a request for the whole file with 206 Partial Content."
                    )
                )
            }
            throw ResponseValidator.failure(for: response, url: remote.url)
        }
        try ResponseValidator.checkSameFile(response.headers, remote: remote)

        let bufferSize = self.session.configuration.writeBufferSize
        var pending = ByteBufferAllocator().buffer(capacity: bufferSize)
        var offset: Int64 = 0
        let file = self.session.file
        func flush() async throws(AttemptFailure) {
            guard pending.readableBytes > 0 else { return }
            let count = Int64(pending.readableBytes)
            if let length = remote.length, offset + count > length {
                throw .fatal(
                    DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server sent more than the \(length) bytes it announced."
                    )
                )
            }
            let (bytes, at) = (pending, offset)
            do {
                try await BlockingIO.run { () throws(DownloadError) in try file.write(bytes, at: at) }
            } catch {
                throw .fatal(error)
            }
            offset += count
            reached = offset
            self.session.streamed(count, connection: self.id)
            pending.clear()
        }
        do {
            for try await var chunk in response.body {
                pending.writeBuffer(&chunk)
                if pending.readableBytes >= bufferSize {
                    try await flush()
                }
            }
        } catch let failure as AttemptFailure {
            throw failure
        } catch {
            try await flush()
            throw SegmentWorker.classify(error, url: remote.url)
        }
        try await flush()
        if let length = remote.length, offset != length {
            throw .retryable(
                DownloadError(
                    code: .network,
                    message: "The server ended the response after \(offset) of \(length) bytes."
                ),
                retryAfter: nil
            )
        }
        return offset
    }
}
