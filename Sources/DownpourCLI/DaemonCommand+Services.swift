import ArgumentParser
import Downpour
import DownpourFleet
import DownpourQueue
import DownpourRPC
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// The daemon assembled from services, as a Hummingbird application with its database is: ``buildDaemon(_:logger:)``
/// makes one `ServiceGroup`, whose run is the daemon's life and whose graceful shutdown (SIGTERM, SIGINT,
/// `aria2.shutdown`) its one teardown, in reverse order of the list:
///
/// ```
/// DownloaderService     the downloads' HTTP clients: shut down last
/// PostgresClient        (a fleet) the database's connections
/// HooksService          the on-download-* programs, for the queue's events until it has stopped
/// the queue             DownloadManager, or the Fleet (its node): pauses the runs, stores the queue
/// RPCServer             the port opens once the queue has started (migrations, the store read, the input file);
///                       given 2.5 s to close its connections once the group stops
/// ShutdownTrigger       aria2.shutdown
/// ```
///
/// Each waits for the one after it to stop, however long the queue takes to pause its runs.
extension DaemonCommand {
    /// Everything the daemon runs with, read from the command line and the configuration file before anything
    /// starts.
    struct Settings: Sendable {
        var server: RPCServerConfiguration
        var stateDirectory: String
        /// Where downloads go when they name no directory.
        var directory: String
        var defaults: DownloadManager.Defaults
        /// `--queue`: the fleet's database.
        var queueURL: String?
        var nodeName: String
        var inputFile: String?
        var hooks: Hooks
        var verbose: Bool
    }

    /// The queue the daemon serves, and how it runs.
    private struct Queue {
        let service: any DownloadQueueService
        /// What it needs while it runs (the fleet's database client): stopped after it.
        let backing: [any Service]
        /// The queue as a service: ``DownloadManager``, or the ``Fleet`` (its node).
        let runner: any Service
        /// Awaited before the port opens; the services' own runs wait for the same start.
        let start: @Sendable () async throws -> Void
        /// Where it is kept, for the line the daemon prints once it listens.
        let place: String
        /// A fleet's node, told where its RPC listens.
        let node: FleetNode?
    }

    /// Why the daemon could not start or stopped: the message for standard error and the exit status.
    struct Failure: Error {
        let message: String
        let status: Int32
    }

    /// The daemon's services as one group. Nothing runs yet; what can be refused before anything runs (the fleet's
    /// URL, the store) is refused here.
    ///
    /// - Throws: ``Failure``.
    static func buildDaemon(_ settings: Settings, logger: Logger) throws(Failure) -> ServiceGroup {
        // The downloads' connections on the same loops as the daemon's tasks (NIO's, see `Main`): a body part read
        // on a loop is handed to the task that waits for it on that loop, not across threads to another group's.
        // The queue and the RPC server on one loop, as aria2 runs on one thread: a read (`tellStatus`, ...) is
        // answered as its request is read, and a change reaches the queue with no hop.
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let makeDownloader = {
            Downloader(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), logger: logger)
        }
        let queue: Queue
        let downloader: Downloader
        if let text = settings.queueURL {
            let url: FleetDatabaseURL
            let store: QueueStore
            do throws(FleetError) {
                url = try FleetDatabaseURL(text)
            } catch {
                throw Failure(message: "--queue: \(error.message)", status: ExitStatus.usage)
            }
            do throws(QueueError) {
                store = try Fleet.openNodeStore(stateDirectory: settings.stateDirectory, nodeName: settings.nodeName)
            } catch {
                throw Failure(message: error.message, status: ExitStatus.localIO)
            }
            downloader = makeDownloader()
            let fleet = Fleet(
                url: url,
                nodeName: settings.nodeName,
                store: store,
                downloader: downloader,
                defaults: settings.defaults,
                eventLoop: eventLoop,
                logger: logger
            )
            queue = Queue(
                service: fleet.node,
                backing: [fleet.client],
                runner: fleet,
                start: { try await fleet.start() },
                place: "PostgreSQL at \(url), shared by the fleet (this node: \(settings.nodeName))",
                node: fleet.node
            )
        } else {
            let store: QueueStore
            do throws(QueueError) {
                store = try QueueStore(directory: settings.stateDirectory)
            } catch {
                throw Failure(message: error.message, status: ExitStatus.localIO)
            }
            downloader = makeDownloader()
            let manager = DownloadManager(
                downloader: downloader,
                store: store,
                defaults: settings.defaults,
                eventLoop: eventLoop,
                logger: logger
            )
            queue = Queue(
                service: manager,
                backing: [],
                runner: manager,
                start: { try await manager.start() },
                place: store.path,
                node: nil
            )
        }
        let shutdown = ShutdownTrigger()
        let server = Self.server(settings, queue: queue, eventLoop: eventLoop, shutdown: shutdown, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: DownloaderService(downloader))]
        services += queue.backing.map { .init(service: $0) }
        if !settings.hooks.isEmpty {
            services.append(.init(service: HooksService(hooks: settings.hooks, queue: queue.service, logger: logger)))
        }
        services += [
            .init(service: queue.runner, failureTerminationBehavior: .gracefullyShutdownGroup),
            .init(
                service: StoppedWithin(server, limit: .milliseconds(2500)),
                failureTerminationBehavior: .gracefullyShutdownGroup
            ),
            .init(service: shutdown, successTerminationBehavior: .gracefullyShutdownGroup),
        ]
        // No limit for the group: the queue pauses its runs and stores itself, and the fleet gives its downloads
        // back, before their database client and the downloader stop.
        return ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
    }

    /// The RPC server, whose port opens once the queue has started and the input file is in.
    private static func server(
        _ settings: Settings,
        queue: Queue,
        eventLoop: any EventLoop,
        shutdown: ShutdownTrigger,
        logger: Logger
    ) -> RPCServer {
        let (service, start, inputFile) = (queue.service, queue.start, settings.inputFile)
        let (address, place, directory, node) = (
            settings.server.bindAddress, queue.place, settings.directory, queue.node
        )
        do {
            return try RPCServer(
                service: service,
                configuration: settings.server,
                eventLoopGroup: eventLoop,
                logger: logger,
                onShutdown: { _ in shutdown.trigger() },
                beforeServerStarts: {
                    try await start()
                    if let inputFile { await Self.load(inputFile, into: service) }
                },
                onServerRunning: { port in
                    let host = address == "0.0.0.0" ? "127.0.0.1" : address
                    var lines = "downpour daemon: JSON-RPC at http://\(host):\(port)/jsonrpc"
                    if address == "0.0.0.0" { lines += " (and every other interface)" }
                    lines += "\ndownpour daemon: dashboard at http://\(host):\(port)/"
                    lines += "\ndownpour daemon: queue in \(place), downloads to \(directory)\n"
                    FileHandle.standardOutput.write(Data(lines.utf8))
                    // The fleet's list of nodes says where to reach this one: its machine's name when it listens on
                    // every interface, loopback otherwise.
                    let reach = address == "0.0.0.0" ? ProcessInfo.processInfo.hostName : host
                    await node?.advertise(address: "\(reach):\(port)")
                }
            )
        } catch {
            // The settings' configuration was validated when they were read.
            preconditionFailure("the RPC server's configuration was refused after it was validated: \(error)")
        }
    }

    /// How an error that stopped the group is told, and the exit status it gives.
    static func failure(_ error: any Error, settings: Settings) -> Failure {
        switch error {
        case let failure as Failure:
            return failure
        case let error as FleetError:
            return Failure(
                message:
                    "the fleet's queue at \(settings.queueURL.flatMap { try? FleetDatabaseURL($0) }.map { "\($0)" } ?? "?") "
                    + "cannot be used: \(error.message) Check that PostgreSQL runs there and lets this user in.",
                status: ExitStatus.network
            )
        case let error as QueueError:
            return Failure(
                message: error.message,
                status: error.reason == .storage ? ExitStatus.localIO : ExitStatus.usage
            )
        default:
            return Failure(message: "stopped by an error: \(error)", status: ExitStatus.internalError)
        }
    }
}

/// The downloads' shared parts (HTTP clients, budgets) for the group's whole life: shut down once every other
/// service has stopped.
private struct DownloaderService: Service {
    let downloader: Downloader

    init(_ downloader: Downloader) {
        self.downloader = downloader
    }

    func run() async {
        try? await gracefulShutdown()
        await self.downloader.shutdown()
    }
}

/// The on-download-* programs for the queue's events, from its start (the downloads an earlier run left active
/// included, as aria2 does) to the last event of its shutdown. Listed before the queue, it is told to stop after
/// the queue has stopped, and waits for that turn: a service that ends before its turn fails the group's shutdown.
private struct HooksService: Service {
    let hooks: Hooks
    let queue: any DownloadQueueService
    let events: AsyncStream<QueueEvent>
    let logger: Logger

    init(hooks: Hooks, queue: any DownloadQueueService, logger: Logger) {
        self.hooks = hooks
        self.queue = queue
        // Listening now, before the queue starts.
        self.events = queue.events
        self.logger = logger
    }

    func run() async {
        // The events end when the queue has shut down (or this task is cancelled).
        await self.hooks.follow(self.events, of: self.queue, logger: self.logger)
        try? await gracefulShutdown()
    }
}

/// A service given `limit` to stop once the group shuts down gracefully, then cancelled: a server whose clients keep
/// their connections open does not hold the daemon's shutdown.
private struct StoppedWithin: Service {
    let service: any Service
    let limit: Duration

    init(_ service: any Service, limit: Duration) {
        self.service = service
        self.limit = limit
    }

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.service.run() }
            group.addTask {
                try? await gracefulShutdown()
                try? await Task.sleep(for: self.limit)
            }
            // The service's end (or its error), or the limit: the other is cancelled.
            try await group.next()
            group.cancelAll()
        }
    }
}
