import Downpour
import Foundation

/// Runs the entries of an input file through one ``Downloader``, `concurrency` at a time, in the file's order,
/// and returns the exit status: 0 when every entry succeeded, else the status of the first failed entry (8 when
/// Ctrl-C or SIGTERM paused the batch).
struct BatchRunner {
    struct Entry: Sendable {
        /// The entry's line in the input file.
        var line: Int
        var request: DownloadRequest
    }

    let entries: [Entry]
    let concurrency: Int
    let downloader: Downloader
    let renderer: BatchRenderer
    /// Given the cookie jar of every download that used cookies, when it has ended.
    var cookiesCollected: (@Sendable (CookieJar) -> Void)?

    func run() async -> Int32 {
        let entries = self.entries
        let downloader = self.downloader
        let renderer = self.renderer
        let cookiesCollected = self.cookiesCollected
        renderer.begin(total: entries.count)
        let batch = Task { () async -> [Int: Result<DownloadResult, DownloadError>] in
            await withTaskGroup(of: (Int, Result<DownloadResult, DownloadError>).self) { group in
                var results: [Int: Result<DownloadResult, DownloadError>] = [:]
                var next = 0
                func startNext() {
                    guard next < entries.count, !Task.isCancelled else { return }
                    let index = next
                    next += 1
                    group.addTask {
                        let download = downloader.download(entries[index].request)
                        // Quiet: nothing to show, so no listener to wake for every event.
                        let events = renderer.isQuiet ? nil : download.events
                        async let listened: Void = {
                            guard let events else { return }
                            for await event in events {
                                renderer.render(event, of: index, url: entries[index].request.url.absoluteString)
                            }
                        }()
                        let result: Result<DownloadResult, DownloadError>
                        do throws(DownloadError) {
                            result = .success(try await download.run())
                        } catch {
                            result = .failure(error)
                        }
                        await listened
                        if let jar = download.cookies { cookiesCollected?(jar) }
                        return (index, result)
                    }
                }
                for _ in 0..<min(self.concurrency, entries.count) { startNext() }
                while let (index, result) = await group.next() {
                    results[index] = result
                    startNext()
                }
                return results
            }
        }
        // Ctrl-C or SIGTERM: every running download stops gracefully (data written, journal saved), no new one
        // starts. A second one leaves at once.
        let interruptions = InterruptionHandler { batch.cancel() }
        defer { interruptions.stop() }
        let results = await batch.value
        renderer.end()
        return self.summarize(results)
    }

    private func summarize(_ results: [Int: Result<DownloadResult, DownloadError>]) -> Int32 {
        var failures: [(Entry, DownloadError)] = []
        var succeeded = 0
        var paused = 0
        for (index, entry) in self.entries.enumerated() {
            switch results[index] {
            case .success: succeeded += 1
            case .failure(let error) where error.code == .cancelled: paused += 1
            case .failure(let error): failures.append((entry, error))
            case nil: paused += 1
            }
        }
        let total = self.entries.count
        guard succeeded < total else {
            self.renderer.line("All \(total) downloads completed.")
            return ExitStatus.success
        }
        var summary = ["downpour: \(succeeded) of \(total) downloads completed"]
        if !failures.isEmpty { summary[0] += ", \(failures.count) failed" }
        if paused > 0 { summary[0] += ", \(paused) stopped or not started" }
        summary[0] += "."
        for (entry, error) in failures {
            summary.append("  line \(entry.line): \(entry.request.url.absoluteString): \(error.message)")
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
