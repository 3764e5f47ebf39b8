import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Finds out what is at a URL before anything is downloaded: follows redirects (bounded, loops refused), and
/// asks with the download's first request, a `GET` of the first ``firstRequestSize`` bytes (`Range: bytes=0-…`).
/// A file of at most ``firstChunkSize`` bytes that fits in that request comes whole with it and is kept (a split
/// set below 64 KiB asks for less, and the rest comes in ranges); a longer one's `206` is handed over at its head
/// and goes on streaming as the first range of the transfer stage (``Outcome/running``), so no byte is asked for
/// twice. With a conditional `GET` it asks with
/// `HEAD` first (the local file may make the download unnecessary), and falls back to the ranged `GET` where
/// `HEAD` is refused or says too little.
struct ResourceProbe: Sendable {
    /// What the probe found, and the headers to send (the configured ones and `User-Agent`; ``authorization``
    /// adds credentials and cookies to each request for the URL it goes to).
    struct Outcome: Sendable {
        var remoteFile: RemoteFile
        var headers: [HTTPHeaderField]
        /// The digest of the whole file the server sent: `Repr-Digest` from any response (RFC 9530: it covers
        /// the representation, also on a `206`), `Digest` (RFC 3230, implemented both ways) only from a response
        /// that describes or carries the full representation: a `HEAD`, a `200`, a `206` with every byte.
        var serverChecksum: ExpectedChecksum? = nil
        /// The file's first bytes, from the probe's own `GET`, to be written at offset 0. When ``remoteFile`` is
        /// segmentable they are bytes `0..<count` of it (all of them for a small file); otherwise they are the
        /// whole file (a `200` that fitted), and nothing is left to fetch. `nil` when there are none to keep.
        var firstBytes: ByteBuffer? = nil
        /// The probe's `206`, still streaming its first bytes, for the transfer stage to take on; `nil` when the
        /// probe kept its bytes or there are none.
        var running: RunningResponse? = nil
    }

    /// The longest file the probe's `GET` takes in whole; a longer one's `206` goes on streaming.
    static let firstChunkSize: Int64 = 64 * 1024

    /// How many bytes the probe's `GET` asks for: the first range of the download, which its connection goes on
    /// fetching as connection 1 (asking for the rest of its share on the same connection when the share is
    /// longer). With several connections, one split: the plan never cuts a share shorter than two splits, so no
    /// other connection asks for bytes this response carries, and the server sends none that are thrown away (a
    /// first range of 8 MiB came whole for a shorter file while the other connections asked for its later parts
    /// again). With one connection nobody else asks: 8 MiB, far enough for a far link's connection to be past
    /// slow start before it asks again.
    /// Under a bandwidth limit (``paced``) it asks for a paced connection's smallest step
    /// (``Pacing/smallestRequest``): the server writes the range into the socket at once, and what the limit had not
    /// yet read is lost if the process dies.
    var firstRequestSize: Int64 {
        if self.paced { return Pacing.smallestRequest }
        if self.resuming { return Self.firstChunkSize }
        return self.configuration.connections == 1
            ? max(8 * 1024 * 1024, self.configuration.minimumSplitSize) : self.configuration.minimumSplitSize
    }

    let transport: HTTPTransport
    let configuration: DownloadConfiguration
    /// Credentials and cookies, attached to each request for the URL it goes to.
    let authorization: RequestAuthorization
    let logger: Logger
    /// Whether a `.part` file of an earlier run may be resumed: then the first bytes may be on disk already, and the
    /// probe asks for ``firstChunkSize`` bytes only and keeps them, as a probe, rather than a first range that would
    /// ask the server for bytes the download has.
    var resuming = false
    /// Whether a bandwidth limit paces the download: then the requests ask a little at a time.
    var paced = false
    /// The download's other connections, opened once the probe's connection to their origin is up.
    var connectAhead: ConnectAhead? = nil

    func probe(_ url: URL) async throws(DownloadError) -> Outcome {
        var target = Target(url: url, headers: self.initialHeaders(), visited: [])
        // A conditional GET may find the local file new enough: then no byte should be fetched.
        if self.configuration.conditionalGet, let outcome = try await self.probeWithHead(&target) {
            return outcome
        }
        return try await self.probeWithRangedGet(&target)
    }

    /// The configured headers plus `User-Agent`. Credentials (those of the URL's user info among them) and
    /// cookies are added per request by ``authorization``.
    private func initialHeaders() -> [HTTPHeaderField] {
        var headers = self.configuration.headers
        if !headers.contains(where: { $0.name.lowercased() == "user-agent" }) {
            headers.insert(HTTPHeaderField(name: "User-Agent", value: self.configuration.userAgent), at: 0)
        }
        return headers
    }

    /// Where the probe is: the current URL, the configured headers, and the URLs seen.
    private struct Target {
        var url: URL
        var headers: [HTTPHeaderField]
        var visited: Set<String>
        var redirects = 0
        /// The origins that answered in this probe: a refusal from one of them is a restart in progress.
        var reached: Set<String> = []

        init(url: URL, headers: [HTTPHeaderField], visited: Set<String>) {
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
            components?.user = nil
            components?.password = nil
            self.url = components?.url ?? url
            self.headers = headers
            self.visited = visited
        }
    }

    /// `nil` when HEAD did not give enough to go on.
    private func probeWithHead(_ target: inout Target) async throws(DownloadError) -> Outcome? {
        while true {
            let response: ProbeResponse
            do {
                response = try await self.sendWithRetries(method: .HEAD, target: target)
                target.reached.insert(Self.origin(of: target.url))
            } catch  where error.code == .httpStatus {
                self.logger.debug("HEAD failed, trying GET", metadata: ["error": "\(error)"])
                return nil
            }
            if try self.followRedirect(response, target: &target) { continue }
            guard (200..<300).contains(response.status.code) else {
                self.logger.debug("HEAD refused, trying GET", metadata: ["status": "\(response.status.code)"])
                return nil
            }
            guard let length = response.headers.value("Content-Length").flatMap({ Int64(decimal: Substring($0)) })
            else {
                return nil
            }
            let acceptRanges = response.headers.value("Accept-Ranges")?.lowercased()
            // No Accept-Ranges at all is common on servers that do serve ranges: try them, and fall back when a
            // range is answered with 200. Only an explicit "none" rules them out.
            let file = self.remoteFile(
                url: target.url,
                headers: response.headers,
                length: length,
                acceptsRanges: acceptRanges != "none"
            )
            return Outcome(
                remoteFile: file,
                headers: target.headers,
                serverChecksum: Self.serverChecksum(response.headers, coversWholeFile: true)
            )
        }
    }

    /// Probes with the download's first request, `GET` with `Range: bytes=0-(firstRequestSize - 1)`: a `206` says
    /// the length and that ranges work, and its bytes are kept (a file of at most ``firstChunkSize`` bytes) or go on
    /// streaming (``Outcome/running``); a `200` says they do not (its body is kept when it is no larger than the
    /// chunk: then it is the whole file); a `416` means an empty file.
    private func probeWithRangedGet(_ target: inout Target) async throws(DownloadError) -> Outcome {
        let asked = self.firstRequestSize
        while true {
            let response = try await self.sendWithRetries(
                method: .GET,
                target: target,
                extraHeaders: [("Range", "bytes=0-\(asked - 1)")],
                bodyLimit: Int(Self.firstChunkSize),
                handsOverFrom: self.resuming ? nil : Self.firstChunkSize
            )
            target.reached.insert(Self.origin(of: target.url))
            if try self.followRedirect(response, target: &target) { continue }
            switch response.status.code {
            case 206:
                // The bytes must start at 0 and stay within what was asked; a server may send fewer (the
                // connections fetch the rest).
                let header = response.headers.value("Content-Range")
                guard let header, let contentRange = ContentRange(header), let range = contentRange.range,
                    range.lowerBound == 0, range.upperBound < asked
                else {
                    response.running?.cancel()
                    throw Self.badFirstRange(header, asked: asked)
                }
                let total = contentRange.completeLength
                let wanted = range.upperBound + 1
                // A body cut short leaves its bytes to the connections; the probe has learned what it needed.
                let body = response.body
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: total,
                    acceptsRanges: total != nil
                )
                let coversWholeFile = total == wanted
                var checksum = Self.serverChecksum(response.headers, coversWholeFile: coversWholeFile)
                if checksum == nil, !coversWholeFile, response.headers.contains(name: "Digest") {
                    checksum = await self.wholeFileDigest(target: target, file: file)
                }
                var running = response.running
                running?.range = 0..<wanted
                return Outcome(
                    remoteFile: file,
                    headers: target.headers,
                    serverChecksum: checksum,
                    firstBytes: total != nil && body?.readableBytes == Int(wanted) ? body : nil,
                    running: running
                )
            case 416:
                // Nothing to range over: the file is empty.
                let length = response.headers.value("Content-Range").flatMap(ContentRange.init)?.completeLength
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: length ?? 0,
                    acceptsRanges: false
                )
                return Outcome(remoteFile: file, headers: target.headers)
            case 200..<300:
                // The server sends the whole file. One that came whole within the probe's body limit (64 KiB) is
                // kept: the download is done. A longer one (or one of unknown length) goes on streaming as the
                // stream's first attempt (``Outcome/running``); when resuming, it is dropped (closing the
                // connection), for the resume to decide.
                let length = response.headers.value("Content-Length").flatMap { Int64(decimal: Substring($0)) }
                var whole: ByteBuffer?
                if (length ?? 0) <= asked, let body = response.body,
                    length.map({ Int64(body.readableBytes) == $0 }) ?? true
                {
                    whole = body
                }
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: length ?? whole.map { Int64($0.readableBytes) },
                    acceptsRanges: false
                )
                var running = response.running
                running?.range = 0..<(length ?? Int64.max)
                running?.isWholeFile = true
                return Outcome(
                    remoteFile: file,
                    headers: target.headers,
                    serverChecksum: Self.serverChecksum(response.headers, coversWholeFile: true),
                    firstBytes: whole,
                    running: running
                )
            default:
                throw DownloadError.httpStatus(response.status, url: target.url)
            }
        }
    }

    /// Why the probe's `206` cannot be used: a length no disk can hold, or a `Content-Range` (`header`) that is not
    /// bytes from 0 within the `asked` first ones.
    private static func badFirstRange(_ header: String?, asked: Int64) -> DownloadError {
        if let length = header.flatMap(ContentRange.lengthPastAnyFile) {
            return DownloadError(
                code: .remoteMisbehaved,
                message: "The server says the file is \(length) bytes long, more than any disk can hold; nothing "
                    + "was fetched."
            )
        }
        return DownloadError(
            code: .remoteMisbehaved,
            message: "The server answered a request for bytes 0-\(asked - 1) with Content-Range '\(header ?? "")'."
        )
    }

    /// The server's RFC 3230 `Digest` of the whole file, from a `HEAD`, when the probe's `206` carried one that
    /// may cover only its part. `nil` when the `HEAD` fails or describes another version of the file.
    private func wholeFileDigest(target: Target, file: RemoteFile) async -> ExpectedChecksum? {
        guard let response = try? await self.sendWithRetries(method: .HEAD, target: target) else { return nil }
        guard response.status.code == 200 else { return nil }
        do throws(AttemptFailure) {
            try ResponseValidator.checkSameFile(response.headers, remote: file)
        } catch {
            return nil
        }
        return Self.serverChecksum(response.headers, coversWholeFile: true)
    }

    private func remoteFile(url: URL, headers: HTTPHeaders, length: Int64?, acceptsRanges: Bool) -> RemoteFile {
        RemoteFile(
            url: url,
            length: length,
            acceptsRanges: acceptsRanges,
            etag: headers.value("ETag"),
            lastModified: headers.value("Last-Modified"),
            suggestedFilename: headers.value("Content-Disposition")
                .flatMap(ContentDisposition.filename(fromHeader:))
                .flatMap(SafeFileName.sanitize),
            contentType: headers.value("Content-Type")
        )
    }

    /// The server's digest of the whole file: `Repr-Digest` always covers the representation (RFC 9530); the
    /// older `Digest` (RFC 3230) is taken only from a response that describes or carries the whole file.
    private static func serverChecksum(_ headers: HTTPHeaders, coversWholeFile: Bool) -> ExpectedChecksum? {
        let reprDigest = headers["Repr-Digest"]
        let digest = coversWholeFile ? headers["Digest"] : []
        return ServerDigest.expected(
            reprDigest: reprDigest.isEmpty ? nil : reprDigest.joined(separator: ","),
            digest: digest.isEmpty ? nil : digest.joined(separator: ",")
        )
    }

    /// Moves `target` to the redirect's location when `response` is a redirect; `false` otherwise.
    private func followRedirect(_ response: ProbeResponse, target: inout Target) throws(DownloadError) -> Bool {
        let location = response.headers.value("Location")
        let limit = self.configuration.maximumRedirects
        var next: URL?
        do throws(Redirect.Refusal) {
            next = try Redirect.target(status: response.status.code, location: location, from: target.url)
            guard let next else { return false }
            target.visited.insert(target.url.absoluteString)
            try Redirect.check(next, visited: target.visited, hops: target.redirects, limit: limit)
        } catch {
            let message =
                switch error {
                case .noLocation:
                    "The server redirected \(target.url.absoluteString) without a usable Location header."
                case .notHTTP:
                    "The server redirected to '\(location ?? "")', which is not an http or https URL."
                case .loop:
                    "The server redirects in a loop (\(next?.absoluteString ?? "") again); the file cannot be reached."
                case .tooMany:
                    "More than \(limit) redirects; giving up at \(next?.absoluteString ?? "")."
                }
            throw DownloadError(code: .httpStatus, message: message, httpStatus: Int(response.status.code))
        }
        guard let next else { return false }
        target.redirects += 1
        // Credentials never reach another origin: ``RequestAuthorization`` leaves them out for `next` if it is one.
        self.logger.debug("Following redirect", metadata: ["to": "\(next.absoluteString)"])
        target.url = next
        return true
    }

    /// `scheme://host:port` of `url`, the unit a refusal is judged by.
    static func origin(of url: URL) -> String {
        "\(url.scheme ?? "")://\(url.host ?? ""):\(url.port.map(String.init) ?? "")"
    }

    /// Sends a probe request, retrying network failures and the statuses that invite a retry. Where nothing
    /// answers (a refused connection to an origin not reached yet in this download, a name that does not exist, a
    /// certificate that fails verification, a 404 or 410 unless `max-file-not-found` asks again) it ends at once,
    /// as curl, wget and aria2c do: retrying cannot help, and a list of dead links should end as fast as a list of
    /// good ones.
    private func sendWithRetries(
        method: HTTPMethod,
        target: Target,
        extraHeaders: [(String, String)] = [],
        bodyLimit: Int = 64 * 1024,
        handsOverFrom: Int64? = nil
    ) async throws(DownloadError) -> ProbeResponse {
        let policy = RetryPolicy(configuration: self.configuration.retry)
        var attempt = 0
        // A download that resumes has reached its server before (its bytes are on disk): a refusal now is a
        // restart in progress.
        var reached = self.resuming || target.reached.contains(Self.origin(of: target.url))
        var notFound = 0
        while true {
            attempt += 1
            var retryAfter: Duration?
            let failure: DownloadError
            do {
                let response = try await self.transport.probe(
                    method: method,
                    url: target.url,
                    headers: self.authorization.headers(target.headers, for: target.url),
                    extraHeaders: extraHeaders,
                    bodyLimit: bodyLimit,
                    handsOverFrom: handsOverFrom,
                    connectAhead: method == .GET ? self.connectAhead : nil
                )
                self.authorization.cookies?.absorb(response.headers, from: target.url)
                reached = true
                if [404, 410].contains(response.status.code) { notFound += 1 }
                // A 404 or 410 ends at once, unless asked to try it again (`max-file-not-found`: that many).
                let notFoundAgain = notFound > 0 && notFound < self.configuration.retry.fileNotFoundTries
                guard StatusPolicy.isRetryable(response.status) || notFoundAgain else { return response }
                retryAfter = response.headers.value("Retry-After").flatMap {
                    RetryPolicy.parseRetryAfter($0, now: Date().timeIntervalSince1970)
                }
                failure = .httpStatus(response.status, url: target.url)
            } catch {
                if Task.isCancelled { throw .cancelled }
                // A head the download's window refuses (``ResourceWindow``): the server's answer, not the network.
                if let refusal = error as? ResourceWindow.Refusal { throw refusal.error }
                failure = .network(error, url: target.url)
                let cause = NetworkFailure(error)
                if cause == .unknownHost || cause == .certificate
                    || (!reached
                        && cause.endsAtOnce(retryingRefused: self.configuration.retry.retriesRefusedConnections))
                {
                    throw failure
                }
            }
            guard attempt < self.configuration.retry.maximumTries else { throw failure }
            let delay = policy.delay(beforeRetry: attempt, retryAfter: retryAfter)
            self.logger.info(
                "Probe failed, retrying",
                metadata: ["error": "\(failure)", "attempt": "\(attempt)", "delay": "\(delay)"]
            )
            do {
                try await Task.sleep(for: delay)
            } catch {
                throw .cancelled
            }
        }
    }
}

/// Which HTTP statuses are worth another try.
enum StatusPolicy {
    static func isRetryable(_ status: HTTPResponseStatus) -> Bool {
        switch status.code {
        case 408, 429, 500, 502, 503, 504: true
        default: false
        }
    }
}
