import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Finds out what is at a URL before anything is downloaded: follows redirects (bounded, loops refused),
/// asks with `HEAD`, and falls back to `GET` with `Range: bytes=0-0` where `HEAD` is refused or says too little.
struct ResourceProbe: Sendable {
    /// What the probe found, and the headers to send (the configured ones and `User-Agent`; ``authorization``
    /// adds credentials and cookies to each request for the URL it goes to).
    struct Outcome: Sendable {
        var remoteFile: RemoteFile
        var headers: [HTTPHeaderField]
        /// The digest of the whole file the server sent (`Repr-Digest` or `Digest`), read only from a response
        /// that describes the full representation: a `HEAD`, or a `200` to a `GET`.
        var serverChecksum: ExpectedChecksum? = nil
    }

    let transport: HTTPTransport
    let configuration: DownloadConfiguration
    /// Credentials and cookies, attached to each request for the URL it goes to.
    let authorization: RequestAuthorization
    let logger: Logger

    func probe(_ url: URL) async throws(DownloadError) -> Outcome {
        var target = Target(url: url, headers: self.initialHeaders(), visited: [])
        if let outcome = try await self.probeWithHead(&target) {
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

    /// What the probe found. The server's digest of the whole file is taken only from a `200` (or a `HEAD`,
    /// which answers as a `200` would); a `206` describes a part.
    private func outcome(_ file: RemoteFile, target: Target, response: HTTPClientResponse? = nil) -> Outcome {
        Outcome(
            remoteFile: file,
            headers: target.headers,
            serverChecksum: response.flatMap { $0.status.code == 200 ? Self.serverChecksum($0.headers) : nil }
        )
    }

    /// Where the probe is: the current URL, the configured headers, and the URLs seen.
    private struct Target {
        var url: URL
        var headers: [HTTPHeaderField]
        var visited: Set<String>
        var redirects = 0

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
            let response: HTTPClientResponse
            do {
                response = try await self.sendWithRetries(method: .HEAD, target: target)
            } catch  where error.code == .httpStatus {
                self.logger.debug("HEAD failed, trying GET", metadata: ["error": "\(error)"])
                return nil
            }
            // Reading the (empty) body to its end hands the connection back to the pool before the first
            // range request is sent, so that request can reuse it instead of opening one more.
            _ = try? await response.body.collect(upTo: 64 * 1024)
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
            return self.outcome(file, target: target, response: response)
        }
    }

    private func probeWithRangedGet(_ target: inout Target) async throws(DownloadError) -> Outcome {
        while true {
            let response = try await self.sendWithRetries(
                method: .GET,
                target: target,
                extraHeaders: [("Range", "bytes=0-0")]
            )
            if try self.followRedirect(response, target: &target) { continue }
            switch response.status.code {
            case 206:
                guard let header = response.headers.value("Content-Range"), let contentRange = ContentRange(header),
                    contentRange.range == 0...0
                else {
                    throw DownloadError(
                        code: .remoteMisbehaved,
                        message: "The server answered a request for byte 0 with Content-Range "
                            + "'\(response.headers.value("Content-Range") ?? "")'."
                    )
                }
                _ = try? await response.body.collect(upTo: 1024)
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: contentRange.completeLength,
                    acceptsRanges: contentRange.completeLength != nil
                )
                return self.outcome(file, target: target)
            case 416:
                // Nothing to range over: the file is empty.
                let length = response.headers.value("Content-Range").flatMap(ContentRange.init)?.completeLength
                _ = try? await response.body.collect(upTo: 64 * 1024)
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: length ?? 0,
                    acceptsRanges: false
                )
                return self.outcome(file, target: target)
            case 200..<300:
                // The server sends the whole file; it is dropped here and fetched again as one stream.
                let length = response.headers.value("Content-Length").flatMap { Int64(decimal: Substring($0)) }
                let file = self.remoteFile(
                    url: target.url,
                    headers: response.headers,
                    length: length,
                    acceptsRanges: false
                )
                return self.outcome(file, target: target, response: response)
            default:
                throw DownloadError.httpStatus(response.status, url: target.url)
            }
        }
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
                .flatMap(SafeFileName.sanitize)
        )
    }

    private static func serverChecksum(_ headers: HTTPHeaders) -> ExpectedChecksum? {
        let reprDigest = headers["Repr-Digest"]
        let digest = headers["Digest"]
        return ServerDigest.expected(
            reprDigest: reprDigest.isEmpty ? nil : reprDigest.joined(separator: ","),
            digest: digest.isEmpty ? nil : digest.joined(separator: ",")
        )
    }

    /// Moves `target` to the redirect's location when `response` is a redirect; `false` otherwise.
    private func followRedirect(_ response: HTTPClientResponse, target: inout Target) throws(DownloadError) -> Bool {
        guard [301, 302, 303, 307, 308].contains(response.status.code) else { return false }
        guard let location = response.headers.value("Location"),
            let next = URL(string: location, relativeTo: target.url)?.absoluteURL
        else {
            throw DownloadError(
                code: .httpStatus,
                message: "The server redirected \(target.url.absoluteString) without a usable Location header.",
                httpStatus: Int(response.status.code)
            )
        }
        guard next.scheme?.lowercased() == "http" || next.scheme?.lowercased() == "https" else {
            throw DownloadError(
                code: .httpStatus,
                message: "The server redirected to '\(location)', which is not an http or https URL.",
                httpStatus: Int(response.status.code)
            )
        }
        target.visited.insert(target.url.absoluteString)
        guard !target.visited.contains(next.absoluteString) else {
            throw DownloadError(
                code: .httpStatus,
                message: "The server redirects in a loop (\(next.absoluteString) again); the file cannot be reached.",
                httpStatus: Int(response.status.code)
            )
        }
        target.redirects += 1
        guard target.redirects <= self.configuration.maximumRedirects else {
            throw DownloadError(
                code: .httpStatus,
                message: "More than \(self.configuration.maximumRedirects) redirects; giving up at "
                    + "\(next.absoluteString).",
                httpStatus: Int(response.status.code)
            )
        }
        // Credentials never reach another origin: ``RequestAuthorization`` leaves them out for `next` if it is one.
        self.logger.debug("Following redirect", metadata: ["to": "\(next.absoluteString)"])
        target.url = next
        return true
    }

    /// Sends a probe request, retrying network failures and the statuses that invite a retry.
    private func sendWithRetries(
        method: HTTPMethod,
        target: Target,
        extraHeaders: [(String, String)] = []
    ) async throws(DownloadError) -> HTTPClientResponse {
        let policy = RetryPolicy(configuration: self.configuration.retry)
        var attempt = 0
        while true {
            attempt += 1
            var retryAfter: Duration?
            let failure: DownloadError
            do {
                let response = try await self.transport.send(
                    method: method,
                    url: target.url,
                    headers: self.authorization.headers(target.headers, for: target.url),
                    extraHeaders: extraHeaders
                )
                self.authorization.cookies?.absorb(response.headers, from: target.url)
                guard StatusPolicy.isRetryable(response.status) else { return response }
                retryAfter = response.headers.value("Retry-After").flatMap {
                    RetryPolicy.parseRetryAfter($0, now: Date().timeIntervalSince1970)
                }
                failure = .httpStatus(response.status, url: target.url)
            } catch {
                if Task.isCancelled { throw .cancelled }
                failure = .network(error, url: target.url)
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
