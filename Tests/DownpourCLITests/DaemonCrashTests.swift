import AsyncHTTPClient
import DownpourTestSupport
import Foundation
import Testing

/// `kill -9` of the daemon binary at 20 random moments of a busy queue. After each restart the queue holds
/// exactly what was acknowledged before the kill (same GIDs, none twice, paused ones still paused, the waiting
/// order kept, finished ones still finished); at the end every file is SHA-256-identical and no `.part` is left.
@Suite("The daemon after kill -9", .timeLimit(.minutes(10)))
struct DaemonCrashTests {
    static let content = makeTestContent(count: 3 * 1024 * 1024 + 11, seed: 21)

    struct Expected {
        var order: [String] = []
        var paused: Set<String> = []
        var names: [String: String] = [:]
    }

    @Test("20 kills of a busy queue lose nothing, duplicate nothing, and every file is intact")
    func killNineAtRandomMoments() async throws {
        let seed =
            ProcessInfo.processInfo.environment["DOWNPOUR_CRASH_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max)
        print("DaemonCrashTests seed \(seed) (set DOWNPOUR_CRASH_SEED to repeat)")
        var random = SplitMix64(seed: seed)

        // Each connection gets 2 MiB/s, so a file takes a good part of a second with two connections: the queue
        // is busy (three active, the rest waiting) through most of the kills.
        let scratch = try Scratch()
        defer { scratch.remove() }
        let downloads = scratch.file("downloads")
        let state = scratch.file("state")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        let arguments = [
            "--state-dir", state, "-d", downloads, "-j", "3", "-x", "2", "--rpc-secret", "crash-test",
        ]

        try await RangeTestServer.withServer(
            content: Self.content,
            faults: [.throttle(bytesPerSecond: 2 * 1024 * 1024)]
        ) { server in
            try await withHTTPClient { client in
                var daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
                var rpc = RPCClient(url: daemon.url, secret: "crash-test", client: client)
                var expected = Expected()

                func add(_ index: Int, paused: Bool) async throws {
                    let name = "f\(index).bin"
                    var options = ["out": name]
                    if paused { options["pause"] = "true" }
                    let gid = try await rpc.string("aria2.addUri", [[server.url("/\(name)")], options])
                    expected.order.append(gid)
                    expected.names[gid] = name
                    if paused { expected.paused.insert(gid) }
                }
                for index in 0..<10 {
                    try await add(index, paused: index % 4 == 3)
                }
                var nextIndex = 10

                for round in 1...20 {
                    // One acknowledged change per round: after its reply it must survive the kill.
                    switch random.next() % 3 {
                    case 0 where nextIndex < 30:
                        try await add(nextIndex, paused: random.next() % 3 == 0)
                        nextIndex += 1
                    case 1:
                        let stopped = Set(try await rpc.statuses("aria2.tellStopped", [0, 1000, ["gid"]]).map(gidOf))
                        let candidates = expected.order.filter {
                            !expected.paused.contains($0) && !stopped.contains($0)
                        }
                        if !candidates.isEmpty {
                            let gid = candidates[Int(random.next() % UInt64(candidates.count))]
                            do {
                                _ = try await rpc.string("aria2.forcePause", [gid])
                                expected.paused.insert(gid)
                            } catch let error as RPCCallError {
                                // It finished between the two calls: only a stopped download cannot be paused.
                                let status = try await rpc.call("aria2.tellStatus", [gid, ["status"]])
                                #expect((status as? [String: Any])?["status"] as? String == "complete", "\(error)")
                            }
                        }
                    default:
                        if let gid = expected.paused.sorted().first {
                            _ = try await rpc.string("aria2.unpause", [gid])
                            expected.paused.remove(gid)
                        }
                    }

                    // An acknowledged pause is never crossed by the file's completion: the daemon stops the run before
                    // it stores the pause, and refuses once the file is taking its name.
                    let before = try await Snapshot(rpc)
                    try await Task.sleep(for: .milliseconds(Int(random.next() % 300)))
                    await daemon.kill9()

                    daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
                    rpc = RPCClient(url: daemon.url, secret: "crash-test", client: client)
                    let after = try await Snapshot.settled(rpc)
                    try after.check(against: expected, before: before, round: round)
                }

                // Let everything finish, then check every byte.
                _ = try await rpc.string("aria2.unpauseAll")
                let deadline = ContinuousClock.now + .seconds(180)
                var finished: [[String: Any]] = []
                while ContinuousClock.now < deadline {
                    finished = try await rpc.statuses(
                        "aria2.tellStopped",
                        [0, 1000, ["gid", "status", "errorMessage"]]
                    )
                    if finished.count == expected.order.count { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(finished.count == expected.order.count, "not all finished: \(finished)")
                for status in finished {
                    #expect(status["status"] as? String == "complete", "\(status)")
                }
                let digest = sha256Hex(Self.content)
                for gid in expected.order {
                    let name = try #require(expected.names[gid])
                    #expect(try sha256Hex(ofFileAt: downloads + "/" + name) == digest, "\(name)")
                }
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: downloads).filter {
                    $0.hasSuffix(".part") || $0.hasSuffix(".downpour")
                }
                #expect(leftovers.isEmpty, "\(leftovers)")
                #expect(await daemon.stop() == 0, "\(daemon.standardError)")
            }
        }
    }

    /// What the daemon says it holds.
    struct Snapshot: Equatable {
        var active: [String]
        var waiting: [String]
        var paused: Set<String>
        var complete: Set<String>
        var stopped: [String]

        /// Three calls read the three lists, and a download that moves on meanwhile (active, then complete) would
        /// be in two of them or none: a snapshot counts once two in a row agree (only a download that stays listed
        /// twice, or stays lost, is the daemon's fault).
        static func settled(_ rpc: RPCClient) async throws -> Snapshot {
            var last = try await Snapshot(rpc)
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                let next = try await Snapshot(rpc)
                if next == last { return next }
                last = next
            }
            return last
        }

        init(_ rpc: RPCClient) async throws {
            let keys = ["gid", "status"]
            let active = try await rpc.statuses("aria2.tellActive", [keys])
            let waiting = try await rpc.statuses("aria2.tellWaiting", [0, 1000, keys])
            let stopped = try await rpc.statuses("aria2.tellStopped", [0, 1000, keys])
            self.active = active.map(gidOf)
            self.waiting = waiting.map(gidOf)
            self.paused = Set(waiting.filter { $0["status"] as? String == "paused" }.map(gidOf))
            self.stopped = stopped.map(gidOf)
            self.complete = Set(stopped.filter { $0["status"] as? String == "complete" }.map(gidOf))
        }

        func check(against expected: Expected, before: Snapshot, round: Int) throws {
            let all = self.active + self.waiting + self.stopped
            #expect(all.count == Set(all).count, "round \(round): a download is listed twice: \(all)")
            #expect(Set(all) == Set(expected.order), "round \(round): lost or invented: \(all) vs \(expected.order)")
            #expect(
                expected.paused.isSubset(of: self.paused),
                "round \(round): paused \(expected.paused) but the daemon has \(self.paused)"
            )
            #expect(self.paused.isSubset(of: expected.paused), "round \(round): paused on its own: \(self.paused)")
            #expect(before.complete.isSubset(of: self.complete), "round \(round): a finished download was lost")
            // The waiting queue keeps its order: those still waiting are in the order they were in.
            let stillWaiting = before.waiting.filter { self.waiting.contains($0) }
            let nowWaiting = self.waiting.filter { before.waiting.contains($0) }
            #expect(
                stillWaiting == nowWaiting,
                "round \(round): waiting order changed: \(before.waiting) → \(self.waiting)"
            )
        }
    }
}

func gidOf(_ status: [String: Any]) -> String { status["gid"] as? String ?? "" }
