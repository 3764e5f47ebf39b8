import Downpour
import DownpourTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A download with a write permit (``Downloader/download(_:id:logger:writePermit:)``), as a daemon of a fleet runs
/// one under a lease: once the permit is withdrawn, the download stops and writes nothing more, and what is on
/// disk stays for the writer that took over.
@Suite("Write permits")
struct WritePermitTests {
    /// A permit a test withdraws; it notes how often it was asked, and what the journal held when it first said no.
    final class Permit: Sendable {
        struct State {
            var asked = 0
            var withdrawn = false
            var journalAtRefusal: Data??
        }

        let state = NIOLockedValueBox(State())
        let journalPath: String
        /// Withdrawn once this holds (asked at every check until then).
        let withdrawWhen: @Sendable () -> Bool

        init(journalPath: String, withdrawWhen: @escaping @Sendable () -> Bool) {
            self.journalPath = journalPath
            self.withdrawWhen = withdrawWhen
        }

        @Sendable func allows() -> Bool {
            let withdraw = self.withdrawWhen()
            return self.state.withLockedValue { state in
                state.asked += 1
                if withdraw && !state.withdrawn {
                    state.withdrawn = true
                    // The download asks before each save and waits for the answer: no save of its runs now.
                    state.journalAtRefusal = .some(FileManager.default.contents(atPath: self.journalPath))
                }
                return !state.withdrawn
            }
        }
    }

    @Test("withdrawn mid-transfer: the download stops at its next write, and the .part and journal stay as they were")
    func withdrawnMidTransfer() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024, seed: 31)
        // Connections 2 and 4 crawl (8 KiB/s: two minutes for their ranges, which nothing splits or races), so
        // the transfer cannot end before journal saves, however busy the machine; the permit is withdrawn at the
        // first write after a journal landed (a later save, or the final name).
        try await withServer(
            content: content,
            faults: [.throttle(bytesPerSecond: 8 * 1024, everyNthConnection: 2)]
        ) { server in
            let path = directory.file("leased.bin")
            let journalPath = path + ".part.downpour"
            let permit = Permit(journalPath: journalPath) { FileManager.default.fileExists(atPath: journalPath) }
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 1024 * 1024)
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: nil)
            configuration.journalInterval = .milliseconds(50)
            let request = try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            let outcome = await collect(testDownloader.download(request, writePermit: permit.allows))
            #expect(outcome.error?.code == .superseded, "\(String(describing: outcome.error))")
            #expect(outcome.error?.resumable == false)
            #expect(!FileManager.default.fileExists(atPath: path), "the file got its final name")
            #expect(FileManager.default.fileExists(atPath: path + ".part"), "the .part file was removed")
            let state = permit.state.withLockedValue { $0 }
            let atRefusal = try #require(state.journalAtRefusal, "the permit was never withdrawn")
            #expect(
                FileManager.default.contents(atPath: path + ".part.downpour") == atRefusal,
                "the journal changed after the permit was withdrawn"
            )
            #expect(atRefusal != nil, "no journal was saved while the permit held")
            #expect(state.asked >= 3)
            // Stopped at a journal save mid-transfer: the crawling ranges were never written whole.
            let written = outcome.events.compactMap { if case .progress(let progress) = $0 { progress } else { nil } }
            #expect(written.last.map { $0.completedBytes < Int64(content.count) } ?? true, "\(written.last!)")
        }
    }

    @Test("a cancel after the permit was withdrawn removes nothing: the files are the new writer's")
    func cancelAfterWithdrawal() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024, seed: 34)
        // Connections 2 and 4 crawl: the download is still running when the test cancels it.
        try await withServer(
            content: content,
            faults: [.throttle(bytesPerSecond: 8 * 1024, everyNthConnection: 2)]
        ) { server in
            let path = directory.file("taken.bin")
            let journalPath = path + ".part.downpour"
            let withdrawn = NIOLockedValueBox(false)
            var configuration = testConfiguration(connections: 4, minimumSplitSize: 1024 * 1024)
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: nil)
            configuration.journalInterval = .milliseconds(50)
            let request = try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            let download = testDownloader.download(request) { !withdrawn.withLockedValue { $0 } }
            async let outcome = collect(download)
            try await waitUntil("a journal save") { FileManager.default.fileExists(atPath: journalPath) }
            withdrawn.withLockedValue { $0 = true }
            let journal = FileManager.default.contents(atPath: journalPath)
            download.cancel()
            let error = await outcome.error
            #expect(error != nil)
            #expect(FileManager.default.fileExists(atPath: path + ".part"), "the .part file was removed")
            #expect(FileManager.default.contents(atPath: journalPath) == journal, "the journal changed or went")
        }
    }

    @Test(
        "withdrawn while bytes come and no journal save is due: a stream, or ranges saved once an hour, stops then",
        arguments: [true, false]
    )
    func withdrawnBetweenSaves(stream: Bool) async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 4 * 1024 * 1024, seed: stream ? 35 : 36)
        // Every connection crawls (32 KiB/s: two minutes for the file), so the download cannot end by itself while
        // the test runs; a stream has no journal, and ranges have none due for an hour: only the permit's watch
        // can stop them before the end.
        var faults: [RangeTestServer.Fault] = [.throttle(bytesPerSecond: 32 * 1024, everyNthConnection: 1)]
        if stream { faults.append(.ignoreRange) }
        try await withServer(content: content, faults: faults) { server in
            let path = directory.file("cut-off.bin")
            let withdrawn = NIOLockedValueBox(false)
            var configuration = testConfiguration(connections: 2, minimumSplitSize: 1024 * 1024)
            configuration.racesTail = false
            configuration.slowConnections = .init(shareOfMedian: nil)
            configuration.journalInterval = .seconds(3600)
            let request = try DownloadRequest(url: server.url(), destination: .file(path), configuration: configuration)
            let download = testDownloader.download(request) { !withdrawn.withLockedValue { $0 } }
            async let outcome = collect(download)
            try await waitUntil("bytes in the .part file") {
                ((try? FileManager.default.attributesOfItem(atPath: path + ".part"))?[.size] as? Int ?? 0) > 0
            }
            withdrawn.withLockedValue { $0 = true }
            let ended = await outcome
            #expect(ended.error?.code == .superseded, "\(String(describing: ended.error))")
            #expect(!FileManager.default.fileExists(atPath: path), "the file got its final name")
            #expect(FileManager.default.fileExists(atPath: path + ".part"), "the .part file was removed")
            let written = ended.events.compactMap { if case .progress(let progress) = $0 { progress } else { nil } }
            #expect(
                (written.last?.completedBytes ?? 0) < Int64(content.count),
                "the download ran to its end before it stopped"
            )
        }
    }

    @Test("withdrawn before the first write: nothing is written at all")
    func withdrawnBeforeAnyWrite() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // Small enough to be finished by the probe's own request, in the trip that writes its bytes.
        let content = makeTestContent(count: 20_000, seed: 32)
        try await withServer(content: content) { server in
            let path = directory.file("small.bin")
            let permit = Permit(journalPath: path + ".part.downpour") { true }
            let request = try DownloadRequest(
                url: server.url(),
                destination: .file(path),
                configuration: testConfiguration()
            )
            let outcome = await collect(testDownloader.download(request, writePermit: permit.allows))
            #expect(outcome.error?.code == .superseded, "\(String(describing: outcome.error))")
            #expect(directory.contents().isEmpty, "written: \(directory.contents())")
            #expect(permit.state.withLockedValue { $0.asked } == 1)
        }
    }

    @Test("a permit that holds changes nothing, and is asked before the writes")
    func heldPermit() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: 2 * 1024 * 1024, seed: 33)
        try await withServer(content: content) { server in
            let path = directory.file("kept.bin")
            let permit = Permit(journalPath: path + ".part.downpour") { false }
            let request = try DownloadRequest(
                url: server.url(),
                destination: .file(path),
                configuration: testConfiguration()
            )
            _ = try await collect(testDownloader.download(request, writePermit: permit.allows)).value
            try expectFile(path, equals: content, in: directory)
            // Before the .part file is written, and before the final name at least.
            #expect(permit.state.withLockedValue { $0.asked } >= 2)
        }
    }
}
