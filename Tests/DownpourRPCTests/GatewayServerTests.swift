import AsyncHTTPClient
import Downpour
import DownpourJSON
import DownpourQueue
import DownpourTestSupport
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOWebSocket
import Testing

@testable import DownpourRPC

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the server lets in before the secret is checked, over real loopback connections: XML-RPC at `/rpc`, the
/// secret as the gate for any origin and `Host`, memory held by bodies, and guessing slowed.
@Suite struct GatewayServerTests {
    static let secret = RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: .zero)

    @Test("XML-RPC at /rpc: text/xml, 200 for results and faults, the same queue")
    func xmlRPCAtRpc() async throws {
        try await LoopbackServer.with(Self.secret) { server in
            let call = XMLRPCTests.call("aria2.getVersion", ["token:s"] as [JSONValue])
            let (response, body) = try await server.send(.POST, path: "/rpc", body: call)
            #expect(response.status.code == 200)
            #expect(response.headers["Content-Type"] == ["text/xml"])
            let version = try XMLRPCResponseReader.read(Array(body.utf8)).get()
            #expect(version["enabledFeatures"]?.arrayValue?.contains("XML-RPC") == true)

            let wrong = XMLRPCTests.call("aria2.getVersion", ["token:x"] as [JSONValue])
            let (refused, refusedBody) = try await server.send(.POST, path: "/rpc", body: wrong)
            #expect(refused.status.code == 200)
            #expect(try XMLRPCResponseReader.read(Array(refusedBody.utf8)) == .failure(.unauthorized))

            let add = XMLRPCTests.call("aria2.addUri", ["token:s", ["http://a/f"]] as [JSONValue])
            let gid = try XMLRPCResponseReader.read(Array(try await server.send(.POST, path: "/rpc", body: add).1.utf8))
            let status = try await server.send(
                .POST,
                body:
                    #"{"id":1,"method":"aria2.tellStatus","params":["token:s","\#(try gid.get().stringValue ?? "")"]}"#
            )
            #expect(status.0.status.code == 200)

            // Announced too large: 413 before the body is read, as on /jsonrpc.
            let answer = try await RawHTTP.exchange(
                port: server.port,
                "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 3000000\r\n\r\n"
            )
            #expect(answer.hasPrefix("HTTP/1.1 413"))
        }
    }

    @Test("Expect: 100-continue gets its 100 before the body; a router's answer before the body keeps the connection")
    func continueAndEarlyAnswers() async throws {
        try await LoopbackServer.with { server in
            let call = XMLRPCTests.call("system.listNotifications", [JSONValue]())
            let socket = try RawSocket(port: server.port)
            let head = try await RawSocket.run {
                try socket.write(
                    "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nExpect: 100-continue\r\n"
                        + "Connection: close\r\nContent-Length: \(call.utf8.count)\r\n\r\n"
                )
                return try socket.readHead()
            }
            #expect(head.hasPrefix("HTTP/1.1 100"), "\(head)")
            let answer = try await RawSocket.run {
                try socket.write(call)
                return String(decoding: try socket.readUntilClosed(), as: UTF8.self)
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
            #expect(answer.contains("aria2.onDownloadStart"), "\(answer)")

            // A path the router answers 404, with a body it never reads; the next request on the connection is
            // still answered.
            let body = String(repeating: "x", count: 200_000)
            let next = #"{"id":"after","method":"system.listNotifications"}"#
            let both = try await RawHTTP.exchange(
                port: server.port,
                first: "POST /nothing HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(body.utf8.count)"
                    + "\r\n\r\n\(body)",
                then: "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n"
                    + "Content-Length: \(next.utf8.count)\r\n\r\n\(next)"
            )
            #expect(both.hasPrefix("HTTP/1.1 404"), "\(both.prefix(200))")
            #expect(both.contains(#""id":"after""#), "\(both.suffix(300))")
        }
    }

    @Test("With a secret, the right token is served from any origin and any Host; CORS only for allowed origins")
    func secretIsTheGate() async throws {
        var configuration = Self.secret
        configuration.allowedOrigins = ["https://ariang.example"]
        try await LoopbackServer.with(configuration) { server in
            let call = #"{"id":1,"method":"aria2.getGlobalStat","params":["token:s"]}"#
            let wrong = #"{"id":1,"method":"aria2.getGlobalStat","params":["token:x"]}"#
            for headers in [
                [("Origin", "chrome-extension://mpkodccbngfoacfalldjimigbofkhgjn")],
                [("Origin", "moz-extension://0f2bd1f4"), ("Sec-Fetch-Site", "cross-site")],
                [("Host", "aria2.example.com")],
                [("Host", "aria2.example.com"), ("Origin", "https://aria2.example.com")],
                [("Origin", "null")],
            ] {
                let (response, _) = try await server.send(.POST, headers: headers, body: call)
                #expect(response.status.code == 200, "\(headers)")
                #expect(response.headers["Access-Control-Allow-Origin"].isEmpty, "\(headers)")
                let (refused, body) = try await server.send(.POST, headers: headers, body: wrong)
                #expect(refused.status.code == 400, "\(headers)")
                #expect(body == #"{"id":1,"jsonrpc":"2.0","error":{"code":1,"message":"Unauthorized"}}"#)
            }
            let (allowed, _) = try await server.send(.POST, headers: [("Origin", "https://ariang.example")], body: call)
            #expect(allowed.headers["Access-Control-Allow-Origin"] == ["https://ariang.example"])
            // A preflight from any origin gets leave to send; the call then needs the token.
            let (preflight, _) = try await server.send(
                .OPTIONS,
                headers: [
                    ("Origin", "http://page.example"), ("Access-Control-Request-Method", "POST"),
                    ("Access-Control-Request-Headers", "content-type"),
                ]
            )
            #expect(preflight.status.code == 200)
            #expect(preflight.headers["Access-Control-Allow-Origin"] == ["http://page.example"])
            #expect(preflight.headers["Access-Control-Allow-Headers"] == ["content-type"])
            let (xmlPreflight, _) = try await server.send(
                .OPTIONS,
                path: "/rpc",
                headers: [("Origin", "http://page.example"), ("Access-Control-Request-Method", "POST")]
            )
            #expect(xmlPreflight.status.code == 200)
        }
        // Without a secret nothing of this is served.
        try await LoopbackServer.with { server in
            let call = #"{"id":1,"method":"aria2.getGlobalStat","params":[]}"#
            let proxied = try await server.send(.POST, headers: [("Host", "aria2.example.com")], body: call)
            #expect(proxied.0.status.code == 421)
            let extensionCall = try await server.send(.POST, headers: [("Origin", "chrome-extension://x")], body: call)
            #expect(extensionCall.0.status.code == 403)
            let xml = try await server.send(.POST, path: "/rpc", headers: [("Origin", "null")], body: "")
            #expect(xml.0.status.code == 403)
        }
    }

    @Test("A WebSocket only the secret admits gets no notification until it has sent the right token")
    func foreignWebSocketIsMutedUntilItProvesTheToken() async throws {
        try await LoopbackServer.with(Self.secret) { server in
            let queue = server.queue
            let first = try await queue.add(uris: ["http://a/1"], options: [], position: nil)
            let second = try await queue.add(uris: ["http://a/2"], options: [], position: nil)
            let hub = server.server.hub
            let control = NIOLockedValueBox<[String]>([])
            let foreign = NIOLockedValueBox<[String]>([])
            let proved = AsyncStream<Void>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                // A session of the daemon's own (no Origin): it hears every notification.
                group.addTask {
                    try await WebSocketClient.connect(
                        url: "ws://127.0.0.1:\(server.port)/jsonrpc",
                        logger: Logger(label: "ws")
                    ) {
                        inbound,
                        outbound,
                        _ in
                        var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                        for _ in 0..<2 {
                            guard case .text(let frame)? = try await messages.next() else { return }
                            control.withLockedValue { $0.append(frame) }
                        }
                        try await outbound.close(.normalClosure, reason: nil)
                    }
                }
                // A page of another origin. Whatever becomes of it, the wait below for its proof ends.
                group.addTask {
                    defer { proved.continuation.finish() }
                    var configuration = WebSocketClientConfiguration()
                    configuration.additionalHeaders = [.origin: "http://page.example"]
                    try await WebSocketClient.connect(
                        url: "ws://127.0.0.1:\(server.port)/jsonrpc",
                        configuration: configuration,
                        logger: Logger(label: "ws")
                    ) { inbound, outbound, _ in
                        var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                        var frames: [String] = []
                        // Wait for the first start to have reached the sessions, then prove the token.
                        try await waitUntil("the first notification") { control.withLockedValue { $0.count } >= 1 }
                        try await outbound.write(
                            .text(#"{"id":1,"method":"aria2.getGlobalStat","params":["token:s"]}"#)
                        )
                        guard case .text(let reply)? = try await messages.next() else { return }
                        frames.append(reply)
                        proved.continuation.yield()
                        guard case .text(let pushed)? = try await messages.next() else { return }
                        frames.append(pushed)
                        foreign.withLockedValue { $0 = frames }
                        try await outbound.close(.normalClosure, reason: nil)
                    }
                }
                try await waitUntil("both sessions to open") { hub.sessionCount >= 2 }
                await queue.start(first)
                var provedIterator = proved.stream.makeAsyncIterator()
                _ = await provedIterator.next()
                await queue.start(second)
                try await group.waitForAll()
            }
            let frames = foreign.withLockedValue { $0 }
            try #require(frames.count == 2)
            #expect(frames[0].contains(#""result""#))
            #expect(frames[1].contains(second.description))
            #expect(!frames.joined().contains(first.description))
        }
    }

    @Test("A body holds what came, not what its Content-Length announced; closing gives it back")
    func announcedBodiesHoldOnlyWhatCame() async throws {
        try await LoopbackServer.with(Self.secret) { server in
            let registry = server.server.connections
            let socket = try RawSocket(port: server.port)
            let sent = 60_000
            try await RawSocket.run {
                try socket.write(
                    "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 2000000\r\n\r\n"
                        + String(repeating: " ", count: sent)
                )
            }
            try await waitUntil("the 60 KB to be in") { registry.heldBytes >= sent }
            #expect(registry.heldBytes <= 128 * 1024)
            try await RawSocket.run { _ = try socket.isClosedByPeer() }
            #if canImport(Glibc)
            shutdown(socket.descriptor, Int32(SHUT_RDWR))
            #else
            shutdown(socket.descriptor, SHUT_RDWR)
            #endif
            try await waitUntil("the body to be given back") { registry.heldBytes == 0 }
        }
    }

    @Test("Past the body budget, the connection whose body stalled longest is closed")
    func bodyBudgetClosesTheStalledLongest() async throws {
        var configuration = Self.secret
        configuration.maximumRequestSize = 64 * 1024
        configuration.maximumHeldBodies = 128 * 1024
        try await LoopbackServer.with(configuration) { server in
            let registry = server.server.connections
            var sockets: [RawSocket] = []
            for index in 0..<3 {
                let socket = try RawSocket(port: server.port)
                sockets.append(socket)
                try await RawSocket.run {
                    try socket.write(
                        "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 65536\r\n\r\n"
                            + String(repeating: " ", count: 40_000)
                    )
                }
                if index < 2 {
                    try await waitUntil("body \(index) to be held") { registry.heldBytes >= (index + 1) * 40_000 }
                }
            }
            let (oldest, second) = (sockets[0], sockets[1])
            try await waitUntil("the oldest to be closed") { try await RawSocket.run { try oldest.isClosedByPeer() } }
            #expect(registry.heldBytes <= 128 * 1024)
            let secondClosed = try await RawSocket.run { try second.isClosedByPeer() }
            #expect(!secondClosed)
        }
    }

    @Test("After a run of wrong tokens from one address, its requests take turns, the right token's too")
    func guessingIsSlowed() async throws {
        var configuration = Self.secret
        configuration.guessBurst = 2
        configuration.guessInterval = .seconds(600)
        try await LoopbackServer.with(configuration) { server in
            let wrong = #"{"id":1,"method":"aria2.getVersion","params":["token:x"]}"#
            for _ in 0..<2 {
                #expect(try await server.send(.POST, body: wrong).0.status.code == 400)
            }
            // Within its turn: the next request is checked at once; the one after waits ten minutes.
            let right = #"{"id":2,"method":"aria2.getVersion","params":["token:s"]}"#
            #expect(try await server.send(.POST, body: right).0.status.code == 200)
            // The next two wait their turns, ten and twenty minutes away: two turns (the burst) are waiting.
            let post =
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(right.utf8.count)\r\n\r\n\(right)"
            let guesses = server.server.guesses
            let start = NIODeadline.now()
            var waiting: [RawSocket] = []
            for (index, minutes) in [15, 25].enumerated() {
                let socket = try RawSocket(port: server.port)
                waiting.append(socket)
                try await RawSocket.run { try socket.write(post) }
                try await waitUntil("request \(index) to take its turn") {
                    guesses.nextTurn(of: "127.0.0.1").map { $0 > start + .minutes(Int64(minutes)) } ?? false
                }
            }
            // With the burst of turns waiting, the next request gets none: 429 at once, and the connection closed.
            let refused = try await RawHTTP.exchange(port: server.port, post)
            #expect(refused.hasPrefix("HTTP/1.1 429"), "\(refused)")
            // The waiting ones are not answered (their turns are minutes away: a look now cannot see them early).
            for socket in waiting {
                let nothing = try await RawSocket.run { try socket.hasNothingToRead() }
                #expect(nothing)
            }
        }
    }
}
