import Downpour
import DownpourTestSupport
import Foundation
import Testing

struct DownloadOutcome {
    var result: Result<DownloadResult, DownloadError>
    var events: [DownloadEvent]

    var value: DownloadResult {
        get throws { try self.result.get() }
    }

    var error: DownloadError? {
        if case .failure(let error) = self.result { return error }
        return nil
    }
}

/// The downloader of the integration tests: tests run in parallel against servers on 127.0.0.1, so they must not
/// share ``Downloader/shared``'s budget of 16 connections per host, which would make one test wait for another.
let testDownloader = Downloader(configuration: .init(maximumConnections: 10_000, maximumConnectionsPerHost: 10_000))

/// Runs a download to the end, collecting its events.
///
/// A download refused with ``DownloadError/Code/alreadyRunning`` is tried again for up to 5 s, unless
/// `retriesWhileLocked` is `false` (for the tests of the lock itself); see ``retryingWhileLocked(_:)``.
func runDownload(
    _ url: String,
    to destination: DownloadRequest.Destination,
    configuration: DownloadConfiguration = testConfiguration(),
    retriesWhileLocked: Bool = true
) async throws -> DownloadOutcome {
    let request = try DownloadRequest(url: url, destination: destination, configuration: configuration)
    guard retriesWhileLocked else { return await collect(testDownloader.download(request)) }
    return try await retryingWhileLocked { await collect(testDownloader.download(request)) }
}

/// Runs `download` to the end, collecting its events.
func collect(_ download: Download) async -> DownloadOutcome {
    async let collected: [DownloadEvent] = {
        var events: [DownloadEvent] = []
        for await event in download.events { events.append(event) }
        return events
    }()
    let result: Result<DownloadResult, DownloadError>
    do {
        result = .success(try await download.run())
    } catch {
        result = .failure(error)
    }
    return DownloadOutcome(result: result, events: await collected)
}

/// Runs `attempt` again, every 20 ms for up to 5 s, while it is refused with
/// ``DownloadError/Code/alreadyRunning``.
///
/// A download's lock is an `flock` on its `.part` file, and such a lock belongs to the open file description,
/// which a child process shares from `fork` until `exec` closes it. This test process spawns children (the CLI
/// tests run `downpour`, the disk-full test `mount`), so for a moment after a download here has ended and closed
/// its file, a child may still hold its lock. On a loaded machine that moment is long enough for the next download
/// of the same file to be refused. A lock that stays taken still fails the test, after 5 s.
func retryingWhileLocked(_ attempt: () async throws -> DownloadOutcome) async throws -> DownloadOutcome {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(5)
    while true {
        let outcome = try await attempt()
        guard outcome.error?.code == .alreadyRunning, clock.now < deadline else { return outcome }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Starts a server, hands it to `body`, and shuts it down afterwards, whatever happens.
func withServer<T>(
    content: [UInt8],
    faults: [RangeTestServer.Fault] = [],
    etag: String? = "\"downpour-test-v1\"",
    _ body: (RangeTestServer) async throws -> T
) async throws -> T {
    try await RangeTestServer.withServer(content: content, faults: faults, etag: etag, body)
}

/// Checks the download produced exactly `content` at `path` and nothing else in the directory.
func expectFile(
    _ path: String,
    equals content: [UInt8],
    in directory: ScratchDirectory,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    #expect(FileManager.default.fileExists(atPath: path), "no file at \(path)", sourceLocation: sourceLocation)
    #expect(try sha256Hex(ofFileAt: path) == sha256Hex(content), "content differs", sourceLocation: sourceLocation)
    let name = (path as NSString).lastPathComponent
    #expect(directory.contents() == [name], "left behind: \(directory.contents())", sourceLocation: sourceLocation)
}

/// Checks a failed download left nothing behind: no final file, no `.part`.
func expectNothingLeft(in directory: ScratchDirectory, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(directory.contents().isEmpty, "left behind: \(directory.contents())", sourceLocation: sourceLocation)
}

extension RangeTestServer.Statistics {
    var getRequestsRecorded: [RangeTestServer.RecordedRequest] {
        self.requests.filter { $0.method == "GET" }
    }
}

/// Pairs of GET requests where a later request on another connection asked for bytes that an earlier request on a
/// throttled connection had asked for: its range was split or raced.
func takeovers(
    in gets: [RangeTestServer.RecordedRequest]
) -> [(slow: RangeTestServer.RecordedRequest, taker: RangeTestServer.RecordedRequest)] {
    var pairs: [(slow: RangeTestServer.RecordedRequest, taker: RangeTestServer.RecordedRequest)] = []
    for (index, slow) in gets.enumerated() {
        guard slow.throttle != nil, let slowRange = askedRange(ofRequest: index, in: gets) else { continue }
        for taker in gets[(index + 1)...] where taker.connectionID != slow.connectionID {
            if let range = taker.requestedRange, range.overlaps(slowRange) {
                pairs.append((slow, taker))
            }
        }
    }
    return pairs
}

/// The bytes request `index` of `gets` was for: its range; for the first, the probe's, no further than where the
/// first request of another connection begins: the probe asks for the download's first 8 MiB and goes on as
/// connection 1's first range, cut at the end of its share when that ends sooner.
func askedRange(ofRequest index: Int, in gets: [RangeTestServer.RecordedRequest]) -> Range<Int>? {
    guard let range = gets[index].requestedRange else { return nil }
    guard index == 0 else { return range }
    var firsts: [Int: Int] = [:]
    for request in gets.dropFirst() where request.connectionID != gets[0].connectionID {
        if firsts[request.connectionID] == nil, let start = request.requestedRange?.lowerBound {
            firsts[request.connectionID] = start
        }
    }
    guard let end = firsts.values.filter({ $0 > 0 }).min() else { return range }
    return range.clamped(to: 0..<end)
}

/// One line per request, for failure messages: `#3 GET 0..<524288 206 (64 KiB/s)`.
func describe(_ requests: [RangeTestServer.RecordedRequest]) -> String {
    requests.map { request in
        var line = "#\(request.connectionID) \(request.method)"
        if let range = request.requestedRange { line += " \(range)" }
        line += " \(request.status)"
        if let throttle = request.throttle { line += " (\(throttle) B/s)" }
        return line
    }.joined(separator: "; ")
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

/// Waits until the file at `path` has been replaced `count` times (see ``fileStamp(atPath:)``), for up to 10 s each.
func waitForSaves(of path: String, count: Int) async throws {
    var stamp = fileStamp(atPath: path)
    for _ in 0..<count {
        let previous = stamp
        try await waitUntil("\(path) saved again") {
            stamp = fileStamp(atPath: path)
            return stamp != nil && stamp != previous
        }
    }
}
