/// Decides how long to wait before trying a failed request again: exponential back-off with jitter, at least
/// what the server asked for in `Retry-After`, never more than the configured maximum.
struct RetryPolicy: Sendable {
    var configuration: DownloadConfiguration.Retry

    /// The wait before retry number `retry` (1 for the first retry).
    func delay(beforeRetry retry: Int, retryAfter: Duration? = nil) -> Duration {
        let exponent = min(max(retry - 1, 0), 20)
        let base = self.configuration.wait * (1 << exponent)
        let capped = min(base, self.configuration.maximumWait)
        // "Equal jitter": half fixed, half random, so connections that failed together spread out.
        let jittered = capped / 2 + capped / 2 * Double.random(in: 0...1)
        guard let retryAfter else { return jittered }
        return min(max(jittered, retryAfter), max(self.configuration.maximumWait, .zero))
    }

    /// Parses a `Retry-After` header: delay-seconds or an HTTP date.
    static func parseRetryAfter(_ value: String, now: Double) -> Duration? {
        let text = Substring(value).trimmingSpaces()
        if let seconds = Int64(decimal: text) {
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(String(text)) else { return nil }
        return .seconds(max(0, date - now))
    }
}
