import Foundation

/// What a running download reports, in order: `started`, any number of `progress`, `retrying`, `restarted`,
/// `notice`, `paused` and `resumed`, then exactly one of `finished` or `failed`. (A download that fails before
/// its probe is done reports `failed` alone; one that ``DownloadConfiguration/conditionalGet`` skips reports
/// `finished` alone, with ``DownloadResult/wasSkipped``. A `notice` about the request itself, such as a `.netrc`
/// file that is ignored, may come before `started`.)
public enum DownloadEvent: Sendable {
    /// The probe is done and the download begins.
    case started(DownloadStart)
    /// A periodic snapshot of the transfer.
    case progress(DownloadProgress)
    /// Something a person should know that does not stop the download: a journal that could not be trusted,
    /// a remote file that changed since the last run, a resume that cannot prove the file is unchanged.
    case notice(String)
    /// ``Download/pause()`` took effect: connections are closed and the journal is saved.
    case paused
    /// ``Download/resume()`` took effect.
    case resumed
    /// A request failed and will be tried again after `delay`.
    case retrying(connection: Int, attempt: Int, delay: Duration, reason: String)
    /// A connection stayed much slower than the others (or below ``DownloadConfiguration/SlowConnections/lowestSpeed``)
    /// and was replaced by a new one, which continues where it stopped.
    case restarted(connection: Int, reason: String)
    /// Every byte is on disk and the file has its final name.
    case finished(DownloadResult)
    /// The download stopped with an error.
    case failed(DownloadError)
}

/// The facts a download starts from.
public struct DownloadStart: Sendable {
    /// What the probe found on the server.
    public var remoteFile: RemoteFile
    /// Where the finished file will be.
    public var destinationPath: String
    /// How many connections will be used (1 when the server does not serve ranges).
    public var connections: Int
    /// Bytes already on disk from an earlier attempt.
    public var resumedBytes: Int64
}

/// A snapshot of a running download.
public struct DownloadProgress: Sendable, Hashable {
    /// Bytes on disk, including any that were there before this run.
    public var completedBytes: Int64
    /// The file's length, when known.
    public var totalBytes: Int64?
    /// Speed over the last few seconds.
    public var bytesPerSecond: Double
    /// Connections with a request in flight.
    public var activeConnections: Int
    /// One entry per connection that has worked so far.
    public var connections: [ConnectionProgress]
    /// The bytes on disk, as sorted, disjoint ranges of the file (a segment map).
    public var completedRanges: [Range<Int64>]

    public init(
        completedBytes: Int64,
        totalBytes: Int64?,
        bytesPerSecond: Double,
        activeConnections: Int,
        connections: [ConnectionProgress],
        completedRanges: [Range<Int64>] = []
    ) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.activeConnections = activeConnections
        self.connections = connections
        self.completedRanges = completedRanges
    }

    /// The fraction done, from 0 to 1, when the length is known.
    public var fractionCompleted: Double? {
        guard let totalBytes else { return nil }
        return totalBytes == 0 ? 1 : Double(self.completedBytes) / Double(totalBytes)
    }

    /// Time left at the current speed, when there is a length and a speed.
    public var estimatedTimeRemaining: Duration? {
        guard let totalBytes, self.bytesPerSecond > 0 else { return nil }
        let seconds = Double(max(0, totalBytes - self.completedBytes)) / self.bytesPerSecond
        guard seconds.isFinite, seconds < 1e9 else { return nil }
        return .milliseconds(Int64(seconds * 1000))
    }
}

/// One connection's share of a download.
public struct ConnectionProgress: Sendable, Hashable {
    /// Numbered from 1.
    public var id: Int
    /// Bytes this connection wrote in this run.
    public var receivedBytes: Int64
    /// This connection's speed over the last few seconds.
    public var bytesPerSecond: Double
    /// The bytes it still has to fetch, when it is working on a range.
    public var remainingRange: Range<Int64>?
    /// How many times it was replaced by a new connection in this run: restarted for being slow, or reconnected
    /// after a dropped connection or a failed request.
    public var restarts: Int
    /// The URL its current or last request went to: one of the download's mirrors (after redirects, for the one
    /// that was probed); `nil` before its first request.
    public var source: URL?

    public init(
        id: Int,
        receivedBytes: Int64,
        bytesPerSecond: Double,
        remainingRange: Range<Int64>?,
        restarts: Int = 0,
        source: URL? = nil
    ) {
        self.id = id
        self.receivedBytes = receivedBytes
        self.bytesPerSecond = bytesPerSecond
        self.remainingRange = remainingRange
        self.restarts = restarts
        self.source = source
    }
}

/// A finished download.
public struct DownloadResult: Sendable {
    /// Where the file is.
    public var path: String
    /// Its length.
    public var length: Int64
    /// What the server said about it.
    public var remoteFile: RemoteFile
    /// Bytes fetched in this run (the rest were on disk already).
    public var downloadedBytes: Int64
    /// Bytes that came from the servers in this run and are not new bytes of the file: a range fetched twice (a
    /// copy raced against a slow connection, a piece that failed its check, a transfer started over, a stream that
    /// began again from byte 0) or dropped past what was wanted. Bytes a server sent into a connection that was
    /// closed before they were read cannot be counted here.
    public var wastedBytes: Int64 = 0
    /// Wall-clock time of this run.
    public var elapsed: Duration
    /// The most connections that worked at once.
    public var connectionsUsed: Int
    /// Nothing was downloaded because the file at ``path`` is at least as new as the remote one
    /// (``DownloadConfiguration/conditionalGet``): it was left as it was.
    public var wasSkipped = false
    /// The digest the file was verified against: ``DownloadConfiguration/checksum``, else one the server sent;
    /// `nil` when there was none.
    public var checksum: Checksum? = nil
    /// The Metalink document the URL answered with, when ``DownloadConfiguration/followsMetalink`` is set and the
    /// response was one (`application/metalink4+xml`, `application/metalink+xml`, or a path ending in `.meta4` or
    /// `.metalink`): the document was read and parsed, and no file was saved (``path`` is where it would have
    /// been). Download the files it lists with requests of their own.
    public var metalink: Metalink? = nil
    /// The HLS playlist the URL answered with, when ``DownloadConfiguration/followsPlaylists`` is set and the response
    /// was one: the document was read, and no file was saved (``path`` is where it would have been).
    public var playlist: PlaylistDocument? = nil
}
