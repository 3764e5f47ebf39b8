import Downpour
import DownpourQueue
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// A daemon's part in a fleet (`--queue postgresql://…`): its client of the fleet's database and its
/// ``FleetNode``, wired as services.
///
/// Run ``services`` in the daemon's `ServiceGroup`, before its RPC server, and ``start()`` before the server's port
/// opens: the fleet's tables are brought up to date, then the node takes back what it ran before a crash. The group
/// stops them in reverse order: the node gives its downloads back while the database's client still runs.
///
/// ```swift
/// let fleet = try Fleet(url: url, nodeName: name, store: store, downloader: downloader, defaults: defaults, logger: logger)
/// let server = try RPCServer(service: fleet.node, beforeServerStarts: { try await fleet.start() })
/// let group = ServiceGroup(services: fleet.services + [server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct Fleet: Service {
    /// The database's URL, without its password when shown.
    public let url: FleetDatabaseURL
    public let client: PostgresClient
    public let node: FleetNode
    private let logger: Logger
    /// The one start: the daemon's server and this service both wait for it.
    private let starting = NIOLockedValueBox<Task<Void, any Error>?>(nil)

    /// The client (not connected until it runs) and the node over `store`, which holds only the runs the node has
    /// now (``openNodeStore(stateDirectory:nodeName:)``).
    public init(
        url: FleetDatabaseURL,
        nodeName: String,
        store: QueueStore,
        downloader: Downloader,
        defaults: DownloadManager.Defaults,
        eventLoop: (any EventLoop)? = nil,
        logger: Logger
    ) {
        self.url = url
        self.logger = logger
        self.client = PostgresClient(configuration: url.configuration, backgroundLogger: logger)
        self.node = FleetNode(
            name: nodeName,
            queue: FleetQueue(client: self.client, logger: logger),
            downloader: downloader,
            store: store,
            defaults: defaults,
            eventLoop: eventLoop,
            logger: logger
        )
    }

    /// The services to run, in this order: the database's client, then this (the node).
    public var services: [any Service] { [self.client, self] }

    /// Brings the fleet's tables up to date, then starts the node. Once: every caller waits for the same start.
    ///
    /// - Throws: ``FleetError`` saying why the fleet cannot be used (the database cannot be reached, refuses this
    ///   user, or is at a later version).
    public func start() async throws(FleetError) {
        let task = self.starting.withLockedValue { starting in
            if let starting { return starting }
            let (client, node, logger) = (self.client, self.node, self.logger)
            let task = Task<Void, any Error> {
                // Every statement gives up after a few seconds: a server that cannot be reached is an error at once.
                try await FleetSchema.migrate(client, logger: logger)
                do throws(QueueError) {
                    try await node.start()
                } catch {
                    throw FleetError(error.message)
                }
            }
            starting = task
            return task
        }
        do {
            try await task.value
        } catch let error as FleetError {
            throw error
        } catch {
            throw FleetError("\(error)")
        }
    }

    /// Starts (``start()``), runs until the group shuts down gracefully, then stops the node: its runs paused and
    /// given back to the fleet.
    public func run() async throws {
        try await self.start()
        try? await gracefulShutdown()
        await self.node.shutdown()
    }

    /// The node's own store, in `stateDirectory`: one file per node name (two daemons of one machine do not share
    /// it), emptied first, for the fleet's queue is the record of truth.
    public static func openNodeStore(stateDirectory: String, nodeName: String) throws(QueueError) -> QueueStore {
        let fileName = String(nodeName.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." ? $0 : "_" })
        let path = stateDirectory + "/fleet-node-" + fileName + ".sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        return try QueueStore(path: path)
    }
}
