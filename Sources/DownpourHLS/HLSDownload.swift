import Downpour
import Foundation
import Logging
import NIOConcurrencyHelpers

/// Fetches what an HLS playlist lists as one file: the segments in parallel, each a download of its own under the
/// downloader's connection and bandwidth budgets, with the playlist request's retries, headers, cookies, proxies and
/// rate limit; then decrypted (AES-128) and written in playlist order to `NAME.part`, synced and renamed to `NAME`.
///
/// ```swift
/// let result = try await downloader.download(request).run()   // request.configuration.followsPlaylists = true
/// if let playlist = result.playlist {
///     let video = try await HLSDownload(playlist, request: request, downloader: downloader).run()
///     print(video.path)
/// }
/// ```
///
/// The segments wait in `NAME.hls/`, beside the output, each under its final name only once it is whole: a run
/// stopped at any moment (even `kill -9`) and started again fetches only what is missing. A playlist that changed in
/// between (other segments, ranges or keys) starts over. The output is MPEG-TS segments one after another (`.ts`),
/// or the initialisation section and the fragments (`.mp4`); both play as they are. When the chosen variant takes
/// its audio from a rendition of its own, that is fetched too, into a second file beside the video.
public struct HLSDownload: Sendable {
    /// What to fetch.
    public struct Options: Sendable, Hashable {
        /// Which variant of a multivariant playlist.
        public var video: HLSVideoChoice
        /// Fetch the audio rendition the variant names (`EXT-X-MEDIA TYPE=AUDIO`), when it is separate.
        public var audio: Bool
        /// The subtitles renditions the variant names to fetch, each into a WebVTT file beside the video.
        public var subtitles: HLSSubtitleChoice
        /// Segments fetched at once; each is one connection.
        public var concurrentSegments: Int
        /// A live playlist (no `EXT-X-ENDLIST`) is recorded until it ends, until the run is cancelled, or for this
        /// long; `nil`: no limit. What was recorded is saved in every case.
        public var recordTime: Duration?

        public init(
            video: HLSVideoChoice = .best,
            audio: Bool = true,
            subtitles: HLSSubtitleChoice = .none,
            concurrentSegments: Int = 8,
            recordTime: Duration? = nil
        ) {
            self.video = video
            self.audio = audio
            self.subtitles = subtitles
            self.concurrentSegments = concurrentSegments
            self.recordTime = recordTime
        }
    }

    /// How far it is.
    public struct Progress: Sendable, Hashable {
        /// Where the output goes (``Result/path``), and its audio rendition (``Result/audioPath``).
        public var path: String
        public var audioPath: String?
        /// A live playlist, being recorded.
        public var isLive: Bool
        /// Segments on disk, of all renditions.
        public var segmentsDone: Int
        public var segmentsTotal: Int
        /// Bytes on disk: fetched in this run or found from an earlier one.
        public var bytes: Int64
        /// Bytes fetched in this run.
        public var downloadedBytes: Int64
        /// The whole, estimated from the segments on disk (their mean length times the count); sharpened as they
        /// arrive. `nil` until one is in.
        public var estimatedLength: Int64?

        public init(
            path: String,
            audioPath: String?,
            isLive: Bool,
            segmentsDone: Int,
            segmentsTotal: Int,
            bytes: Int64,
            downloadedBytes: Int64,
            estimatedLength: Int64?
        ) {
            self.path = path
            self.audioPath = audioPath
            self.isLive = isLive
            self.segmentsDone = segmentsDone
            self.segmentsTotal = segmentsTotal
            self.bytes = bytes
            self.downloadedBytes = downloadedBytes
            self.estimatedLength = estimatedLength
        }
    }

    /// What a finished run made.
    public struct Result: Sendable, Hashable {
        /// The video (or the only rendition).
        public var path: String
        public var length: Int64
        /// The separate audio rendition, when there was one and ``Options/audio`` asked for it.
        public var audioPath: String?
        /// The audio rendition's length; 0 without one.
        public var audioLength: Int64 = 0
        /// The subtitles renditions ``Options/subtitles`` asked for, each one WebVTT file.
        public var subtitlesPaths: [String] = []
        public var segments: Int
        /// Bytes fetched in this run (the rest were on disk).
        public var downloadedBytes: Int64
    }

    let document: PlaylistDocument
    let request: DownloadRequest
    let downloader: Downloader
    let options: Options
    let logger: Logger
    /// The request's rate limit (`--max-download-limit`), shared by every fetch of the run: the segments fetched at
    /// once stay under it together.
    let limiter: BandwidthLimiter
    /// Asked before each write that matters, as a download's is (``Downloader/download(_:id:logger:writePermit:)``):
    /// by every fetch, before the work directory is emptied or the outputs are written, before each piece is copied
    /// and each output named. Once it says no, the run stops with ``DownloadError/Code/superseded`` and leaves what
    /// is on disk as it is, for the writer that took over. `nil`: always allowed.
    let writePermit: (@Sendable () async -> Bool)?

    /// - Parameters:
    ///   - document: the playlist the request answered with (``DownloadResult/playlist``).
    ///   - request: the request that fetched it: its destination says where the output goes (a directory: under the
    ///     playlist's name, `.ts` or `.mp4`), its configuration is used for every fetch.
    public init(
        _ document: PlaylistDocument,
        request: DownloadRequest,
        downloader: Downloader,
        options: Options = Options(),
        logger: Logger = Logger(label: "downpour.hls", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(
            document,
            request: request,
            downloader: downloader,
            options: options,
            logger: logger,
            limiter: BandwidthLimiter(rate: request.configuration.maximumRate)
        )
    }

    /// With the rate limit `limiter`, which its owner may change while it runs (a daemon's `max-download-limit`), and
    /// the write permit `writePermit` (``writePermit``; a fleet's node runs a download under its lease).
    package init(
        _ document: PlaylistDocument,
        request: DownloadRequest,
        downloader: Downloader,
        options: Options,
        logger: Logger,
        limiter: BandwidthLimiter,
        writePermit: (@Sendable () async -> Bool)? = nil
    ) {
        self.document = document
        self.request = request
        self.downloader = downloader
        self.options = options
        self.logger = logger
        self.limiter = limiter
        self.writePermit = writePermit
    }

    /// Fetches the segments and writes the output.
    ///
    /// - Parameters:
    ///   - progress: called once the outputs' names are known, then as segments arrive.
    ///   - finishing: called once every segment is on disk (a live recording: once it stopped), before the outputs
    ///     are written (from there on, the run ends with its outputs named even when cancelled); `false` stops it as
    ///     cancelled instead, every segment kept.
    /// - Throws: ``DownloadError``: the playlist's own errors (not a playlist, live, encrypted with what Downpour
    ///   cannot decrypt, no variant), a segment's error naming it, ``DownloadError/Code/outputExists`` when the
    ///   output is there and ``DownloadConfiguration/overwrite`` is not set, a local I/O error.
    public func run(
        progress: @escaping @Sendable (Progress) -> Void = { _ in },
        finishing: @escaping @Sendable () -> Bool = { true }
    ) async throws(DownloadError) -> Result {
        do {
            return try await self.perform(progress: progress, finishing: finishing)
        } catch {
            // Whatever stopped it first (a fetch cancelled with the others, say), a run whose permit was withdrawn
            // was superseded: its owner must not take it for a failure, nor remove what it leaves.
            if error.code != .superseded, !(await self.mayWrite()) { throw .superseded }
            throw error
        }
    }

    private func perform(
        progress: @escaping @Sendable (Progress) -> Void,
        finishing: @escaping @Sendable () -> Bool
    ) async throws(DownloadError) -> Result {
        let names = self.names()
        var media: HLSMediaPlaylist
        var mediaURL = self.document.url
        var audio: (playlist: HLSMediaPlaylist, url: URL)?
        var subtitles: [(playlist: HLSMediaPlaylist, url: URL, language: String?)] = []
        switch try Self.parse(self.document) {
        case .media(let playlist):
            media = playlist
        case .multivariant(let master):
            guard let variant = master.variant(self.options.video) else {
                throw DownloadError(
                    code: .invalidRequest,
                    message: "The playlist at \(self.document.url.absoluteString) has no variant that matches "
                        + "'\(self.options.video)' among its \(master.variants.count)."
                )
            }
            self.logger.info(
                "Chose a variant",
                metadata: ["bandwidth": "\(variant.bandwidth)", "height": "\(variant.height.map(String.init) ?? "-")"]
            )
            (media, mediaURL) = try await self.mediaPlaylist(variant.url, at: names.base + ".video.m3u8")
            if self.options.audio, let group = variant.audioGroup,
                let rendition = master.rendition(.audio, group: group), let url = rendition.url
            {
                audio = try await self.mediaPlaylist(url, at: names.base + ".audio.m3u8")
            }
            let chosen = variant.subtitlesGroup.map { master.subtitles(self.options.subtitles, group: $0) } ?? []
            for (index, rendition) in chosen.enumerated() {
                guard let url = rendition.url else { continue }
                let (playlist, at) = try await self.mediaPlaylist(url, at: names.base + ".subtitles-\(index).m3u8")
                subtitles.append((playlist, at, rendition.language))
            }
        }

        guard media.hasEnd else {
            return try await self.record(media, url: mediaURL, names: names, progress: progress, finishing: finishing)
        }
        var outputs = [try Output(.video, HLSFetchPlan(media, url: mediaURL), names: names, url: mediaURL)]
        if let audio {
            outputs.append(
                try Output(.audio, HLSFetchPlan(audio.playlist, url: audio.url), names: names, url: audio.url)
            )
        }
        for (index, subtitle) in subtitles.enumerated() {
            let plan = try HLSFetchPlan(subtitle.playlist, url: subtitle.url)
            let refusal: String? =
                plan.pieces.contains(where: { $0.decryption != nil })
                ? "are encrypted, and Downpour does not decrypt subtitles"
                : plan.isFragmentedMP4 ? "are fragmented MP4 (IMSC), and Downpour saves WebVTT subtitles only" : nil
            if let refusal {
                throw DownloadError(
                    code: .invalidRequest,
                    message: "The subtitles at \(subtitle.url.absoluteString) \(refusal); fetch the video without "
                        + "them (--media-subtitles=none)."
                )
            }
            // A name of its own, whatever the languages say (compared as a case-insensitive file system would).
            var path = names.subtitlesOutput(language: subtitle.language, index: index)
            var attempt = 1
            while outputs.contains(where: { $0.path.lowercased() == path.lowercased() }) {
                // Each attempt's name differs from the one before it, so this ends.
                attempt += 1
                path = names.subtitlesOutput(language: subtitle.language, index: index, attempt: attempt)
            }
            outputs.append(Output(.subtitles, plan, path: path))
        }
        for index in outputs.indices { outputs[index].replaces = try await self.checkFree(outputs[index].path) }
        return try await self.fetch(outputs, progress: progress, finishing: finishing)
    }

    /// One file a run writes: the video, its audio rendition, or a subtitles rendition.
    struct Output: Sendable {
        enum Kind: Sendable { case video, audio, subtitles }
        var kind: Kind
        var plan: HLSFetchPlan
        var path: String
        /// A file at ``path`` may be replaced: overwriting is allowed, or it is this download's (a run killed while
        /// naming its outputs left it).
        var replaces = false

        init(_ kind: Kind, _ plan: HLSFetchPlan, path: String) {
            self.kind = kind
            self.plan = plan
            self.path = path
        }

        init(_ kind: Kind, _ plan: HLSFetchPlan, names: Names, url: URL) {
            let path =
                kind == .video
                ? names.output(fragmentedMP4: plan.isFragmentedMP4)
                : names.audioOutput(fragmentedMP4: plan.isFragmentedMP4, url: url)
            self.init(kind, plan, path: path)
        }
    }

    /// Fetches the segments of `outputs` (the video first) and writes each, all named together once all are whole.
    private func fetch(
        _ outputs: [Output],
        progress: @escaping @Sendable (Progress) -> Void,
        finishing: @escaping @Sendable () -> Bool
    ) async throws(DownloadError) -> Result {
        let videoPath = outputs[0].path
        let audio = outputs.first { $0.kind == .audio }
        // Nothing made on disk once the permit is withdrawn, not even the video's `.part`.
        try await self.checkPermit()
        // The video's `.part` stays locked from here to the end: a second run of the same name (another playlist
        // called index.m3u8, say) stops at once instead of mixing its segments with these. The other outputs'
        // `.part` files are made only when they are written.
        let videoFile = try await AssembledFile.run { () throws(DownloadError) in
            try AssembledFile(locking: videoPath + ".part")
        }
        do throws(DownloadError) {
            let tally = Tally(
                total: outputs.reduce(0) { $0 + $1.plan.segmentCount },
                path: videoPath,
                audioPath: audio?.path,
                isLive: false,
                report: progress
            )
            let work = Self.workDirectory(for: videoPath)
            var subtitlesCount = 0
            let works = outputs.map { output -> String in
                switch output.kind {
                case .video: return work + "/video"
                case .audio: return work + "/audio"
                case .subtitles:
                    subtitlesCount += 1
                    return work + "/subtitles-\(subtitlesCount)"
                }
            }
            for (output, rendition) in zip(outputs, works) {
                try await self.prepareWork(rendition, fingerprint: output.plan.fingerprint)
                try await self.fetchAll(output.plan, work: rendition, tally: tally)
            }
            try await self.checkPermit()
            guard !Task.isCancelled, finishing() else {
                throw DownloadError(code: .cancelled, message: "The download was cancelled.")
            }
            // Past the point of no return: a cancel from here on does not stop the outputs being written.
            let replacing = self.request.configuration.overwrite
            let mark = Self.finishMark(of: self.request)
            let lengths = try await Self.uncancelled { () async throws(DownloadError) -> [Int64] in
                try await self.watchingPermit { permit async throws(DownloadError) -> [Int64] in
                    var files = [videoFile]
                    var lengths: [Int64] = []
                    do throws(DownloadError) {
                        for (index, output) in outputs.enumerated() {
                            try permit.check()
                            if index > 0 {
                                files.append(
                                    try await AssembledFile.run { () throws(DownloadError) in
                                        try AssembledFile(locking: output.path + ".part")
                                    }
                                )
                            }
                            lengths.append(
                                output.kind == .subtitles
                                    ? try await self.assembleSubtitles(
                                        output.plan,
                                        work: works[index],
                                        into: files[index],
                                        permit: permit
                                    )
                                    : try await self.assemble(
                                        output.plan,
                                        work: works[index],
                                        into: files[index],
                                        permit: permit
                                    )
                            )
                        }
                        // All named only once all are whole, each with the mark of a finished run; the video last.
                        try await AssembledFile.run { [files] () throws(DownloadError) in
                            for index in outputs.indices.reversed() {
                                try permit.check()
                                try files[index].commit(
                                    to: outputs[index].path,
                                    replacing: replacing || outputs[index].replaces,
                                    mark: mark,
                                    mayName: permit.check
                                )
                            }
                        }
                    } catch {
                        // Made again from the work directory by the next run; one left would put a named output that
                        // carries the mark (`committed`) in that run's way. Superseded, it is the next writer's.
                        for index in files.indices.dropFirst() {
                            files[index].close()
                            guard permit.allows else { continue }
                            try? await AssembledFile.runEvenIfCancelled {
                                try? FileManager.default.removeItem(atPath: outputs[index].path + ".part")
                            }
                        }
                        throw error
                    }
                    if permit.allows { await Self.removeWork(work) }
                    return lengths
                }
            }
            let counts = tally.counts
            let audioIndex = outputs.firstIndex { $0.kind == .audio }
            return Result(
                path: videoPath,
                length: lengths[0],
                audioPath: audio?.path,
                audioLength: audioIndex.map { lengths[$0] } ?? 0,
                subtitlesPaths: outputs.filter { $0.kind == .subtitles }.map(\.path),
                segments: counts.total,
                downloadedBytes: counts.fetched
            )
        } catch {
            videoFile.close()
            throw error
        }
    }

    // MARK: - Live

    /// Records a live playlist: its segments as they appear (the playlist fetched again every target duration),
    /// until it ends (`EXT-X-ENDLIST`), the run is cancelled, or ``Options/recordTime`` has passed; then the whole
    /// segments, in order, become the output. Only the variant is recorded, not a separate audio rendition.
    private func record(
        _ first: HLSMediaPlaylist,
        url: URL,
        names: Names,
        progress: @escaping @Sendable (Progress) -> Void,
        finishing: @escaping @Sendable () -> Bool
    ) async throws(DownloadError) -> Result {
        let path = names.output(fragmentedMP4: first.segments.contains { $0.map != nil })
        let replacesExisting = try await self.checkFree(path)
        try await self.checkPermit()
        let file = try await AssembledFile.run { () throws(DownloadError) in try AssembledFile(locking: path + ".part")
        }
        let work = Self.workDirectory(for: path) + "/live"
        let tally = Tally(total: 0, path: path, audioPath: nil, isLive: true, report: progress)
        let deadline = self.options.recordTime.map { ContinuousClock.now + $0 }
        self.logger.info("Recording a live playlist", metadata: ["url": "\(url)"])
        do throws(DownloadError) {
            // A recording is never resumed: the stream went on meanwhile.
            try await self.prepareWork(work, fingerprint: "live \(UUID().uuidString)")
            var media = first
            var recorded = first
            recorded.segments = []
            recorded.hasEnd = true
            while true {
                let last = recorded.segments.last?.sequence ?? Int.min
                let fresh = media.segments.filter { $0.sequence > last }
                recorded.segments += fresh
                tally.grow(by: fresh.count)
                if !recorded.segments.isEmpty {
                    do {
                        try await self.fetchAll(HLSFetchPlan(recorded, url: url), work: work, tally: tally)
                    } catch  where error.code == .cancelled {
                        break
                    }
                }
                if media.hasEnd || deadline.map({ ContinuousClock.now >= $0 }) == true || Task.isCancelled { break }
                // RFC 8216, 6.3.4: again after the target duration, or half of it when nothing was new.
                var wait = Duration.seconds(max(1, media.targetDuration)) / (fresh.isEmpty ? 2 : 1)
                if let deadline { wait = min(wait, max(.zero, deadline - ContinuousClock.now)) }
                do {
                    try await Task.sleep(for: wait)
                    (media, _) = try await self.mediaPlaylist(url, at: names.base + ".live.m3u8")
                } catch {
                    break
                }
            }
            // What is whole is saved, whatever stopped the recording (unless `finishing` says it was given up): in a
            // task of its own, so that the cancel that stopped it does not stop this.
            try await self.checkPermit()
            guard finishing() else {
                throw DownloadError(code: .cancelled, message: "The recording was stopped; nothing was saved.")
            }
            let (plan, segments) = try await Self.uncancelled { [recorded] () async throws(DownloadError) in
                try await self.wholeSegments(of: recorded, url: url, work: work)
            }
            let replacing = self.request.configuration.overwrite
            let length = try await Self.uncancelled { () async throws(DownloadError) -> Int64 in
                try await self.watchingPermit { permit async throws(DownloadError) -> Int64 in
                    let length = try await self.assemble(plan, work: work, into: file, permit: permit)
                    try await AssembledFile.run { () throws(DownloadError) in
                        try permit.check()
                        try file.commit(
                            to: path,
                            replacing: replacing || replacesExisting,
                            mark: Self.finishMark(of: self.request),
                            mayName: permit.check
                        )
                    }
                    if permit.allows { await Self.removeWork(Self.workDirectory(for: path)) }
                    return length
                }
            }
            return Result(
                path: path,
                length: length,
                audioPath: nil,
                segments: segments,
                downloadedBytes: tally.counts.fetched
            )
        } catch {
            file.close()
            throw error
        }
    }

    /// The plan of the recorded segments that are whole in `work` (with their keys and sections), and their count.
    ///
    /// - Throws: ``DownloadError`` `cancelled` when none is.
    private func wholeSegments(
        of recorded: HLSMediaPlaylist,
        url: URL,
        work: String
    ) async throws(DownloadError) -> (HLSFetchPlan, Int) {
        let present = try await AssembledFile.run {
            Set((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? [])
        }
        var kept = recorded
        kept.segments = recorded.segments.filter { present.contains("segment-\($0.sequence)") }
        guard !kept.segments.isEmpty else {
            throw DownloadError(
                code: .cancelled,
                message: "The recording of \(url.absoluteString) stopped before a segment was in; nothing was saved."
            )
        }
        var plan = try HLSFetchPlan(kept, url: url)
        plan.pieces.removeAll {
            !present.contains($0.name) || $0.decryption.map { !present.contains($0.keyName) } == true
        }
        return (plan, kept.segments.count)
    }

    /// Runs `work` in a task that the caller's cancellation does not reach.
    private static func uncancelled<T: Sendable>(
        _ work: @escaping @Sendable () async throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        let outcome = await Task { () async -> Swift.Result<T, DownloadError> in
            do throws(DownloadError) {
                return .success(try await work())
            } catch {
                return .failure(error)
            }
        }.value
        return try outcome.get()
    }

    // MARK: - Write permit

    private func mayWrite() async -> Bool {
        await self.writePermit?() ?? true
    }

    /// Throws ``DownloadError/Code/superseded`` once the write permit is withdrawn.
    private func checkPermit() async throws(DownloadError) {
        guard await self.mayWrite() else { throw .superseded }
    }

    /// Runs `body` (the outputs' writing, blocking work that cannot wait for the permit) with the permit kept up to
    /// date in memory: asked at once, then every quarter of a second, as a transfer's is.
    private func watchingPermit<T: Sendable>(
        _ body: (PermitFlag) async throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        let flag = PermitFlag()
        guard let permit = self.writePermit else { return try await body(flag) }
        if !(await permit()) { flag.withdraw() }
        let watch = Task {
            while !Task.isCancelled, flag.allows {
                try? await Task.sleep(for: PermitFlag.interval)
                if !(await permit()) { flag.withdraw() }
            }
        }
        defer { watch.cancel() }
        return try await body(flag)
    }

    // MARK: - Names

    /// Where the outputs go: the segments wait in `OUTPUT.hls/` beside the video (``workDirectory(for:)``).
    struct Names: Sendable {
        /// The output's path without its extension (a directory destination), or the path itself (`-o`).
        var base: String
        var fixed: Bool

        /// The output at `path` (`-o`, or a queue's download run again under the name it had). A playlist's own name
        /// (`.m3u8`, `.m3u`, which a queue records before it knows it is a playlist) names the video without that
        /// extension, as a URL's does.
        init(fixed path: String) {
            let ext = (path as NSString).pathExtension.lowercased()
            if ext == "m3u8" || ext == "m3u" {
                self.base = (path as NSString).deletingPathExtension
                self.fixed = false
            } else {
                self.base = path
                self.fixed = true
            }
        }

        init(base: String, fixed: Bool) {
            self.base = base
            self.fixed = fixed
        }

        func output(fragmentedMP4: Bool) -> String {
            self.fixed ? self.base : self.base + (fragmentedMP4 ? ".mp4" : ".ts")
        }

        /// The output without its extension: what the audio and the subtitles are named after.
        var stem: String {
            self.fixed ? (self.base as NSString).deletingPathExtension : self.base
        }

        func audioOutput(fragmentedMP4: Bool, url: URL) -> String {
            let ext = fragmentedMP4 ? "m4a" : (url.pathExtension.lowercased() == "aac" ? "aac" : "ts")
            return self.stem + ".audio." + ext
        }

        /// `STEM.LANGUAGE.vtt` (the language reduced to letters, digits and `-`), or `STEM.subtitles-N.vtt`.
        /// With `attempt` past 1, `-ATTEMPT` follows the tag: a name of its own for a language given twice.
        func subtitlesOutput(language: String?, index: Int, attempt: Int = 1) -> String {
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
            let tag = String((language ?? "").filter(allowed.contains).prefix(40))
            let name = (tag.isEmpty ? "subtitles-\(index + 1)" : tag) + (attempt > 1 ? "-\(attempt)" : "")
            return self.stem + "." + name + ".vtt"
        }
    }

    /// The mark the video takes when the request has a ``DownloadRequest/finishMark`` (a queue's download): its own,
    /// so that the engine never takes a video for the playlist's file.
    static func finishMark(of request: DownloadRequest) -> String? {
        request.finishMark.map { $0 + " hls" }
    }

    /// The video a run of `request` (with a ``DownloadRequest/finishMark``, under a name: a queue's download run
    /// again) wrote and named before it could be recorded: a kill came between the two. `nil` when there is none.
    /// Its audio, named with the same mark (the outputs are named together, the video last), comes with it.
    public static func finishedEarlier(_ request: DownloadRequest) async -> Result? {
        guard let mark = Self.finishMark(of: request) else { return nil }
        let names = Self.names(of: request)
        typealias Found = (path: String, length: Int64)
        let found = try? await AssembledFile.run { () -> (video: Found, audio: Found?)? in
            func committed(_ path: String) -> Found? {
                AssembledFile.committed(path, mark: mark).map { (path, $0) }
            }
            for path in Set([false, true].map(names.output(fragmentedMP4:))).sorted() {
                guard let video = committed(path) else { continue }
                let audio = ["ts", "m4a", "aac"].lazy.compactMap { committed(names.stem + ".audio." + $0) }.first
                return (video, audio)
            }
            return nil
        }
        guard let (video, audio) = found ?? nil else { return nil }
        return Result(
            path: video.path,
            length: video.length,
            audioPath: audio?.path,
            audioLength: audio?.length ?? 0,
            segments: 0,
            downloadedBytes: 0
        )
    }

    /// The directory the segments of the video at `output` wait in: one per output, so two downloads of the same
    /// stem (`a.ts`, `a.mp4`) never share segments.
    static func workDirectory(for output: String) -> String {
        output + ".hls"
    }

    func names() -> Names {
        Self.names(of: self.request)
    }

    static func names(of request: DownloadRequest) -> Names {
        switch request.destination {
        case .file(let path):
            return Names(fixed: path)
        case .named(let name, let directory):
            return Names(fixed: (directory.hasSuffix("/") ? directory : directory + "/") + name)
        case .directory(let directory):
            var stem = request.url.lastPathComponent
            for ext in [".m3u8", ".m3u"] where stem.lowercased().hasSuffix(ext) {
                stem = String(stem.dropLast(ext.count))
            }
            let name = SafeFileName.sanitize(stem) ?? "video"
            return Names(base: (directory.hasSuffix("/") ? directory : directory + "/") + name, fixed: false)
        }
    }

    // MARK: - Fetching

    static func parse(_ document: PlaylistDocument) throws(DownloadError) -> HLSPlaylist {
        try HLSPlaylist.parse(String(decoding: document.data, as: UTF8.self), url: document.url)
    }

    /// Fetches and parses the media playlist of a variant or rendition; it passes through `path` (its `.part`), and
    /// is read, not saved.
    private func mediaPlaylist(_ url: URL, at path: String) async throws(DownloadError) -> (HLSMediaPlaylist, URL) {
        var configuration = self.fetchConfiguration(for: url, connections: 1)
        configuration.followsPlaylists = true
        configuration.overwrite = false
        let result = try await self.runFetch(
            DownloadRequest(url: url, destination: .file(path), configuration: configuration)
        )
        guard let document = result.playlist else {
            if await self.mayWrite() {
                try? await AssembledFile.run { try? FileManager.default.removeItem(atPath: result.path) }
            }
            throw DownloadError(
                code: .remoteMisbehaved,
                message: "\(url.absoluteString), named as a playlist by \(self.document.url.absoluteString), is not "
                    + "an HLS playlist."
            )
        }
        guard case .media(let media) = try Self.parse(document) else {
            throw DownloadError(
                code: .remoteMisbehaved,
                message: "\(url.absoluteString) is a multivariant playlist where a media playlist belongs."
            )
        }
        return (media, document.url)
    }

    /// The configuration of the fetch of `url`: the request's, saving what comes as it is; the credentials stay with
    /// the playlist's origin (a key or a segment on another host gets none).
    private func fetchConfiguration(for url: URL, connections: Int) -> DownloadConfiguration {
        // The origin the user asked: a playlist redirected to another host does not take the credentials along.
        var configuration = self.request.configuration.named(by: self.request.url, for: url)
        configuration.connections = connections
        configuration.followsMetalink = false
        configuration.followsPlaylists = false
        configuration.checksum = nil
        configuration.pieceChecksums = nil
        configuration.expectedLength = nil
        configuration.overwrite = true
        configuration.renamesExisting = false
        configuration.conditionalGet = false
        configuration.setsRemoteTime = false
        return configuration
    }

    /// Fetches every resource of `plan` not yet in `work`, `concurrentSegments` at a time.
    private func fetchAll(_ plan: HLSFetchPlan, work: String, tally: Tally) async throws(DownloadError) {
        let present = try await AssembledFile.run { () -> [String: Int64] in
            var sizes: [String: Int64] = [:]
            for name in (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? [] {
                let attributes = try? FileManager.default.attributesOfItem(atPath: work + "/" + name)
                sizes[name] = (attributes?[.size] as? NSNumber)?.int64Value ?? 0
            }
            return sizes
        }
        var missing: [HLSFetchPlan.Fetch] = []
        for fetch in plan.fetches {
            if let size = present[fetch.name] {
                tally.add(fetch, bytes: size, fetched: 0)
            } else {
                missing.append(fetch)
            }
        }
        self.logger.info(
            "Fetching segments",
            metadata: ["missing": "\(missing.count)", "all": "\(plan.fetches.count)"]
        )
        let width = max(1, self.options.concurrentSegments)
        // How a task of the group ended: a fetch, or the permit's watch (`nil` once cancelled).
        enum Ended: Sendable {
            case fetched
            case failed(DownloadError)
            case permitWithdrawn
        }
        let permit = self.writePermit
        let outcome = await withTaskGroup(of: Ended?.self) { group -> DownloadError? in
            var next = missing.makeIterator()
            var running = 0
            func start() -> Bool {
                guard !Task.isCancelled, let fetch = next.next() else { return false }
                group.addTask { () -> Ended? in
                    do throws(DownloadError) {
                        // Not a byte asked for once the permit is withdrawn.
                        try await self.checkPermit()
                        let (length, fetched) = try await self.fetch(fetch, work: work)
                        tally.add(fetch, bytes: length, fetched: fetched)
                        return .fetched
                    } catch {
                        return .failed(self.naming(error, fetch: fetch, plan: plan))
                    }
                }
                return true
            }
            while running < width, start() { running += 1 }
            guard running > 0 else { return nil }
            // The fetches stop once the permit is withdrawn, also those that write nothing meanwhile (a segment's
            // probe waiting for its body): the download is another writer's now.
            if let permit {
                group.addTask { () -> Ended? in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: PermitFlag.interval)
                        if Task.isCancelled { break }
                        if !(await permit()) { return .permitWithdrawn }
                    }
                    return nil
                }
            }
            while let ended = await group.next() {
                switch ended {
                case .failed(let error):
                    group.cancelAll()
                    return error
                case .permitWithdrawn:
                    group.cancelAll()
                    return .superseded
                case .fetched:
                    guard !start() else { continue }
                    running -= 1
                    if running == 0 {
                        group.cancelAll()
                        return nil
                    }
                case nil:
                    continue
                }
            }
            return nil
        }
        if let outcome { throw outcome }
        if Task.isCancelled { throw DownloadError(code: .cancelled, message: "The download was cancelled.") }
    }

    /// Fetches one resource into `work`; returns its length and the bytes fetched in this run.
    private func fetch(_ fetch: HLSFetchPlan.Fetch, work: String) async throws(DownloadError) -> (Int64, Int64) {
        let configuration = self.fetchConfiguration(
            for: fetch.url,
            connections: fetch.isShared ? self.request.configuration.connections : 1
        )
        var request = try DownloadRequest(
            url: fetch.url,
            destination: .file(work + "/" + fetch.name),
            configuration: configuration
        )
        request.byteRange = fetch.range
        let result = try await self.runFetch(request)
        return (result.length, result.downloadedBytes)
    }

    /// Runs one fetch of the run: under its rate limit and its write permit.
    private func runFetch(_ request: DownloadRequest) async throws(DownloadError) -> DownloadResult {
        try await self.downloader.download(
            request,
            logger: self.logger,
            limiter: self.limiter,
            writePermit: self.writePermit
        ).run()
    }

    /// A fetch's error, saying which segment (or key, or section) it was.
    private func naming(_ error: DownloadError, fetch: HLSFetchPlan.Fetch, plan: HLSFetchPlan) -> DownloadError {
        guard error.code != .cancelled else { return error }
        let what: String
        if let piece = plan.pieces.first(where: { $0.name == fetch.name && !fetch.isShared }) {
            what = "The HLS " + piece.label.replacingOccurrences(of: "the ", with: "", options: .anchored)
        } else if fetch.name.hasPrefix("key-") {
            what = "The HLS key"
        } else {
            what = "The HLS resource"
        }
        return DownloadError(
            code: error.code,
            message: "\(what) (\(fetch.url.absoluteString)) failed: \(error.message)",
            httpStatus: error.httpStatus
        )
    }

    // MARK: - Disk

    /// Removes what a stopped run left for the outputs at `path` and `audioPath` (``Progress/path``): their `.part`
    /// files and the segments in the work directory beside the video (only Downpour's own). For a download given up.
    public static func removeLeftovers(path: String, audioPath: String?) async {
        try? await AssembledFile.runEvenIfCancelled {
            for output in [path] + (audioPath.map { [$0] } ?? []) {
                try? FileManager.default.removeItem(atPath: output + ".part")
            }
        }
        await Self.removeWork(Self.workDirectory(for: path))
    }

    /// ``removeLeftovers(path:audioPath:)`` for the video a run of `request` would write (as `.ts` or `.mp4`), before
    /// its playlist said which.
    public static func removeLeftovers(of request: DownloadRequest) async {
        let names = Self.names(of: request)
        for path in Set([false, true].map(names.output(fragmentedMP4:))) {
            await Self.removeLeftovers(path: path, audioPath: nil)
        }
    }

    /// Removes the work directory once the output is named: the renditions' directories (Downpour's own), then the
    /// directory itself when nothing else is in it. Even when cancelled.
    private static func removeWork(_ work: String) async {
        try? await AssembledFile.runEvenIfCancelled {
            let manager = FileManager.default
            for rendition in (try? manager.contentsOfDirectory(atPath: work)) ?? [] {
                let path = work + "/" + rendition
                if manager.fileExists(atPath: path + "/playlist.fingerprint") { try? manager.removeItem(atPath: path) }
            }
            if ((try? manager.contentsOfDirectory(atPath: work)) ?? []).isEmpty {
                try? manager.removeItem(atPath: work)
            }
        }
    }

    /// Checks that an output may be written at `path`: `true` when a file there may be replaced (overwriting is
    /// allowed, or it carries this download's mark: a run killed while naming its outputs left it).
    ///
    /// - Throws: ``DownloadError/Code/outputExists`` for anyone else's file.
    private func checkFree(_ path: String) async throws(DownloadError) -> Bool {
        guard !self.request.configuration.overwrite else { return true }
        let mark = Self.finishMark(of: self.request)
        let (exists, ours) = try await AssembledFile.run { () -> (Bool, Bool) in
            (
                FileManager.default.fileExists(atPath: path),
                mark.flatMap { AssembledFile.committed(path, mark: $0) } != nil
            )
        }
        if exists, !ours {
            throw DownloadError(
                code: .outputExists,
                message: "'\(path)' already exists; it was left as it is (remove it, or allow overwriting)."
            )
        }
        return ours
    }

    /// Keeps what `work` holds when it was fetched for the same playlist; else empties it and records
    /// `fingerprint`.
    private func prepareWork(_ work: String, fingerprint: String) async throws(DownloadError) {
        // It may empty the directory: another writer's, once the permit is withdrawn.
        try await self.checkPermit()
        let logger = self.logger
        try await AssembledFile.run { () throws(DownloadError) in
            let manager = FileManager.default
            let record = work + "/playlist.fingerprint"
            if let found = try? String(contentsOfFile: record, encoding: .utf8), found == fingerprint { return }
            // Only a directory of Downpour's own (it holds the fingerprint) is emptied; a user's is left alone.
            if manager.fileExists(atPath: work), !manager.fileExists(atPath: record) {
                let contents = (try? manager.contentsOfDirectory(atPath: work)) ?? []
                if !contents.isEmpty {
                    throw DownloadError(
                        code: .outputExists,
                        message: "'\(work)' is there and is not a Downpour download's; move it away, or save under "
                            + "another name (-o)."
                    )
                }
            }
            if manager.fileExists(atPath: work) {
                logger.info("The playlist changed since the segments were fetched: starting over")
                try? manager.removeItem(atPath: work)
            }
            do {
                try manager.createDirectory(atPath: work, withIntermediateDirectories: true)
                try Data(fingerprint.utf8).write(to: URL(fileURLWithPath: record))
            } catch {
                throw DownloadError(
                    code: .localIO,
                    message: "Cannot prepare '\(work)' for the segments: \(error.localizedDescription)"
                )
            }
        }
    }

    /// Writes the pieces in order to `file`, decrypted; returns the length. A piece that is not what the playlist
    /// says (it does not decrypt, it is not MPEG-TS once decrypted, it is shorter than its range) is removed from
    /// `work`, with its key, so that the next run fetches them again.
    private func assemble(
        _ plan: HLSFetchPlan,
        work: String,
        into file: AssembledFile,
        permit: PermitFlag
    ) async throws(DownloadError) -> Int64 {
        try await AssembledFile.run { () throws(DownloadError) -> Int64 in
            try permit.check()
            try file.startOver()
            var keys: [String: [UInt8]] = [:]
            for piece in plan.pieces {
                try permit.check()
                do throws(DownloadError) {
                    try Self.copy(piece, from: work, keys: &keys, into: file)
                } catch  where error.code == .remoteMisbehaved {
                    try permit.check()
                    try? FileManager.default.removeItem(atPath: work + "/" + piece.name)
                    if let key = piece.decryption?.keyName {
                        try? FileManager.default.removeItem(atPath: work + "/" + key)
                    }
                    throw DownloadError(
                        code: error.code,
                        message: error.message + " It is fetched again on the next run.",
                        httpStatus: error.httpStatus
                    )
                }
            }
            return file.count
        }
    }

    /// Writes the WebVTT segments of `plan`, found in `work`, as one WebVTT file (``WebVTTMerger``); returns its
    /// length. A subtitles segment is a few kilobytes: each is read whole.
    private func assembleSubtitles(
        _ plan: HLSFetchPlan,
        work: String,
        into file: AssembledFile,
        permit: PermitFlag
    ) async throws(DownloadError) -> Int64 {
        try await AssembledFile.run { () throws(DownloadError) -> Int64 in
            try permit.check()
            var texts: [String] = []
            for piece in plan.pieces {
                let path = work + "/" + piece.name
                let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
                // A subtitles segment is text of a few kilobytes; one past the limit is no subtitles segment.
                let refusal: String? =
                    size.map { $0 > Self.longestSubtitlesSegment }
                        == true ? "is \(size ?? 0) bytes long, too long for subtitles" : nil
                var data = refusal == nil ? FileManager.default.contents(atPath: path) : nil
                if let range = piece.range, let whole = data {
                    data =
                        range.upperBound <= Int64(whole.count)
                        ? whole.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)) : nil
                }
                let text = data.map { String(decoding: $0, as: UTF8.self) }
                guard let text, text.drop(while: { $0 == "\u{FEFF}" }).hasPrefix("WEBVTT") else {
                    // Fetched again on the next run: what is on disk is not that segment's WebVTT.
                    try permit.check()
                    try? FileManager.default.removeItem(atPath: path)
                    throw DownloadError(
                        code: .remoteMisbehaved,
                        message: "The HLS subtitles \(piece.label) "
                            + (refusal ?? (data == nil ? "is shorter than its byte range" : "is not WebVTT"))
                            + " (\(piece.url.absoluteString))."
                    )
                }
                texts.append(text)
            }
            try permit.check()
            try file.startOver()
            try file.append(Array(WebVTTMerger.merge(texts).utf8))
            return file.count
        }
    }

    /// The longest subtitles segment read: 16 MiB.
    static let longestSubtitlesSegment: Int64 = 16 << 20

    /// The size of the parts a piece is copied (and decrypted) in: memory stays the same whatever a segment's length.
    static let chunkSize = 1 << 20

    /// Copies one piece from its file in `work` to `file`, decrypting it part by part.
    private static func copy(
        _ piece: HLSFetchPlan.Piece,
        from work: String,
        keys: inout [String: [UInt8]],
        into file: AssembledFile
    ) throws(DownloadError) {
        let path = work + "/" + piece.name
        do {
            var key: [UInt8]?
            if let decryption = piece.decryption {
                if let known = keys[decryption.keyName] {
                    key = known
                } else {
                    let keyPath = work + "/" + decryption.keyName
                    guard let handle = FileHandle(forReadingAtPath: keyPath) else {
                        throw DownloadError(code: .localIO, message: "Cannot open '\(keyPath)'.")
                    }
                    defer { try? handle.close() }
                    // A key is 16 bytes; reading a little more shows a longer one for what it is.
                    let bytes = [UInt8](try handle.read(upToCount: 64) ?? Data())
                    keys[decryption.keyName] = bytes
                    key = bytes
                }
            }
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw DownloadError(code: .localIO, message: "Cannot open '\(path)'.")
            }
            defer { try? handle.close() }
            var remaining: Int64
            if let range = piece.range {
                remaining = range.upperBound - range.lowerBound
                try handle.seek(toOffset: UInt64(range.lowerBound))
            } else {
                remaining = Int64(try handle.seekToEnd())
                try handle.seek(toOffset: 0)
            }
            var iv = piece.decryption?.iv ?? []
            var check = HLSDecryption.TransportStreamCheck()
            while remaining > 0 {
                let wanted = Int(min(Int64(Self.chunkSize), remaining))
                let data = try handle.read(upToCount: wanted) ?? Data()
                guard data.count == wanted else {
                    throw DownloadError(
                        code: .remoteMisbehaved,
                        message: "The HLS resource \(piece.url.absoluteString) ends before the byte range the "
                            + "playlist gives for the \(piece.label)."
                    )
                }
                remaining -= Int64(data.count)
                guard let decryption = piece.decryption, let key else {
                    try file.append(data)
                    continue
                }
                let plain = try HLSDecryption.decrypt(
                    data,
                    key: key,
                    iv: iv,
                    padded: remaining == 0,
                    segment: piece.url,
                    keyURL: decryption.keyURL
                )
                iv = Array(data.suffix(16))
                if piece.checksTransportStream, !check.feed(plain) { break }
                try file.append(plain)
            }
            if piece.checksTransportStream, !check.isWhole, let decryption = piece.decryption {
                throw DownloadError(
                    code: .remoteMisbehaved,
                    message: "The HLS \(piece.label) (\(piece.url.absoluteString)) is not MPEG-TS once decrypted "
                        + "with the key from \(decryption.keyURL.absoluteString): the key is wrong, or the segment "
                        + "is damaged."
                )
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(code: .localIO, message: "Cannot read '\(path)': \(error.localizedDescription)")
        }
    }
}

/// Counts segments and bytes as they arrive, and reports them.
private final class Tally: Sendable {
    struct Counts: Sendable {
        var total: Int
        var segmentsDone = 0
        var bytes: Int64 = 0
        var segmentBytes: Int64 = 0
        var fetched: Int64 = 0
    }

    private let state: NIOLockedValueBox<Counts>
    private let path: String
    private let audioPath: String?
    private let isLive: Bool
    private let report: @Sendable (HLSDownload.Progress) -> Void

    /// Reports the outputs' names at once, with nothing on disk yet.
    init(
        total: Int,
        path: String,
        audioPath: String?,
        isLive: Bool,
        report: @escaping @Sendable (HLSDownload.Progress) -> Void
    ) {
        self.state = NIOLockedValueBox(Counts(total: total))
        self.path = path
        self.audioPath = audioPath
        self.isLive = isLive
        self.report = report
        report(
            HLSDownload.Progress(
                path: path,
                audioPath: audioPath,
                isLive: isLive,
                segmentsDone: 0,
                segmentsTotal: total,
                bytes: 0,
                downloadedBytes: 0,
                estimatedLength: nil
            )
        )
    }

    var counts: Counts { self.state.withLockedValue { $0 } }

    /// More segments to fetch: a live playlist grew.
    func grow(by count: Int) {
        self.state.withLockedValue { $0.total += count }
    }

    /// One resource on disk: `bytes` long, `fetched` of them in this run.
    func add(_ fetch: HLSFetchPlan.Fetch, bytes: Int64, fetched: Int64) {
        let progress = self.state.withLockedValue { counts -> HLSDownload.Progress in
            counts.bytes += bytes
            counts.fetched += fetched
            if fetch.segments > 0 {
                counts.segmentsDone += fetch.segments
                counts.segmentBytes += bytes
            }
            let estimate =
                counts.segmentsDone > 0
                ? counts.bytes - counts.segmentBytes + counts.segmentBytes / Int64(counts.segmentsDone)
                    * Int64(counts.total) : nil
            return HLSDownload.Progress(
                path: self.path,
                audioPath: self.audioPath,
                isLive: self.isLive,
                segmentsDone: counts.segmentsDone,
                segmentsTotal: counts.total,
                bytes: counts.bytes,
                downloadedBytes: counts.fetched,
                estimatedLength: estimate.map { max($0, counts.bytes) }
            )
        }
        self.report(progress)
    }
}

/// The write permit as last heard (``HLSDownload/writePermit``): once withdrawn, withdrawn for good.
struct PermitFlag: Sendable {
    /// How often the permit is asked while the outputs are written.
    static let interval = Duration.milliseconds(250)

    private let allowed = NIOLockedValueBox(true)

    var allows: Bool { self.allowed.withLockedValue { $0 } }

    func withdraw() {
        self.allowed.withLockedValue { $0 = false }
    }

    /// Throws ``DownloadError/Code/superseded`` once withdrawn.
    func check() throws(DownloadError) {
        guard self.allows else { throw .superseded }
    }
}
