import Downpour
import DownpourAria2
import DownpourHLS
import Foundation
import Logging

/// Runs the entries of an input file through one ``Downloader``, `concurrency` at a time, in the file's order,
/// and returns the exit status: 0 when every download succeeded, else the status of the first failed one (8 when
/// Ctrl-C or SIGTERM paused the batch).
///
/// An entry whose URL turned out to be a Metalink document (its request follows Metalinks, and its result has
/// ``DownloadResult/metalink``) is not a download of its own: the files the document lists join the batch
/// (``Entry/metalinkFiles(of:options:line:origin:)``, in the entry's directory) and start before the
/// entries still waiting, as aria2 puts them at the front of its waiting queue. They are counted, and their
/// failures named, as every other download.
struct BatchRunner {
    struct Entry: Sendable {
        /// The entry's line in the input file.
        var line: Int
        var request: DownloadRequest
        /// For a file of a Metalink document that an entry's URL answered with: that URL and the file's name.
        var origin: String? = nil
        /// The entry's own `metalink-location`, for a URL that turns out to be a Metalink; `nil`: the batch's.
        var metalinkLocations: [String]? = nil
        /// What to fetch when its URL turns out to be an HLS playlist.
        var playlistOptions = HLSDownload.Options()
    }

    /// What became of one entry.
    private enum Outcome: Sendable {
        case finished(Result<DownloadResult, DownloadError>)
        /// A Metalink document whose files joined the batch.
        case followed
    }

    let entries: [Entry]
    let concurrency: Int
    let downloader: Downloader
    let renderer: BatchRenderer
    /// `--metalink-location`: with a Metalink, the URLs of these countries first.
    var metalinkLocations: [String] = []
    /// Given the cookie jar of every download that used cookies, when it has ended.
    var cookiesCollected: (@Sendable (CookieJar) -> Void)?
    /// aria2's hooks, run for each download with a GID of its own, and the logger for their failures.
    var hooks: (Hooks, Logger)?

    func run() async -> Int32 {
        let downloader = self.downloader
        let renderer = self.renderer
        let cookiesCollected = self.cookiesCollected
        let hooks = self.hooks
        let locations = self.metalinkLocations
        renderer.begin(total: self.entries.count)
        let batch = Task { [entries = self.entries, concurrency = self.concurrency] in
            await withTaskGroup(of: (Int, Result<DownloadResult, DownloadError>).self) {
                group -> (entries: [Entry], outcomes: [Int: Outcome]) in
                // Entries only grow (a Metalink's files are appended), so an index names one download for good;
                // `order` is what starts next.
                var entries = entries
                var order = Array(entries.indices)[...]
                var outcomes: [Int: Outcome] = [:]
                var running = 0
                func startNext() {
                    guard let index = order.first, !Task.isCancelled else { return }
                    order = order.dropFirst()
                    running += 1
                    let entry = entries[index]
                    group.addTask {
                        let download = downloader.download(entry.request)
                        let gid = InputGID.random()
                        // Quiet and without hooks: nothing to show, so no listener to wake for every event.
                        let events = renderer.isQuiet && hooks == nil ? nil : download.events
                        async let listened: String? = {
                            guard let events else { return nil }
                            var path: String?
                            for await event in events {
                                if case .started(let start) = event, let (hooks, logger) = hooks {
                                    path = start.destinationPath
                                    hooks.run(.start, gid: gid, path: start.destinationPath, logger: logger)
                                }
                                renderer.render(event, of: index, url: entry.request.url.absoluteString)
                            }
                            return path
                        }()
                        var result: Result<DownloadResult, DownloadError>
                        do throws(DownloadError) {
                            result = .success(try await download.run())
                        } catch {
                            result = .failure(error)
                        }
                        var path = await listened
                        if case .success(let done) = result, let playlist = done.playlist {
                            // An HLS playlist: its segments, in this entry's slot, into one file; the cookies its
                            // answer set go with them.
                            var entry = entry
                            if let jar = download.cookies { entry.request.configuration.cookies = jar }
                            result = await Self.fetchSegments(
                                of: playlist,
                                as: done,
                                entry: entry,
                                downloader: downloader
                            )
                            renderer.playlistEnded(result, of: index, url: entry.request.url.absoluteString)
                            if case .success(let video) = result { path = video.path }
                        }
                        if let (hooks, logger) = hooks { hooks.run(result, gid: gid, path: path, logger: logger) }
                        if let jar = download.cookies { cookiesCollected?(jar) }
                        return (index, result)
                    }
                }
                for _ in 0..<min(concurrency, entries.count) { startNext() }
                while let (index, result) = await group.next() {
                    running -= 1
                    if case .success(let done) = result, let metalink = done.metalink {
                        let entry = entries[index]
                        do throws(DownloadError) {
                            var options = entry.optionsForMetalinkFiles
                            options.metalinkLocations = entry.metalinkLocations ?? locations
                            let files = try Entry.metalinkFiles(
                                of: metalink,
                                options: options,
                                line: { _ in entry.line },
                                origin: "Metalink \(entry.request.url.absoluteString)"
                            )
                            let first = entries.count
                            entries += files
                            order = Array(first..<entries.count)[...] + order
                            renderer.addMetalinkFiles(files.count)
                            outcomes[index] = .followed
                        } catch {
                            renderer.metalinkFailed(url: entry.request.url.absoluteString, error)
                            outcomes[index] = .finished(.failure(error))
                        }
                    } else {
                        outcomes[index] = .finished(result)
                    }
                    while running < concurrency, !order.isEmpty, !Task.isCancelled { startNext() }
                }
                return (entries, outcomes)
            }
        }
        // Ctrl-C or SIGTERM: every running download stops gracefully (data written, journal saved), no new one
        // starts. A second one leaves at once.
        let interruptions = InterruptionHandler { batch.cancel() }
        defer { interruptions.stop() }
        let (entries, outcomes) = await batch.value
        renderer.end()
        return self.summarize(entries, outcomes)
    }

    /// The video of an entry whose URL was an HLS playlist (``HLSDownload``), as the entry's result.
    private static func fetchSegments(
        of playlist: PlaylistDocument,
        as document: DownloadResult,
        entry: Entry,
        downloader: Downloader
    ) async -> Result<DownloadResult, DownloadError> {
        do throws(DownloadError) {
            let video = try await HLSDownload(
                playlist,
                request: entry.request,
                downloader: downloader,
                options: entry.playlistOptions
            ).run()
            var result = document
            result.playlist = nil
            result.path = video.path
            result.length = video.length
            result.downloadedBytes += video.downloadedBytes
            return .success(result)
        } catch {
            return .failure(error)
        }
    }

    private func summarize(_ entries: [Entry], _ outcomes: [Int: Outcome]) -> Int32 {
        var failures: [(Entry, DownloadError)] = []
        var succeeded = 0
        var paused = 0
        var total = 0
        for (index, entry) in entries.enumerated() {
            if case .followed = outcomes[index] { continue }
            total += 1
            switch outcomes[index] {
            case .finished(.success): succeeded += 1
            case .finished(.failure(let error)) where error.code == .cancelled: paused += 1
            case .finished(.failure(let error)): failures.append((entry, error))
            case nil, .followed: paused += 1
            }
        }
        guard succeeded < total else {
            self.renderer.line("All \(total) downloads completed.")
            return ExitStatus.success
        }
        var summary = ["downpour: \(succeeded) of \(total) downloads completed"]
        if !failures.isEmpty { summary[0] += ", \(failures.count) failed" }
        if paused > 0 { summary[0] += ", \(paused) stopped or not started" }
        summary[0] += "."
        for (entry, error) in failures {
            let place = entry.origin.map { "line \(entry.line) (\($0))" } ?? "line \(entry.line)"
            summary.append("  \(place): \(entry.request.url.absoluteString): \(error.message)")
            if let hint = Remedy.hint(for: error) { summary.append("    " + hint) }
        }
        if paused > 0 {
            summary.append("downpour: run the same command again to resume; finished files are kept.")
        }
        for line in summary { writeError(line) }
        if let first = failures.first { return ExitStatus.code(for: first.1) }
        return ExitStatus.paused
    }
}
