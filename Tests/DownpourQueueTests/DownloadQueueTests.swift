import Downpour
import Testing

@testable import DownpourQueue

/// The queue as tables: an operation on a fixed queue, the actions it returns and the queue it leaves.
///
/// The fixture runs two at once: active 1, 2; waiting 3, 4 (paused), 5; one result, 6 (complete). Layouts read
/// `A=active W=waiting S=gid:code,...`, with `p` after a paused GID.
@Suite("DownloadQueue")
struct DownloadQueueTests {
    static func gid(_ value: UInt64) -> DownloadID { DownloadID(value: value) }

    static func entry(_ value: UInt64, options: [QueueOption] = []) -> QueueEntry {
        QueueEntry(gid: gid(value), uris: ["http://example.com/\(value)"], options: options)
    }

    static func queued(_ value: UInt64) -> QueuedDownload { QueuedDownload(entry: entry(value)) }

    static func fixture() -> DownloadQueue {
        DownloadQueue(
            active: [queued(1), queued(2)],
            waiting: [(queued(3), isPaused: false), (queued(4), isPaused: true), (queued(5), isPaused: false)],
            stopped: [StoppedResult(entry: entry(6), errorCode: 0)],
            stoppedTotal: 1,
            maxConcurrentDownloads: 2
        )
    }

    static func layout(_ queue: DownloadQueue) -> String {
        let active = queue.active.map { "\($0.value)" }.joined(separator: ",")
        let waiting = queue.waiting.map { "\($0.gid.value)\($0.isPaused ? "p" : "")" }.joined(separator: ",")
        let stopped = queue.stopped.map { "\($0.gid.value):\($0.errorCode)" }.joined(separator: ",")
        return "A=\(active) W=\(waiting) S=\(stopped)"
    }

    static let unchanged = "A=1,2 W=3,4p,5 S=6:0"

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var operation: @Sendable (inout DownloadQueue) throws(QueueError) -> [QueueAction]
        var actions: [QueueAction]
        var layout: String
        var testDescription: String { self.name }
    }

    static let rows: [Row] = [
        Row(
            name: "pause active: front of the waiting queue, paused; the slot goes to the next unpaused",
            operation: { q throws(QueueError) in try q.pause(gid(1)) },
            actions: [.stop(gid(1), reason: .pause), .emit(.paused(gid(1))), .start(gid(3)), .emit(.started(gid(3)))],
            layout: "A=2,3 W=1p,4p,5 S=6:0"
        ),
        Row(
            name: "a Metalink followed: complete, its files at the front of the waiting queue, the first starts",
            operation: { q throws(QueueError) in
                try q.finish(gid(1), path: "/d/x.meta4", length: 9, followedBy: [entry(7), entry(8)])
            },
            actions: [
                .emit(.completed(gid(1))), .emit(.added(gid(7))), .emit(.added(gid(8))), .start(gid(7)),
                .emit(.started(gid(7))),
            ],
            layout: "A=2,7 W=8,3,4p,5 S=6:0,1:0"
        ),
        Row(
            name: "pause waiting: paused in place",
            operation: { q throws(QueueError) in try q.pause(gid(3)) },
            actions: [.emit(.changed(gid(3)))],
            layout: "A=1,2 W=3p,4p,5 S=6:0"
        ),
        Row(
            name: "unpause paused: waits again, no slot free",
            operation: { q throws(QueueError) in try q.unpause(gid(4)) },
            actions: [.emit(.changed(gid(4)))],
            layout: "A=1,2 W=3,4,5 S=6:0"
        ),
        Row(
            name: "remove active: a removed result (31), the next starts",
            operation: { q throws(QueueError) in try q.remove(gid(2)) },
            actions: [
                .stop(gid(2), reason: .remove), .emit(.stopped(gid(2))), .start(gid(3)), .emit(.started(gid(3))),
            ],
            layout: "A=1,3 W=4p,5 S=6:0,2:31"
        ),
        Row(
            name: "remove waiting: dropped, no result",
            operation: { q throws(QueueError) in try q.remove(gid(3)) },
            actions: [.emit(.changed(gid(3)))],
            layout: "A=1,2 W=4p,5 S=6:0"
        ),
        Row(
            name: "remove paused: dropped, no result",
            operation: { q throws(QueueError) in try q.remove(gid(4)) },
            actions: [.emit(.changed(gid(4)))],
            layout: "A=1,2 W=3,5 S=6:0"
        ),
        Row(
            name: "finish active, complete: result 0, the next starts",
            operation: { q in q.finish(gid(1), outcome: .complete(path: "/d/1", length: 10)) },
            actions: [.emit(.completed(gid(1))), .start(gid(3)), .emit(.started(gid(3)))],
            layout: "A=2,3 W=4p,5 S=6:0,1:0"
        ),
        Row(
            name: "finish active, failed: result with its code, the next starts",
            operation: { q in q.finish(gid(1), outcome: .failed(code: .resourceNotFound, message: "404")) },
            actions: [.emit(.failed(gid(1))), .start(gid(3)), .emit(.started(gid(3)))],
            layout: "A=2,3 W=4p,5 S=6:0,1:3"
        ),
        Row(
            name: "finish waiting with an error (a run stopped by a pause): nothing changes",
            operation: { q in q.finish(gid(3), outcome: .failed(code: .unknown, message: "cancelled")) },
            actions: [],
            layout: unchanged
        ),
        Row(
            name: "finish paused, complete (finished as it was paused): a complete result",
            operation: { q in q.finish(gid(4), outcome: .complete(path: "/d/4", length: 1)) },
            actions: [.emit(.completed(gid(4)))],
            layout: "A=1,2 W=3,5 S=6:0,4:0"
        ),
        Row(
            name: "finish stopped: nothing changes",
            operation: { q in q.finish(gid(6), outcome: .complete(path: "/d/6", length: 1)) },
            actions: [],
            layout: unchanged
        ),
        Row(
            name: "changePosition waiting to the front",
            operation: { q throws(QueueError) in try q.changePosition(gid(5), by: 0, from: .set).actions },
            actions: [.emit(.changed(gid(5)))],
            layout: "A=1,2 W=5,3,4p S=6:0"
        ),
        Row(
            name: "changePosition paused to the end",
            operation: { q throws(QueueError) in try q.changePosition(gid(4), by: 0, from: .end).actions },
            actions: [.emit(.changed(gid(4)))],
            layout: "A=1,2 W=3,5,4p S=6:0"
        ),
        Row(
            name: "changeOptions active: restarts",
            operation: { q throws(QueueError) in try q.changeOptions(gid(1), [QueueOption(name: "split", value: "2")])
            },
            actions: [.stop(gid(1), reason: .restart), .start(gid(1)), .emit(.started(gid(1)))],
            layout: unchanged
        ),
        Row(
            name: "changeOptions active, max-download-limit only: no restart",
            operation: { q throws(QueueError) in
                try q.changeOptions(gid(1), [QueueOption(name: "max-download-limit", value: "1M")])
            },
            actions: [],
            layout: unchanged
        ),
        Row(
            name: "changeOptions waiting",
            operation: { q throws(QueueError) in try q.changeOptions(gid(3), [QueueOption(name: "split", value: "2")])
            },
            actions: [.emit(.changed(gid(3)))],
            layout: unchanged
        ),
        Row(
            name: "changeOptions paused",
            operation: { q throws(QueueError) in try q.changeOptions(gid(4), [QueueOption(name: "split", value: "2")])
            },
            actions: [.emit(.changed(gid(4)))],
            layout: unchanged
        ),
        Row(
            name: "changeURIs active",
            operation: { q throws(QueueError) in
                try q.changeURIs(gid(1), remove: [], add: ["http://mirror/1"], position: nil).actions
            },
            actions: [.emit(.changed(gid(1)))],
            layout: unchanged
        ),
        Row(
            name: "removeResult stopped",
            operation: { q throws(QueueError) in try q.removeResult(gid(6)) },
            actions: [.emit(.resultsRemoved(gid(6)))],
            layout: "A=1,2 W=3,4p,5 S="
        ),
        Row(
            name: "purgeResults",
            operation: { q in q.purgeResults() },
            actions: [.emit(.resultsRemoved(nil))],
            layout: "A=1,2 W=3,4p,5 S="
        ),
        Row(
            name: "pauseAll: active ones first in the order they ran, all paused",
            operation: { q in q.pauseAll() },
            actions: [
                .stop(gid(1), reason: .pause), .emit(.paused(gid(1))), .stop(gid(2), reason: .pause),
                .emit(.paused(gid(2))), .emit(.changed(gid(3))), .emit(.changed(gid(5))),
            ],
            layout: "A= W=1p,2p,3p,4p,5p S=6:0"
        ),
        Row(
            name: "unpauseAll",
            operation: { q in q.unpauseAll() },
            actions: [.emit(.changed(gid(4)))],
            layout: "A=1,2 W=3,4,5 S=6:0"
        ),
        Row(
            name: "add: appended, waits (no slot)",
            operation: { q throws(QueueError) in try q.add(entry(7)) },
            actions: [.emit(.added(gid(7)))],
            layout: "A=1,2 W=3,4p,5,7 S=6:0"
        ),
        Row(
            name: "add at position 1",
            operation: { q throws(QueueError) in try q.add(entry(7), position: 1) },
            actions: [.emit(.added(gid(7)))],
            layout: "A=1,2 W=3,7,4p,5 S=6:0"
        ),
        Row(
            name: "add past the end appends",
            operation: { q throws(QueueError) in try q.add(entry(7), position: 99) },
            actions: [.emit(.added(gid(7)))],
            layout: "A=1,2 W=3,4p,5,7 S=6:0"
        ),
        Row(
            name: "add paused",
            operation: { q throws(QueueError) in try q.add(entry(7), paused: true, position: 0) },
            actions: [.emit(.added(gid(7)))],
            layout: "A=1,2 W=7p,3,4p,5 S=6:0"
        ),
        Row(
            name: "more at once: the unpaused waiting ones start in order",
            operation: { q in q.setMaxConcurrentDownloads(4) },
            actions: [
                .emit(.optionsChanged), .start(gid(3)), .emit(.started(gid(3))), .start(gid(5)),
                .emit(.started(gid(5))),
            ],
            layout: "A=1,2,3,5 W=4p S=6:0"
        ),
        Row(
            name: "fewer at once: the active ones run on",
            operation: { q in q.setMaxConcurrentDownloads(1) },
            actions: [.emit(.optionsChanged)],
            layout: unchanged
        ),
        Row(
            name: "shutdown: active ones stop and stay active",
            operation: { q in q.shutdown() },
            actions: [
                .stop(gid(1), reason: .shutdown), .emit(.stopped(gid(1))), .stop(gid(2), reason: .shutdown),
                .emit(.stopped(gid(2))),
            ],
            layout: unchanged
        ),
        Row(
            name: "start: a waiting one starts now, past the limit",
            operation: { q throws(QueueError) in try q.start(gid(5)) },
            actions: [.start(gid(5)), .emit(.started(gid(5)))],
            layout: "A=1,2,5 W=3,4p S=6:0"
        ),
        Row(
            name: "start: a paused one starts now",
            operation: { q throws(QueueError) in try q.start(gid(4)) },
            actions: [.start(gid(4)), .emit(.started(gid(4)))],
            layout: "A=1,2,4 W=3,5 S=6:0"
        ),
        Row(
            name: "startUp: the active ones start again",
            operation: { q in q.startUp() },
            actions: [.start(gid(1)), .emit(.started(gid(1))), .start(gid(2)), .emit(.started(gid(2)))],
            layout: unchanged
        ),
    ]

    @Test("operation → actions and queue", arguments: rows)
    func operation(_ row: Row) throws {
        var queue = Self.fixture()
        let actions = try row.operation(&queue)
        #expect(actions == row.actions)
        #expect(Self.layout(queue) == row.layout)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        var operation: @Sendable (inout DownloadQueue) throws(QueueError) -> Void
        var reason: QueueError.Reason
        var testDescription: String { self.name }
    }

    static let refusals: [Refusal] = [
        Refusal(
            name: "pause paused",
            operation: { q throws(QueueError) in _ = try q.pause(gid(4)) },
            reason: .cannotPause
        ),
        Refusal(
            name: "pause stopped",
            operation: { q throws(QueueError) in _ = try q.pause(gid(6)) },
            reason: .cannotPause
        ),
        Refusal(
            name: "unpause active",
            operation: { q throws(QueueError) in _ = try q.unpause(gid(1)) },
            reason: .cannotUnpause
        ),
        Refusal(
            name: "unpause waiting",
            operation: { q throws(QueueError) in _ = try q.unpause(gid(3)) },
            reason: .cannotUnpause
        ),
        Refusal(
            name: "unpause stopped",
            operation: { q throws(QueueError) in _ = try q.unpause(gid(6)) },
            reason: .cannotUnpause
        ),
        Refusal(
            name: "remove stopped",
            operation: { q throws(QueueError) in _ = try q.remove(gid(6)) },
            reason: .notActive
        ),
        Refusal(
            name: "changePosition active",
            operation: { q throws(QueueError) in _ = try q.changePosition(gid(1), by: 0, from: .set) },
            reason: .notWaiting
        ),
        Refusal(
            name: "changePosition stopped",
            operation: { q throws(QueueError) in _ = try q.changePosition(gid(6), by: 0, from: .set) },
            reason: .notWaiting
        ),
        Refusal(
            name: "changeOptions stopped",
            operation: { q throws(QueueError) in _ = try q.changeOptions(gid(6), []) },
            reason: .cannotChangeOption
        ),
        Refusal(
            name: "changeURIs stopped",
            operation: { q throws(QueueError) in
                _ = try q.changeURIs(gid(6), remove: [], add: ["http://a/b"], position: nil)
            },
            reason: .notFound
        ),
        Refusal(
            name: "removeResult active",
            operation: { q throws(QueueError) in _ = try q.removeResult(gid(1)) },
            reason: .noResult
        ),
        Refusal(
            name: "removeResult waiting",
            operation: { q throws(QueueError) in _ = try q.removeResult(gid(3)) },
            reason: .noResult
        ),
        Refusal(
            name: "removeResult paused",
            operation: { q throws(QueueError) in _ = try q.removeResult(gid(4)) },
            reason: .noResult
        ),
        Refusal(
            name: "add with the GID of an active one",
            operation: { q throws(QueueError) in _ = try q.add(entry(1)) },
            reason: .duplicateGID
        ),
        Refusal(
            name: "add with the GID of a result",
            operation: { q throws(QueueError) in _ = try q.add(entry(6)) },
            reason: .duplicateGID
        ),
        Refusal(
            name: "a Metalink followed by a file with the GID of a waiting one",
            operation: { q throws(QueueError) in
                _ = try q.finish(gid(1), path: "/d/x.meta4", length: 9, followedBy: [entry(3)])
            },
            reason: .duplicateGID
        ),
        Refusal(
            name: "start active",
            operation: { q throws(QueueError) in _ = try q.start(gid(1)) },
            reason: .notWaiting
        ),
        Refusal(
            name: "start stopped",
            operation: { q throws(QueueError) in _ = try q.start(gid(6)) },
            reason: .notWaiting
        ),
        Refusal(
            name: "add at a negative position",
            operation: { q throws(QueueError) in _ = try q.add(entry(7), position: -1) },
            reason: .invalidRequest
        ),
    ]

    @Test("refused operations leave the queue as it was", arguments: refusals)
    func refusal(_ refusal: Refusal) {
        var queue = Self.fixture()
        let before = queue
        do {
            try refusal.operation(&queue)
            Issue.record("\(refusal.name) was not refused")
        } catch {
            #expect(error.reason == refusal.reason)
        }
        #expect(queue == before)
        #expect(queue.changes == before.changes, "a refused operation records no row to store")
    }

    /// aria2's `IndexedList::move`: five waiting, the one moved at index 2.
    @Test(
        "changePosition clamps as aria2 does",
        arguments: [
            (0, PositionOrigin.set, 0) as (Int, PositionOrigin, Int), (3, .set, 3), (-1, .set, 0), (10, .set, 4),
            (1, .current, 3), (-1, .current, 1), (-5, .current, 0), (10, .current, 4), (0, .current, 2),
            (0, .end, 4), (-1, .end, 3), (-10, .end, 0), (5, .end, 4),
        ]
    )
    func changePositionClamps(position: Int, origin: PositionOrigin, expected: Int) throws {
        var queue = DownloadQueue(
            active: [],
            waiting: (1...5).map { (Self.queued($0), isPaused: true) },
            stopped: [],
            stoppedTotal: 0
        )
        let (index, _) = try queue.changePosition(Self.gid(3), by: position, from: origin)
        #expect(index == expected)
        #expect(queue.waiting[expected].gid == Self.gid(3))
        #expect(queue.waiting.count == 5)
    }

    @Test("GIDs resolve from unique prefixes in any case")
    func resolve() throws {
        var queue = DownloadQueue(maxConcurrentDownloads: 1)
        let a = DownloadID(value: 0xabcd_0000_0000_0001)
        let b = DownloadID(value: 0xabcd_1000_0000_0002)
        _ = try queue.add(QueueEntry(gid: a, uris: ["http://x/a"], options: []))
        _ = try queue.add(QueueEntry(gid: b, uris: ["http://x/b"], options: []))
        #expect(try queue.resolve("abcd000000000001") == a)
        #expect(try queue.resolve("ABCD0") == a)
        #expect(try queue.resolve("abcd1") == b)
        #expect(throws: QueueError.self) { try queue.resolve("abcd") }
        func reason(_ text: String) -> QueueError.Reason? {
            do {
                _ = try queue.resolve(text)
                return nil
            } catch {
                return error.reason
            }
        }
        #expect(reason("abcd") == .notUnique)
        #expect(reason("abce") == .notFound)
        #expect(reason("abcd000000000009") == .notFound)
        #expect(reason("") == .invalidGID)
        #expect(reason("xyz") == .invalidGID)
        #expect(reason("abcd0000000000011") == .invalidGID)
        #expect(reason("-1") == .invalidGID)
        // A result is found too.
        _ = queue.finish(a, outcome: .complete(path: "/a", length: 1))
        #expect(try queue.resolve("abcd0") == a)
    }

    @Test("results are kept first in, first out; the total counts them all")
    func resultsCapped() throws {
        var queue = DownloadQueue(maxConcurrentDownloads: 5, maxDownloadResult: 2)
        for value in 1...4 as ClosedRange<UInt64> {
            _ = try queue.add(Self.entry(value))
        }
        for value in 1...4 as ClosedRange<UInt64> {
            _ = queue.finish(Self.gid(value), outcome: .failed(code: .network, message: "network"))
        }
        #expect(queue.stopped.map(\.gid) == [Self.gid(3), Self.gid(4)])
        #expect(queue.stoppedTotal == 4)
        _ = queue.setMaxDownloadResult(1)
        #expect(queue.stopped.map(\.gid) == [Self.gid(4)])
        #expect(queue.stopped.first?.status == .error)
        #expect(queue.stoppedTotal == 4)
    }

    @Test("adding fills free slots, passing over paused ones")
    func fillSkipsPaused() throws {
        var queue = DownloadQueue(maxConcurrentDownloads: 1)
        #expect(try queue.add(Self.entry(1), paused: true) == [.emit(.added(Self.gid(1)))])
        #expect(
            try queue.add(Self.entry(2))
                == [.emit(.added(Self.gid(2))), .start(Self.gid(2)), .emit(.started(Self.gid(2)))]
        )
        #expect(Self.layout(queue) == "A=2 W=1p S=")
        #expect(try queue.unpause(Self.gid(1)) == [.emit(.changed(Self.gid(1)))])
        let actions = try queue.remove(Self.gid(2))
        #expect(actions.contains(.start(Self.gid(1))))
        #expect(Self.layout(queue) == "A=1 W= S=2:31")
        #expect(queue.result(of: Self.gid(2))?.status == .removed)
    }

    @Test("a queue that does not fill its slots starts only what start(_:) names, and can take that back")
    func startsOnlyWhenTold() throws {
        var queue = DownloadQueue(maxConcurrentDownloads: 2, fillsFreeSlots: false)
        #expect(try queue.add(Self.entry(1)) == [.emit(.added(Self.gid(1)))])
        #expect(try queue.add(Self.entry(2)) == [.emit(.added(Self.gid(2)))])
        #expect(try queue.add(Self.entry(3)) == [.emit(.added(Self.gid(3)))])
        #expect(queue.startUp() == [])
        queue.acceptChanges()
        let before = queue
        #expect(try queue.start(Self.gid(2)) == [.start(Self.gid(2)), .emit(.started(Self.gid(2)))])
        #expect(queue.changes == [.place(Self.gid(2), state: .active, position: 1)])
        queue.revertChanges()
        #expect(queue == before)
        _ = try queue.start(Self.gid(2))
        // A finish, a higher limit or a pause frees a slot, and nothing takes it.
        #expect(
            queue.finish(Self.gid(2), outcome: .complete(path: "/2", length: 1)) == [.emit(.completed(Self.gid(2)))]
        )
        #expect(queue.setMaxConcurrentDownloads(5) == [.emit(.optionsChanged)])
        _ = try queue.start(Self.gid(3))
        #expect(try queue.pause(Self.gid(3)) == [.stop(Self.gid(3), reason: .pause), .emit(.paused(Self.gid(3)))])
        #expect(queue.unpauseAll() == [.emit(.changed(Self.gid(3)))])
        #expect(Self.layout(queue) == "A= W=3,1 S=2:0")
        _ = queue.shutdown()
        #expect(throws: QueueError.self) { try queue.start(Self.gid(1)) }
    }

    @Test("after shutdown nothing starts and errors are not results; a completion still is")
    func shutdownFreezes() throws {
        var queue = Self.fixture()
        _ = queue.shutdown()
        #expect(queue.shutdown() == [])
        #expect(queue.finish(Self.gid(1), outcome: .failed(code: .unknown, message: "cancelled")) == [])
        #expect(
            queue.finish(Self.gid(2), outcome: .complete(path: "/2", length: 1)) == [.emit(.completed(Self.gid(2)))]
        )
        #expect(try queue.unpause(Self.gid(4)) == [.emit(.changed(Self.gid(4)))])
        #expect(Self.layout(queue) == "A=1 W=3,4,5 S=6:0,2:0")
    }

    @Test("a removed result keeps what was recorded of the file")
    func removedKeepsFacts() throws {
        var queue = Self.fixture()
        queue.record(Self.gid(1), path: "/d/one.bin", totalLength: 100, completedLength: 40)
        _ = try queue.remove(Self.gid(1))
        let result = try #require(queue.result(of: Self.gid(1)))
        #expect(result.path == "/d/one.bin")
        #expect(result.totalLength == 100)
        #expect(result.completedLength == 40)
        #expect(result.errorCode == 31)
        #expect(result.errorMessage == "")
    }

    @Test("changing dir or out forgets the resolved path, and the audio beside it")
    func changingDestinationForgetsPath() throws {
        var queue = Self.fixture()
        queue.record(Self.gid(4), path: "/d/four.ts", audioPath: "/d/four.audio.ts")
        _ = try queue.changeOptions(Self.gid(4), [QueueOption(name: "split", value: "3")])
        #expect(queue.downloads[Self.gid(4)]?.path == "/d/four.ts")
        #expect(queue.downloads[Self.gid(4)]?.audioPath == "/d/four.audio.ts")
        _ = try queue.changeOptions(Self.gid(4), [QueueOption(name: "out", value: "other.bin")])
        #expect(queue.downloads[Self.gid(4)]?.path == nil)
        #expect(queue.downloads[Self.gid(4)]?.audioPath == nil)
        #expect(
            queue.downloads[Self.gid(4)]?.entry.options == [
                QueueOption(name: "split", value: "3"), QueueOption(name: "out", value: "other.bin"),
            ]
        )
    }

    @Test("a run's names replace an earlier run's: an audio it does not have is gone; an unnamed record keeps it")
    func namesReplaceTheAudio() throws {
        var queue = Self.fixture()
        queue.record(Self.gid(4), path: "/d/v.ts", audioPath: "/d/v.audio.ts")
        queue.record(Self.gid(4), totalLength: 10, completedLength: 5)
        #expect(queue.downloads[Self.gid(4)]?.audioPath == "/d/v.audio.ts")
        queue.record(Self.gid(4), path: "/d/v.ts", audioPath: .some(nil))
        #expect(queue.downloads[Self.gid(4)]?.audioPath == nil)
        #expect(queue.downloads[Self.gid(4)]?.path == "/d/v.ts")
    }
}
