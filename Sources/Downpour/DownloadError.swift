#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error from a download: what went wrong, in words a person can act on, and the cause underneath.
///
/// Compare errors by ``code``; the message is for people and may change. Two errors are equal when their code,
/// message, status, resumability and cause (by its description) are.
public struct DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
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
            case checksumMismatch
            case superseded
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
        /// The downloaded bytes do not have the expected digest (``DownloadConfiguration/checksum``, or one the
        /// server sent); ``DownloadError/checksumMismatch`` says which. The file never got its final name, and
        /// nothing of it was kept.
        public static let checksumMismatch = Code(base: .checksumMismatch)
        /// The download's write permit was withdrawn (``Downloader/download(_:id:logger:writePermit:)``): another
        /// writer has taken it over. Nothing more was written, and its `.part` file and journal were left as they
        /// were, for that writer.
        public static let superseded = Code(base: .superseded)

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
    /// request again continues where this one stopped. Set by the engine, which knows what it kept.
    public internal(set) var resumable: Bool

    /// The failed system call and its `errno`, when a local file operation failed.
    public var systemCallError: SystemCallError? {
        self.underlying as? SystemCallError
    }

    /// The expected and the actual digest, when the download failed with ``Code/checksumMismatch``.
    public var checksumMismatch: ChecksumMismatch? {
        self.underlying as? ChecksumMismatch
    }

    public init(code: Code, message: String, httpStatus: Int? = nil, underlying: (any Error)? = nil) {
        self.init(code: code, message: message, httpStatus: httpStatus, underlying: underlying, resumable: false)
    }

    init(
        code: Code,
        message: String,
        httpStatus: Int? = nil,
        underlying: (any Error)? = nil,
        resumable: Bool
    ) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.underlying = underlying
        self.resumable = resumable
    }

    public var description: String {
        if let underlying, !(underlying is SystemCallError), !(underlying is ChecksumMismatch) {
            return "\(self.message) (\(underlying))"
        }
        return self.message
    }

    public static func == (lhs: DownloadError, rhs: DownloadError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.httpStatus == rhs.httpStatus
            && lhs.resumable == rhs.resumable
            && lhs.underlying.map { String(describing: $0) } == rhs.underlying.map { String(describing: $0) }
    }
}

/// A system call that failed, and why: the structured cause of a ``DownloadError/Code/localIO`` error.
public struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call, such as `pwritev` or `open`.
    public var systemCall: String
    /// Its `errno`.
    public var errno: Int32

    public init(systemCall: String, errno: Int32) {
        self.systemCall = systemCall
        self.errno = errno
    }

    /// Whether the device or the user's quota is full.
    public var isNoSpace: Bool {
        self.errno == ENOSPC || self.errno == EDQUOT
    }

    public var description: String {
        "\(self.systemCall): \(describeErrno(self.errno)) (errno \(self.errno))"
    }
}

extension DownloadError {
    /// A run stopped because its write permit was withdrawn (``Downloader/download(_:id:logger:writePermit:)``).
    package static let superseded = DownloadError(
        code: .superseded,
        message: "Another writer took this download over; this run stopped and wrote nothing more."
    )

    package static func invalidRequest(_ message: String) -> DownloadError {
        DownloadError(code: .invalidRequest, message: message)
    }

    /// A failed local file operation: `systemCall` failed with `errno`.
    package static func localIO(_ message: String, systemCall: String, errno: Int32) -> DownloadError {
        let cause = SystemCallError(systemCall: systemCall, errno: errno)
        var text = message + ": " + describeErrno(errno)
        if cause.isNoSpace {
            text += ". Free some space, then resume the download."
        }
        return DownloadError(code: .localIO, message: text, underlying: cause)
    }

    static let cancelled = DownloadError(code: .cancelled, message: "The download was cancelled.")

    static func checksumMismatch(_ mismatch: ChecksumMismatch) -> DownloadError {
        DownloadError(
            code: .checksumMismatch,
            message: mismatch.summary + "; the file was removed.",
            underlying: mismatch
        )
    }
}
