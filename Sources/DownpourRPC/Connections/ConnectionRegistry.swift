import NIOConcurrencyHelpers
import NIOCore

/// The server's open connections, across its event loops: the cap on their number, and the budget for the bytes
/// their unanswered request bodies hold.
///
/// A connection over the cap is not refused while another one stalls: the connection that has been stalled longest
/// (``ConnectionTimeline/stalledSince``) is closed to make room, so a flood of connections that send half a request
/// and then nothing never locks out a client that talks. Only when no connection is stalled (all are being answered
/// or are WebSockets) is the new one closed instead.
///
/// The body budget works the same way: when the bodies held (``hold(_:bytes:)``) pass ``bodyBudget``, the holders
/// stalled longest are closed until they fit. A body waiting for its peer's turn (a guesser's) counts as stalled
/// longest of all.
///
/// After a flood (many connections, or many bytes held) has drained away, the C library is asked to give its free
/// memory back to the system (``MemoryTrim``), so the daemon's size follows what it holds now.
final class ConnectionRegistry: Sendable {
    /// A connection's handle in the registry.
    struct ID: Sendable, Hashable {
        let value: UInt64
    }

    private struct Entry {
        let channel: any Channel
        var stalledSince: NIODeadline?
        var held = 0
    }

    private struct State {
        var nextID: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
        var held = 0
        /// The most connections and bytes held since memory was last given back.
        var peakCount = 0
        var peakHeld = 0
    }

    /// The most connections open at once.
    let capacity: Int
    /// The most bytes all unanswered request bodies may hold together.
    let bodyBudget: Int
    private let state = NIOLockedValueBox(State())
    private let trim: @Sendable () -> Void

    /// - Parameters:
    ///   - capacity: the most connections open at once.
    ///   - bodyBudget: the most bytes all unanswered bodies hold together.
    ///   - trim: gives free memory back after a flood (``MemoryTrim/release()``; tests count the calls).
    init(capacity: Int, bodyBudget: Int = 64 * 1024 * 1024, trim: @escaping @Sendable () -> Void = MemoryTrim.release) {
        self.capacity = max(1, capacity)
        self.bodyBudget = max(1, bodyBudget)
        self.trim = trim
    }

    /// The connections open now.
    var count: Int { self.state.withLockedValue { $0.entries.count } }

    /// The bytes the unanswered bodies hold now.
    var heldBytes: Int { self.state.withLockedValue { $0.held } }

    /// Takes in a new connection, stalled since `now` (it has sent nothing yet).
    /// - Returns: its handle, and the connection to close to make room, if any: the one stalled longest, or
    ///   `channel` itself when no other is stalled.
    func admit(_ channel: any Channel, at now: NIODeadline) -> (id: ID, close: (any Channel)?) {
        self.state.withLockedValue { state in
            state.nextID += 1
            let id = state.nextID
            state.entries[id] = Entry(channel: channel, stalledSince: now)
            state.peakCount = max(state.peakCount, state.entries.count)
            guard state.entries.count > self.capacity else { return (ID(value: id), nil) }
            let closing = Self.stalledLongest(in: state, except: id, holdingOnly: false) ?? id
            let channel = Self.remove(closing, from: &state)
            return (ID(value: id), channel)
        }
    }

    /// Records since when a connection has been stalled (`nil`: it is being answered).
    func update(_ id: ID, stalledSince: NIODeadline?) {
        self.state.withLockedValue { state in
            state.entries[id.value]?.stalledSince = stalledSince
        }
    }

    /// Records the bytes a connection's unanswered body holds now.
    /// - Returns: the connections to close to keep every body within ``bodyBudget``: those holding bytes that
    ///   stalled longest (maybe this one).
    func hold(_ id: ID, bytes: Int) -> [any Channel] {
        self.state.withLockedValue { state in
            guard let before = state.entries[id.value]?.held else { return [] }
            state.entries[id.value]?.held = bytes
            state.held += bytes - before
            state.peakHeld = max(state.peakHeld, state.held)
            var victims: [any Channel] = []
            while state.held > self.bodyBudget,
                let victim = Self.stalledLongest(in: state, except: nil, holdingOnly: true),
                let channel = Self.remove(victim, from: &state)
            {
                victims.append(channel)
            }
            return victims
        }
    }

    /// Forgets a closed connection; gives memory back once a flood has drained.
    func remove(_ id: ID) {
        let trims = self.state.withLockedValue { state -> Bool in
            _ = Self.remove(id.value, from: &state)
            guard
                MemoryTrim.isAfterFlood(
                    connections: state.entries.count,
                    held: state.held,
                    peakConnections: state.peakCount,
                    peakHeld: state.peakHeld
                )
            else { return false }
            state.peakCount = state.entries.count
            state.peakHeld = state.held
            return true
        }
        if trims { self.trim() }
    }

    private static func remove(_ id: UInt64, from state: inout State) -> (any Channel)? {
        guard let entry = state.entries.removeValue(forKey: id) else { return nil }
        state.held -= entry.held
        return entry.channel
    }

    /// The connection stalled longest (the lowest ID first among equals); with `holdingOnly`, among those holding
    /// body bytes, where one waiting for its turn (stalled since `nil`) comes first.
    private static func stalledLongest(in state: State, except: UInt64?, holdingOnly: Bool) -> UInt64? {
        var victim: (id: UInt64, since: NIODeadline)?
        for (other, entry) in state.entries where other != except {
            let since: NIODeadline
            if holdingOnly {
                guard entry.held > 0 else { continue }
                since = entry.stalledSince ?? .distantPast
            } else {
                guard let stalled = entry.stalledSince else { continue }
                since = stalled
            }
            if victim.map({ since < $0.since || (since == $0.since && other < $0.id) }) ?? true {
                victim = (other, since)
            }
        }
        return victim?.id
    }
}
