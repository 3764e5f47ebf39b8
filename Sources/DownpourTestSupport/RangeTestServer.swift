import NIOCore
import NIOHTTP1
import NIOPosix

/// An in-process HTTP/1.1 server for tests and benchmarks that serves one byte array with range support, and
/// misbehaves on request (see ``Fault``).
///
/// It listens on 127.0.0.1 at a random port, on an event loop of its own; call ``shutdown()`` when done.
///
/// Routes:
/// - Any path not listed below serves the content. `HEAD` answers 200 with `Content-Length`,
///   `Accept-Ranges: bytes`, `ETag` and `Last-Modified` (when set) and `Content-Type: application/octet-stream`.
///   `GET` answers 200 with the whole body, or 206 with `Content-Range` for a single `bytes=a-b`, `bytes=a-` or
///   `bytes=-n` range, or 416 with `Content-Range: bytes */total` when the range starts past the end (or the content
///   is empty). Several ranges, another unit or a malformed range get 200 with the whole body, as does a range whose
///   `If-Range` does not match the current `ETag` (strongly) or `Last-Modified`.
/// - `/redirect/N`: 302 to `/redirect/N-1`; `/redirect/0`: 302 to `/file.bin`.
/// - `/loop/a` and `/loop/b`: 302 to each other.
/// - `/redirect-to?url=PERCENT_ENCODED_URL`: 302 to that URL.
/// - `/status/NNN` (200 to 599): that status with a short text body.
/// - `/basic-auth/USER/PASSWORD/REST`: what `REST` gets (any route, `/file.bin` say), when the request carries
///   exactly one `Authorization: Basic` header for USER and PASSWORD (percent-encoded segments); else 401 with
///   `WWW-Authenticate: Basic`.
/// - `/require-cookie/NAME/VALUE/REST`: what `REST` gets, when the `Cookie` headers hold `NAME=VALUE`; else 403.
/// - A path given a file of its own (``serve(_:_:)``): that file, with its type, whole or by one range.
/// - `/set-cookie/PERCENT_ENCODED_SET_COOKIE/REST`: what `REST` gets, with that `Set-Cookie` header added
///   (repeat the prefix for several cookies). `/set-cookie-on-get/PERCENT_ENCODED_SET_COOKIE/REST` adds it to GET
///   answers only.
///
/// Two servers are two origins (their ports differ), so `/redirect-to` from one to the other is a cross-origin
/// redirect; the request log (``statistics()``) shows which headers each one received.
///
/// Connections are kept alive unless the client asks otherwise or a fault closes them; pipelined requests are
/// answered in order; request bodies are ignored.
public struct RangeTestServer: Sendable {
    /// The port the server listens on, on 127.0.0.1.
    public let port: Int

    private let state: ServerState
    private let serverChannel: any Channel
    private let group: MultiThreadedEventLoopGroup

    private init(port: Int, state: ServerState, serverChannel: any Channel, group: MultiThreadedEventLoopGroup) {
        self.port = port
        self.state = state
        self.serverChannel = serverChannel
        self.group = group
    }

    /// Starts serving `content` on 127.0.0.1 at a random port.
    ///
    /// - Parameters:
    ///   - content: The bytes every content path serves. Not copied: a 200 MiB array costs no extra memory.
    ///   - faults: Misbehaviours to inject; they combine.
    ///   - etag: The `ETag` to send, or `nil` for none.
    ///   - lastModified: The `Last-Modified` to send (an HTTP date), or `nil` for none.
    /// - Returns: The running server.
    public static func start(
        content: [UInt8],
        faults: [Fault] = [],
        etag: String? = "\"downpour-test-v1\"",
        lastModified: String? = "Wed, 21 Oct 2026 07:28:00 GMT"
    ) async throws -> RangeTestServer {
        let planner = ResponsePlanner(content: content, faults: faults, etag: etag, lastModified: lastModified)
        let state = ServerState(planner: planner)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                Self.configureConnection(channel, state: state)
            }

        do {
            let serverChannel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = serverChannel.localAddress?.port else {
                try? await serverChannel.close()
                throw ChannelError.unknownLocalAddress
            }
            return RangeTestServer(port: port, state: state, serverChannel: serverChannel, group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func configureConnection(_ channel: any Channel, state: ServerState) -> EventLoopFuture<Void> {
        guard let connectionID = state.connectionOpened(channel) else {
            return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
        }
        channel.closeFuture.whenComplete { _ in
            state.connectionClosed(connectionID)
        }
        do {
            // Framing headers are set by `ResponsePlanner` itself, so that a HEAD answer without a length is
            // never given a chunked terminator.
            var encoderConfiguration = HTTPResponseEncoder.Configuration()
            encoderConfiguration.automaticallySetFramingHeaders = false
            let pipeline = channel.pipeline.syncOperations
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: true,
                withErrorHandling: true,
                withOutboundHeaderValidation: true,
                withEncoderConfiguration: encoderConfiguration
            )
            try pipeline.addHandler(RangeRequestHandler(state: state, connectionID: connectionID))
            return channel.eventLoop.makeSucceededVoidFuture()
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
    }

    /// The URL of `path` on this server: `"http://127.0.0.1:PORT"` + `path`.
    ///
    /// - Parameter path: An absolute path, with a query if wanted; `"/file.bin"` by default.
    public func url(_ path: String = "/file.bin") -> String {
        "http://127.0.0.1:\(self.port)\(path)"
    }

    /// A snapshot of the requests received and bytes sent so far.
    public func statistics() -> Statistics {
        self.state.statistics
    }

    /// Stops sending body bytes, on every connection, until ``releaseBodies()``.
    ///
    /// Requests are still received, logged and answered with their heads; the bodies wait. A client can then not
    /// finish a download, whatever the machine's load: a test can interrupt it at a point of its choosing.
    public func holdBodies() {
        self.state.isHoldingBodies = true
    }

    /// Holds the bodies as ``holdBodies()`` does once `bytes` body bytes have been sent in all (at once when they
    /// have been already), on the server's own count: however late a loaded test looks, the client cannot get more
    /// than about `bytes` (a slice more per connection) before ``releaseBodies()``.
    public func holdBodies(afterSending bytes: Int) {
        self.state.holdBodies(afterSending: bytes)
    }

    /// Holds the bodies as ``holdBodies(afterSending:)`` does, once `bytes` more body bytes than so far have been
    /// sent: a budget for what starts now, whatever was sent before.
    public func holdBodies(afterSendingMore bytes: Int) {
        self.state.holdBodies(afterSendingMore: bytes)
    }

    /// Holds the last `bytes` bytes of the file in every body until ``releaseBodies()``; the bytes before them are
    /// sent. However late a loaded test looks, a download cannot finish, and whatever a client cuts short or
    /// drops, the rest of the file still arrives.
    public func holdBodies(lastBytes bytes: Int) {
        self.state.heldTail = bytes
    }

    /// Sends the bodies that ``holdBodies()`` held back, and every body from now on.
    ///
    /// A throttled response catches up with its rate at once: its pace counts from the start of the response.
    public func releaseBodies() {
        self.state.isHoldingBodies = false
    }

    /// Serves `file` at `path` (an absolute path without a query) from now on, in place of what was there.
    public func serve(_ path: String, _ file: ServedFile) {
        self.state.serve(path, file)
    }

    /// Serves each file at its path (``serve(_:_:)``).
    public func serve(_ files: [String: ServedFile]) {
        for (path, file) in files { self.state.serve(path, file) }
    }

    /// Stops listening, closes every open connection (ending responses in progress) and stops the event loop.
    ///
    /// Safe to call more than once; later calls return at once.
    public func shutdown() async throws {
        guard let openChannels = self.state.beginShutdown() else { return }
        self.serverChannel.close(promise: nil)
        for channel in openChannels {
            channel.close(promise: nil)
        }
        try await self.group.shutdownGracefully()
    }
}
