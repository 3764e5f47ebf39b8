import Downpour
import DownpourJSON
import DownpourQueue
import Foundation
import NIOCore
import Testing

@testable import DownpourRPC

/// Calls that only read are answered on the queue's own loop as soon as they are read
/// (``RPCDispatcher/handleNow(body:)``), with the reply a task would give; a request with a change in it waits
/// for its task, and the server keeps the order of pipelined requests whichever way each is answered.
@Suite struct ImmediateReadTests {
    /// A real queue (SQLite store) holding two paused downloads and one stopped result, and a dispatcher over it.
    static func withQueue(
        _ body: (DownloadManager, RPCDispatcher, _ gids: [String]) async throws -> Void
    ) async throws {
        try await withStartedManager { manager, _ in
            let dispatcher = RPCDispatcher(service: manager, secret: "s")
            var gids: [String] = []
            for name in ["a.bin", "b.bin", "c.bin"] {
                let options = [QueueOption(name: "pause", value: "true"), QueueOption(name: "out", value: name)]
                gids.append(
                    try await manager.add(uris: ["http://127.0.0.1:9/\(name)"], options: options, position: nil)
                        .description
                )
            }
            _ = try await manager.remove(gids[2], force: false)
            try await body(manager, dispatcher, gids)
        }
    }

    static func call(_ method: String, _ params: String = "", token: Bool = true) -> String {
        let all = token ? (params.isEmpty ? #""token:s""# : #""token:s","# + params) : params
        return #"{"jsonrpc":"2.0","id":"q","method":"\#(method)","params":[\#(all)]}"#
    }

    @Test("reads, alone, in a batch or in system.multicall, are answered at once on the queue's loop, as a task would")
    func readsAreAnsweredAtOnce() async throws {
        try await Self.withQueue { manager, dispatcher, gids in
            let gid = "\"\(gids[0])\""
            let requests = [
                Self.call("aria2.tellStatus", gid),
                Self.call("aria2.tellStatus", #"\#(gid),["gid","status","files"]"#),
                Self.call("aria2.tellStatus", #""zz""#),
                Self.call("aria2.tellStatus", #""\#(gids[2])""#),
                Self.call("aria2.tellWaiting", "0,10"),
                Self.call("aria2.tellWaiting", "-1,1"),
                Self.call("aria2.tellActive"),
                Self.call("aria2.tellStopped", "0,10"),
                Self.call("aria2.getGlobalStat"),
                Self.call("aria2.getOption", gid),
                Self.call("aria2.getGlobalOption"),
                Self.call("aria2.getUris", gid),
                Self.call("aria2.getFiles", gid),
                Self.call("aria2.getServers", gid),
                Self.call("aria2.getPeers", gid),
                Self.call("aria2.getVersion"),
                Self.call("aria2.getSessionInfo"),
                Self.call("aria2.addTorrent", #""AAAA""#),
                Self.call("system.listMethods", token: false),
                Self.call("system.listNotifications", token: false),
                Self.call("aria2.noSuchMethod"),
                Self.call("downpour.subscribe"),
                #"{"jsonrpc":"2.0","id":"q","method":"aria2.tellStatus","params":["token:wrong",\#(gid)]}"#,
                "[" + Self.call("aria2.tellStatus", gid) + "," + Self.call("aria2.getGlobalStat") + ",7]",
                // AriaNg's refresh: one multicall of the three lists and the totals.
                #"{"jsonrpc":"2.0","id":"q","method":"system.multicall","params":[["#
                    + #"{"methodName":"aria2.tellActive","params":["token:s"]},"#
                    + #"{"methodName":"aria2.tellWaiting","params":["token:s",0,1000]},"#
                    + #"{"methodName":"aria2.tellStopped","params":["token:s",0,1000]},"#
                    + #"{"methodName":"aria2.getGlobalStat","params":["token:s"]},"#
                    + #"{"methodName":"system.multicall","params":[[]]},"#
                    + #"{"methodName":"aria2.tellStatus","params":["token:wrong",\#(gid)]}]]}"#,
                #"{"id":"q"}"#,
                "{",
            ]
            for request in requests {
                let bytes = Array(request.utf8)
                let immediate = try await dispatcher.handleNow(body: bytes, on: manager)
                guard case .answered(let early) = immediate else {
                    Issue.record("not answered at once: \(request)")
                    continue
                }
                let later = await dispatcher.handle(body: bytes)
                #expect(
                    String(decoding: early.body, as: UTF8.self) == String(decoding: later.body, as: UTF8.self),
                    "\(request)"
                )
                #expect(early.httpStatus == later.httpStatus, "\(request)")
                #expect(early.isUnauthorized == later.isUnauthorized, "\(request)")
                #expect(early.afterReply == nil, "\(request)")
            }
            // They read the queue: the waiting list is the two paused downloads, the removed one is gone.
            let answer = try await dispatcher.handleNow(
                body: Array(Self.call("aria2.tellWaiting", #"0,10,["gid"]"#).utf8),
                on: manager
            )
            guard case .answered(let reply) = answer else {
                Issue.record("tellWaiting not answered at once")
                return
            }
            #expect(
                String(decoding: reply.body, as: UTF8.self)
                    == #"{"id":"q","jsonrpc":"2.0","result":[{"gid":"\#(gids[0])"},{"gid":"\#(gids[1])"}]}"#
            )
        }
    }

    @Test("a request that changes anything waits for its task; off the queue's loop only malformed JSON is answered")
    func changesWait() async throws {
        try await Self.withQueue { manager, dispatcher, gids in
            let gid = "\"\(gids[0])\""
            let changing = [
                Self.call("aria2.addUri", #"["http://127.0.0.1:9/d.bin"]"#),
                Self.call("aria2.unpause", gid),
                Self.call("aria2.changeGlobalOption", #"{"max-concurrent-downloads":"2"}"#),
                Self.call("aria2.shutdown"),
                "[" + Self.call("aria2.getGlobalStat") + "," + Self.call("aria2.pause", gid) + "]",
                #"{"jsonrpc":"2.0","id":"q","method":"system.multicall","params":[["#
                    + #"{"methodName":"aria2.tellActive","params":["token:s"]},"#
                    + #"{"methodName":"aria2.remove","params":["token:s",\#(gid)]}]]}"#,
            ]
            for request in changing {
                let bytes = Array(request.utf8)
                let immediate = try await dispatcher.handleNow(body: bytes, on: manager)
                guard case .pending(let parsed) = immediate else {
                    Issue.record("answered at once, although it changes the queue: \(request)")
                    continue
                }
                #expect(parsed.body == (try JSONParser.parse(bytes)))
            }
            // Nothing above ran: the queue is as it was.
            #expect(await manager.waitingDownloads(0..<10).map(\.status) == [.paused, .paused])

            // Here, off the loop, a read waits for its task; malformed JSON needs no queue.
            #expect(!manager.eventLoop.inEventLoop)
            guard case .pending = dispatcher.handleNow(body: Array(Self.call("aria2.tellStatus", gid).utf8)) else {
                Issue.record("a read answered off the queue's loop")
                return
            }
            guard case .answered(let malformed) = dispatcher.handleNow(body: Array("{".utf8)) else {
                Issue.record("malformed JSON not answered at once")
                return
            }
            #expect(malformed.httpStatus == 500)
            #expect(String(decoding: malformed.body, as: UTF8.self).contains("-32700"))
        }
    }

    @Test("on the queue's loop, pipelined reads and changes are answered in order: a read after a change sees it")
    func pipelinedReadsAndChangesKeepTheirOrder() async throws {
        try await Self.withQueue { manager, _, gids in
            try await LoopbackServer.with(service: PausedOnly(manager), eventLoopGroup: manager.eventLoop) { server in
                let calls = [
                    Self.call("aria2.tellWaiting", #"0,10,["gid"]"#),
                    Self.call("aria2.addUri", #"["http://127.0.0.1:9/d.bin"],{"gid":"00000000000000dd"}"#),
                    Self.call("aria2.tellWaiting", #"0,10,["gid"]"#),
                    Self.call("aria2.changePosition", #""00000000000000dd",0,"POS_SET""#),
                ]
                let requests = calls.map {
                    "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \($0.utf8.count)\r\n\r\n\($0)"
                }
                let last =
                    "POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\nContent-Length: "
                    + "\(calls[0].utf8.count)\r\n\r\n\(calls[0])"
                // Read until the server closes, after the last answer.
                let answer = try await RawHTTP.exchange(port: server.port, requests.joined() + last)
                let bodies = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map {
                    $0.components(separatedBy: "\r\n\r\n").last ?? ""
                }
                func list(_ gids: [String]) -> String {
                    #"{"id":"q","jsonrpc":"2.0","result":["# + gids.map { #"{"gid":"\#($0)"}"# }.joined(separator: ",")
                        + "]}"
                }
                #expect(
                    bodies == [
                        list([gids[0], gids[1]]),
                        #"{"id":"q","jsonrpc":"2.0","result":"00000000000000dd"}"#,
                        list([gids[0], gids[1], "00000000000000dd"]),
                        #"{"id":"q","jsonrpc":"2.0","result":0}"#,
                        list(["00000000000000dd", gids[0], gids[1]]),
                    ],
                    "\(answer)"
                )
            }
        }
    }
}

extension RPCDispatcher {
    /// ``handleNow(body:)`` on `manager`'s loop, where the calls that only read are answered at once.
    func handleNow(body: [UInt8], on manager: DownloadManager) async throws -> Immediate {
        try await manager.eventLoop.submit { self.handleNow(body: body) }.get()
    }
}
