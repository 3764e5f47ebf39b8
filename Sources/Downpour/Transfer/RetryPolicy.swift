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

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to seconds since 1970, without Foundation's formatters.
enum HTTPDate {
    static func parse(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]) else {
            return nil
        }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let hour = Int(time[0]), let minute = Int(time[1]), let second = Int(time[2]) else {
            return nil
        }
        // Days from civil date (Howard Hinnant's algorithm).
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146097 + dayOfEra - 719468
        return Double(days * 86400 + hour * 3600 + minute * 60 + second)
    }
}
