import NIOConcurrencyHelpers
import NIOCore

/// The server's open connections, across its event loops, and the cap on their number.
///
/// A connection over the cap is not refused while another one stalls: the connection that has been stalled longest
/// (``ConnectionTimeline/stalledSince``) is closed to make room, so a flood of connections that send half a request
/// and then nothing never locks out a client that talks. Only when no connection is stalled (all are being answered
/// or are WebSockets) is the new one closed instead.
final class ConnectionRegistry: Sendable {
    /// A connection's handle in the registry.
    struct ID: Sendable, Hashable {
        let value: UInt64
    }

    private struct Entry {
        let channel: any Channel
        var stalledSince: NIODeadline?
    }

    private struct State {
        var nextID: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    /// The most connections open at once.
    let capacity: Int
    private let state = NIOLockedValueBox(State())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The connections open now.
    var count: Int { self.state.withLockedValue { $0.entries.count } }

    /// Takes in a new connection, stalled since `now` (it has sent nothing yet).
    /// - Returns: its handle, and the connection to close to make room, if any: the one stalled longest, or
    ///   `channel` itself when no other is stalled.
    func admit(_ channel: any Channel, at now: NIODeadline) -> (id: ID, close: (any Channel)?) {
        self.state.withLockedValue { state in
            state.nextID += 1
            let id = state.nextID
            state.entries[id] = Entry(channel: channel, stalledSince: now)
            guard state.entries.count > self.capacity else { return (ID(value: id), nil) }
            var victim: (id: UInt64, since: NIODeadline)?
            for (other, entry) in state.entries where other != id {
                guard let since = entry.stalledSince else { continue }
                if victim.map({ since < $0.since || (since == $0.since && other < $0.id) }) ?? true {
                    victim = (other, since)
                }
            }
            let closing = victim?.id ?? id
            let channel = state.entries.removeValue(forKey: closing)?.channel
            return (ID(value: id), channel)
        }
    }

    /// Records since when a connection has been stalled (`nil`: it is being answered).
    func update(_ id: ID, stalledSince: NIODeadline?) {
        self.state.withLockedValue { state in
            state.entries[id.value]?.stalledSince = stalledSince
        }
    }

    /// Forgets a closed connection.
    func remove(_ id: ID) {
        _ = self.state.withLockedValue { $0.entries.removeValue(forKey: id.value) }
    }
}
