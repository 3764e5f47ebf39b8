/// Thrown by ``waitUntil(_:limit:_:)`` when its condition never held.
public struct GaveUpWaiting: Error, CustomStringConvertible {
    /// What was waited for.
    public var condition: String

    public init(condition: String) {
        self.condition = condition
    }

    public var description: String { "gave up waiting for \(self.condition)" }
}

/// Polls `condition` every few milliseconds until it holds; throws ``GaveUpWaiting`` after `limit`, which only
/// guards against a hang (two minutes by default): a test asserts on what happened, never on how soon.
public func waitUntil(
    _ what: @autoclosure () -> String,
    limit: Duration = .seconds(120),
    _ condition: () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while !(try await condition()) {
        guard clock.now < deadline else { throw GaveUpWaiting(condition: what()) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Polls `body` every few milliseconds until it gives a value, and returns that value; throws ``GaveUpWaiting``
/// after `limit` (two minutes by default, a guard against a hang, as for ``waitUntil(_:limit:_:)``).
public func eventually<Value>(
    _ what: @autoclosure () -> String,
    limit: Duration = .seconds(120),
    _ body: () async throws -> Value?
) async throws -> Value {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while true {
        if let value = try await body() { return value }
        guard clock.now < deadline else { throw GaveUpWaiting(condition: what()) }
        try await Task.sleep(for: .milliseconds(5))
    }
}
