import AsyncHTTPClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The HTTP clients of one ``Downloader``: the one place that builds AsyncHTTPClient clients.
///
/// There is one `HTTPClient` per event loop, each with that loop alone as its group, for every distinct TLS,
/// time-out and proxy setting the requests ask for (almost always one). The proxy is that of one request: a
/// download whose requests take different proxies (or none) by their URLs uses several sets of clients. A
/// download's connection *i* always uses the same
/// client (see ``HTTPTransport``), so every connection of a client lives on the client's loop: a request never
/// lands on a connection of another loop (which would cost a thread hop for every read), and a finished
/// request leaves its connection idle in its client's pool for the next request of that loop, of this download
/// or of another one to the same host (keep-alive).
final class HTTPClientPool: Sendable {
    private struct Key: Hashable {
        var tls: DownloadConfiguration.TLS
        var timeouts: DownloadConfiguration.Timeouts
        var route: ProxyRoute?
    }

    private struct State {
        var clients: [Key: [HTTPClient]] = [:]
        /// One relay per SOCKS5 proxy with a user name (see ``SOCKS5AuthRelay``).
        var relays: [ProxyURL: SOCKS5AuthRelay] = [:]
        var isShutDown = false
        /// Per origin: requests running, and when one last started or ended (or connections were opened ahead).
        var activity: [Origin: (running: Int, last: NIODeadline, ended: Int)] = [:]
        /// How many origins ``activity`` may hold before the quiet ones are dropped: twice as many as were left
        /// after the last time, so that dropping them costs each new origin a constant share.
        var pruneAt = 64
    }

    /// How long a connection may stay idle in a client's pool before it is closed.
    static let idleTimeout = TimeAmount.seconds(60)

    let eventLoops: [any EventLoop]
    private let state = NIOLockedValueBox(State())
    private let logger: Logger

    /// - Parameter eventLoops: the loops to spread clients over; at least one.
    init(eventLoops: [any EventLoop], logger: Logger) {
        precondition(!eventLoops.isEmpty, "HTTPClientPool needs at least one event loop")
        self.eventLoops = eventLoops
        self.logger = logger
    }

    /// The clients for `configuration`'s TLS and time-out settings and the proxy `route`, one per event loop,
    /// made on first use, and the relay they reach the proxy through, if any.
    func clients(
        for configuration: DownloadConfiguration,
        route: ProxyRoute?
    ) async throws(DownloadError) -> (clients: [HTTPClient], relay: SOCKS5AuthRelay?) {
        let key = Key(tls: configuration.tls, timeouts: configuration.timeouts, route: route)
        var relay: SOCKS5AuthRelay?
        if let route, route.needsRelay {
            relay = try await self.relay(to: route.proxy, configuration: configuration)
        }
        if let clients = self.state.withLockedValue({ $0.clients[key] }) { return (clients, relay) }
        var clientConfiguration = try Self.clientConfiguration(for: configuration)
        if let route {
            clientConfiguration.proxy =
                relay.map { HTTPClient.Configuration.Proxy.socksServer(host: "127.0.0.1", port: $0.port) }
                ?? route.clientProxy
            clientConfiguration.dnsOverride = route.dnsOverride
        }
        let clients: [HTTPClient]? = self.state.withLockedValue { state in
            guard !state.isShutDown else { return nil }
            if let clients = state.clients[key] { return clients }
            let clients = self.eventLoops.map { HTTPClient(eventLoopGroup: $0, configuration: clientConfiguration) }
            state.clients[key] = clients
            return clients
        }
        guard let clients else {
            throw DownloadError(code: .invalidRequest, message: "The downloader has been shut down.")
        }
        return (clients, relay)
    }

    /// The relay to the SOCKS5 proxy `proxy`, started on first use.
    private func relay(
        to proxy: ProxyURL,
        configuration: DownloadConfiguration
    ) async throws(DownloadError) -> SOCKS5AuthRelay {
        if let relay = self.state.withLockedValue({ $0.relays[proxy] }) { return relay }
        let started = try await SOCKS5AuthRelay.start(
            upstream: proxy,
            connectTimeout: configuration.timeouts.connect,
            on: self.eventLoops[0]
        )
        let (relay, isShutDown) = self.state.withLockedValue { state in
            if let relay = state.relays[proxy] { return (relay, state.isShutDown) }
            if !state.isShutDown { state.relays[proxy] = started }
            return (started, state.isShutDown)
        }
        if relay !== started || isShutDown { await started.close() }
        guard !isShutDown else {
            throw DownloadError(code: .invalidRequest, message: "The downloader has been shut down.")
        }
        return relay
    }

    /// Notes that a request to `origin` starts (`+1`) or ends (`-1`).
    func noteRequest(to origin: Origin, _ change: Int) {
        self.state.withLockedValue { state in
            let running = (state.activity[origin]?.running ?? 0) + change
            let ended = (state.activity[origin]?.ended ?? 0) + (change < 0 ? 1 : 0)
            state.activity[origin] = (max(0, running), .now(), ended)
        }
    }

    /// Whether connections to `origin` may be opened ahead of requests: only when none can be idle in a pool,
    /// that is when no request to it ran within the connect time-out and the idle time-out (an idle connection
    /// would take the placeholder request that opens a connection, and send it; a connection may come up as late
    /// as the connect time-out after the request it was opened for, and then idle). A `true` counts as
    /// activity, so that downloads started together open connections ahead once.
    func mayConnectAhead(to origin: Origin, connectTimeout: TimeAmount) -> Bool {
        self.state.withLockedValue { state in
            let now = NIODeadline.now()
            let window = connectTimeout + Self.idleTimeout + .seconds(1)
            // An origin quiet for longer than the window says nothing any more.
            func isRecent(_ activity: (running: Int, last: NIODeadline, ended: Int)) -> Bool {
                activity.running > 0 || now - activity.last < window
            }
            if let activity = state.activity[origin], isRecent(activity) {
                return false
            }
            state.activity[origin] = (0, now, 0)
            // A daemon that runs for months, or a list of 10,000 hosts, keeps only the recent origins, dropped
            // now and then rather than looked through at every download.
            if state.activity.count >= state.pruneAt {
                state.activity = state.activity.filter { isRecent($0.value) }
                state.pruneAt = max(64, 2 * state.activity.count)
            }
            return true
        }
    }

    /// Whether connections readied for `origin` by ``mayConnectAhead(to:connectTimeout:)`` may still be opened: no
    /// request to it has ended since (which could have left a connection idle in a pool, for a placeholder to
    /// take and send), and only one runs (the probe's).
    func mayStillConnectAhead(to origin: Origin) -> Bool {
        self.state.withLockedValue { state in
            guard let activity = state.activity[origin] else { return false }
            return activity.ended == 0 && activity.running <= 1
        }
    }

    /// Checks what making clients for `configuration` would check (the CA file, not shut down), without making
    /// any: which clients a download needs depends on the proxy of each of its requests.
    func check(_ configuration: DownloadConfiguration) throws(DownloadError) {
        try Self.checkTrustRoots(configuration.tls)
        guard !self.state.withLockedValue({ $0.isShutDown }) else {
            throw DownloadError(code: .invalidRequest, message: "The downloader has been shut down.")
        }
    }

    /// The one setting of a client that can be wrong before any request: the CA file must be readable.
    private static func checkTrustRoots(_ tls: DownloadConfiguration.TLS) throws(DownloadError) {
        if let path = tls.trustedCertificatesPath, !FileManager.default.isReadableFile(atPath: path) {
            throw .invalidRequest("The CA certificate file '\(path)' does not exist or cannot be read.")
        }
    }

    private static func clientConfiguration(
        for configuration: DownloadConfiguration
    ) throws(DownloadError) -> HTTPClient.Configuration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if !configuration.tls.verifyCertificates {
            tls.certificateVerification = .none
        }
        try Self.checkTrustRoots(configuration.tls)
        if let path = configuration.tls.trustedCertificatesPath {
            tls.trustRoots = .file(path)
        }
        var pool = HTTPClient.Configuration.ConnectionPool(idleTimeout: Self.idleTimeout)
        // The Downloader's connection budget decides how many requests run at once; the pool only keeps them.
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        // Our own retry policy decides about failed connections, with its back-off and its count.
        pool.retryConnectionEstablishment = false
        var clientConfiguration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            // No read time-out here: it would count the time Downpour holds a part back; each request watches its
            // own (``IdleReadTimed``).
            timeout: .init(connect: TimeAmount(configuration.timeouts.connect)),
            connectionPool: pool,
            decompression: .disabled
        )
        // Many connections is the point: HTTP/2 would multiplex them all onto one TCP connection.
        clientConfiguration.httpVersion = .http1Only
        return clientConfiguration
    }

    func shutdown() async {
        let (clients, relays) = self.state.withLockedValue { state in
            state.isShutDown = true
            defer { (state.clients, state.relays) = ([:], [:]) }
            return (state.clients.values.flatMap { $0 }, Array(state.relays.values))
        }
        for client in clients {
            do {
                try await client.shutdown()
            } catch {
                self.logger.debug("HTTP client shutdown failed", metadata: ["error": "\(error)"])
            }
        }
        for relay in relays {
            await relay.close()
        }
    }
}

/// Connections a download opens ahead of its ranges' requests (``HTTPTransport/prepareConnectAhead(to:count:)``):
/// AsyncHTTPClient opens a connection only for a request, so each gets a placeholder request that is cancelled on
/// its client's event loop at once, before the connection can be established (that loop runs both); the
/// connection, established, waits idle in the pool, and the next request on that loop takes it. A server that
/// turns out to refuse ranges loses nothing: the connections close after the pool's idle time-out.
final class ConnectAhead: Sendable {
    struct Placeholders: Sendable {
        var client: HTTPClient
        var loop: any EventLoop
        var count: Int
    }

    let origin: Origin
    /// What each placeholder asks for (it never goes out), made when the connections open: a probe that never
    /// connects (a dead link) makes none.
    private let url: URL
    private let placeholders: [Placeholders]
    private let logger: Logger
    private let isOpened = NIOLockedValueBox(false)

    /// Whether nothing since readying them could have left a connection idle for a placeholder to take.
    private let mayStillOpen: @Sendable () -> Bool

    init(
        origin: Origin,
        url: URL,
        placeholders: [Placeholders],
        mayStillOpen: @escaping @Sendable () -> Bool,
        logger: Logger
    ) {
        self.origin = origin
        self.url = url
        self.placeholders = placeholders
        self.mayStillOpen = mayStillOpen
        self.logger = logger
    }

    /// Whether ``open()`` was called.
    var isOpen: Bool { self.isOpened.withLockedValue { $0 } }

    /// Opens the connections, once; called on the probe's event loop when its request head went out (its
    /// connection is busy until the answer has come, so no placeholder can take it).
    func open() {
        guard
            !self.isOpened.withLockedValue({ opened in
                defer { opened = true }
                return opened
            })
        else { return }
        // Another request to the origin ended meanwhile (another download's, or a probe's failed first try): a
        // connection may be idle in a pool, and a placeholder would take it and send. The ranges open their own.
        guard self.mayStillOpen(), let request = try? HTTPClient.Request(url: self.url.absoluteString, method: .HEAD)
        else { return }
        for placeholders in self.placeholders {
            let (client, loop, logger) = (placeholders.client, placeholders.loop, self.logger)
            let start = {
                // All placeholders first: each finds as many connections starting as requests waiting, and the
                // pool starts one more for it; then every one of them is cancelled before the loop moves on.
                let tasks = (0..<placeholders.count).map { _ in
                    client.execute(
                        request: request,
                        delegate: ConnectAheadDelegate(),
                        eventLoop: .delegate(on: loop),
                        deadline: nil,
                        logger: logger
                    )
                }
                for task in tasks { task.cancel() }
            }
            // Never inside the probe's own callback: after it, on the loop's next turn, before anything the server
            // may send (its answer needs the head first) is read.
            loop.execute(start)
        }
        self.logger.debug(
            "Connecting ahead",
            metadata: ["connections": "\(self.placeholders.map(\.count).reduce(0, +))", "origin": "\(self.origin)"]
        )
    }
}

/// One download's view of the ``HTTPClientPool``: connection *i* uses client *(first + i)* mod the number of
/// clients, so the connections of one download spread over the loops, and downloads started one after another
/// begin on different loops. The set of clients is chosen for each request by the proxy its URL takes
/// (``ProxyRouter``), so a redirect to another host goes the way that host calls for.
struct HTTPTransport: Sendable {
    let logger: Logger
    private let pool: HTTPClientPool
    private let configuration: DownloadConfiguration
    private let router: ProxyRouter
    private let first: Int
    /// The bytes of each resource the download is: every `Range` asked is moved into it, and every response head
    /// moved back (``ResourceWindow``). `nil`: the whole resource.
    let window: ResourceWindow?

    init(
        pool: HTTPClientPool,
        configuration: DownloadConfiguration,
        first: Int,
        window: ResourceWindow? = nil,
        logger: Logger
    ) {
        self.pool = pool
        self.configuration = configuration
        self.router = ProxyRouter(settings: configuration.proxy)
        self.first = first
        self.window = window
        self.logger = logger
    }

    /// `value` for header `name`, moved into the ``window`` when it is a `Range`.
    private func header(_ name: String, _ value: String) -> String {
        guard let window = self.window, name.lowercased() == "range" else { return value }
        return window.asking(value)
    }

    private var eventLoops: [any EventLoop] { self.pool.eventLoops }

    /// `delegate`, with the download's read time-out watched (``IdleReadWatch``).
    private func timed<Delegate: HTTPClientResponseDelegate & Sendable>(
        _ delegate: Delegate,
        on loop: any EventLoop
    ) -> IdleReadTimed<Delegate> {
        IdleReadTimed(delegate, timeout: TimeAmount(self.configuration.timeouts.idleRead), eventLoop: loop)
    }

    /// The event loop for connection `id`: each connection keeps its loop (and its client) from one request
    /// to the next.
    func eventLoop(forConnection id: Int) -> any EventLoop {
        self.eventLoops[(self.first + id) % self.eventLoops.count]
    }

    /// Connection `id`'s client for a request to `url`, and the proxy route it takes.
    private func client(
        forConnection id: Int,
        url: URL
    ) async throws(DownloadError) -> (client: HTTPClient, route: ProxyRoute?, relay: SOCKS5AuthRelay?) {
        let route = try await self.router.route(for: url)
        let (clients, relay) = try await self.pool.clients(for: self.configuration, route: route)
        return (clients[(self.first + id) % clients.count], route, relay)
    }

    /// Readies connections 2 to `count + 1` to `url`'s origin, to be opened once the probe's own connection is up
    /// (``ConnectAhead/open()``, when the probe's request head has gone out): their handshakes then run while the
    /// probe waits for its answer, so that the ranges' requests go out the moment its head is in rather than a
    /// round trip later (two with TLS). A host that does not resolve, refuses or fails its certificate costs the
    /// probe's one attempt, not one per connection. Only direct connections, and only to an origin with no
    /// connection that may be idle in a pool already (``HTTPClientPool/mayConnectAhead(to:connectTimeout:)``).
    func prepareConnectAhead(to url: URL, count: Int) async -> ConnectAhead? {
        let route: ProxyRoute?
        do {
            route = try await self.router.route(for: url)
        } catch {
            return nil
        }
        guard count > 0, route == nil,
            self.pool.mayConnectAhead(to: Origin(url), connectTimeout: TimeAmount(self.configuration.timeouts.connect)),
            let (clients, _) = try? await self.pool.clients(for: self.configuration, route: nil)
        else { return nil }
        var perClient = [Int](repeating: 0, count: clients.count)
        for id in 2...(count + 1) {
            perClient[(self.first + id) % clients.count] += 1
        }
        let placeholders = clients.indices.filter { perClient[$0] > 0 }.map {
            ConnectAhead.Placeholders(client: clients[$0], loop: self.eventLoops[$0], count: perClient[$0])
        }
        let pool = self.pool
        let origin = Origin(url)
        return ConnectAhead(
            origin: origin,
            url: url,
            placeholders: placeholders,
            mayStillOpen: { pool.mayStillConnectAhead(to: origin) },
            logger: self.logger
        )
    }

    /// Sends one probe request on connection 1's client (so that connection 1 can reuse its connection) and returns
    /// its head and its body, when the body is at most `bodyLimit` bytes; a larger one ends the request. The body
    /// is taken in on the connection's event loop (``ProbeResponseDelegate``): one hop back to the caller, not one
    /// per body part. Throws when no head came; a failure after the head leaves the body out. A `206` for a file
    /// longer than `handsOverFrom` bytes, or a `200` with a longer body, returns at its head, still streaming
    /// (``ProbeResponse/running``, ``ProbeResponseDelegate/handsOver(_:from:)``).
    func probe(
        method: HTTPMethod,
        url: URL,
        headers: [HTTPHeaderField],
        extraHeaders: [(String, String)] = [],
        bodyLimit: Int,
        handsOverFrom: Int64? = nil,
        connectAhead: ConnectAhead? = nil
    ) async throws -> ProbeResponse {
        var request = try HTTPClient.Request(url: url.absoluteString, method: method)
        for header in headers {
            request.headers.add(name: header.name, value: header.value)
        }
        for (name, value) in extraHeaders {
            request.headers.replaceOrAdd(name: name, value: self.header(name, value))
        }
        let (client, route, relay) = try await self.client(forConnection: 1, url: url)
        self.pool.noteRequest(to: Origin(url), +1)
        defer { self.pool.noteRequest(to: Origin(url), -1) }
        let loop = self.eventLoop(forConnection: 1)
        let delegate = ProbeResponseDelegate(
            bodyLimit: bodyLimit,
            handsOverFrom: handsOverFrom,
            eventLoop: loop,
            whenSent: connectAhead.flatMap { $0.origin == Origin(url) && route == nil ? $0 : nil },
            window: self.window.map { (window: $0, isHead: method == .HEAD, url: url) }
        )
        let task = client.execute(
            request: request,
            delegate: self.timed(delegate, on: loop),
            eventLoop: .delegate(on: loop),
            deadline: nil,
            logger: self.logger
        )
        task.futureResult.whenComplete { delegate.requestEnded($0) }
        do {
            return try await withTaskCancellationHandler {
                do {
                    let head = try await delegate.handedOver.get()
                    return ProbeResponse(
                        status: head.status,
                        headers: head.headers,
                        body: nil,
                        running: RunningResponse(task: task, delegate: delegate, url: url)
                    )
                } catch is ProbeResponseDelegate.NotHandedOver {
                    return try await task.futureResult.get()
                }
            } onCancel: {
                task.cancel()
            }
        } catch {
            if !Task.isCancelled, let head = delegate.head {
                return ProbeResponse(status: head.status, headers: head.headers, body: nil)
            }
            throw ProxyConnectionError.wrapping(error, route: route, relay: relay)
        }
    }
}

extension HTTPTransport {
    /// Sends one `GET` whose response `delegate` takes in on its event loop, and returns when the request has
    /// ended. Cancelling the calling task cancels the request (and closes its connection).
    func fetch(
        url: URL,
        headers: [HTTPHeaderField],
        extraHeaders: [(String, String)],
        connection: Int,
        delegate: FileBodyDelegate,
        abort: RequestAbort? = nil
    ) async throws {
        var request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: url.absoluteString, method: .GET)
        }
        for header in headers {
            request.headers.add(name: header.name, value: header.value)
        }
        for (name, value) in extraHeaders {
            request.headers.replaceOrAdd(name: name, value: self.header(name, value))
        }
        let (client, route, relay) = try await self.client(forConnection: connection, url: url)
        self.pool.noteRequest(to: Origin(url), +1)
        defer { self.pool.noteRequest(to: Origin(url), -1) }
        let task = client.execute(
            request: request,
            delegate: self.timed(delegate, on: delegate.eventLoop),
            eventLoop: .delegate(on: delegate.eventLoop),
            deadline: nil,
            logger: self.logger
        )
        abort?.attach(task)
        defer { abort?.detach() }
        do {
            try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
        } catch {
            throw ProxyConnectionError.wrapping(error, route: route, relay: relay)
        }
    }
}

/// Ends one connection's current request from another task (the slow-connection watchdog), with an error
/// of its choosing. A request that is not running is left alone.
final class RequestAbort: Sendable {
    private let fail = NIOLockedValueBox<(@Sendable (any Error) -> Void)?>(nil)

    func attach<Response>(_ task: HTTPClient.Task<Response>) {
        self.fail.withLockedValue { $0 = { task.fail(reason: $0) } }
    }

    func detach() {
        self.fail.withLockedValue { $0 = nil }
    }

    /// Fails the running request with `reason`; `false` when none is running.
    @discardableResult
    func abort(_ reason: any Error) -> Bool {
        guard let fail = self.fail.withLockedValue({ $0 }) else { return false }
        fail(reason)
        return true
    }
}

extension DownloadError {
    /// Describes a transport failure talking to `url`.
    static func network(_ error: any Error, url: URL) -> DownloadError {
        if let error = error as? DownloadError { return error }
        let target = "\(url.host ?? "?")\(url.port.map { ":\($0)" } ?? "")"
        let reason: String
        switch error {
        case let error as ProxyConnectionError:
            reason = error.reason(target: target)
        case let error as HTTPClientError where error == .connectTimeout:
            reason = "connecting to \(target) timed out"
        case let error as HTTPClientError where error == .readTimeout:
            reason = "\(target) sent nothing for too long (read time-out)"
        case let error as HTTPClientError where error == .remoteConnectionClosed:
            reason = "\(target) closed the connection"
        case let error as HTTPClientError where error == .tlsHandshakeTimeout:
            reason = "the TLS handshake with \(target) timed out"
        case let error as NIOSSLError:
            reason = "the TLS connection to \(target) failed (\(error)); check the certificate, or trust its issuer"
        case let error as NIOConnectionError where error.connectionErrors.isEmpty:
            // Not a single address to try: the name did not resolve.
            reason = "the host name '\(error.host)' could not be resolved; check the URL and the network"
        case let error as NIOConnectionError:
            reason =
                "could not connect to \(target)"
                + (error.connectionErrors.first.map { " (\($0.error))" } ?? "")
        case let error as IOError where error.errnoCode == ECONNREFUSED:
            reason = "\(target) refused the connection (no server is listening on that port)"
        case let error as IOError:
            reason = "talking to \(target) failed: \(error)"
        default:
            reason = "talking to \(target) failed: \(error)"
        }
        return DownloadError(code: .network, message: "Network error: \(reason).", underlying: error)
    }

    static func httpStatus(_ status: HTTPResponseStatus, url: URL) -> DownloadError {
        DownloadError(
            code: .httpStatus,
            message: "The server answered \(status.code) \(status.reasonPhrase) for \(url.absoluteString).",
            httpStatus: Int(status.code)
        )
    }
}

extension HTTPHeaders {
    /// A header's first value, case-insensitive.
    func value(_ name: String) -> String? {
        self.first(name: name)
    }
}

/// The delegate of a placeholder request (``ConnectAhead``): cancelled before it is sent.
private final class ConnectAheadDelegate: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {}
}
