import Downpour
import DownpourJSON
import DownpourQueue
import Foundation
import Testing

@testable import DownpourRPC

@Suite struct ProgressPushTests {
    @Test("a frame: totals, limit, version, and each active download with its ranges and connections")
    func frame() throws {
        let gid = DownloadID(value: 0x2089_b05e_cca3_d829)
        let status = DownloadStatus(
            gid: gid,
            status: .active,
            uris: ["http://host/f.bin", "http://mirror/f.bin"],
            options: [],
            directory: "/dl",
            path: "/dl/f.bin",
            totalLength: 1000,
            completedLength: 300,
            downloadSpeed: 50,
            connections: 2,
            connectionProgress: [
                ConnectionProgress(id: 1, receivedBytes: 200, bytesPerSecond: 25.4, remainingRange: 200..<500),
                ConnectionProgress(
                    id: 2,
                    receivedBytes: 100,
                    bytesPerSecond: 0,
                    remainingRange: 600..<1000,
                    restarts: 2,
                    source: URL(string: "http://mirror/f.bin")
                ),
                ConnectionProgress(id: 3, receivedBytes: 0, bytesPerSecond: 0, remainingRange: nil),
            ],
            completedRanges: [0..<200, 500..<600]
        )
        let text = ProgressPush.frame(
            stat: GlobalStat(downloadSpeed: 50, numActive: 1, numWaiting: 2, numStopped: 3, numStoppedTotal: 4),
            maximumOverallRate: 1_048_576,
            queueVersion: 17,
            active: [status]
        )
        let frame = try JSONParser.parse(text)
        #expect(frame["method"] == "downpour.onProgress")
        #expect(frame["id"] == nil)
        let payload = try #require(frame["params"]?.arrayValue?.first)
        #expect(payload["globalStat"]?["numWaiting"] == "2")
        #expect(payload["maxOverallDownloadLimit"] == "1048576")
        #expect(payload["queueVersion"] == "17")
        let entry = try #require(payload["active"]?.arrayValue?.first)
        #expect(entry["gid"] == "2089b05ecca3d829")
        #expect(entry["completedLength"] == "300")
        #expect(entry["ranges"] == [[0, 200], [500, 600]])
        // A connection between ranges is not listed; the others with where they write next and their restarts.
        #expect(
            entry["connectionRanges"] == [
                ["id": 1, "start": 200, "end": 500, "downloadSpeed": "25", "restarts": 0],
                [
                    "id": 2, "start": 600, "end": 1000, "downloadSpeed": "0", "restarts": 2,
                    "source": "http://mirror/f.bin",
                ],
            ]
        )
    }

    @Test("a fleet's frame lists its nodes; a daemon's own queue has none, and its frame no `nodes` key")
    func nodes() throws {
        let stat = GlobalStat(downloadSpeed: 0, numActive: 0, numWaiting: 0, numStopped: 0, numStoppedTotal: 0)
        let alone = try JSONParser.parse(
            ProgressPush.frame(stat: stat, maximumOverallRate: 0, queueVersion: 1, active: [])
        )
        #expect(alone["params"]?.arrayValue?.first?["nodes"] == nil)
        let text = ProgressPush.frame(
            stat: stat,
            maximumOverallRate: 0,
            queueVersion: 1,
            active: [],
            nodes: [
                QueueNode(
                    name: "a",
                    address: "127.0.0.1:6800",
                    downloadSpeed: 2048,
                    numActive: 3,
                    secondsSinceSeen: 0.4,
                    isUp: true
                ),
                QueueNode(name: "b", address: "", downloadSpeed: 0, numActive: 0, secondsSinceSeen: 42.7, isUp: false),
            ]
        )
        let nodes = try JSONParser.parse(text)["params"]?.arrayValue?.first?["nodes"]
        #expect(
            nodes == [
                [
                    "name": "a", "address": "127.0.0.1:6800", "downloadSpeed": "2048", "numActive": "3",
                    "secondsSinceSeen": "0", "up": "true",
                ],
                [
                    "name": "b", "address": "", "downloadSpeed": "0", "numActive": "0", "secondsSinceSeen": "42",
                    "up": "false",
                ],
            ]
        )
    }
}
