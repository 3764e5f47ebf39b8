import AsyncHTTPClient
import Downpour
import DownpourQueue
import DownpourTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import DownpourRPC

#if canImport(Glibc)
import Glibc
#endif

/// The request policy and the connection guard over real sockets, against a real queue.
@Suite struct RequestPolicyServerTests {
    /// What a page of another site, or a page whose own name resolves to 127.0.0.1, can send without a
    /// preflight: each is refused before it runs, and nothing is added or written.
    @Test func hostileRequestsChangeNothing() async throws {
        let content = makeTestContent(count: 200_000)
        try await withStartedManager { manager, directory in
            try await RangeTestServer.withServer(content: content) { files in
                try await LoopbackServer.with(service: manager, eventLoopGroup: manager.eventLoop) { server in
                    let target = directory + "/chosen-by-the-page"
                    let add =
                        #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":[["http://127.0.0.1:\#(files.port)/f.bin"],{"dir":"\#(target)","out":"x.bin"}]}"#
                    let params = Data(#"[["http://127.0.0.1:\#(files.port)/f.bin"],{"dir":"\#(target)"}]"#.utf8)
                        .base64EncodedString()
                        .replacingOccurrences(of: "=", with: "%3D").replacingOccurrences(of: "+", with: "%2B")
                        .replacingOccurrences(of: "/", with: "%2F")
                    let own = "127.0.0.1:\(server.port)"
                    let rebound = "evil.example:\(server.port)"
                    func post(host: String, _ headers: String, body: String = add) -> String {
                        "POST /jsonrpc HTTP/1.1\r\nHost: \(host)\r\n\(headers)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
                    }
                    let hostile: [(String, String, Int)] = [
                        (
                            "no-cors fetch, text/plain",
                            post(
                                host: own,
                                "Origin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
                                    + "Content-Type: text/plain;charset=UTF-8\r\n"
                            ), 403
                        ),
                        (
                            "form POST",
                            post(
                                host: own,
                                "Origin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\n",
                                body: "\(add)="
                            ), 403
                        ),
                        (
                            "DNS rebinding, same-origin to the page",
                            post(
                                host: rebound,
                                "Origin: http://\(rebound)\r\nSec-Fetch-Site: same-origin\r\nContent-Type: text/plain\r\n"
                            ), 421
                        ),
                        (
                            "DNS rebinding, reading the options",
                            "GET /jsonrpc?method=aria2.getGlobalOption&id=1 HTTP/1.1\r\nHost: \(rebound)\r\n\r\n", 421
                        ),
                        (
                            "JSONP from a script tag",
                            "GET /jsonrpc?method=aria2.addUri&id=1&params=\(params)&jsoncallback=cb HTTP/1.1\r\n"
                                + "Host: \(own)\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
                                + "Sec-Fetch-Dest: script\r\n\r\n", 403
                        ),
                        (
                            "JSONP from a script tag, the path with a trailing slash (the router takes it)",
                            "GET /jsonrpc/?method=aria2.addUri&id=1&params=\(params)&jsoncallback=cb HTTP/1.1\r\n"
                                + "Host: \(own)\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
                                + "Sec-Fetch-Dest: script\r\n\r\n", 403
                        ),
                        (
                            "JSONP from a script tag, the path with a doubled slash",
                            "GET //jsonrpc?method=aria2.addUri&id=1&params=\(params)&jsoncallback=cb HTTP/1.1\r\n"
                                + "Host: \(own)\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
                                + "Sec-Fetch-Dest: script\r\n\r\n", 403
                        ),
                        (
                            "XML-RPC from a page",
                            "POST /rpc HTTP/1.1\r\nHost: \(own)\r\nOrigin: http://evil.example\r\n"
                                + "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n<a", 403
                        ),
                        (
                            "WebSocket handshake from a page",
                            "GET /jsonrpc HTTP/1.1\r\nHost: \(own)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                                + "Origin: http://evil.example\r\n\r\n", 403
                        ),
                    ]
                    for (name, request, status) in hostile {
                        let answer = try await RawSocket.run {
                            let socket = try RawSocket(port: server.port)
                            try socket.write(request)
                            // Refused, and closed by the server.
                            return String(decoding: try socket.readUntilClosed(), as: UTF8.self)
                        }
                        #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(name): \(answer)")
                        let body = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined()
                        #expect(
                            body.hasSuffix("\n") && body.dropLast().count > 10 && !body.dropLast().contains("\n"),
                            "\(name): a one-line reason, got \(body)"
                        )
                        #expect(answer.lowercased().contains("content-type: text/plain"), "\(name)")
                    }
                    // Nothing was added, nothing written.
                    #expect(await manager.activeDownloads().isEmpty)
                    #expect(await manager.waitingDownloads(0..<100).isEmpty)
                    #expect(await manager.stoppedDownloads(0..<100).isEmpty)
                    #expect(!FileManager.default.fileExists(atPath: target))
                    #expect(files.statistics().requests.isEmpty)

                    // The same call from a client that is not a browser is served and writes the file: what
                    // refused the calls above was the policy.
                    let (response, _) = try await server.send(.POST, headers: [("Host", own)], body: add)
                    #expect(response.status.code == 200)
                    let path = target + "/x.bin"
                    try await waitUntil("the download to finish") { FileManager.default.fileExists(atPath: path) }
                    #expect(try sha256Hex(ofFileAt: path) == sha256Hex(content))
                }
            }
        }
    }

    /// The daemon's own page, a listed origin, and clients that are not browsers are answered.
    @Test func allowedRequestsAreAnswered() async throws {
        let configuration = RPCServerConfiguration(
            port: 0,
            allowedHosts: ["downpour.lan"],
            allowedOrigins: ["https://ariang.example"],
            unauthorizedDelay: .zero
        )
        try await LoopbackServer.with(configuration) { server in
            let call = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat"}"#
            let own = "http://127.0.0.1:\(server.port)"
            let (ownPage, _) = try await server.send(
                .POST,
                headers: [("Origin", own), ("Sec-Fetch-Site", "same-origin")],
                body: call
            )
            #expect(ownPage.status.code == 200)
            #expect(ownPage.headers["Access-Control-Allow-Origin"].isEmpty)

            let (listed, _) = try await server.send(
                .POST,
                headers: [("Origin", "https://ariang.example"), ("Sec-Fetch-Site", "cross-site")],
                body: call
            )
            #expect(listed.status.code == 200)
            #expect(listed.headers["Access-Control-Allow-Origin"] == ["https://ariang.example"])
            #expect(listed.headers["Vary"].contains("Origin"))

            let (preflight, _) = try await server.send(
                .OPTIONS,
                headers: [
                    ("Origin", "https://ariang.example"), ("Access-Control-Request-Method", "POST"),
                    ("Access-Control-Request-Headers", "content-type"),
                ]
            )
            #expect(preflight.status.code == 200)
            #expect(preflight.headers["Access-Control-Allow-Origin"] == ["https://ariang.example"])
            #expect(preflight.headers["Access-Control-Allow-Methods"] == ["POST, GET, OPTIONS"])
            #expect(preflight.headers["Access-Control-Allow-Headers"] == ["content-type"])

            let (proxied, _) = try await server.send(.POST, headers: [("Host", "downpour.lan")], body: call)
            #expect(proxied.status.code == 200)

            let (page, _) = try await server.send(.GET, path: "/", headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(page.status.code == 200)

            // A WebSocket from the daemon's own page is upgraded.
            let head = try await RawSocket.run {
                let socket = try RawSocket(port: server.port)
                try socket.write(
                    "GET /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nUpgrade: websocket\r\n"
                        + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        + "Sec-WebSocket-Version: 13\r\nOrigin: \(own)\r\n\r\n"
                )
                return try socket.readHead()
            }
            #expect(head.hasPrefix("HTTP/1.1 101"), "\(head)")
        }
    }

    /// Without a secret, another user's process is refused; with one, it is served. Needs root to connect as
    /// another user (CI runs as root).
    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")
        )
    )
    func anotherUsersProcessIsRefusedWithoutASecret() async throws {
        @Sendable func curl(port: Int, as uid: Int?, token: String?) throws -> String {
            let call =
                #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[\#(token.map { "\"token:\($0)\"" } ?? "")]}"#
            let process = Process()
            let arguments = ["/usr/bin/curl", "-s", "-i", "--data-binary", call, "http://127.0.0.1:\(port)/jsonrpc"]
            if let uid {
                process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: arguments[0])
                process.arguments = Array(arguments.dropFirst())
            }
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }
        try await LoopbackServer.with { server in
            let other = try await RawSocket.run { try curl(port: server.port, as: 65534, token: nil) }
            #expect(other.hasPrefix("HTTP/1.1 403"), "\(other)")
            #expect(other.contains("own user"), "\(other)")
            let mine = try await RawSocket.run { try curl(port: server.port, as: nil, token: nil) }
            #expect(mine.hasPrefix("HTTP/1.1 200"), "\(mine)")
        }
        try await LoopbackServer.with(RPCServerConfiguration(port: 0, secret: "s", unauthorizedDelay: .zero)) {
            server in
            let other = try await RawSocket.run { try curl(port: server.port, as: 65534, token: "s") }
            #expect(other.hasPrefix("HTTP/1.1 200"), "\(other)")
        }
    }

    /// Short time-outs, so that the test waits little; the assertions are on what happened, not on when.
    static let quick = RPCServerConfiguration(
        port: 0,
        unauthorizedDelay: .zero,
        requestTimeout: .milliseconds(300),
        idleTimeout: .milliseconds(300),
        webSocketPingInterval: .milliseconds(300)
    )

    @Test func stalledConnectionsAreClosed() async throws {
        try await LoopbackServer.with(Self.quick) { server in
            let port = server.port
            // Half a request, then nothing: closed unanswered.
            let half = try await RawSocket.run {
                let socket = try RawSocket(port: port)
                try socket.write("POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 100\r\n\r\n{")
                return try socket.readUntilClosed()
            }
            #expect(half.isEmpty)
            // A head that never ends.
            let trickle = try await RawSocket.run {
                let socket = try RawSocket(port: port)
                try socket.write("GET /jsonrpc?method=system.listMethods HTTP/1.1\r\nHost: 127.0.0.1")
                return try socket.readUntilClosed()
            }
            #expect(trickle.isEmpty)
            // Never a byte.
            let silent = try await RawSocket.run { try RawSocket(port: port).readUntilClosed() }
            #expect(silent.isEmpty)
            // Answered, then idle: closed after the answer.
            let idle = try await RawSocket.run {
                let socket = try RawSocket(port: port)
                let call = #"{"id":1,"method":"system.listNotifications"}"#
                try socket.write(
                    "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: \(call.utf8.count)\r\n\r\n\(call)"
                )
                return String(decoding: try socket.readUntilClosed(), as: UTF8.self)
            }
            #expect(idle.hasPrefix("HTTP/1.1 200"))
            #expect(idle.contains("aria2.onDownloadStart"))
        }
    }

    @Test func aWebSocketThatAnswersNoPingIsClosed() async throws {
        // Only the ping is quick: what closes the connection can only be the unanswered ping.
        var configuration = RPCServerConfiguration(port: 0, unauthorizedDelay: .zero)
        configuration.requestTimeout = .seconds(600)
        configuration.idleTimeout = .seconds(600)
        configuration.webSocketPingInterval = .milliseconds(300)
        try await LoopbackServer.with(configuration) { server in
            let port = server.port
            let received = try await RawSocket.run {
                let socket = try RawSocket(port: port)
                try socket.write(
                    "GET /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                )
                let head = try socket.readHead()
                return (head, try socket.readUntilClosed())
            }
            #expect(received.0.hasPrefix("HTTP/1.1 101"))
            // It was pinged (opcode 9), and closed once a ping went unanswered.
            #expect(received.1.contains(0x89))
        }
    }

    @Test("at the cap, a client that talks gets in: the connection stalled longest makes room")
    func theCapMakesRoomForAClientThatTalks() async throws {
        var configuration = RPCServerConfiguration(port: 0, unauthorizedDelay: .zero, maximumConnections: 4)
        configuration.requestTimeout = .seconds(600)
        try await LoopbackServer.with(configuration) { server in
            let port = server.port
            var stalled: [RawSocket] = []
            for _ in 0..<4 {
                stalled.append(
                    try await RawSocket.run {
                        let socket = try RawSocket(port: port)
                        try socket.write(
                            "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 9\r\n\r\n"
                        )
                        return socket
                    }
                )
                let count = stalled.count
                try await waitUntil("the server to take connection \(count)") {
                    server.server.connections.count == count
                }
            }
            let (response, _) = try await server.send(.POST, body: #"{"id":1,"method":"system.listMethods"}"#)
            #expect(response.status.code == 200)
            let sockets = stalled
            try await waitUntil("one stalled connection to be closed") {
                try await RawSocket.run { try sockets.filter { try $0.isClosedByPeer() }.count } >= 1
            }
            let closed = try await RawSocket.run { try sockets.map { try $0.isClosedByPeer() } }
            // Exactly one, the oldest.
            #expect(closed == [true, false, false, false])
            #expect(server.server.connections.count <= 4)
        }
    }
}
