import Downpour
import DownpourTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DownpourQueue

/// The ledger's transactions as a table of steps: what each step leaves to store, and whether the change counts.
@Suite("Queue ledger")
struct QueueLedgerTests {
    static func entry(_ value: UInt64) -> QueueEntry {
        QueueEntry(gid: DownloadID(value: value), uris: ["http://127.0.0.1:1/\(value)"], options: [])
    }

    /// What `write` asks the store for, in words.
    static func describe(_ write: QueueStore.Write?) -> String {
        switch write {
        case nil: "nothing"
        case .changes(let changes, let options)?: "\(changes.count) rows, options \(options?.count ?? -1)"
        case .whole(let queue, let options)?: "whole \(queue.downloads.count), options \(options.count)"
        }
    }

    enum Step: Sendable, CustomTestStringConvertible {
        case add(UInt64)
        case stored, refused, fellBehind

        var testDescription: String {
            switch self {
            case .add(let value): "add \(value)"
            case .stored: "stored"
            case .refused: "refused"
            case .fellBehind: "fell behind"
            }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var steps: [Step]
        /// The GIDs in the queue after the steps.
        var kept: [UInt64]
        /// What the next write asks for, with no options changed; and with one changed (`current` has two).
        var write: String
        var writeWithOption: String
        var pending: Bool

        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(
            name: "nothing changed",
            steps: [],
            kept: [],
            write: "nothing",
            writeWithOption: "0 rows, options 1",
            pending: false
        ),
        Case(
            name: "a change not yet stored",
            steps: [.add(1)],
            kept: [1],
            // The row of the download, and of its start (a slot was free).
            write: "2 rows, options -1",
            writeWithOption: "2 rows, options 1",
            pending: true
        ),
        Case(
            name: "a change stored",
            steps: [.add(1), .stored],
            kept: [1],
            write: "nothing",
            writeWithOption: "0 rows, options 1",
            pending: false
        ),
        Case(
            name: "a change refused is taken back",
            steps: [.add(1), .stored, .add(2), .refused],
            kept: [1],
            write: "nothing",
            writeWithOption: "0 rows, options 1",
            pending: false
        ),
        Case(
            name: "a change of the queue's own the store refused stands, and the next write is whole",
            steps: [.add(1), .fellBehind],
            kept: [1],
            write: "whole 1, options 2",
            writeWithOption: "whole 1, options 1",
            pending: true
        ),
        Case(
            name: "a whole write stored: the store is caught up",
            steps: [.add(1), .fellBehind, .add(2), .stored],
            kept: [1, 2],
            write: "nothing",
            writeWithOption: "0 rows, options 1",
            pending: false
        ),
    ]

    @Test("each step leaves the queue and what to store as the table says", arguments: cases)
    func steps(_ row: Case) throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var ledger = QueueLedger(store: try QueueStore(directory: directory.stateDirectory))
        for step in row.steps {
            switch step {
            case .add(let value): _ = try ledger.queue.add(Self.entry(value))
            case .stored: ledger.stored()
            case .refused: ledger.refused()
            case .fellBehind: ledger.fellBehind()
            }
        }
        #expect(ledger.queue.downloads.keys.map(\.value).sorted() == row.kept)
        let current = [QueueOption(name: "split", value: "4"), QueueOption(name: "dir", value: "/d")]
        #expect(Self.describe(ledger.write(options: nil, current: current)) == row.write)
        let changed = [QueueOption(name: "split", value: "8")]
        #expect(Self.describe(ledger.write(options: changed, current: current)) == row.writeWithOption)
        #expect(ledger.hasPendingRecord == row.pending)
    }
}

/// One transaction at a time, in the order they came.
@Suite("Transaction gate")
struct TransactionGateTests {
    @Test("the gate lets waiters through one at a time, in the order they came")
    func order() async throws {
        let gate = TransactionGate()
        #expect(gate.tryEnter())
        #expect(!gate.tryEnter(), "held")
        let order = NIOLockedValueBox<[Int]>([])
        var tasks: [Task<Void, Never>] = []
        for number in 1...3 {
            tasks.append(
                Task {
                    await gate.enter()
                    order.withLockedValue { $0.append(number) }
                    gate.leave()
                }
            )
            // Each waits before the next comes (a poll with a deadline: no wall-clock assertion).
            let deadline = ContinuousClock.now + .seconds(30)
            while gate.waiters < number, ContinuousClock.now < deadline { await Task.yield() }
            try #require(gate.waiters == number)
        }
        #expect(order.withLockedValue { $0 }.isEmpty, "nobody passes a held gate")
        gate.leave()
        for task in tasks { await task.value }
        #expect(order.withLockedValue { $0 } == [1, 2, 3])
        #expect(gate.tryEnter(), "free again once the last left")
        gate.leave()
    }

    @Test("leaving a gate nobody entered stops the process")
    func leaveWithoutEnter() async {
        await #expect(processExitsWith: .failure) {
            TransactionGate().leave()
        }
    }
}
