#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error from a download: what went wrong, in words a person can act on, and the cause underneath.
///
/// Compare errors by ``code``; the message is for people and may change.
public struct DownloadError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Stable: the command-line tool maps each code to a documented exit code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Hashable, Sendable {
            case invalidRequest
            case httpStatus
            case network
            case remoteChanged
            case remoteMisbehaved
            case outputExists
            case localIO
            case cancelled
            case alreadyRunning
        }

        fileprivate let base: Base

        /// The request itself is unusable: a malformed URL, an unsupported scheme, a bad option value.
        public static let invalidRequest = Code(base: .invalidRequest)
        /// The server answered with an error status (such as 404 or 403), or redirected in a loop or too often.
        public static let httpStatus = Code(base: .httpStatus)
        /// The network failed and retries were used up: refused connections, time-outs, dropped connections.
        public static let network = Code(base: .network)
        /// The remote file is no longer the one that was probed: its validators or its length changed.
        public static let remoteChanged = Code(base: .remoteChanged)
        /// The server broke the protocol: a wrong `Content-Range`, more or fewer bytes than it promised.
        public static let remoteMisbehaved = Code(base: .remoteMisbehaved)
        /// The output file exists already and overwriting was not asked for.
        public static let outputExists = Code(base: .outputExists)
        /// Reading or writing a local file failed: no space left, no permission, a missing directory.
        public static let localIO = Code(base: .localIO)
        /// The download was stopped before it finished. When ``DownloadError/resumable`` is set, what was
        /// fetched is kept on disk and the same request picks it up again.
        public static let cancelled = Code(base: .cancelled)
        /// Another process (or another download in this one) is writing to the same output file.
        public static let alreadyRunning = Code(base: .alreadyRunning)

        public var description: String { self.base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened and what to do about it, in one or two sentences.
    public var message: String
    /// The HTTP status that caused the failure, when there was one.
    public var httpStatus: Int?
    /// The error underneath, when there is one.
    public var underlying: (any Error)?
    /// Whether the bytes fetched so far were kept (`NAME.part` and its journal), so that running the same
    /// request again continues where this one stopped.
    public var resumable: Bool

    public init(
        code: Code,
        message: String,
        httpStatus: Int? = nil,
        underlying: (any Error)? = nil,
        resumable: Bool = false
    ) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.underlying = underlying
        self.resumable = resumable
    }

    public var description: String {
        if let underlying {
            return "\(self.message) (\(underlying))"
        }
        return self.message
    }
}

extension DownloadError {
    static func invalidRequest(_ message: String) -> DownloadError {
        DownloadError(code: .invalidRequest, message: message)
    }

    static func localIO(_ message: String, errno: Int32? = nil, underlying: (any Error)? = nil) -> DownloadError {
        var text = message
        if let errno {
            text += ": " + describeErrno(errno)
            if errno == ENOSPC || errno == EDQUOT {
                text += ". Free some space and run the same command again."
            }
        }
        return DownloadError(code: .localIO, message: text, underlying: underlying)
    }

    static let cancelled = DownloadError(code: .cancelled, message: "The download was cancelled.")
}
