import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Everything a ``RangeTestServer`` shares between its connections, behind one lock.
final class ServerState: Sendable {
    private struct Mutable {
        var statistics = RangeTestServer.Statistics()
        var progress: ResponsePlanner.Progress
        var openChannels: [Int: any Channel] = [:]
        var isShutDown = false
        var isHoldingBodies = false
        /// Body bytes handed to the sockets so far (counted as they are written, ahead of `bodyBytesSent`).
        var bodyBytesQueued = 0
        /// Hold bodies once `bodyBytesQueued` reaches this (see ``RangeTestServer/holdBodies(afterSending:)``).
        var holdAfterBytes: Int?
        /// Hold the last bytes of every file, this many (see ``RangeTestServer/holdBodies(lastBytes:)``).
        var heldTail: Int?
    }

    let planner: ResponsePlanner
    private let mutable: NIOLockedValueBox<Mutable>

    init(planner: ResponsePlanner) {
        self.planner = planner
        self.mutable = NIOLockedValueBox(Mutable(progress: planner.makeProgress()))
    }

    /// Registers a newly accepted connection; returns its 1-based ID, or `nil` once the server is shutting down.
    func connectionOpened(_ channel: any Channel) -> Int? {
        self.mutable.withLockedValue { state in
            guard !state.isShutDown else { return nil }
            state.statistics.connections += 1
            let connectionID = state.statistics.connections
            state.openChannels[connectionID] = channel
            state.statistics.mostOpenConnections = max(state.statistics.mostOpenConnections, state.openChannels.count)
            return connectionID
        }
    }

    func connectionClosed(_ connectionID: Int) {
        self.mutable.withLockedValue { state in
            _ = state.openChannels.removeValue(forKey: connectionID)
        }
    }

    /// Records `request` and decides the answer, atomically, so fault counters follow the order of handling.
    func respond(
        to request: HTTPRequestHead,
        connectionID: Int,
        receivedAt: ContinuousClock.Instant,
        onReusedConnection reused: Bool
    ) -> ResponsePlan {
        var recorded = RangeTestServer.RecordedRequest(
            method: request.method.rawValue,
            uri: request.uri,
            headers: request.headers.map { (name: $0.name, value: $0.value) },
            connectionID: connectionID,
            receivedAt: receivedAt,
            status: 0,
            requestedRange: nil,
            throttle: self.planner.throttleRate(forConnection: connectionID)
        )
        return self.mutable.withLockedValue { state in
            switch request.method {
            case .GET:
                state.statistics.getRequests += 1
            case .HEAD:
                state.statistics.headRequests += 1
            default:
                break
            }
            var plan = self.planner.plan(
                method: request.method,
                uri: request.uri,
                headers: request.headers,
                onReusedConnection: reused,
                progress: &state.progress
            )
            recorded.status = Int(plan.status.code)
            recorded.requestedRange = plan.requestedRange
            plan.logIndex = state.statistics.requests.count
            state.statistics.requests.append(recorded)
            return plan
        }
    }

    /// Whether body bytes wait (see ``RangeTestServer/holdBodies()``).
    var isHoldingBodies: Bool {
        get { self.mutable.withLockedValue { $0.isHoldingBodies } }
        set {
            self.mutable.withLockedValue { state in
                state.isHoldingBodies = newValue
                if !newValue { (state.holdAfterBytes, state.heldTail) = (nil, nil) }
            }
        }
    }

    /// How many bytes at the end of every file wait (see ``RangeTestServer/holdBodies(lastBytes:)``).
    /// Serves `file` at `path` (``RangeTestServer/serve(_:_:)``).
    func serve(_ path: String, _ file: RangeTestServer.ServedFile) {
        self.mutable.withLockedValue { state in
            state.progress.files[path] = file
            state.progress.fileGETs[path] = 0
        }
    }

    var heldTail: Int? {
        get { self.mutable.withLockedValue { $0.heldTail } }
        set { self.mutable.withLockedValue { $0.heldTail = newValue } }
    }

    /// Whether bodies wait now: ``RangeTestServer/holdBodies()``, or the threshold of
    /// ``RangeTestServer/holdBodies(afterSending:)`` reached (which then holds until released).
    var shouldHoldBodies: Bool {
        self.mutable.withLockedValue { state in
            if let threshold = state.holdAfterBytes, state.bodyBytesQueued >= threshold {
                state.isHoldingBodies = true
                state.holdAfterBytes = nil
            }
            return state.isHoldingBodies
        }
    }

    /// Counts a slice handed to a socket.
    func bodyBytesQueued(_ count: Int) {
        self.mutable.withLockedValue { $0.bodyBytesQueued += count }
    }

    /// Holds the bodies once `bytes` body bytes have been handed to the sockets in all (at once if they have): the
    /// count is taken as each slice is written, so not a byte more goes out.
    /// Holds the bodies once `bytes` more body bytes than so far have been handed to the sockets.
    func holdBodies(afterSendingMore bytes: Int) {
        self.mutable.withLockedValue { state in
            state.holdAfterBytes = state.bodyBytesQueued + bytes
        }
    }

    func holdBodies(afterSending bytes: Int) {
        self.mutable.withLockedValue { state in
            if state.bodyBytesQueued >= bytes {
                state.isHoldingBodies = true
            } else {
                state.holdAfterBytes = bytes
            }
        }
    }

    /// Counts body bytes whose write succeeded, in all and for the request at `logIndex`.
    func bodyBytesWritten(_ count: Int, logIndex: Int) {
        self.mutable.withLockedValue { state in
            state.statistics.bodyBytesSent += count
            state.statistics.requests[logIndex].bodyBytesSent += count
        }
    }

    var statistics: RangeTestServer.Statistics {
        self.mutable.withLockedValue { state in
            var statistics = state.statistics
            statistics.openConnections = state.openChannels.count
            statistics.openConnectionIDs = Set(state.openChannels.keys)
            return statistics
        }
    }

    /// Marks the server as shutting down and returns the connections still open; `nil` if it already was.
    func beginShutdown() -> [any Channel]? {
        self.mutable.withLockedValue { state in
            guard !state.isShutDown else { return nil }
            state.isShutDown = true
            return Array(state.openChannels.values)
        }
    }
}
