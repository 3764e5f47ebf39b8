import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The engine that many downloads share: event loops, HTTP clients with kept-alive connections, and limits
/// across all of its downloads (connections in total and per host, overall bandwidth), which can change while
/// they run.
///
/// ```swift
/// try await withDownloader(configuration: .init(maximumOverallRate: 20 * 1024 * 1024)) { downloader in
///     let first = downloader.download(try DownloadRequest(url: "https://example.com/a.iso"))
///     let second = downloader.download(try DownloadRequest(url: "https://example.com/b.iso"))
///     async let a = first.run()
///     async let b = second.run()
///     _ = try await (a, b)
/// }
/// ```
///
/// Two downloads from the same host reuse each other's idle connections. ``shared`` is a process-wide
/// downloader that is never shut down; ``Download/init(_:logger:)`` uses it. A downloader you make yourself must
/// be shut down with ``shutdown()`` once its downloads have ended; ``withDownloader(eventLoopGroupProvider:configuration:logger:_:)``
/// does that on every path.
public final class Downloader: Sendable {
    /// Limits across all downloads of one downloader.
    public struct Configuration: Sendable, Hashable, Codable {
        /// Connections open at once across all downloads.
        public var maximumConnections: Int
        /// Connections open at once to one host, across all downloads.
        public var maximumConnectionsPerHost: Int
        /// Bytes per second across all downloads; `nil` for no limit.
        public var maximumOverallRate: Int64?

        public init(
            maximumConnections: Int = 128,
            maximumConnectionsPerHost: Int = 16,
            maximumOverallRate: Int64? = nil
        ) {
            self.maximumConnections = maximumConnections
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.maximumOverallRate = maximumOverallRate
        }

        /// Checks the values; the error says which one is wrong.
        ///
        /// - Throws: ``DownloadError/Code/invalidRequest``.
        public func validate() throws(DownloadError) {
            guard self.maximumConnections >= 1 else {
                throw .invalidRequest(
                    "The total number of connections must be at least 1, not \(self.maximumConnections)."
                )
            }
            guard self.maximumConnectionsPerHost >= 1 else {
                throw .invalidRequest(
                    "The number of connections per host must be at least 1, not \(self.maximumConnectionsPerHost)."
                )
            }
            if let rate = self.maximumOverallRate, rate < 1 {
                throw .invalidRequest("The overall rate limit must be at least 1 byte per second, not \(rate).")
            }
        }
    }

    /// Where the event loops come from (AsyncHTTPClient's and Hummingbird's model).
    public enum EventLoopGroupProvider: Sendable {
        /// Downpour's own loops, one per core, shared by every downloader of the process and never shut down.
        /// Body bytes are written to disk on these loops, so a slow disk holds up downloads only, never other
        /// users of NIO.
        case singleton
        /// Loops you own and shut down after the downloader.
        case shared(any EventLoopGroup)
    }

    /// A downloader for the whole process, on ``EventLoopGroupProvider/singleton``, with the default limits.
    /// Its ``shutdown()`` does nothing.
    public static let shared = Downloader(isShared: true)

    /// Downpour's own event loops, one per core.
    static let singletonEventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)

    let logger: Logger
    let clientPool: HTTPClientPool
    let connectionBudget: ConnectionBudget
    let overallLimiter: BandwidthLimiter
    /// The `.netrc` files read so far, while unchanged.
    let netrcFiles = NetrcCache()
    private let isShared: Bool
    private let state: NIOLockedValueBox<State>

    private struct State {
        var configuration: Configuration
        var downloadsMade = 0
    }

    /// - Parameters:
    ///   - eventLoopGroupProvider: whose event loops to use.
    ///   - configuration: the limits at the start; change them later with ``setConfiguration(_:)``. Connection
    ///     limits below 1 count as 1, and an overall rate below 1 as no limit (``Configuration/validate()``
    ///     reports such values).
    ///   - logger: receives diagnostics at `info` and below; silent by default.
    public convenience init(
        eventLoopGroupProvider: EventLoopGroupProvider = .singleton,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(
            eventLoopGroupProvider: eventLoopGroupProvider,
            configuration: configuration,
            logger: logger,
            isShared: false
        )
    }

    private convenience init(isShared: Bool) {
        self.init(
            eventLoopGroupProvider: .singleton,
            configuration: Configuration(),
            logger: Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() }),
            isShared: isShared
        )
    }

    private init(
        eventLoopGroupProvider: EventLoopGroupProvider,
        configuration: Configuration,
        logger: Logger,
        isShared: Bool
    ) {
        let group: any EventLoopGroup
        switch eventLoopGroupProvider {
        case .singleton: group = Self.singletonEventLoopGroup
        case .shared(let shared): group = shared
        }
        // One client per loop, but no more than 16 loops: a machine with many cores does not get a client per core.
        let loops = Array(group.makeIterator().prefix(16))
        self.logger = logger
        self.isShared = isShared
        self.clientPool = HTTPClientPool(eventLoops: loops.isEmpty ? [group.next()] : loops, logger: logger)
        self.connectionBudget = ConnectionBudget(
            total: configuration.maximumConnections,
            perHost: configuration.maximumConnectionsPerHost
        )
        self.overallLimiter = BandwidthLimiter(rate: configuration.maximumOverallRate)
        self.state = NIOLockedValueBox(State(configuration: configuration))
    }

    /// The limits in force.
    public var configuration: Configuration {
        self.state.withLockedValue { $0.configuration }
    }

    /// Changes the limits; running downloads follow at once (a connection already open stays open, but no new
    /// one starts past the new limit).
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for a value out of range; nothing changes then.
    public func setConfiguration(_ configuration: Configuration) throws(DownloadError) {
        try configuration.validate()
        self.state.withLockedValue { $0.configuration = configuration }
        self.connectionBudget.setLimits(
            total: configuration.maximumConnections,
            perHost: configuration.maximumConnectionsPerHost
        )
        self.overallLimiter.setRate(configuration.maximumOverallRate)
    }

    /// A new download of `request`, not yet started: call ``Download/run()``.
    ///
    /// - Parameters:
    ///   - request: what to download and where to put it.
    ///   - id: the identity to give it (one restored from storage, say); a new random one by default.
    ///   - logger: the download's logger; the downloader's by default.
    public func download(_ request: DownloadRequest, id: DownloadID = DownloadID(), logger: Logger? = nil) -> Download {
        Download(request, id: id, downloader: self, logger: logger ?? self.logger)
    }

    /// A download that writes only while `writePermit` allows it: the permit is asked before each journal save, before
    /// anything that removes or rewrites what is on disk, before the file gets its final name, and every quarter
    /// of a second while bytes come (also in a stream, which saves no journal). Once it answers `false`, the
    /// download stops with ``DownloadError/Code/superseded`` and writes nothing more, leaving its `.part` file and
    /// journal as they are (for the writer that took over, say a daemon of a fleet whose lease on the download ran
    /// out). Bytes in flight when it answers may still land in the `.part` file; the journal never claims them.
    ///
    /// - Parameters:
    ///   - writePermit: Asked before each write that matters, and four times a second while bytes come: it should
    ///     answer from memory (a lease's deadline on a monotonic clock, say), not with a round trip.
    public func download(
        _ request: DownloadRequest,
        id: DownloadID = DownloadID(),
        logger: Logger? = nil,
        writePermit: @escaping @Sendable () async -> Bool
    ) -> Download {
        Download(request, id: id, downloader: self, logger: logger ?? self.logger, writePermit: writePermit)
    }

    /// ``download(_:id:logger:)``, with `willFinish` awaited once its run is past its point of no return, before
    /// the file is synced and renamed (tests hold a run there; see ``Download/cancel(keepingPartialFile:)``).
    package func download(
        _ request: DownloadRequest,
        id: DownloadID,
        logger: Logger?,
        willFinish: (@Sendable () async -> Void)?
    ) -> Download {
        Download(request, id: id, downloader: self, logger: logger ?? self.logger, willFinish: willFinish)
    }

    /// ``download(_:id:logger:)``, paced by `limiter` together with the other downloads given it (the segments of
    /// one HLS video share its rate limit), not by a limiter of its own; with `writePermit`, it writes only while
    /// that allows it (``download(_:id:logger:writePermit:)``).
    package func download(
        _ request: DownloadRequest,
        logger: Logger?,
        limiter: BandwidthLimiter,
        writePermit: (@Sendable () async -> Bool)? = nil
    ) -> Download {
        Download(
            request,
            id: DownloadID(),
            downloader: self,
            logger: logger ?? self.logger,
            writePermit: writePermit,
            limiter: limiter
        )
    }

    /// The transport for one download, starting it on the next loop in turn.
    func transport(
        for configuration: DownloadConfiguration,
        window: ResourceWindow? = nil,
        logger: Logger
    ) throws(DownloadError) -> HTTPTransport {
        try self.clientPool.check(configuration)
        let first = self.state.withLockedValue { state in
            state.downloadsMade += 1
            return state.downloadsMade
        }
        return HTTPTransport(
            pool: self.clientPool,
            configuration: configuration,
            first: first,
            window: window,
            logger: logger
        )
    }

    /// Closes the HTTP clients. Downloads still running fail; start no more after this.
    /// Does nothing for ``shared``.
    public func shutdown() async {
        guard !self.isShared else { return }
        await self.clientPool.shutdown()
    }
}

/// Runs `body` with a new ``Downloader`` and shuts the downloader down afterwards, whether `body` returns or
/// throws.
///
/// ```swift
/// let result = try await withDownloader { downloader in
///     try await downloader.download(try DownloadRequest(url: "https://example.com/big.iso")).run()
/// }
/// ```
public func withDownloader<Result>(
    eventLoopGroupProvider: Downloader.EventLoopGroupProvider = .singleton,
    configuration: Downloader.Configuration = Downloader.Configuration(),
    logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() }),
    _ body: (Downloader) async throws -> Result
) async rethrows -> Result {
    let downloader = Downloader(
        eventLoopGroupProvider: eventLoopGroupProvider,
        configuration: configuration,
        logger: logger
    )
    do {
        let result = try await body(downloader)
        await downloader.shutdown()
        return result
    } catch {
        await downloader.shutdown()
        throw error
    }
}
