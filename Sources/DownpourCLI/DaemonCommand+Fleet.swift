import ArgumentParser
import Downpour
import DownpourFleet
import DownpourQueue
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension DaemonCommand {
    /// A daemon that is a node of a fleet (`--queue postgresql://…`): its client of the fleet's database, and the
    /// node that serves the RPC.
    struct Fleet {
        let node: FleetNode
        let client: PostgresClient
        let clientTask: Task<Void, Never>
        /// The database's URL without its password.
        let url: FleetDatabaseURL

        /// Connects to the fleet's database, brings its tables up to date, and starts the node (which takes back
        /// at once what it ran before a crash). Every failure is written as a message and thrown as an exit code.
        static func start(
            url text: String,
            nodeName: String,
            stateDirectory: String,
            downloader: Downloader,
            defaults: DownloadManager.Defaults,
            eventLoop: any EventLoop,
            logger: Logger
        ) async throws -> Fleet {
            let url: FleetDatabaseURL
            do {
                url = try FleetDatabaseURL(text)
            } catch {
                writeError("downpour daemon: --queue: \(error.message)")
                await downloader.shutdown()
                throw ExitCode(ExitStatus.usage)
            }
            // The node's own store holds only the runs it has now: the fleet's queue is the record of truth, so it
            // starts empty. One file a node name: two daemons of one machine do not share it.
            let storePath = stateDirectory + "/fleet-node-" + Self.fileName(nodeName) + ".sqlite"
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storePath + suffix) }
            let store: QueueStore
            do {
                store = try QueueStore(path: storePath)
            } catch {
                writeError("downpour daemon: \(error.message)")
                await downloader.shutdown()
                throw ExitCode(ExitStatus.localIO)
            }
            let client = PostgresClient(configuration: url.configuration, backgroundLogger: logger)
            let clientTask = Task { await client.run() }
            let node = FleetNode(
                name: nodeName,
                queue: FleetQueue(client: client, logger: logger),
                downloader: downloader,
                store: store,
                defaults: defaults,
                eventLoop: eventLoop,
                logger: logger
            )
            let fleet = Fleet(node: node, client: client, clientTask: clientTask, url: url)
            // Every statement gives up after a few seconds: a server that cannot be reached is an error at once.
            var failure: String?
            do throws(FleetError) {
                try await FleetSchema.migrate(client, logger: logger)
            } catch {
                failure = error.message
            }
            if failure == nil {
                do throws(QueueError) {
                    try await node.start()
                } catch {
                    failure = error.message
                }
            }
            if let failure {
                writeError(
                    "downpour daemon: the fleet's queue at \(url) cannot be used: \(failure) Check that PostgreSQL "
                        + "runs there and lets this user in."
                )
                await node.shutdown()
                await downloader.shutdown()
                await fleet.stop()
                throw ExitCode(ExitStatus.network)
            }
            return fleet
        }

        /// Closes the database's connections.
        func stop() async {
            self.clientTask.cancel()
            await self.clientTask.value
        }

        private static func fileName(_ name: String) -> String {
            String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." ? $0 : "_" })
        }
    }

    /// A node's name when none is given: the host's name and the RPC port (or the process, for port 0).
    static func defaultNodeName(port: Int) -> String {
        let host = ProcessInfo.processInfo.hostName
        return port == 0 ? "\(host):pid\(getpid())" : "\(host):\(port)"
    }
}
