import Downpour

/// aria2's error codes (§4 of the reference) for the errors a download stops with.
public enum Aria2ErrorCode {
    /// The code aria2 would report for `error`:
    ///
    /// | error | code |
    /// |---|---|
    /// | HTTP 404 | 3 (resource not found) |
    /// | HTTP 401 or 407 | 24 (authorization failed) |
    /// | HTTP 503 | 29 (server overloaded) |
    /// | network | 6 |
    /// | output exists | 13 |
    /// | checksum mismatch | 32 |
    /// | local I/O: no space | 9 |
    /// | local I/O: other | 17 |
    /// | remote changed or misbehaved | 22 (bad response) |
    /// | invalid request | 28 (bad option or argument) |
    /// | already running | 11 (same file being downloaded) |
    /// | anything else | 1 (unknown) |
    public static func code(for error: DownloadError) -> Int {
        switch error.code {
        case .httpStatus:
            switch error.httpStatus {
            case 404: return 3
            case 401, 407: return 24
            case 503: return 29
            default: return 1
            }
        case .network: return 6
        case .outputExists: return 13
        case .checksumMismatch: return 32
        case .localIO: return error.systemCallError?.isNoSpace == true ? 9 : 17
        case .remoteChanged, .remoteMisbehaved: return 22
        case .invalidRequest: return 28
        case .alreadyRunning: return 11
        default: return 1
        }
    }
}
