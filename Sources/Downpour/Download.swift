import Foundation
import Logging
import NIOConcurrencyHelpers

/// One file being downloaded: a handle with a stable ``id``, a ``state`` and a ``progress`` you can read at any
/// time, ``pause()``, ``resume()`` and ``cancel(keepingPartialFile:)``, and ``events`` for as many listeners as
/// you like.
///
/// ```swift
/// let download = Downloader.shared.download(try DownloadRequest(url: "https://example.com/big.iso"))
/// async let result = download.run()
/// for await event in download.events {
///     if case .progress(let progress) = event { print(progress.completedBytes, progress.bytesPerSecond) }
/// }
/// print(try await result.path)
/// ```
///
/// ``run()`` does the work in the calling task, once. Cancelling that task stops the download and, when the
/// server allows ranges and bytes are on disk, keeps them (`NAME.part` and its journal `NAME.part.downpour`), so
/// the same request, in this process or a later one, continues where it stopped (``DownloadError/resumable``
/// says whether it can); ``cancel(keepingPartialFile:)`` stops it and removes them.
public final class Download: Sendable, Identifiable {
    /// Where a download is in its life.
    public enum State: String, Sendable, Hashable, Codable {
        /// Made, ``run()`` not called yet.
        case queued
        /// Finding out what is at the URL.
        case probing
        /// Fetching bytes.
        case downloading
        /// Stopped by ``pause()``: connections closed, journal saved; ``resume()`` continues.
        case paused
        /// The file is complete under its final name.
        case completed
        /// Ended with an error other than cancellation.
        case failed
        /// Stopped by ``cancel(keepingPartialFile:)`` or by cancelling the task running ``run()``.
        case cancelled
    }

    /// 16 lowercase hexadecimal digits, stable for the life of the download (aria2's GID).
    public let id: DownloadID
    /// The request as given; ``setMaximumRate(_:)`` changes the rate in force, not this copy.
    public let request: DownloadRequest
    /// The downloader whose connections and limits this download uses.
    public let downloader: Downloader

    private let logger: Logger
    private let gate = PauseGate()
    private let hub = DownloadEventHub()
    private let limiter: BandwidthLimiter
    private let control = NIOLockedValueBox(Control())
    private let cancelSignal = PauseGate()
    private let cookieStore: CookieStore?
    private let willFinish: (@Sendable () async -> Void)?
    private let writePermit: (@Sendable () async -> Bool)?

    private struct Control {
        var started = false
        var cancelRequested = false
        var keepPartialFile = false
        var partPath: String?
        /// The run is past its point of no return: its file is being synced and given its final name, or has it.
        var finishing = false
    }

    /// A download through ``Downloader/shared``.
    ///
    /// - Parameters:
    ///   - request: what to download and where to put it.
    ///   - logger: receives diagnostics at `info` and below; silent by default.
    public convenience init(
        _ request: DownloadRequest,
        logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(request, id: DownloadID(), downloader: .shared, logger: logger)
    }

    /// - Parameters:
    ///   - willFinish: Awaited once a run is past its point of no return, before its file is synced and renamed
    ///     (tests hold a run there).
    ///   - writePermit: Asked before each write that matters (``Downloader/download(_:id:logger:writePermit:)``).
    init(
        _ request: DownloadRequest,
        id: DownloadID,
        downloader: Downloader,
        logger: Logger,
        willFinish: (@Sendable () async -> Void)? = nil,
        writePermit: (@Sendable () async -> Bool)? = nil,
        limiter: BandwidthLimiter? = nil
    ) {
        self.request = request
        self.willFinish = willFinish
        self.writePermit = writePermit
        self.id = id
        self.downloader = downloader
        var logger = logger
        logger[metadataKey: "download"] = "\(id)"
        self.logger = logger
        self.limiter = limiter ?? BandwidthLimiter(rate: request.configuration.maximumRate)
        self.cookieStore = request.configuration.cookies.map(CookieStore.init)
    }

    /// A download that continues the one whose output is `path`, from its journal alone: the URL comes from
    /// `path.part.downpour`; the length and validators recorded there are compared with a new probe, as for any
    /// resume.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` when there is no readable journal for `path`.
    public static func resuming(
        path: String,
        configuration: DownloadConfiguration = .init(),
        downloader: Downloader = .shared,
        logger: Logger = Logger(label: "downpour", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(DownloadError) -> Download {
        let store = JournalStore(partPath: path + ".part")
        switch store.load() {
        case .loaded(let journal):
            var configuration = configuration
            configuration.resume = true
            let request = try DownloadRequest(
                url: journal.sourceURL,
                destination: .file(path),
                configuration: configuration
            )
            return downloader.download(request, logger: logger)
        case .missing:
            throw .invalidRequest("There is no resume journal at '\(store.path)'; nothing to resume.")
        case .unreadable(let reason):
            throw .invalidRequest("The resume journal '\(store.path)' cannot be used: \(reason).")
        }
    }

    /// What happens, as it happens: each access is a new sequence of its own. It begins with what happened so
    /// far (`started`, the latest 256 other events, the last progress) and finishes after `finished` or
    /// `failed`. Each listener has a buffer of the newest 1,024 events: one that does not keep up loses the
    /// oldest ones, never the final event, and never slows the download.
    public var events: AsyncStream<DownloadEvent> {
        self.hub.subscribe()
    }

    /// Where the download is now.
    public var state: State {
        self.hub.phase
    }

    /// The latest snapshot: bytes on disk, total, speed, connections and their ranges.
    public var progress: DownloadProgress {
        self.hub.progress
    }

    /// The cookies as they are now: ``DownloadConfiguration/cookies`` and what the servers have set since, until
    /// the end of the download and after it, whether it succeeded or not (to save them, as
    /// ``CookieJar/netscapeFormat(now:)`` writes them). `nil` when the download uses no cookies.
    public var cookies: CookieJar? {
        self.cookieStore?.snapshot
    }

    /// The bandwidth limit of this download alone, in bytes per second; `nil` for none.
    public var maximumRate: Int64? {
        self.limiter.rate
    }

    /// Changes this download's bandwidth limit, at once if it is running; `nil` lifts it. The
    /// ``Downloader``'s overall limit applies as well.
    public func setMaximumRate(_ rate: Int64?) {
        self.limiter.setRate(rate.map { max(1, $0) })
    }

    /// Closes the connections and saves the journal; the download waits until ``resume()``.
    public func pause() {
        self.gate.pause()
    }

    /// Continues a paused download with the bytes that are missing.
    public func resume() {
        self.gate.resume()
    }

    /// Stops the download for good: ``run()`` ends with ``DownloadError/Code/cancelled``, and `NAME.part` and
    /// its journal are removed unless `keepingPartialFile` (then the same request resumes it later, as after a
    /// pause). Unlike ``pause()`` it cannot be undone; unlike cancelling the task that runs ``run()``, it
    /// removes what arrived by default. A download not started yet ends as soon as ``run()`` is called.
    ///
    /// A download has one point of no return: when all its bytes are in and verified, just before its file is
    /// synced and given its final name. A cancel after it comes too late and changes nothing; one before it
    /// always wins, so the file never appears under its name after a cancel that was accepted.
    ///
    /// - Returns: `false` when the cancel came too late: the download is finishing or has finished, and
    ///   ``run()`` returns its result as if there had been no cancel. `true` otherwise: ``run()`` does not
    ///   succeed (it may have failed already).
    @discardableResult
    public func cancel(keepingPartialFile: Bool = false) -> Bool {
        let accepted = self.control.withLockedValue { control in
            guard !control.finishing else { return false }
            control.cancelRequested = true
            control.keepPartialFile = keepingPartialFile
            return true
        }
        if accepted { self.cancelSignal.pause() }
        return accepted
    }

    /// Downloads the file. Call once: a second call throws.
    ///
    /// - Returns: where the file is and what was transferred.
    /// - Throws: a ``DownloadError``. Nothing is ever left under the final name unless the download succeeded;
    ///   when the error is ``DownloadError/resumable``, `NAME.part` and its journal are kept for the next run.
    ///   ``DownloadError/Code/cancelled`` after ``cancel(keepingPartialFile:)`` or when the task is cancelled;
    ///   ``DownloadError/Code/invalidRequest`` when ``run()`` was called before.
    @discardableResult
    public func run() async throws(DownloadError) -> DownloadResult {
        let first = self.control.withLockedValue { control in
            defer { control.started = true }
            return !control.started
        }
        guard first else {
            throw .invalidRequest(
                "Download \(self.id) has been run already; a download runs once. Make a new one from the same "
                    + "request to run it again (it resumes from what is on disk)."
            )
        }
        self.hub.setPhase(.probing)
        let engine = DownloadEngine(
            request: self.request,
            downloader: self.downloader,
            hub: self.hub,
            gate: self.gate,
            limiter: self.limiter,
            cookies: self.cookieStore,
            logger: self.logger,
            partPathKnown: { [control = self.control] path in control.withLockedValue { $0.partPath = path } },
            mayFinish: { [control = self.control] in
                control.withLockedValue { control in
                    if !control.cancelRequested { control.finishing = true }
                    return control.finishing
                }
            },
            willFinish: self.willFinish,
            writePermit: self.writePermit
        )
        let signal = self.cancelSignal
        // Cancelled before it ran: not a single request is sent.
        let cancelledBeforeRun = self.control.withLockedValue { $0.cancelRequested }
        let outcome: Result<DownloadResult, DownloadError>
        if cancelledBeforeRun {
            outcome = .failure(.cancelled)
        } else {
            outcome = await Self.runUntilCancelled(engine, signal: signal)
        }
        switch outcome {
        case .success(let result):
            self.hub.emit(.finished(result))
            return result
        case .failure(var error):
            let control = self.control.withLockedValue { $0 }
            if control.cancelRequested, error.code == .cancelled || error.resumable {
                // Without its write permit any more, what is on disk is another writer's: kept whatever was asked.
                let mayRemove = await self.writePermit?() ?? true
                if !control.keepPartialFile, mayRemove, let partPath = control.partPath {
                    JournalStore(partPath: partPath).remove()
                    FileOperations.remove(partPath)
                    error = DownloadError(
                        code: .cancelled,
                        message: "The download was cancelled; what arrived was removed."
                    )
                } else {
                    error = DownloadError(
                        code: .cancelled,
                        message: "The download was cancelled; what arrived is kept and the same request resumes it.",
                        resumable: error.resumable
                    )
                }
            }
            self.hub.emit(.failed(error))
            throw error
        }
    }

    /// Runs `engine` until it ends, or until `signal` says ``cancel(keepingPartialFile:)`` was called.
    private static func runUntilCancelled(
        _ engine: DownloadEngine,
        signal: PauseGate
    ) async -> Result<DownloadResult, DownloadError> {
        await withTaskGroup(of: Result<DownloadResult, DownloadError>?.self) { group in
            group.addTask {
                do throws(DownloadError) {
                    return .success(try await engine.run())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                await signal.waitUntilPaused()
                return nil
            }
            var outcome: Result<DownloadResult, DownloadError>?
            while let next = await group.next() {
                if let next {
                    outcome = next
                    group.cancelAll()
                } else if !Task.isCancelled {
                    // cancel() was called: stop the engine.
                    group.cancelAll()
                }
            }
            return outcome ?? .failure(.cancelled)
        }
    }
}
