import Foundation
import Logging

/// Runs one download from probe to final name: the work behind ``Download/run()``.
///
/// ``perform()`` reads as the flow the README describes, one stage a file:
/// - probe (`DownloadEngine+Probe.swift`): which URL answers, what is there, and what the download produces;
/// - prepare (`+Prepare.swift`): the destination, the conditional GET, the `.part` file and the resume decision;
/// - plan and fetch (`+Transfer.swift`): the ``TransferSession`` and the ``DownloadStateMachine``'s actions, rounds
///   of workers among them, up to the finish;
/// - record and verify (`+Verify.swift`): the journal, the pieces' and the file's digests;
/// - finish (`+Finish.swift`): the point of no return, the final name, or a Metalink document read; and what a
///   failure leaves on disk.
struct DownloadEngine: Sendable {
    let request: DownloadRequest
    let downloader: Downloader
    let hub: DownloadEventHub
    let gate: PauseGate
    let limiter: BandwidthLimiter
    /// The download's cookie jar, when it uses cookies.
    let cookies: CookieStore?
    let logger: Logger
    /// Told the `.part` path as soon as it is known, so that a cancel can remove it.
    let partPathKnown: @Sendable (String) -> Void
    /// Asked at the point of no return, just before the file is synced and given its final name: `false` when
    /// the download was cancelled, and it stops there instead; `true` commits it to finishing, and a cancel
    /// after that comes too late (``Download/cancel(keepingPartialFile:)``).
    let mayFinish: @Sendable () -> Bool
    /// Awaited once the download is committed to finishing.
    let willFinish: (@Sendable () async -> Void)?
    /// Asked before each write that matters (``checkWritePermit()``); `nil`: always allowed.
    let writePermit: (@Sendable () async -> Bool)?

    /// The bandwidth limits its bytes are read under: the downloader's and its own.
    var pacing: Pacing {
        Pacing(limiters: [self.downloader.overallLimiter, self.limiter])
    }

    /// Whether the download may still write (always, without a permit).
    func writePermitted() async -> Bool {
        await self.writePermit?() ?? true
    }

    /// Throws ``DownloadError/Code/superseded`` when the write permit was withdrawn: before a journal save, a start
    /// over, a fall-back that drops the journal, and the final name.
    func checkWritePermit() async throws(DownloadError) {
        guard !(await self.writePermitted()) else { return }
        throw DownloadStateMachine.superseded
    }

    func run() async throws(DownloadError) -> DownloadResult {
        do {
            return try await self.perform()
        } catch {
            if Task.isCancelled && error.code != .localIO && error.code != .superseded {
                throw DownloadError(
                    code: .cancelled,
                    message: error.resumable
                        ? "The download was stopped; what arrived is kept and the same request resumes it."
                        : "The download was cancelled.",
                    resumable: error.resumable
                )
            }
            throw error
        }
    }

    /// Probe → prepare → plan → fetch, record and verify → finish.
    private func perform() async throws(DownloadError) -> DownloadResult {
        try await self.validate()
        let probed = try await self.probe()
        // The probe's response, when still streaming, is connection 1's first range; if nothing took it (the file
        // was done already, or the download ended first), its connection is closed here.
        defer { probed.outcome.running?.end() }
        let output: PreparedOutput
        switch try await self.prepare(probed) {
        case .alreadyDone(let result):
            return result
        case .ready(let ready):
            output = ready
        }
        return try await self.fetch(self.plan(probed, output), output)
    }

    /// Checks the request before any byte moves: its configuration, destination and URLs, and that no file stands
    /// at a fixed destination that may not be replaced.
    private func validate() async throws(DownloadError) {
        let configuration = self.request.configuration
        try configuration.validate()
        try self.request.destination.validate()
        for mirror in self.request.mirrors {
            try DownloadRequest.validate(mirror)
        }
        guard let path = self.request.destination.fixedPath else { return }
        let engine = self
        try await BlockingIO.run { () throws(DownloadError) in
            // With a conditional GET an existing file is judged once the probe has said how new the remote is; a
            // file with this download's finish mark, once the probe has said how long the remote is.
            try engine.checkFree(
                path,
                replacing: configuration.overwrite || configuration.conditionalGet || configuration.renamesExisting
                    || engine.isMarkedAsFinished(path)
            )
        }
    }
}
