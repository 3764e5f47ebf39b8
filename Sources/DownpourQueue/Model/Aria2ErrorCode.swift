import Downpour

/// aria2's error codes (§4 of the reference): the number a stopped download reports as `errorCode`. Only the
/// codes Downpour gives have members.
public enum Aria2ErrorCode: Int, Sendable, Hashable, CaseIterable {
    /// The download completed.
    case finished = 0
    /// Anything without a code of its own.
    case unknown = 1
    /// HTTP 404.
    case resourceNotFound = 3
    /// A network error after the tries.
    case network = 6
    /// The disk is full.
    case noSpace = 9
    /// Another download is writing the same file.
    case duplicateDownload = 11
    /// The file exists and is not ours to replace.
    case fileExists = 13
    /// Another local I/O error.
    case fileIO = 17
    /// The server changed the file or answered what it must not.
    case badResponse = 22
    /// HTTP 401 or 407.
    case authorizationFailed = 24
    /// A bad option or argument.
    case badOption = 28
    /// HTTP 503.
    case serviceUnavailable = 29
    /// A user removed the download while it ran.
    case removed = 31
    /// The file's digest did not match.
    case checksumMismatch = 32

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
    public init(_ error: DownloadError) {
        switch error.code {
        case .httpStatus:
            switch error.httpStatus {
            case 404: self = .resourceNotFound
            case 401, 407: self = .authorizationFailed
            case 503: self = .serviceUnavailable
            default: self = .unknown
            }
        case .network: self = .network
        case .outputExists: self = .fileExists
        case .checksumMismatch: self = .checksumMismatch
        case .localIO: self = error.systemCallError?.isNoSpace == true ? .noSpace : .fileIO
        case .remoteChanged, .remoteMisbehaved: self = .badResponse
        case .invalidRequest: self = .badOption
        case .alreadyRunning: self = .duplicateDownload
        default: self = .unknown
        }
    }
}
