import Foundation
import Logging

/// One file being downloaded.
///
/// ```swift
/// let download = try Download(DownloadRequest(url: "https://example.com/big.iso", destination: .file("big.iso")))
/// async let result = download.run()
/// for await event in download.events {
///     if case .progress(let progress) = event { print(progress.completedBytes) }
/// }
/// print(try await result.path)
/// ```
///
/// ``run()`` does the work in the calling task; cancel that task to stop the download. ``events`` reports
/// what happens, for one consumer.
public final class Download: Sendable {
    public let request: DownloadRequest
    /// What happens, as it happens; finishes after `finished` or `failed`.
    public let events: AsyncStream<DownloadEvent>
    private let continuation: AsyncStream<DownloadEvent>.Continuation
    private let logger: Logger

    /// - Parameter logger: receives diagnostics at `info` and below; silent by default.
    public init(_ request: DownloadRequest, logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })) {
        self.request = request
        self.logger = logger
        (self.events, self.continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(1024))
    }

    /// Downloads the file. Call once.
    ///
    /// - Returns: where the file is and what was transferred.
    /// - Throws: a ``DownloadError``; no file is left at the destination path unless the download succeeded.
    @discardableResult
    public func run() async throws(DownloadError) -> DownloadResult {
        do {
            let result = try await self.perform()
            self.continuation.yield(.finished(result))
            self.continuation.finish()
            return result
        } catch {
            let failure = Task.isCancelled && error.code != .localIO ? DownloadError.cancelled : error
            self.continuation.yield(.failed(failure))
            self.continuation.finish()
            throw failure
        }
    }

    private func perform() async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        try configuration.validate()
        if case .file(let path) = self.request.destination {
            try self.checkFree(path)
        }
        let transport = try HTTPTransport(configuration: configuration, logger: self.logger)
        do {
            let result = try await self.perform(with: transport)
            await transport.shutdown()
            return result
        } catch {
            await transport.shutdown()
            throw error
        }
    }

    private func perform(with transport: HTTPTransport) async throws(DownloadError) -> DownloadResult {
        let configuration = self.request.configuration
        let clock = ContinuousClock()
        let startedAt = clock.now
        let probe = ResourceProbe(transport: transport, configuration: configuration, logger: self.logger)
        let outcome = try await probe.probe(self.request.url)
        var remote = outcome.remoteFile
        self.logger.info(
            "Probed",
            metadata: [
                "url": "\(remote.url.absoluteString)", "length": "\(remote.length.map(String.init) ?? "unknown")",
                "ranges": "\(remote.acceptsRanges)", "etag": "\(remote.etag ?? "-")",
            ]
        )

        let path = try self.destinationPath(for: remote)
        try self.checkFree(path)
        let partPath = path + ".part"
        let file = try OutputFile.create(at: partPath, length: remote.isSegmentable ? remote.length : nil)
        var session = TransferSession(
            transport: transport,
            file: file,
            remoteFile: remote,
            headers: outcome.headers,
            configuration: configuration,
            logger: self.logger,
            events: self.continuation
        )
        let plannedConnections = remote.isSegmentable ? configuration.connections : 1
        self.continuation.yield(
            .started(
                DownloadStart(remoteFile: remote, destinationPath: path, connections: plannedConnections, resumedBytes: 0)
            )
        )

        let length: Int64
        do {
            length = try await self.transfer(&session)
            remote = session.remoteFile
            if remote.length == nil {
                try file.truncate(to: length)
            }
            try file.sync()
            file.close()
        } catch {
            file.close()
            FileOperations.remove(partPath)
            throw error
        }

        do {
            try FileOperations.move(partPath, to: path, replacing: configuration.overwrite)
        } catch {
            FileOperations.remove(partPath)
            throw error
        }
        let snapshot = session.snapshot()
        return DownloadResult(
            path: path,
            length: length,
            remoteFile: remote,
            downloadedBytes: snapshot.bytesThisRun,
            elapsed: clock.now - startedAt,
            connectionsUsed: max(1, snapshot.mostActiveConnections)
        )
    }

    /// Downloads in ranges when the server allows, else as one stream; returns the length.
    private func transfer(_ session: inout TransferSession) async throws(DownloadError) -> Int64 {
        do {
            if session.remoteFile.isSegmentable {
                do {
                    return try await self.runSegmented(session)
                } catch .rangesIgnored {
                    self.logger.info("The server ignores ranges; downloading as one stream")
                    var remote = session.remoteFile
                    remote.acceptsRanges = false
                    session = session.replacingRemoteFile(remote)
                }
            }
            return try await self.runStream(session)
        } catch {
            switch error {
            case .fatal(let error), .retryable(let error, _):
                throw error
            case .rangesIgnored:
                throw DownloadError(code: .remoteMisbehaved, message: "The server ignored a range request it had accepted.")
            }
        }
    }

    /// Downloads in ranges over up to N connections; returns the length.
    private func runSegmented(_ session: TransferSession) async throws(AttemptFailure) -> Int64 {
        let configuration = session.configuration
        let length = session.remoteFile.length ?? 0
        session.startSegmented(
            SegmentPlanner(
                length: length,
                connections: configuration.connections,
                minimumSplitSize: configuration.minimumSplitSize
            )
        )
        try await self.withProgressReports(session) { () throws(AttemptFailure) in
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for id in 1...configuration.connections {
                        group.addTask {
                            try await SegmentWorker(id: id, session: session).run()
                        }
                    }
                    try await group.waitForAll()
                }
            } catch let failure as AttemptFailure {
                throw failure
            } catch {
                throw .fatal(.cancelled)
            }
        }
        guard session.isPlanComplete else {
            if Task.isCancelled { throw .fatal(.cancelled) }
            throw .fatal(DownloadError(code: .remoteMisbehaved, message: "The download ended with bytes missing."))
        }
        return length
    }

    /// Downloads as one stream; returns the length.
    private func runStream(_ session: TransferSession) async throws(AttemptFailure) -> Int64 {
        session.startStream()
        var length: Int64 = 0
        try await self.withProgressReports(session) { () throws(AttemptFailure) in
            length = try await StreamWorker(id: 1, session: session).run()
        }
        return length
    }

    /// Runs `body` while a side task sends a progress event every `progressInterval`, and one at the end.
    private func withProgressReports(
        _ session: TransferSession,
        _ body: () async throws(AttemptFailure) -> Void
    ) async throws(AttemptFailure) {
        let reporter = ProgressReporter(session: session)
        let interval = session.configuration.progressInterval
        let ticker = Task {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                reporter.report()
            }
        }
        defer {
            ticker.cancel()
            reporter.report()
        }
        try await body()
    }

    private func destinationPath(for remote: RemoteFile) throws(DownloadError) -> String {
        switch self.request.destination {
        case .file(let path):
            return path
        case .directory(let directory):
            try FileOperations.createDirectory(directory)
            let name =
                remote.suggestedFilename
                ?? SafeFileName.sanitize(self.request.url.lastPathComponent)
                ?? SafeFileName.sanitize(remote.url.lastPathComponent)
                ?? "index.html"
            return directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    private func checkFree(_ path: String) throws(DownloadError) {
        if FileOperations.isDirectory(path) {
            throw .invalidRequest("'\(path)' is a directory; give a file name with -o, or use -d for a directory.")
        }
        if !self.request.configuration.overwrite && FileOperations.exists(path) {
            throw .outputExists(path)
        }
    }
}
