import Downpour
import DownpourJSON
import DownpourQueue
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DownpourRPC

/// §2.2: every method against the in-memory queue.
@Suite struct DispatcherMethodTests {
    let harness = RPCHarness()

    @Test func addUriPassesOptionsInOrder() async throws {
        let gid = try await harness.add(
            "http://a/f",
            options: [
                "dir": "/tmp/x", "header": ["Cookie: a=b", "Referer: http://a/"], "split": 4, "continue": true,
                "ignored": nil, "also-ignored": ["k": "v"],
            ]
        )
        let options = try await harness.result("aria2.getOption", [.string(gid.description)])
        #expect(
            options == ["dir": "/tmp/x", "header": "Cookie: a=b\nReferer: http://a/", "split": "4", "continue": "true"]
        )
        #expect(options.keys == ["dir", "header", "split", "continue"])
        let status = try await harness.result("aria2.tellStatus", [.string(gid.description), ["dir", "status"]])
        #expect(status == ["status": "waiting", "dir": "/tmp/x"])
    }

    @Test func addUriPositionAndPause() async throws {
        let first = try await harness.add("http://a/1")
        let second = try await harness.add("http://a/2")
        let third = try await harness.result("aria2.addUri", [["http://a/3"], ["pause": "true"], 0])
        let waiting = try await harness.result("aria2.tellWaiting", [0, 10, ["gid", "status"]])
        #expect(
            waiting == [
                ["gid": third, "status": "paused"], ["gid": .string(first.description), "status": "waiting"],
                ["gid": .string(second.description), "status": "waiting"],
            ]
        )
        let gid = try await harness.result("aria2.addUri", [["http://a/4"], [:], 99])
        #expect(try await harness.result("aria2.tellWaiting", [-1, 1, ["gid"]]) == [["gid": gid]])
    }

    @Test func addUriErrors() async throws {
        #expect(try await harness.errorMessage("aria2.addUri", []) == "The parameter at 0 is required but missing.")
        #expect(try await harness.errorMessage("aria2.addUri", ["http://a"]) == "The parameter at 0 has wrong type.")
        #expect(try await harness.errorMessage("aria2.addUri", [[]]) == "URI is not provided.")
        #expect(try await harness.errorMessage("aria2.addUri", [[5]]) == "URI is not provided.")
        #expect(
            try await harness.errorMessage("aria2.addUri", [["http://a"], "x"]) == "The parameter at 1 has wrong type."
        )
        #expect(
            try await harness.errorMessage("aria2.addUri", [["http://a"], [:], "0"])
                == "The parameter at 2 has wrong type."
        )
        #expect(
            try await harness.errorMessage("aria2.addUri", [["http://a"], [:], -1])
                == "Position must be greater than or equal to 0."
        )
        #expect(
            try await harness.errorMessage("aria2.addUri", [["http://a"], ["split": "many"]])
                == "We encountered a problem while processing the option '--split'."
        )
        #expect(try await harness.errorMessage("aria2.addUri", [["ftp://a"]]) == "Unsupported URI: ftp://a")
        let gid = try await harness.add(options: ["gid": "00000000000000aa"])
        #expect(gid == DownloadID(value: 0xAA))
        #expect(
            try await harness.errorMessage("aria2.addUri", [["http://a"], ["gid": "00000000000000aa"]])
                == "GID#00000000000000aa is not unique."
        )
    }

    @Test func numbersTruncateToTheirIntegerPart() async throws {
        _ = try await harness.add("http://a/1")
        _ = try await harness.add("http://a/2")
        #expect(try await harness.result("aria2.tellWaiting", [0.9, 1.7, ["status"]]) == [["status": "waiting"]])
        #expect(
            try await harness.errorMessage("aria2.tellWaiting", [1e300, 1]) == "The parameter at 0 has wrong type."
        )
    }

    @Test func gidErrorsAndPrefixes() async throws {
        let gid = try await harness.add(options: ["gid": "abcdef0000000001"])
        _ = try await harness.add(options: ["gid": "abcdef0000000002"])
        #expect(
            try await harness.result("aria2.tellStatus", ["ABCDEF0000000001", ["gid"]]) == [
                "gid": .string(gid.description)
            ]
        )
        #expect(try await harness.result("aria2.remove", ["abcdef0000000001"]) == .string(gid.description))
        #expect(try await harness.result("aria2.tellStatus", ["abcdef00000000", ["gid"]])["gid"] == "abcdef0000000002")
        _ = try await harness.add(options: ["gid": "abcdef0000000003"])
        #expect(try await harness.errorMessage("aria2.tellStatus", ["abcdef"]) == "GID abcdef is not unique")
        #expect(
            try await harness.errorMessage("aria2.tellStatus", ["ffff000000000000"])
                == "GID ffff000000000000 is not found"
        )
        #expect(try await harness.errorMessage("aria2.tellStatus", ["xyz"]) == "Invalid GID xyz")
        #expect(try await harness.errorMessage("aria2.tellStatus", [5]) == "The parameter at 0 has wrong type.")
        #expect(try await harness.errorMessage("aria2.tellStatus", []) == "The parameter at 0 is required but missing.")
        #expect(
            try await harness.errorMessage("aria2.tellStatus", ["abcdef0000000002", "gid"])
                == "The parameter at 1 has wrong type."
        )
    }

    @Test func pauseUnpauseRemove() async throws {
        let gid = try await harness.add()
        let id: JSONValue = .string(gid.description)
        await harness.queue.start(gid)
        #expect(try await harness.result("aria2.forcePause", [id]) == id)
        #expect(try await harness.errorMessage("aria2.pause", [id]) == "GID#\(gid) cannot be paused now")
        #expect(try await harness.result("aria2.tellStatus", [id, ["status"]]) == ["status": "paused"])
        #expect(try await harness.result("aria2.unpause", [id]) == id)
        #expect(try await harness.errorMessage("aria2.unpause", [id]) == "GID#\(gid) cannot be unpaused now")
        #expect(try await harness.result("aria2.pauseAll") == "OK")
        #expect(try await harness.result("aria2.unpauseAll") == "OK")
        #expect(try await harness.result("aria2.forcePauseAll") == "OK")
        await harness.queue.start(gid)
        #expect(try await harness.result("aria2.forceRemove", [id]) == id)
        #expect(
            try await harness.result("aria2.tellStatus", [id, ["status", "errorCode"]]) == [
                "status": "removed", "errorCode": "31",
            ]
        )
        #expect(try await harness.errorMessage("aria2.remove", [id]) == "Active Download not found for GID#\(gid)")
    }

    @Test func statusStructHasExactlyAria2sKeys() async throws {
        let gid = try await harness.add("http://a/f")
        let id: JSONValue = .string(gid.description)
        let waiting = try await harness.result("aria2.tellStatus", [id])
        #expect(
            waiting.keys == [
                "gid", "status", "totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed",
                "pieceLength", "numPieces", "connections", "dir", "files",
            ]
        )
        #expect(
            waiting["files"] == [
                [
                    "index": "1", "path": "", "length": "0", "completedLength": "0", "selected": "true",
                    "uris": [["uri": "http://a/f", "status": "waiting"]],
                ]
            ]
        )
        #expect(waiting["pieceLength"] == "1048576")
        #expect(waiting["numPieces"] == "0")

        await harness.queue.start(gid)
        let length: Int64 = 5 * 1_048_576 + 10
        await harness.queue.progress(
            gid,
            total: length,
            ranges: [0..<1_048_576, 2_097_152..<3_500_000, 4_194_304..<length],
            speed: 1234,
            connections: 2
        )
        let active = try await harness.result("aria2.tellStatus", [id])
        #expect(
            active.keys == [
                "gid", "status", "totalLength", "completedLength", "uploadLength", "bitfield", "downloadSpeed",
                "uploadSpeed", "pieceLength", "numPieces", "connections", "dir", "files",
            ]
        )
        #expect(active["status"] == "active")
        #expect(active["totalLength"] == .string(String(length)))
        #expect(active["numPieces"] == "6")
        #expect(active["bitfield"] == "ac")  // pieces 0, 2, 4 and 5 of 6 (3.5 MB ends inside piece 3): 1010 1100
        #expect(active["downloadSpeed"] == "1234")
        #expect(active["connections"] == "2")
        #expect(active["files"]?[0]?["uris"] == [["uri": "http://a/f", "status": "used"]])
        #expect(active["files"]?[0]?["path"] == .string("/downloads/file-\(gid)"))

        await harness.queue.finish(gid, errorCode: 3, message: "Resource not found")
        let stopped = try await harness.result("aria2.tellStatus", [id])
        #expect(
            stopped.keys == [
                "gid", "status", "totalLength", "completedLength", "uploadLength", "bitfield", "downloadSpeed",
                "uploadSpeed", "pieceLength", "numPieces", "connections", "errorCode", "errorMessage", "dir", "files",
            ]
        )
        #expect(stopped["status"] == "error")
        #expect(stopped["errorCode"] == "3")
        #expect(stopped["errorMessage"] == "Resource not found")
        #expect(stopped["downloadSpeed"] == "0")
        #expect(stopped["connections"] == "0")
        let filtered = try await harness.result("aria2.tellStatus", [id, ["errorCode", "nonsense", 5, "gid"]])
        #expect(filtered == ["gid": id, "errorCode": "3"])
        #expect(try await harness.result("aria2.tellStatus", [id, []]).keys.count == 15)
    }

    @Test func completeDownloadHasFullBitfield() async throws {
        let gid = try await harness.add()
        await harness.queue.start(gid)
        await harness.queue.progress(gid, total: 9 * 1_048_576, ranges: [])
        await harness.queue.finish(gid)
        let status = try await harness.result(
            "aria2.tellStatus",
            [.string(gid.description), ["bitfield", "status", "errorCode", "errorMessage", "completedLength"]]
        )
        #expect(
            status == [
                "status": "complete", "completedLength": "9437184", "bitfield": "ff80", "errorCode": "0",
                "errorMessage": "",
            ]
        )
    }

    @Test func paginationAsInTheManual() async throws {
        var gids: [JSONValue] = []
        for name in ["A", "B", "C"] {
            gids.append(.string(try await harness.add("http://a/\(name)").description))
        }
        let (a, b, c) = (gids[0], gids[1], gids[2])
        func page(_ offset: Int64, _ num: Int64) async throws -> [JSONValue] {
            try await harness.result("aria2.tellWaiting", [.integer(offset), .integer(num), ["gid"]]).arrayValue!.map {
                $0["gid"]!
            }
        }
        #expect(try await page(0, 1) == [a])
        #expect(try await page(1, 2) == [b, c])
        #expect(try await page(-1, 2) == [c, b])
        #expect(try await page(-1, 1000) == [c, b, a])
        #expect(try await page(0, 1000) == [a, b, c])
        #expect(try await page(3, 1) == [])
        #expect(try await page(-4, 2) == [])
        #expect(try await page(-2, 1) == [b])
        #expect(try await page(0, 0) == [])
        #expect(try await page(Int64.min, 5) == [])
        #expect(try await page(Int64.max, 5) == [])
        #expect(try await page(1, Int64.max) == [b, c])
        #expect(try await page(-1, Int64.max) == [c, b, a])
        #expect(
            try await harness.errorMessage("aria2.tellWaiting", [0, -1])
                == "The integer parameter at 1 has invalid value: the value must be greater than or equal to 0."
        )
        #expect(
            try await harness.errorMessage("aria2.tellWaiting", [0]) == "The parameter at 1 is required but missing."
        )
        #expect(try await harness.errorMessage("aria2.tellStopped", ["0", 1]) == "The parameter at 0 has wrong type.")
    }

    @Test(
        arguments: [
            (0, 1, 0..<1, false), (1, 2, 1..<3, false), (-1, 2, 1..<3, true), (-3, 2, 0..<1, true),
            (5, 1, 0..<0, false),
            (-1, 0, 0..<0, true), (2, 5, 2..<3, false), (-2, 5, 0..<2, true),
        ] as [(Int64, Int64, Range<Int>, Bool)]
    )
    func paginationTable(offset: Int64, num: Int64, range: Range<Int>, reversed: Bool) {
        let page = Pagination(offset: offset, num: num, size: 3)
        #expect(page.range == range)
        #expect(page.isReversed == reversed)
    }

    @Test func tellStoppedOldestFirstAndNegativeNewestFirst() async throws {
        var gids: [JSONValue] = []
        for _ in 0..<3 {
            let gid = try await harness.add()
            await harness.queue.start(gid)
            await harness.queue.finish(gid)
            gids.append(.string(gid.description))
        }
        let oldest = try await harness.result("aria2.tellStopped", [0, 1000, ["gid"]])
        #expect(oldest.arrayValue?.map { $0["gid"]! } == gids)
        let newest = try await harness.result("aria2.tellStopped", [-1, 1000, ["gid"]])
        #expect(newest.arrayValue?.map { $0["gid"]! } == gids.reversed())
        #expect(try await harness.result("aria2.tellActive", [["gid"]]) == [])
    }

    @Test func changePositionAndChangeUriAnswerIntegers() async throws {
        let a = try await harness.add("http://a/A")
        _ = try await harness.add("http://a/B")
        let c = try await harness.add("http://a/C")
        let response = try await harness.response("aria2.changePosition", [.string(c.description), 0, "POS_SET"])
        #expect(response["result"] == .integer(0))
        #expect(
            try await harness.result("aria2.changePosition", [.string(a.description), 0, "POS_END"]) == .integer(2)
        )
        #expect(
            try await harness.result("aria2.changePosition", [.string(a.description), -5, "POS_CUR"]) == .integer(0)
        )
        #expect(
            try await harness.errorMessage("aria2.changePosition", [.string(a.description), 0, "POS_NOWHERE"])
                == "Illegal argument."
        )
        #expect(
            try await harness.errorMessage("aria2.changePosition", [.string(a.description), "0", "POS_SET"])
                == "The parameter at 1 has wrong type."
        )

        let counts = try await harness.result(
            "aria2.changeUri",
            [.string(a.description), 1, ["http://a/A", "http://nowhere"], ["http://m1/A", "http://m2/A"], 0]
        )
        #expect(counts == [.integer(1), .integer(2)])
        #expect(
            try await harness.result("aria2.getUris", [.string(a.description)])
                == [["uri": "http://m1/A", "status": "waiting"], ["uri": "http://m2/A", "status": "waiting"]]
        )
        #expect(
            try await harness.errorMessage("aria2.changeUri", [.string(a.description), 2, [], []])
                == "fileIndex is out of range"
        )

        await harness.queue.start(a)
        await harness.queue.finish(a)
        #expect(
            try await harness.errorMessage("aria2.changePosition", [.string(a.description), 0, "POS_SET"])
                == "GID#\(a) not found in the waiting queue."
        )
        #expect(
            try await harness.errorMessage("aria2.getUris", [.string(a.description)])
                == "No URI data is available for GID#\(a)"
        )
    }

    @Test func optionsMethods() async throws {
        let gid = try await harness.add()
        let id: JSONValue = .string(gid.description)
        #expect(
            try await harness.result(
                "aria2.changeOption",
                [id, ["max-download-limit": "1M", "header": ["A: 1", "B: 2"]]]
            ) == "OK"
        )
        #expect(
            try await harness.result("aria2.getOption", [id]) == ["max-download-limit": "1M", "header": "A: 1\nB: 2"]
        )
        #expect(
            try await harness.errorMessage("aria2.changeOption", [id]) == "The parameter at 1 is required but missing."
        )
        await harness.queue.start(gid)
        await harness.queue.finish(gid)
        #expect(
            try await harness.errorMessage("aria2.changeOption", [id, ["split": "2"]])
                == "Cannot change option for GID#\(gid)"
        )
        #expect(try await harness.result("aria2.getOption", [id])["max-download-limit"] == "1M")

        let global = try await harness.result("aria2.getGlobalOption")
        #expect(global == ["dir": "/downloads", "max-concurrent-downloads": "5"])
        #expect(try await harness.result("aria2.changeGlobalOption", [["max-concurrent-downloads": 2]]) == "OK")
        #expect(try await harness.result("aria2.getGlobalOption")["max-concurrent-downloads"] == "2")
        #expect(
            try await harness.errorMessage("aria2.changeGlobalOption", [["max-concurrent-downloads": "x"]])
                == "We encountered a problem while processing the option '--max-concurrent-downloads'."
        )
        #expect(
            try await harness.errorMessage("aria2.changeGlobalOption", [])
                == "The parameter at 0 is required but missing."
        )
    }

    @Test func globalStatAndResults() async throws {
        let done = try await harness.add()
        await harness.queue.start(done)
        await harness.queue.progress(done, total: 10, ranges: [0..<5], speed: 300)
        _ = try await harness.add()
        let stat = try await harness.result("aria2.getGlobalStat")
        #expect(
            stat == [
                "downloadSpeed": "300", "uploadSpeed": "0", "numActive": "1", "numWaiting": "1", "numStopped": "0",
                "numStoppedTotal": "0",
            ]
        )
        await harness.queue.finish(done)
        #expect(try await harness.result("aria2.getGlobalStat")["numStoppedTotal"] == "1")
        let id: JSONValue = .string(done.description)
        #expect(try await harness.result("aria2.removeDownloadResult", [id]) == "OK")
        #expect(try await harness.errorMessage("aria2.removeDownloadResult", [id]) == "GID \(done) is not found")
        let other = try await harness.add()
        #expect(
            try await harness.errorMessage("aria2.removeDownloadResult", [.string(other.description)])
                == "Could not remove download result of GID#\(other)"
        )
        #expect(try await harness.result("aria2.purgeDownloadResult") == "OK")
        #expect(try await harness.result("aria2.getGlobalStat")["numStopped"] == "0")
    }

    @Test func filesPeersServers() async throws {
        let gid = try await harness.add("http://a/f")
        let id: JSONValue = .string(gid.description)
        #expect(try await harness.result("aria2.getPeers", [id]) == [])
        #expect(try await harness.errorMessage("aria2.getServers", [id]) == "No active download for GID#\(gid)")
        await harness.queue.start(gid)
        await harness.queue.progress(gid, total: 100, ranges: [0..<50], speed: 200, connections: 2)
        #expect(
            try await harness.result("aria2.getServers", [id])
                == [
                    [
                        "index": "1",
                        "servers": [
                            ["uri": "http://a/f", "currentUri": "http://a/f", "downloadSpeed": "100"],
                            ["uri": "http://a/f", "currentUri": "http://a/f", "downloadSpeed": "100"],
                        ],
                    ]
                ]
        )
        #expect(try await harness.result("aria2.getFiles", [id])[0]?["completedLength"] == "50")
        await harness.queue.finish(gid)
        #expect(
            try await harness.result("aria2.getFiles", [id])[0]?["uris"] == [["uri": "http://a/f", "status": "used"]]
        )
        #expect(try await harness.errorMessage("aria2.getPeers", [id]) == "No peer data is available for GID#\(gid)")
        #expect(
            try await harness.errorMessage("aria2.getPeers", ["ffff000000000000"])
                == "GID ffff000000000000 is not found"
        )
    }

    @Test("addMetalink: one download per file, URLs best first, its name and strongest digest as options")
    func addMetalink() async throws {
        let sha256 = String(repeating: "ab", count: 32)
        let xml = """
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="a.iso"><hash type="md5">\(String(repeating: "cd", count: 16))</hash>
                <size>1500</size>
                <hash type="sha-256">\(sha256)</hash>
                <pieces length="1024" type="sha-256"><hash>\(sha256)</hash><hash>\(sha256.uppercased())</hash></pieces>
                <url priority="2" location="de">http://mirror/a.iso</url><url priority="1">http://main/a.iso</url></file>
              <file name="b.iso"><url>http://main/b.iso</url></file>
            </metalink>
            """
        let encoded = Data(xml.utf8).base64EncodedString()
        let result = try await harness.result("aria2.addMetalink", [.string(encoded), ["dir": "/iso"]])
        let gids = try #require(result.arrayValue).compactMap(\.stringValue)
        try #require(gids.count == 2)
        let first = try await harness.result("aria2.getOption", [.string(gids[0])])
        #expect(first["out"] == "a.iso")
        #expect(first["dir"] == "/iso")
        #expect(first["checksum"] == .string("sha-256=\(sha256)"))
        // The pieces and the size, as options of Downpour's own (the real queue keeps them out of getOption).
        #expect(first["downpour-piece-checksums"] == .string("sha-256:1024:\(sha256),\(sha256)"))
        #expect(first["downpour-length"] == "1500")
        let uris = try await harness.result("aria2.getUris", [.string(gids[0])])
        #expect(uris.arrayValue?.compactMap { $0["uri"]?.stringValue } == ["http://main/a.iso", "http://mirror/a.iso"])
        let second = try await harness.result("aria2.getOption", [.string(gids[1])])
        #expect(second["out"] == "b.iso")
        #expect(second["checksum"] == nil)
        #expect(second["downpour-piece-checksums"] == nil)
        #expect(second["downpour-length"] == nil)
        // aria2's metalink-location puts the URLs of those countries first.
        let located = try await harness.result(
            "aria2.addMetalink",
            [.string(encoded), ["dir": "/iso", "metalink-location": "jp,DE"]]
        )
        let locatedGID = try #require(located.arrayValue?.first?.stringValue)
        let locatedURIs = try await harness.result("aria2.getUris", [.string(locatedGID)])
        #expect(
            locatedURIs.arrayValue?.compactMap { $0["uri"]?.stringValue } == [
                "http://mirror/a.iso", "http://main/a.iso",
            ]
        )
    }

    @Test("multicall: a run of addUri calls is added as one batch; results and errors keep their places")
    func multicallBatchedAdds() async throws {
        let harness = RPCHarness(secret: "s")
        let result = try await harness.result(
            "system.multicall",
            [
                [
                    ["methodName": "aria2.addUri", "params": ["token:s", ["http://a/1"]]],
                    ["methodName": "aria2.addUri", "params": ["token:s", []]],
                    ["methodName": "aria2.addUri", "params": ["token:wrong", ["http://a/2"]]],
                    ["methodName": "aria2.getGlobalStat", "params": ["token:s"]],
                    ["methodName": "aria2.addUri", "params": ["token:s", ["http://a/3"], ["pause": "true"]]],
                    ["methodName": "aria2.addUri", "params": ["token:s", ["ftp://a/4"]]],
                ]
            ]
        )
        let entries = try #require(result.arrayValue)
        try #require(entries.count == 6)
        #expect(entries[0].arrayValue?.first?.stringValue?.count == 16)
        #expect(entries[1]["message"] == "URI is not provided.")
        #expect(entries[2]["message"] == "Unauthorized")
        #expect(entries[3].arrayValue?.first?["numWaiting"] == "1")
        #expect(entries[4].arrayValue?.first?.stringValue?.count == 16)
        #expect(entries[5]["code"] == .integer(1))
        // The runs of well-formed, authorized adds went to the queue as batches: the first alone (an add with no
        // URI and one with a wrong token take the usual way, with its words), then the last two (the ftp one fails
        // in the queue).
        #expect(await harness.queue.batchSizes == [1, 2])
        let waiting = try await harness.result("aria2.tellWaiting", ["token:s", 0, 10, ["status"]])
        #expect(waiting.arrayValue?.compactMap { $0["status"]?.stringValue } == ["waiting", "paused"])
    }

    @Test("An option Downpour only answers: its own value is taken and changes nothing; another is refused, with why")
    func fixedOptions() async throws {
        let gid = try await harness.add("http://a/f")
        #expect(
            try await harness.result("aria2.changeGlobalOption", [["file-allocation": "FALLOC", "split": "3"]]) == "OK"
        )
        #expect(try await harness.result("aria2.getGlobalOption")["file-allocation"] == nil)
        #expect(try await harness.result("aria2.getGlobalOption")["split"] == "3")
        #expect(
            try await harness.result("aria2.changeOption", [.string(gid.description), ["disk-cache": "0M"]]) == "OK"
        )
        let refused = try await harness.errorMessage("aria2.changeGlobalOption", [["enable-mmap": "true"]])
        #expect(refused.contains("'enable-mmap'") && refused.contains("never mapped into memory"), "\(refused)")
        let onAdd = try await harness.errorMessage("aria2.addUri", [["http://a/g"], ["file-allocation": "none"]])
        #expect(onAdd.contains("'file-allocation'") && onAdd.contains("fallocate"), "\(onAdd)")
        let onChange = try await harness.errorMessage(
            "aria2.changeOption",
            [.string(gid.description), ["max-resume-failure-tries": "5"]]
        )
        #expect(onChange.contains("'max-resume-failure-tries'"), "\(onChange)")
        // Nothing of a refused call was made.
        #expect(try await harness.result("aria2.getGlobalOption")["split"] == "3")
        #expect(try await harness.result("aria2.tellWaiting", [0, 10, ["gid"]]).arrayValue?.count == 1)
    }

    @Test func unsupportedAndFixedAnswers() async throws {
        #expect(try await harness.errorMessage("aria2.addTorrent", ["AAAA"]).contains("BitTorrent is not supported"))
        #expect(try await harness.errorMessage("aria2.addMetalink", ["AAAA"]).contains("Metalink"))
        #expect(try await harness.errorMessage("aria2.addMetalink", ["!!!"]) == "The Metalink is not valid base64.")
        // As aria2 answers when no save-session file is set.
        #expect(try await harness.errorMessage("aria2.saveSession") == "Filename is not given.")
        let version = try await harness.result("aria2.getVersion")
        #expect(
            version == ["version": "1.37.0", "enabledFeatures": ["HTTPS", "Message Digest", "Metalink", "XML-RPC"]]
        )
        let session = try await harness.result("aria2.getSessionInfo")["sessionId"]?.stringValue ?? ""
        #expect(session.count == 40)
        #expect(session.allSatisfy { $0.isHexDigit })
        #expect(try await harness.result("aria2.getSessionInfo")["sessionId"]?.stringValue == session)
        #expect(RPCDispatcher(service: harness.queue, secret: nil).sessionID != session)
    }

    @Test func listMethodsInAria2sOrder() async throws {
        let names = try await harness.result("system.listMethods").arrayValue?.compactMap(\.stringValue)
        let expected =
            [
                "addUri", "addTorrent", "getPeers", "addMetalink", "remove", "pause", "forcePause", "pauseAll",
                "forcePauseAll", "unpause", "unpauseAll", "forceRemove", "changePosition", "tellStatus", "getUris",
                "getFiles", "getServers", "tellActive", "tellWaiting", "tellStopped", "getOption", "changeUri",
                "changeOption", "getGlobalOption", "changeGlobalOption", "purgeDownloadResult",
                "removeDownloadResult", "getVersion", "getSessionInfo", "shutdown", "forceShutdown", "getGlobalStat",
                "saveSession",
            ].map { "aria2." + $0 } + ["system.multicall", "system.listMethods", "system.listNotifications"]
        #expect(names == expected)
    }

    @Test func shutdownRunsAfterTheReply() async throws {
        let reply = await harness.dispatcher.handle(body: Array(#"{"id":1,"method":"aria2.shutdown"}"#.utf8))
        #expect(String(decoding: reply.body, as: UTF8.self) == #"{"id":1,"jsonrpc":"2.0","result":"OK"}"#)
        #expect(harness.shutdowns.withLockedValue { $0 }.isEmpty)
        let afterReply = try #require(reply.afterReply)
        await afterReply()
        #expect(harness.shutdowns.withLockedValue { $0 } == [false])
        let forced = await harness.dispatcher.handle(body: Array(#"{"id":1,"method":"aria2.forceShutdown"}"#.utf8))
        await forced.afterReply?()
        #expect(harness.shutdowns.withLockedValue { $0 } == [false, true])
        let plain = await harness.dispatcher.handle(body: Array(#"{"id":1,"method":"aria2.getVersion"}"#.utf8))
        #expect(plain.afterReply == nil)
    }

    @Test func multicall() async throws {
        let gid = try await harness.add()
        let (json, reply) = try await harness.send(
            #"{"id":"m","method":"system.multicall","params":[[{"methodName":"aria2.tellStatus","params":["\#(gid)",["status"]]},{"methodName":"aria2.remove","params":["ffff000000000000"]},5,{"params":[]},{"methodName":"system.multicall","params":[[]]},{"methodName":"aria2.getGlobalStat"},{"methodName":"system.listMethods"}]]}"#
        )
        #expect(reply.httpStatus == 200)
        let results = try #require(json["result"]?.arrayValue)
        #expect(results.count == 7)
        #expect(results[0] == [["status": "waiting"]])
        #expect(results[1] == ["code": 1, "message": "GID ffff000000000000 is not found"])
        #expect(results[2] == ["code": 1, "message": "system.multicall expected struct."])
        #expect(results[3] == ["code": 1, "message": "Missing methodName."])
        #expect(results[4] == ["code": 1, "message": "Recursive system.multicall forbidden."])
        #expect(results[5][0]?["numWaiting"] == "1")
        #expect(results[6][0]?.arrayValue?.count == 36)
        #expect(try await harness.errorMessage("system.multicall", []) == "The parameter at 0 is required but missing.")
        #expect(try await harness.errorMessage("system.multicall", [5]) == "The parameter at 0 has wrong type.")
    }

    @Test func multicallOfAddUrisInBatches() async throws {
        let calls: [JSONValue] = (0..<100).map { index in
            ["methodName": "aria2.addUri", "params": ["token:x", [.string("http://a/\(index)")], ["dir": "/d"]]]
        }
        let result = try await harness.result("system.multicall", [.array(calls)])
        let gids = try #require(result.arrayValue)
        #expect(gids.count == 100)
        #expect(gids.allSatisfy { $0.arrayValue?.first?.stringValue?.count == 16 })
        #expect(try await harness.result("aria2.getGlobalStat")["numWaiting"] == "100")
    }
}

@Suite struct StatusStructTests {
    @Test(arguments: [(QueueStatus.complete, "0"), (.removed, "31"), (.error, "1")])
    func stoppedWithoutACodeGetsAria2s(status: QueueStatus, code: String) {
        let snapshot = DownloadStatus(gid: DownloadID(value: 1), status: status, uris: [], options: [], directory: "/d")
        let object = StatusStruct.make(snapshot, keys: ["errorCode", "errorMessage", "files"])
        #expect(object["errorCode"] == .string(code))
        #expect(object["errorMessage"] == "")
        #expect(object["files"]?[0]?["uris"] == [])
    }

    @Test func neverNull() {
        let snapshot = DownloadStatus(
            gid: DownloadID(value: 1),
            status: .active,
            uris: ["http://a"],
            options: [],
            directory: "/d"
        )
        let text = JSONWriter.string(StatusStruct.make(snapshot))
        #expect(!text.contains("null"))
        #expect(!text.contains("errorCode"))
        #expect(!text.contains("followedBy") && !text.contains("following"))
    }

    @Test("a Metalink URL's download lists followedBy; each of its files names it in following")
    func followedByAndFollowing() {
        let metalink = DownloadStatus(
            gid: DownloadID(value: 1),
            status: .complete,
            uris: ["http://a/x.meta4"],
            options: [],
            directory: "/d",
            followedBy: [DownloadID(value: 2), DownloadID(value: 3)]
        )
        let object = StatusStruct.make(metalink)
        #expect(object["followedBy"] == ["0000000000000002", "0000000000000003"])
        #expect(object["following"] == nil)
        let file = DownloadStatus(
            gid: DownloadID(value: 2),
            status: .waiting,
            uris: ["http://a/f"],
            options: [],
            directory: "/d",
            following: DownloadID(value: 1)
        )
        #expect(
            StatusStruct.make(file, keys: ["following", "gid"]) == [
                "gid": "0000000000000002", "following": "0000000000000001",
            ]
        )
        #expect(StatusStruct.make(file)["followedBy"] == nil)
    }

    @Test("an HLS video with its audio rendition: files[0] the video, files[1] the audio, each with its own length")
    func videoAndAudioFiles() {
        let complete = DownloadStatus(
            gid: DownloadID(value: 1),
            status: .complete,
            uris: ["http://a/show.m3u8"],
            options: [],
            directory: "/d",
            path: "/d/show.ts",
            totalLength: 1000,
            completedLength: 1000,
            audio: AudioFile(path: "/d/show.audio.ts", length: 300)
        )
        let files = StatusStruct.make(complete, keys: ["files"])["files"]
        #expect(files?[0]?["path"] == "/d/show.ts")
        #expect(files?[0]?["length"] == "700" && files?[0]?["completedLength"] == "700")
        #expect(files?[1]?["index"] == "2" && files?[1]?["path"] == "/d/show.audio.ts")
        #expect(files?[1]?["length"] == "300" && files?[1]?["completedLength"] == "300")
        // While its segments come, the audio's length is not known apart: the video's entry counts both.
        var active = complete
        active.status = .active
        active.completedLength = 400
        active.audio = AudioFile(path: "/d/show.audio.ts", length: 0)
        let running = StatusStruct.make(active, keys: ["files"])["files"]
        #expect(running?[0]?["length"] == "1000" && running?[0]?["completedLength"] == "400")
        #expect(running?[1]?["length"] == "0" && running?[1]?["completedLength"] == "0")
        #expect(
            StatusStruct.make(
                DownloadStatus(
                    gid: DownloadID(value: 2),
                    status: .active,
                    uris: [],
                    options: [],
                    directory: "/d"
                )
            )["files"]?[1] == nil
        )
    }
}
