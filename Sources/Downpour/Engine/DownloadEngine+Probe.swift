import Foundation
import Logging

/// The probe stage: who the download says it is, which of its URLs answers, what is there, and what the download
/// produces.
extension DownloadEngine {
    /// What a download produces, decided once, from the probe.
    enum Product: Sendable, Equatable {
        /// A file, saved under its name.
        case file
        /// A Metalink document (``DownloadConfiguration/followsMetalink``): read into memory and parsed, never
        /// saved; its digests describe the files it lists, not the document.
        case metalinkDocument
    }

    /// What the probe stage found.
    struct Probed: Sendable {
        let transport: HTTPTransport
        let authorization: RequestAuthorization
        /// The request's URLs, the first one and its mirrors.
        let urls: [URL]
        /// The index in ``urls`` of the one that answered.
        let index: Int
        let outcome: ResourceProbe.Outcome
        /// Why the URLs before ``index`` failed.
        let failedMirrors: [Int: String]
        let product: Product
        let startedAt: ContinuousClock.Instant

        var remote: RemoteFile { self.outcome.remoteFile }
    }

    /// Probes the request's URLs (``probeFirstWorking(_:probe:budget:)``) and decides what the download produces.
    ///
    /// - Throws: the probe's error; ``DownloadError/Code/remoteChanged`` when the length is not the one expected,
    ///   ``DownloadError/Code/invalidRequest`` for a Metalink document too long to read.
    func probe() async throws(DownloadError) -> Probed {
        let configuration = self.request.configuration
        let transport = try self.downloader.transport(
            for: configuration,
            window: self.request.byteRange.map(ResourceWindow.init),
            logger: self.logger
        )
        let startedAt = ContinuousClock.now
        let authorization = await self.authorization()
        // A `.part` file where this download would save (the name from the URL, when the server may still
        // suggest another) may be resumed: then the probe asks for its first bytes only.
        let path = self.request.destination.fixedPath ?? self.pathFromURL()
        var mayResume = false
        if let path {
            mayResume = (try? await BlockingIO.run { FileOperations.exists(path + ".part") }) ?? false
        }
        let urls = self.request.urls
        // With several connections the file may be split: the probe's response goes on as connection 1's first
        // range, and the other connections open once the probe's is up (as many as the downloader and the host
        // may have at once besides the probe's).
        let limits = self.downloader.connectionBudget.state
        let ahead = min(configuration.connections - 1, limits.perHost - 1, limits.total - 1)
        var connectAhead: ConnectAhead?
        if configuration.connections > 1, ahead > 0, let url = urls.first {
            connectAhead = await transport.prepareConnectAhead(to: url, count: ahead)
        }
        let probe = ResourceProbe(
            transport: transport,
            configuration: configuration,
            authorization: authorization,
            logger: self.logger,
            resuming: mayResume,
            paced: self.pacing.tightestRate != nil,
            connectAhead: connectAhead
        )
        let (index, outcome, failed) = try await self.probeFirstWorking(
            urls,
            probe: probe,
            budget: self.downloader.connectionBudget
        )
        let remote = outcome.remoteFile
        self.logger.info(
            "Probed",
            metadata: [
                "url": "\(remote.url.absoluteString)", "length": "\(remote.length.map(String.init) ?? "unknown")",
                "ranges": "\(remote.acceptsRanges)", "etag": "\(remote.etag ?? "-")",
            ]
        )
        let isMetalink =
            configuration.followsMetalink
            && (remote.contentType.map(Metalink.isMetalink(contentType:)) ?? false
                || Metalink.isMetalink(path: self.request.url.path) || Metalink.isMetalink(path: remote.url.path))
        let product: Product = isMetalink ? .metalinkDocument : .file
        if let length = remote.length {
            do throws(DownloadError) {
                switch product {
                case .file: try self.checkLength(length)
                case .metalinkDocument: try Self.checkMetalinkLength(length, url: remote.url)
                }
            } catch {
                outcome.running?.end()
                throw error
            }
        }
        return Probed(
            transport: transport,
            authorization: authorization,
            urls: urls,
            index: index,
            outcome: outcome,
            failedMirrors: failed,
            product: product,
            startedAt: startedAt
        )
    }

    /// Where a download into a directory saves when the server suggests no name: the URL's last path component.
    private func pathFromURL() -> String? {
        guard case .directory(let directory) = self.request.destination,
            let name = SafeFileName.sanitize(self.request.url.lastPathComponent)
        else { return nil }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// Probes the URLs in order until one answers well: a mirror that is dead or refuses (a connection error, an
    /// error status after the retries) is skipped with a notice. Returns the index of the one probed, its outcome,
    /// and why the ones before it failed. With one URL its error is thrown as it is; when every URL fails, the last
    /// error, naming them all.
    private func probeFirstWorking(
        _ urls: [URL],
        probe: ResourceProbe,
        budget: ConnectionBudget
    ) async throws(DownloadError) -> (Int, ResourceProbe.Outcome, [Int: String]) {
        var failed: [Int: String] = [:]
        var lastError: DownloadError?
        for (index, url) in urls.enumerated() {
            let host = url.host ?? ""
            do {
                try await budget.acquire(host: host)
            } catch {
                throw .cancelled
            }
            do {
                var outcome = try await probe.probe(url)
                // A response still streaming keeps its permit, for connection 1 to go on with.
                if outcome.running != nil {
                    outcome.running?.permit = ConnectionBudget.Permit(budget: budget, host: host)
                } else {
                    budget.release(host: host)
                }
                return (index, outcome, failed)
            } catch {
                budget.release(host: host)
                guard urls.count > 1, SegmentWorker.isMirrorFault(error), !Task.isCancelled else { throw error }
                let reason = SegmentWorker.reason(error)
                failed[index] = reason
                lastError = error
                if index < urls.count - 1 {
                    let notice = "Dropped the mirror \(MirrorSet.key(url)): \(reason) Trying the next URL."
                    self.logger.info("\(notice)")
                    self.hub.emit(.notice(notice))
                }
            }
        }
        var failure = lastError ?? .cancelled
        let summary = urls.enumerated().map { "\(MirrorSet.key($1)) (\(failed[$0] ?? "-"))" }
        failure.message += " Every URL of the file failed: \(summary.joined(separator: "; "))."
        throw failure
    }

    /// Who the download says it is: Basic credentials from the URL's user info, else the configured ones, else
    /// the `.netrc` entry for the URL's host (a file others may read is ignored, with a notice); and the cookies.
    private func authorization() async -> RequestAuthorization {
        let configuration = self.request.configuration
        let url = self.request.url
        var credentials = Credentials(userInfoOf: url) ?? configuration.credentials
        let hasAuthorizationHeader = configuration.headers.contains { $0.name.lowercased() == "authorization" }
        if credentials == nil, !hasAuthorizationHeader, let path = configuration.netrcPath {
            switch await self.downloader.netrcFiles.load(path: path) {
            case .file(let netrc):
                credentials = netrc.credentials(forHost: url.host ?? "")
            case .refused(let reason):
                self.logger.info("\(reason)")
                self.hub.emit(.notice(reason))
            case .missing:
                break
            }
        }
        var authorization = RequestAuthorization(origin: Origin(url), credentials: credentials, cookies: self.cookies)
        // A mirror on another origin gets the credentials of its own URL or its own `.netrc` entry, never the
        // first URL's or the configured ones.
        var netrc: NetrcFile?
        for mirror in self.request.mirrors where Origin(mirror) != authorization.origin {
            var own = Credentials(userInfoOf: mirror)
            if own == nil, let path = configuration.netrcPath {
                if netrc == nil, case .file(let loaded)? = try? await BlockingIO.run({ NetrcFile.load(path: path) }) {
                    netrc = loaded
                }
                own = netrc?.credentials(forHost: mirror.host ?? "")
            }
            if let own, authorization.otherCredentials[Origin(mirror)] == nil {
                authorization.otherCredentials[Origin(mirror)] = own
            }
        }
        return authorization
    }

    /// The digest to verify the download against: the configuration's, else the server's; and a notice when both
    /// are there and disagree.
    func expectedChecksum(server: ExpectedChecksum?) -> (ExpectedChecksum?, String?) {
        guard let given = self.request.configuration.checksum else { return (server, nil) }
        var notice: String?
        if let server, server.checksum.algorithm == given.algorithm, server.checksum.digest != given.digest {
            let source = server.source.description
            notice =
                source.prefix(1).uppercased() + source.dropFirst() + " is \(server.checksum.digest), but the expected "
                + "\(given.algorithm) digest is \(given.digest); the file is checked against the expected one."
        }
        return (ExpectedChecksum(checksum: given, source: .configuration), notice)
    }

    /// Checks a length the server reported against the expected length and the piece digests.
    ///
    /// - Throws: ``DownloadError/Code/remoteChanged`` when they disagree.
    func checkLength(_ length: Int64) throws(DownloadError) {
        let configuration = self.request.configuration
        if let expected = configuration.expectedLength, expected != length {
            throw DownloadError(
                code: .remoteChanged,
                message: "The server's file is \(length) bytes long, but the expected length is \(expected) bytes: "
                    + "it is not the file that was described."
            )
        }
        if let pieces = configuration.pieceChecksums, !pieces.possibleLengths.contains(length) {
            throw DownloadError(
                code: .remoteChanged,
                message: "The server's file is \(length) bytes long, but the \(pieces.count) piece digests of "
                    + "\(pieces.pieceLength) bytes describe \(pieces.possibleLengths.lowerBound)-"
                    + "\(pieces.possibleLengths.upperBound) bytes: it is not the file that was described."
            )
        }
    }

    /// - Throws: ``DownloadError/Code/invalidRequest`` when a Metalink document is longer than
    ///   ``Metalink/maximumDocumentLength``.
    static func checkMetalinkLength(_ length: Int64, url: URL) throws(DownloadError) {
        guard length > Metalink.maximumDocumentLength else { return }
        throw .invalidRequest(
            "The Metalink document at \(url.absoluteString) is \(length) bytes long; at most "
                + "\(Metalink.maximumDocumentLength) bytes are read."
        )
    }
}
