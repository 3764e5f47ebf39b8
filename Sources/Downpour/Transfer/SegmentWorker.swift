import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Why one attempt of a request ended without finishing its range.
enum AttemptFailure: Error {
    /// Worth another try after a pause: a network fault, a dropped connection, a 503.
    case retryable(DownloadError, retryAfter: Duration?)
    /// Final for the whole download.
    case fatal(DownloadError)
    /// The server answered a range request with the whole file: switch to one stream.
    case rangesIgnored
    /// The connection was judged too slow and closed; a new one continues the range at once.
    case slow(SlowConnectionDetector.Verdict)
    /// A mirror redirected the request there (only with several URLs: one URL is followed by the probe).
    case redirected(URL)
}

/// One connection of a segmented download: takes a range from the planner, fetches it with one `GET` and
/// `Range` from its mirror, writes it at its offset, retries from the last written byte, and asks for more until
/// none is left. When its mirror fails for good (and others are left), the mirror is dropped, the range goes back
/// to the planner, and the connection goes on with another mirror.
struct SegmentWorker: Sendable {
    let id: Int
    let session: TransferSession

    func run() async throws(AttemptFailure) {
        var takesOver = true
        // Connection 1 begins with the probe's response, still streaming, under the permit the probe held, counted
        // for the host it comes from (a redirect's); one from another mirror than connection 1's, or whose host has
        // no room, is ended.
        if let (lease, running) = self.session.acquireProbeRange(connection: self.id) {
            defer {
                self.session.release(lease.id, connection: self.id)
                running.end()
            }
            let source = self.session.mirror(forConnection: self.id)
            if source.url == running.url, running.permit?.move(to: source.host) ?? false {
                takesOver = try await self.fetch(lease.id, from: source, continuing: running)
            }
        }
        while true {
            let source = self.session.mirror(forConnection: self.id)
            // A permit first, then work: a connection waiting for a permit holds no range another could fetch.
            try await self.session.acquirePermit(host: source.host)
            if let lease = self.session.acquire(connection: self.id, takesOver: takesOver) {
                defer {
                    self.session.release(lease.id, connection: self.id)
                    self.session.releasePermit(host: source.host)
                }
                takesOver = try await self.fetch(lease.id, from: source)
                continue
            }
            self.session.releasePermit(host: source.host)
            // Nothing to take now; a connection still busy may yet turn out slow enough to race.
            guard takesOver, self.session.mayTakeLater else { return }
            do {
                try await Task.sleep(for: Self.racePollInterval)
            } catch {
                return
            }
        }
    }

    /// How often an idle connection checks whether a busy one has become worth racing.
    static let racePollInterval = Duration.milliseconds(50)

    /// Fetches what is left of `lease` from `source`, retrying as the configuration allows. `false` when the last
    /// request was cut short because another connection took the rest over (which closed this connection).
    /// Returns early, leaving the rest to the planner, when `source` is dropped.
    private func fetch(
        _ lease: SegmentPlanner.LeaseID,
        from source: TransferState.Source,
        continuing running: RunningResponse? = nil
    ) async throws(AttemptFailure)
        -> Bool
    {
        // The probe's response, for the first attempt only.
        var running = running
        var failuresWithoutProgress = 0
        var restartsBelowFloor = 0
        var connectionKept = true
        while let range = self.session.remaining(lease), !range.isEmpty {
            if Task.isCancelled { throw .fatal(.cancelled) }
            if source.hasMirrors, !self.session.isLive(mirror: source.index) { return true }
            do {
                defer { running = nil }
                connectionKept = try await self.attempt(lease, range: range, from: source, continuing: running)
            } catch .fatal(let error) where Self.isMirrorFault(error) {
                guard source.hasMirrors else { throw .fatal(error) }
                guard self.session.dropMirror(source.index, because: Self.reason(error)) else {
                    throw .fatal(self.session.lastMirrorFailed(error))
                }
                return true
            } catch .redirected(let location) {
                // Followed at once by the connection's next request, with the range back in the planner.
                guard let failure = self.session.redirectMirror(source.index, from: source.url, to: location) else {
                    return true
                }
                guard self.session.dropMirror(source.index, because: failure) else {
                    throw .fatal(
                        self.session.lastMirrorFailed(
                            DownloadError(code: .httpStatus, message: "\(MirrorSet.key(source.url)): \(failure)")
                        )
                    )
                }
                return true
            } catch .rangesIgnored where source.hasMirrors {
                let error = DownloadError(
                    code: .remoteMisbehaved,
                    message: "\(source.url.absoluteString) answered a range request with the whole file."
                )
                if self.session.dropMirror(source.index, because: "it ignores range requests.") { return true }
                // The last mirror: the primary's file can still come as one stream; another's cannot.
                guard source.index == self.session.mirrors.primary else {
                    throw .fatal(self.session.lastMirrorFailed(error))
                }
                throw .rangesIgnored
            } catch .slow(let slow) {
                restartsBelowFloor = slow.belowFloor ? restartsBelowFloor + 1 : 0
                let speed = ByteCount.formatRate(slow.speed)
                if slow.belowFloor, restartsBelowFloor >= self.session.configuration.retry.maximumTries {
                    throw .fatal(
                        DownloadError(
                            code: .network,
                            message: "Connection \(self.id) stayed below the lowest speed of "
                                + "\(ByteCount.formatRate(slow.reference)) (\(speed)) after \(restartsBelowFloor) "
                                + "restarts. Try again later, or with a lower floor."
                        )
                    )
                }
                let reason =
                    slow.belowFloor
                    ? "\(speed) is below the lowest speed of \(ByteCount.formatRate(slow.reference))"
                    : "\(speed) against a median of \(ByteCount.formatRate(slow.reference)) on the other connections"
                self.session.logger.info(
                    "Restarting a slow connection",
                    metadata: ["connection": "\(self.id)", "reason": "\(reason)"]
                )
                self.session.noteRestart(connection: self.id)
                self.session.emit(
                    .restarted(connection: self.id, reason: "restarted on a new connection: \(reason).")
                )
            } catch .retryable(let error, let retryAfter) {
                let progressed = (self.session.remaining(lease)?.lowerBound ?? range.upperBound) > range.lowerBound
                failuresWithoutProgress = progressed ? 1 : failuresWithoutProgress + 1
                self.session.noteRestart(connection: self.id)
                if source.hasMirrors, failuresWithoutProgress >= self.session.configuration.retry.maximumTries {
                    // Out of tries on this mirror: the others take its work, unless it is the last.
                    let reason = Self.reason(error, tries: failuresWithoutProgress)
                    guard self.session.dropMirror(source.index, because: reason) else {
                        throw .fatal(self.session.lastMirrorFailed(error))
                    }
                    return true
                }
                try await self.session.waitBeforeRetry(
                    connection: self.id,
                    failuresWithoutProgress: failuresWithoutProgress,
                    error: error,
                    retryAfter: retryAfter
                )
            }
        }
        return connectionKept
    }

    /// One request for `range`. Returns when the range is written (`true`) or another connection took the
    /// rest over (`false`: ending the request early closed the connection).
    private func attempt(
        _ lease: SegmentPlanner.LeaseID,
        range: Range<Int64>,
        from source: TransferState.Source,
        continuing probeResponse: RunningResponse?
    ) async throws(AttemptFailure) -> Bool {
        let session = self.session
        // A mirror's validators are known once its first response was checked (or from an earlier run).
        let remote = source.hasMirrors ? session.remoteFile(forMirror: source.index) : source.remote
        // Under a bandwidth limit a request asks for a tenth of a second of reading, the next one on the same
        // connection: what the server sent ahead is then small when the process dies.
        let asked =
            probeResponse == nil ? range.lowerBound..<session.requestEnd(for: range, connection: self.id) : range
        var extraHeaders = [("Range", "bytes=\(asked.lowerBound)-\(asked.upperBound - 1)")]
        if let validator = remote.ifRangeValidator {
            extraHeaders.append(("If-Range", validator))
        }
        // Connection 1's first range may be on its way already: the probe's response, checked by the probe, from
        // this mirror (`run()` compared the URLs), its lease beginning at the response's first byte
        // (`acquireProbeRange`), and this the lease's first attempt.
        let running = probeResponse
        assert(running.map { $0.range.lowerBound == range.lowerBound } ?? true)
        // The last byte the response carries, past which nothing may land.
        let end = running?.range.upperBound ?? asked.upperBound
        session.setActive(true, connection: self.id, continuing: running != nil)
        defer { session.setActive(false, connection: self.id) }

        let id = self.id
        let outcome = try await session.fetch(
            .init(
                offset: range.lowerBound,
                limit: end,
                overflow: {
                    DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server sent more bytes than the range it confirmed (up to byte "
                            + "\(end - 1))."
                    )
                },
                checkHead: { head throws(AttemptFailure) in
                    if running == nil { session.headArrived(connection: id) }
                    if source.hasMirrors, let location = try Self.redirect(head, from: source.url) {
                        throw .redirected(location)
                    }
                    try Self.check(head, asked: asked, remote: remote) { headers throws(AttemptFailure) in
                        try session.checkPartial(headers, asked: asked, mirror: source.index)
                    }
                },
                claim: { session.claim(lease, upTo: $0) },
                written: { session.written($0, connection: id) },
                dropped: { session.dropped($0) }
            ),
            from: source.url,
            extraHeaders: extraHeaders,
            connection: id,
            continuing: running
        )
        if let failure = outcome.failure { throw failure }
        let (reached, stopped) = (outcome.reached, outcome.stopped)
        // The probe's response may end before the lease does: the rest is asked for on the same connection.
        if reached < min(end, range.upperBound), let rest = session.remaining(lease), !rest.isEmpty {
            throw .retryable(
                DownloadError(
                    code: .network,
                    message: "The server ended the response at byte \(reached), before byte "
                        + "\(min(end, range.upperBound) - 1) it had promised."
                ),
                retryAfter: nil
            )
        }
        return !stopped
    }

    /// Whether `error`, from a response or a connection, says something about the mirror rather than about this
    /// machine or the download: such an error drops a mirror when others are left.
    static func isMirrorFault(_ error: DownloadError) -> Bool {
        [.httpStatus, .network, .remoteChanged, .remoteMisbehaved].contains(error.code)
    }

    /// Why a mirror is dropped, as a sentence.
    static func reason(_ error: DownloadError, tries: Int? = nil) -> String {
        var message = error.message
        if !message.hasSuffix(".") { message += "." }
        guard let tries else { return message }
        return "\(tries) tries failed, the last with: \(message)"
    }

    /// Accepts only a `206` for exactly `asked` of the probed file, as `checkPartial` checks it.
    private static func check(
        _ head: HTTPResponseHead,
        asked range: Range<Int64>,
        remote: RemoteFile,
        checkPartial: (HTTPHeaders) throws(AttemptFailure) -> Void
    ) throws(AttemptFailure) {
        switch head.status.code {
        case 206:
            try checkPartial(head.headers)
        case 200:
            try ResponseValidator.checkSameFile(head.headers, remote: remote)
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
            throw ResponseValidator.failure(status: head.status, headers: head.headers, url: remote.url)
        }
    }

    /// Where a redirect (see ``Redirect``) of a request to `url` points; `nil` when `head` is none.
    ///
    /// - Throws: a fatal ``DownloadError/Code/httpStatus`` when it has no usable `Location`.
    static func redirect(_ head: HTTPResponseHead, from url: URL) throws(AttemptFailure) -> URL? {
        do throws(Redirect.Refusal) {
            return try Redirect.target(status: head.status.code, location: head.headers.value("Location"), from: url)
        } catch {
            let reason = MirrorSet.reason(error, location: nil, limit: 0)
            throw .fatal(DownloadError(code: .httpStatus, message: reason, httpStatus: Int(head.status.code)))
        }
    }

    static func classify(_ error: any Error, url: URL) -> AttemptFailure {
        if Task.isCancelled { return .fatal(.cancelled) }
        if let failure = error as? AttemptFailure { return failure }
        if let slow = error as? SlowConnectionDetector.Verdict { return .slow(slow) }
        if let error = error as? DownloadError { return .fatal(error) }
        return .retryable(.network(error, url: url), retryAfter: nil)
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
    static func failure(status: HTTPResponseStatus, headers: HTTPHeaders, url: URL) -> AttemptFailure {
        let error = DownloadError.httpStatus(status, url: url)
        guard StatusPolicy.isRetryable(status) else { return .fatal(error) }
        let retryAfter = headers.value("Retry-After").flatMap {
            RetryPolicy.parseRetryAfter($0, now: Date().timeIntervalSince1970)
        }
        return .retryable(error, retryAfter: retryAfter)
    }
}
