import NIOConcurrencyHelpers

/// Hands every event of one download to any number of listeners, and keeps what a listener that comes late
/// needs: the current state, the last progress, and the events that are not progress (the most recent
/// ``historyLimit`` of them, `started` always). Sending never waits: each listener has a buffer of its own
/// that keeps the newest events, so a listener that does not read loses old progress, never the engine's time.
final class DownloadEventHub: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<DownloadEvent>.Continuation] = [:]
        var nextID = 0
        var started: DownloadEvent?
        var history: [DownloadEvent] = []
        var lastProgress: DownloadProgress?
        var phase: Download.State = .queued
        var start: DownloadStart?
        var finished = false
    }

    static let historyLimit = 256
    static let bufferLimit = 1024

    private let state = NIOLockedValueBox(State())

    /// A new sequence: what happened so far (state-bearing events and the last progress), then everything as it
    /// happens, until the download finishes or fails.
    func subscribe() -> AsyncStream<DownloadEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadEvent.self,
            bufferingPolicy: .bufferingNewest(Self.bufferLimit)
        )
        let id: Int? = self.state.withLockedValue { state in
            if let started = state.started { continuation.yield(started) }
            // The last progress goes before the final event, as it happened.
            let final = state.finished ? state.history.last : nil
            for event in state.finished ? state.history.dropLast() : state.history[...] {
                continuation.yield(event)
            }
            if let progress = state.lastProgress { continuation.yield(.progress(progress)) }
            if let final {
                continuation.yield(final)
                continuation.finish()
                return nil
            }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        if let id {
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLockedValue { $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    func emit(_ event: DownloadEvent) {
        let subscribers: [AsyncStream<DownloadEvent>.Continuation] = self.state.withLockedValue { state in
            guard !state.finished else { return [] }
            switch event {
            case .progress(let progress):
                state.lastProgress = progress
            case .started(let start):
                state.started = event
                state.start = start
                state.phase = .downloading
            default:
                state.history.append(event)
                if state.history.count > Self.historyLimit {
                    state.history.removeFirst(state.history.count - Self.historyLimit)
                }
            }
            switch event {
            case .paused: state.phase = .paused
            case .resumed: state.phase = .downloading
            case .finished: state.phase = .completed
            case .failed(let error): state.phase = error.code == .cancelled ? .cancelled : .failed
            default: break
            }
            let subscribers = Array(state.subscribers.values)
            if case .finished = event { state.finished = true }
            if case .failed = event { state.finished = true }
            if state.finished { state.subscribers = [:] }
            return subscribers
        }
        for subscriber in subscribers {
            subscriber.yield(event)
        }
        switch event {
        case .finished, .failed:
            for subscriber in subscribers { subscriber.finish() }
        default:
            break
        }
    }

    func setPhase(_ phase: Download.State) {
        self.state.withLockedValue { $0.phase = phase }
    }

    var phase: Download.State {
        self.state.withLockedValue { $0.phase }
    }

    /// The latest progress; before any, what the start says (bytes already on disk, the length).
    var progress: DownloadProgress {
        self.state.withLockedValue { state in
            if let progress = state.lastProgress { return progress }
            return DownloadProgress(
                completedBytes: state.start?.resumedBytes ?? 0,
                totalBytes: state.start?.remoteFile.length,
                bytesPerSecond: 0,
                activeConnections: 0,
                connections: []
            )
        }
    }

    var start: DownloadStart? {
        self.state.withLockedValue { $0.start }
    }
}
