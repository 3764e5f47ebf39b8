import AsyncHTTPClient
import Downpour
import DownpourJSON
import DownpourQueue
import DownpourTestSupport
import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOWebSocket
import Testing

@testable import DownpourRPC

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The server over real loopback connections.
@Suite struct ServerTests {
    @Test func postAnswersWithAria2sHeaders() async throws {
        try await LoopbackServer.with { server in
            let (response, body) = try await server.send(
                .POST,
                body: #"{"jsonrpc":"2.0","id":"q","method":"aria2.getVersion"}"#
            )
            #expect(response.status.code == 200)
            #expect(response.headers["Content-Type"] == ["application/json-rpc"])
            #expect(response.headers["Cache-Control"] == ["no-cache"])
            #expect(response.headers["Access-Control-Allow-Origin"].isEmpty)
            #expect(try JSONParser.parse(body)["result"]?["version"] == "1.37.0")

            let (error, errorBody) = try await server.send(
                .POST,
                headers: [("Content-Type", "application/json")],
                body: #"{"id":1,"method":"aria2.tellStatus","params":["zz"]}"#
            )
            #expect(error.status.code == 400)
            #expect(errorBody == #"{"id":1,"jsonrpc":"2.0","error":{"code":1,"message":"Invalid GID zz"}}"#)
            let (parse, _) = try await server.send(.POST, body: "{")
            #expect(parse.status.code == 500)
            let (batch, batchBody) = try await server.send(.POST, body: #"[{"id":1,"method":"x"}]"#)
            #expect(batch.status.code == 200)
            #expect(try JSONParser.parse(batchBody)[0]?["error"]?["message"] == "No such method: x")
        }
    }

    @Test("A call is answered on the event loop that read it: the dispatcher and the queue's actor run there, no hop")
    func callsRunOnTheirEventLoop() async throws {
        try await LoopbackServer.with { server in
            for _ in 0..<5 {
                let (response, _) = try await server.send(
                    .POST,
                    body: #"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat"}"#
                )
                #expect(response.status.code == 200)
            }
            #expect(await server.queue.readsOnEventLoop == Array(repeating: true, count: 5))
        }
    }

    @Test func getWithBase64AndJSONP() async throws {
        try await LoopbackServer.with { server in
            let params = "WyJ0b2tlbjp4IixbImdpZCJdXQ%3D%3D"  // ["token:x",["gid"]]
            let (response, body) = try await server.send(
                .GET,
                path: "/jsonrpc?jsonrpc=2.0&method=aria2.tellActive&id=QXJpYU5n&params=\(params)&jsoncallback=cb"
            )
            #expect(response.status.code == 200)
            #expect(response.headers["Content-Type"] == ["text/javascript"])
            #expect(body == #"cb({"id":"QXJpYU5n","jsonrpc":"2.0","result":[]})"#)
        }
    }

    @Test func wrongTokenRepliesAreHeldBack() async throws {
        let delay = Duration.milliseconds(300)
        try await LoopbackServer.with(RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: delay)) {
            server in
            let clock = ContinuousClock()
            let start = clock.now
            let (response, body) = try await server.send(
                .POST,
                body: #"{"id":1,"method":"aria2.getVersion","params":["token:x"]}"#
            )
            // Only a lower bound: the reply cannot come before the delay, however loaded the machine.
            #expect(clock.now - start >= delay)
            #expect(response.status.code == 400)
            #expect(body == #"{"id":1,"jsonrpc":"2.0","error":{"code":1,"message":"Unauthorized"}}"#)
            let (good, _) = try await server.send(
                .POST,
                body: #"{"id":1,"method":"aria2.getVersion","params":["token:s"]}"#
            )
            #expect(good.status.code == 200)
        }
    }

    @Test func otherPathsAre404() async throws {
        try await LoopbackServer.with { server in
            let rpc = try await server.send(.GET, path: "/rpc").0
            #expect(rpc.status.code == 404)
            let other = try await server.send(.GET, path: "/dashboard/other.js").0
            #expect(other.status.code == 404)
            let below = try await server.send(.POST, path: "/jsonrpc/x", body: "{}").0
            #expect(below.status.code == 404)
        }
    }

    @Test("The dashboard's files are served from the binary, without the secret, with headers that keep it safe")
    func dashboardFiles() async throws {
        try await LoopbackServer.with(RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: .zero)) {
            server in
            // The page's script is an ES module that imports the others: each must be served as JavaScript.
            let modules = ["actions", "connection", "format", "forms", "graph", "render", "rpc", "view"]
            let expected: [(String, String, String)] =
                [
                    ("/", "text/html; charset=utf-8", "<!doctype html"),
                    ("/dashboard/app.js", "text/javascript; charset=utf-8", "downpour.subscribe"),
                    ("/dashboard/style.css", "text/css; charset=utf-8", "prefers-color-scheme"),
                ] + modules.map { ("/dashboard/\($0).js", "text/javascript; charset=utf-8", "export ") }
            for (path, type, text) in expected {
                let (response, body) = try await server.send(.GET, path: path)
                #expect(response.status.code == 200, "\(path)")
                #expect(response.headers.first(name: "Content-Type") == type, "\(path)")
                #expect(response.headers.first(name: "X-Content-Type-Options") == "nosniff", "\(path)")
                #expect(response.headers.first(name: "Content-Security-Policy") == "frame-ancestors 'none'")
                #expect(body.lowercased().contains(text.lowercased()), "\(path)")
            }
        }
    }

    @Test("downpour.subscribe: a session with the right token gets onProgress frames; aria2 sessions never do")
    func progressPush() async throws {
        try await LoopbackServer.with(RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: .zero)) {
            server in
            let queue = server.queue
            let gid = try await queue.add(uris: ["http://a/f"], options: [], position: nil)
            await queue.start(gid)
            let frames = NIOLockedValueBox<[String]>([])
            try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(server.port)/jsonrpc",
                logger: Logger(label: "test.ws")
            ) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await outbound.write(.text(#"{"id":1,"method":"downpour.subscribe","params":["token:bad"]}"#))
                guard case .text(let refused)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(refused) }
                try await outbound.write(.text(#"{"id":2,"method":"downpour.subscribe","params":["token:s"]}"#))
                guard case .text(let accepted)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(accepted) }
                guard case .text(let push)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(push) }
                try await outbound.close(.normalClosure, reason: nil)
            }
            let received = frames.withLockedValue { $0 }
            try #require(received.count == 3)
            #expect(received[0] == #"{"id":1,"jsonrpc":"2.0","error":{"code":1,"message":"Unauthorized"}}"#)
            #expect(received[1] == #"{"id":2,"jsonrpc":"2.0","result":"OK"}"#)
            let push = try JSONParser.parse(received[2])
            #expect(push["method"]?.stringValue == "downpour.onProgress")
            #expect(push["id"] == nil)
            guard case .array(let params)? = push["params"], case .object(let payload)? = params.first else {
                Issue.record("no payload: \(received[2])")
                return
            }
            #expect(payload["globalStat"]?["numActive"]?.stringValue == "1")
            #expect(payload["queueVersion"]?.stringValue != nil)
            guard case .array(let active)? = payload["active"], let first = active.first else {
                Issue.record("no active download: \(received[2])")
                return
            }
            #expect(first["gid"]?.stringValue == gid.description)
            #expect(first["ranges"] != nil)
            #expect(first["connectionRanges"] != nil)

            // Over HTTP there is no session to push to: a clear error, not "No such method".
            let (_, body) = try await server.send(
                .POST,
                body: #"{"id":3,"method":"downpour.subscribe","params":["token:s"]}"#
            )
            #expect(body.contains("only on the WebSocket"))
        }
    }

    @Test func corsOnlyWhenAllowed() async throws {
        let preflightHeaders = [
            ("Origin", "http://ariang.example"), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type, x-custom"),
            ("Access-Control-Request-Private-Network", "true"),
        ]
        try await LoopbackServer.with(
            RPCServerConfiguration(port: 0, secret: "s", allowOriginAll: true, unauthorizedDelay: .zero)
        ) {
            server in
            let (post, _) = try await server.send(
                .POST,
                headers: [("Origin", "http://a")],
                body: #"{"id":1,"method":"system.listMethods"}"#
            )
            #expect(post.headers["Access-Control-Allow-Origin"] == ["*"])
            let (get, _) = try await server.send(.GET, path: "/jsonrpc?method=aria2.getVersion&id=1")
            #expect(get.headers["Access-Control-Allow-Origin"] == ["*"])
            let (preflight, _) = try await server.send(.OPTIONS, headers: preflightHeaders)
            #expect(preflight.status.code == 200)
            #expect(preflight.headers["Access-Control-Allow-Origin"] == ["*"])
            #expect(preflight.headers["Access-Control-Allow-Methods"] == ["POST, GET, OPTIONS"])
            #expect(preflight.headers["Access-Control-Allow-Headers"] == ["content-type, x-custom"])
            #expect(preflight.headers["Access-Control-Max-Age"] == ["1728000"])
            #expect(preflight.headers["Access-Control-Allow-Private-Network"] == ["true"])
        }
        try await LoopbackServer.with { server in
            let (post, _) = try await server.send(
                .POST,
                headers: [("Origin", "http://a")],
                body: #"{"id":1,"method":"system.listMethods"}"#
            )
            #expect(post.headers["Access-Control-Allow-Origin"].isEmpty)
            let (preflight, _) = try await server.send(.OPTIONS, headers: preflightHeaders)
            #expect(preflight.headers["Access-Control-Allow-Origin"].isEmpty)
            #expect(preflight.headers["Access-Control-Allow-Private-Network"].isEmpty)
        }
    }

    @Test func requestsOverTheLimitAreRefusedUnread() async throws {
        try await LoopbackServer.with(
            RPCServerConfiguration(port: 0, maximumRequestSize: 1024, unauthorizedDelay: .zero)
        ) {
            server in
            // Announced too large: refused before a byte of the body is sent.
            let answer = try await RawHTTP.exchange(
                port: server.port,
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 3000000\r\n\r\n"
            )
            #expect(answer.hasPrefix("HTTP/1.1 413"))
            #expect(answer.lowercased().contains("connection: close"))
            // Exactly the limit is taken.
            let fits = #"{"id":1,"method":"system.listNotifications","params":[]}"#
            let padded = fits + String(repeating: " ", count: 1024 - fits.utf8.count)
            let (fitting, _) = try await server.send(.POST, body: padded)
            #expect(fitting.status.code == 200)
            // Chunked, no length announced: refused once past the limit.
            let chunk = String(repeating: " ", count: 2048)
            let chunked = try await RawHTTP.exchange(
                port: server.port,
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n\(chunk)\r\n"
            )
            #expect(chunked.hasPrefix("HTTP/1.1 413"))
            #expect(chunked.lowercased().contains("connection: close"))
        }
    }

    @Test("Pipelined requests are answered in order, whichever path answers each; Connection: close is honoured")
    func pipelinedRequestsKeepTheirOrder() async throws {
        try await LoopbackServer.with { server in
            let first = #"{"jsonrpc":"2.0","id":"one","method":"system.listNotifications"}"#
            let third = #"{"jsonrpc":"2.0","id":"three","method":"aria2.getVersion"}"#
            let chunked = #"{"jsonrpc":"2.0","id":"four","method":"system.listNotifications"}"#
            let requests =
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(first.utf8.count)\r\n\r\n\(first)"
                + "GET /jsonrpc?method=system.listNotifications&id=two HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"
                + "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(third.utf8.count)\r\n\r\n\(third)"
                + "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + String(chunked.utf8.count, radix: 16) + "\r\n\(chunked)\r\n0\r\n\r\n"
            // Read until the server closes: it must, after the fourth answer.
            let answer = try await RawHTTP.exchange(
                port: server.port,
                first:
                    "GET /jsonrpc?method=system.listMethods&id=zero HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n",
                then: requests
            )
            let ids = ["\"one\"", "\"two\"", "\"three\"", "\"four\""].map { answer.range(of: $0)?.lowerBound }
            #expect(ids.allSatisfy { $0 != nil }, "\(answer)")
            let found = ids.compactMap { $0 }
            #expect(found == found.sorted(), "answers out of order: \(answer)")
            #expect(answer.components(separatedBy: "HTTP/1.1 200").count == 6, "\(answer)")

            // A POST answered on the fast path with Connection: close closes the connection after its answer.
            let closing = try await RawHTTP.exchange(
                port: server.port,
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\nContent-Length: \(first.utf8.count)\r\n\r\n"
                    + first
            )
            #expect(closing.hasPrefix("HTTP/1.1 200"))
            #expect(closing.lowercased().contains("connection: close"))
            #expect(closing.hasSuffix(#"]}"#), "\(closing)")
        }
    }

    @Test("An HTTP/1.0 call without keep-alive is answered on the fast path, then the connection is closed")
    func http10CallClosesAfterItsAnswer() async throws {
        try await LoopbackServer.with { server in
            let call = #"{"jsonrpc":"2.0","id":"old","method":"aria2.getVersion"}"#
            // Read until the server closes: it must, after the one answer.
            let answer = try await RawHTTP.exchange(
                port: server.port,
                "POST /jsonrpc HTTP/1.0\r\nContent-Length: \(call.utf8.count)\r\n\r\n\(call)"
            )
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
            #expect(answer.lowercased().contains("connection: close"), "\(answer)")
            #expect(answer.contains(#""id":"old""#), "\(answer)")
            #expect(answer.contains(#""version":"1.37.0""#), "\(answer)")
        }
    }

    @Test("The installer puts the POST handler ahead of the HTTP Types codec and leaves; other requests pass through")
    func installerPutsTheHandlerAheadOfTheCodec() throws {
        let channel = EmbeddedChannel()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        let handler = RPCPostHandler(maximumBodySize: 1024) { _, _ in
            .now(RPCPostHandler.Reply(status: .ok, headers: [:], body: ByteBuffer()))
        }
        try pipeline.addHandler(
            RPCPostHandlerInstaller(policy: RequestPolicy(port: 80, allowedHosts: ["h"]), handler)
        )
        #expect(try pipeline.handler(type: RPCPostHandler.self) === handler)
        // The policy is installed too (the socket tests show that nothing passes it unchecked).
        _ = try pipeline.handler(type: RequestPolicyHandler.self)
        #expect(throws: (any Error).self) { try pipeline.handler(type: RPCPostHandlerInstaller.self) }

        // NIO's parts reach the handler first (it would trap on Swift HTTP Types' parts); a request it does not
        // answer goes on to the codec, which hands the router its converted form.
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/jsonrpc?method=x", headers: ["Host": "h"])
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        let converted = try channel.readInbound(as: HTTPRequestPart.self)
        guard case .head(let request) = converted else {
            Issue.record("expected the converted head, got \(String(describing: converted))")
            return
        }
        #expect(request.method == .get)
        #expect(request.path == "/jsonrpc?method=x")
        guard case .end(nil) = try channel.readInbound(as: HTTPRequestPart.self) else {
            Issue.record("expected the request's end")
            return
        }
        #expect(try channel.finish().isClean)
    }

    @Test func defaultLimitIsTwoMiB() async throws {
        try await LoopbackServer.with { server in
            let answer = try await RawHTTP.exchange(
                port: server.port,
                "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(2 * 1024 * 1024 + 1)\r\n\r\n"
            )
            #expect(answer.hasPrefix("HTTP/1.1 413"))
        }
    }

    @Test func listenAllNeedsASecret() throws {
        #expect(throws: RPCServerError.listenAllWithoutSecret) {
            try RPCServer(service: InMemoryQueue(), configuration: RPCServerConfiguration(listenAll: true))
        }
        #expect(throws: RPCServerError.listenAllWithoutSecret) {
            try RPCServer(service: InMemoryQueue(), configuration: RPCServerConfiguration(listenAll: true, secret: ""))
        }
        let server = try RPCServer(
            service: InMemoryQueue(),
            configuration: RPCServerConfiguration(listenAll: true, secret: "s")
        )
        #expect(server.configuration.bindAddress == "0.0.0.0")
        #expect(RPCServerConfiguration().bindAddress == "127.0.0.1")
        #expect(RPCServerConfiguration().port == 6800)
    }

    @Test func shutdownIsCalledAfterTheReply() async throws {
        try await LoopbackServer.with { server in
            let (response, body) = try await server.send(.POST, body: #"{"id":1,"method":"aria2.forceShutdown"}"#)
            #expect(response.status.code == 200)
            #expect(body == #"{"id":1,"jsonrpc":"2.0","result":"OK"}"#)
            var shutdowns = server.shutdowns.makeAsyncIterator()
            #expect(await shutdowns.next() == true)
        }
    }

    @Test func webSocketRequestsAndNotifications() async throws {
        try await LoopbackServer.with(RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: .zero)) {
            server in
            let frames = NIOLockedValueBox<[String]>([])
            let queue = server.queue
            try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(server.port)/jsonrpc",
                logger: Logger(label: "test.ws")
            ) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await outbound.write(
                    .text(#"{"id":1,"method":"aria2.addUri","params":["token:s",["http://a/f"]]}"#)
                )
                guard case .text(let reply)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(reply) }
                guard let gid = try JSONParser.parse(reply)["result"]?.stringValue.flatMap(DownloadID.init) else {
                    return
                }
                try await outbound.write(.text(#"[{"id":2,"method":"aria2.getGlobalStat","params":["token:bad"]}]"#))
                guard case .text(let unauthorized)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(unauthorized) }
                await queue.start(gid)
                guard case .text(let notification)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(notification) }
                try await outbound.write(.text("{"))
                guard case .text(let parseError)? = try await messages.next() else { return }
                frames.withLockedValue { $0.append(parseError) }
                try await outbound.close(.normalClosure, reason: nil)
            }
            let received = frames.withLockedValue { $0 }
            try #require(received.count == 4)
            let gid = try #require(try JSONParser.parse(received[0])["result"]?.stringValue)
            #expect(received[1] == #"[{"id":2,"jsonrpc":"2.0","error":{"code":1,"message":"Unauthorized"}}]"#)
            #expect(received[2] == #"{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"\#(gid)"}]}"#)
            #expect(received[3] == #"{"id":null,"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error."}}"#)
        }
    }

    @Test func notificationsReachEverySocket() async throws {
        try await LoopbackServer.with { server in
            let received = NIOLockedValueBox<[String]>([])
            let queue = server.queue
            let gid = try await queue.add(uris: ["http://a/f"], options: [], position: nil)
            let hub = server.server.hub
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        try await WebSocketClient.connect(
                            url: "ws://127.0.0.1:\(server.port)/jsonrpc",
                            logger: Logger(label: "ws")
                        ) {
                            inbound,
                            outbound,
                            _ in
                            var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                            guard case .text(let frame)? = try await messages.next() else { return }
                            received.withLockedValue { $0.append(frame) }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                    }
                }
                // Both sessions are open once the hub counts them.
                try await waitUntil("both sessions to open") { hub.sessionCount >= 2 }
                await queue.start(gid)
                try await group.waitForAll()
            }
            let expected = #"{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"\#(gid)"}]}"#
            #expect(received.withLockedValue { $0 } == [expected, expected])
        }
    }
}

/// One HTTP exchange over a plain socket: sends `request` as it is, reads until the server closes (or 64 KiB).
enum RawHTTP {
    /// Runs on NIO's thread pool: a blocking socket on the concurrency pool's few threads could starve the
    /// server's handlers that run there.
    static func exchange(port: Int, _ request: String) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive {
            try Self.blockingExchange(port: port, request)
        }
    }

    /// Sends `first` and reads its whole answer (a `Content-Length` body), then sends `rest` at once and reads
    /// until the server closes; returns everything read. The first request of a connection goes alone because
    /// the server's WebSocket upgrade check holds the connection's first request by itself.
    static func exchange(port: Int, first: String, then rest: String) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive {
            try Self.blockingExchange(port: port, first, then: rest)
        }
    }

    private static func blockingExchange(port: Int, _ request: String, then rest: String? = nil) throws -> String {
        let socket = try RawSocket(port: port)
        let descriptor = socket.descriptor
        func sendAll(_ text: String) throws { try socket.write(text) }
        try sendAll(request)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        if let rest {
            // Until the first answer's head and its Content-Length bytes of body are in.
            while true {
                let text = String(decoding: received, as: UTF8.self)
                if let headEnd = text.range(of: "\r\n\r\n"),
                    let line = text[..<headEnd.lowerBound].split(separator: "\r\n").first(where: {
                        $0.lowercased().hasPrefix("content-length:")
                    }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                    text.utf8.count - text[..<headEnd.upperBound].utf8.count >= length
                {
                    break
                }
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count <= 0 { throw RawSocket.Failure(call: "recv", errno: errno) }
                received += buffer[0..<count]
            }
            try sendAll(rest)
        }
        while received.count < 65536 {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }
}
