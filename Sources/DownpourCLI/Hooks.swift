import Downpour
import DownpourAria2
import DownpourQueue
import DownpourSpawn
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// aria2's hooks (`on-download-start`, `-pause`, `-stop`, `-complete`, `-error`): a program run with aria2's three
/// arguments, the GID, the number of files (1) and the file's path (empty while unknown). The program is started
/// directly (``Spawn``, looked for in `PATH` when its name has no `/`, as aria2 does), without a shell, so nothing of a URL or a server's file name is ever read as a command; it is not
/// waited for, its output goes nowhere, and a failure is logged and changes nothing.
struct Hooks: Sendable {
    enum Moment: Sendable, Hashable {
        case start, pause, stop, complete, error
    }

    var start: String?
    var pause: String?
    var stop: String?
    var complete: String?
    var error: String?

    init(_ settings: Aria2Arguments) {
        func command(_ option: Aria2Option) -> String? {
            settings.value(option).flatMap { $0.isEmpty ? nil : $0 }
        }
        self.start = command(.onDownloadStart)
        self.pause = command(.onDownloadPause)
        self.stop = command(.onDownloadStop)
        self.complete = command(.onDownloadComplete)
        self.error = command(.onDownloadError)
    }

    var isEmpty: Bool {
        [self.start, self.pause, self.stop, self.complete, self.error].allSatisfy { $0 == nil }
    }

    /// The program for `moment`: as in aria2, `on-download-stop` runs when a download completes or fails only when
    /// no `on-download-complete` (or `-error`) is set, and always when one is removed.
    func command(for moment: Moment) -> String? {
        switch moment {
        case .start: self.start
        case .pause: self.pause
        case .stop: self.stop
        case .complete: self.complete ?? self.stop
        case .error: self.error ?? self.stop
        }
    }

    /// Starts the program for `moment`, if there is one, and returns at once; a thread of its own waits for it
    /// (and logs a failure), so no zombie is left.
    func run(_ moment: Moment, gid: String, path: String?, logger: Logger) {
        guard let command = self.command(for: moment) else { return }
        let pid: pid_t
        do {
            pid = try Spawn.start(
                executable: command,
                arguments: [gid, "1", path ?? ""],
                environment: Spawn.currentEnvironment,
                searchingPath: true
            )
        } catch {
            logger.warning(
                "A hook could not be started",
                metadata: ["hook": "\(command)", "gid": "\(gid)", "error": "\(error.description)"]
            )
            return
        }
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            if status != 0 {
                logger.warning(
                    "A hook failed",
                    metadata: ["hook": "\(command)", "gid": "\(gid)", "status": "\(status)"]
                )
            }
        }
    }

    /// The moment a download of `get` ended at: completed, failed, or stopped (Ctrl-C).
    static func moment(of outcome: Result<DownloadResult, DownloadError>) -> Moment {
        switch outcome {
        case .success: .complete
        case .failure(let error) where error.code == .cancelled: .stop
        case .failure: .error
        }
    }

    /// Starts the program for how a download of `get` ended.
    func run(_ outcome: Result<DownloadResult, DownloadError>, gid: String, path: String? = nil, logger: Logger) {
        let path: String? =
            switch outcome {
            case .success(let result): result.path
            case .failure: path
            }
        self.run(Self.moment(of: outcome), gid: gid, path: path, logger: logger)
    }

    /// Runs the hooks for `events` of `queue` until it shuts down.
    func follow(_ events: AsyncStream<QueueEvent>, of queue: any DownloadQueueService, logger: Logger) async {
        for await event in events {
            let moment: Moment
            let gid: DownloadID
            switch event {
            case .started(let id): (moment, gid) = (.start, id)
            case .paused(let id): (moment, gid) = (.pause, id)
            case .stopped(let id): (moment, gid) = (.stop, id)
            case .completed(let id): (moment, gid) = (.complete, id)
            case .failed(let id): (moment, gid) = (.error, id)
            case .added, .changed, .resultsRemoved, .optionsChanged: continue
            }
            guard self.command(for: moment) != nil else { continue }
            let path = try? await queue.status(of: gid.description).path
            self.run(moment, gid: gid.description, path: path, logger: logger)
        }
    }
}
