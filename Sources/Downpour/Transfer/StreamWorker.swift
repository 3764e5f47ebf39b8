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
        var failuresWithoutProgress = 0
        var furthest: Int64 = 0
        while true {
            if Task.isCancelled { throw .fatal(.cancelled) }
            var reached: Int64 = 0
            do {
                return try await self.attempt(reached: &reached)
            } catch .retryable(let error, let retryAfter) {
                failuresWithoutProgress = reached > furthest ? 1 : failuresWithoutProgress + 1
                furthest = max(furthest, reached)
                try await self.session.waitBeforeRetry(
                    connection: self.id,
                    failuresWithoutProgress: failuresWithoutProgress,
                    error: error,
                    retryAfter: retryAfter
                )
                self.session.restartStream()
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

        let session = self.session
        let id = self.id
        var writer = PipelinedFileWriter(
            file: session.file,
            offset: 0,
            bufferSize: session.configuration.writeBufferSize,
            claim: { $0 },
            written: { session.streamed(Int64($0.count), connection: id) }
        )
        do {
            for try await chunk in response.body {
                if let length = remote.length, writer.offset + Int64(writer.buffered + chunk.readableBytes) > length {
                    throw AttemptFailure.fatal(
                        DownloadError(
                            code: .remoteMisbehaved,
                            message: "The server sent more than the \(length) bytes it announced."
                        )
                    )
                }
                _ = try await writer.append(chunk)
            }
            try await writer.finish()
        } catch let failure as AttemptFailure {
            _ = try? await writer.finish()
            throw failure
        } catch let error as DownloadError {
            throw .fatal(error)
        } catch {
            _ = try? await writer.finish()
            reached = writer.offset
            throw SegmentWorker.classify(error, url: remote.url)
        }
        let offset = writer.offset
        reached = offset
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
