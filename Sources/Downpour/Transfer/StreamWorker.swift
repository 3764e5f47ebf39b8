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
        let host = self.session.host
        // The probe's `200`, still streaming, is the first attempt, under the permit the probe held (when the
        // host has room for it): its bytes are not asked for again.
        var first = self.session.takeStreamStart()
        if let running = first, running.permit?.move(to: host) != true {
            running.end()
            first = nil
        }
        if let first {
            defer { first.end() }
            return try await self.attempts(first: first)
        }
        try await self.session.acquirePermit(host: host)
        defer { self.session.releasePermit(host: host) }
        return try await self.attempts(first: nil)
    }

    /// Attempts until one brings the whole file, `first` (the probe's response) as the first.
    private func attempts(first: RunningResponse?) async throws(AttemptFailure) -> Int64 {
        var running = first
        var failuresWithoutProgress = 0
        var furthest: Int64 = 0
        while true {
            if Task.isCancelled { throw .fatal(.cancelled) }
            var reached: Int64 = 0
            defer { running = nil }
            do {
                return try await self.attempt(reached: &reached, continuing: running)
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

    private func attempt(
        reached: inout Int64,
        continuing running: RunningResponse?
    ) async throws(AttemptFailure)
        -> Int64
    {
        let session = self.session
        let remote = session.remoteFile
        session.setActive(true, connection: self.id)
        defer { session.setActive(false, connection: self.id) }

        let id = self.id
        let outcome = try await session.fetch(
            .init(
                offset: 0,
                limit: remote.length,
                overflow: {
                    DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server sent more than the \(remote.length ?? 0) bytes it announced."
                    )
                },
                checkHead: { head throws(AttemptFailure) in
                    try Self.check(head, remote: remote)
                },
                claim: { $0 },
                written: { session.streamed(Int64($0.count), connection: id) },
                dropped: { session.dropped($0) }
            ),
            from: running?.url ?? remote.url,
            extraHeaders: [],
            connection: id,
            continuing: running
        )
        let offset = outcome.reached
        reached = offset
        if let failure = outcome.failure { throw failure }
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

    /// Accepts only a `200` for the probed file.
    private static func check(_ head: HTTPResponseHead, remote: RemoteFile) throws(AttemptFailure) {
        guard head.status.code == 200 else {
            if head.status.code == 206 {
                throw .fatal(
                    DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server answered a request for the whole file with 206 Partial Content."
                    )
                )
            }
            throw ResponseValidator.failure(status: head.status, headers: head.headers, url: remote.url)
        }
        try ResponseValidator.checkSameFile(head.headers, remote: remote)
    }
}
