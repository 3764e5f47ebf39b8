import Foundation

/// The URLs one download fetches its ranges from: mirrors of one file, as aria2 takes several URIs of one file.
///
/// A value type with no I/O, tested as tables. The mirror the probe answered first is the *primary*: its length
/// and validators are the file's. Every other mirror is checked by the first ranged response it gives: the length
/// in its `Content-Range` must be the file's, and its own `ETag` and `Last-Modified` are recorded then and every
/// later response from it is held to them. A mirror that fails a check, or keeps failing, is dropped with a reason,
/// unless it is the last one left: then the download fails as it would with one URL.
///
/// Connections are spread over the live mirrors: a connection keeps its mirror while that mirror lives, and a
/// connection without one takes the live mirror with the fewest connections (the first such), so connections 1, 2,
/// 3… of a download with two mirrors go to mirror 0, 1, 0…. Which mirror serves more bytes follows from the
/// planner: a connection that finishes early takes half of the slowest one's remainder.
struct MirrorSet: Sendable, Hashable {
    /// One URL of the file.
    struct Mirror: Sendable, Hashable {
        /// The URL as it was given (the key in the resume journal).
        var url: URL
        /// Where its requests go: the given URL without user info, or the primary's URL after redirects.
        var fetchURL: URL
        /// Its entity tag, as it sent it; known once ``isChecked``, or from the journal of an earlier run.
        var etag: String?
        /// Its `Last-Modified`, as it sent it.
        var lastModified: String?
        /// Whether one of its responses has been checked and its validators recorded.
        var isChecked: Bool
        /// Why it was dropped; `nil` while it is in use.
        var droppedBecause: String?
        /// The URLs it redirected from, in order (see ``MirrorSet/redirect(_:from:to:limit:)``).
        var redirectedFrom: [URL] = []

        var isLive: Bool { self.droppedBecause == nil }

        /// The value for `If-Range`: the strong ETag, else `Last-Modified` (as ``RemoteFile/ifRangeValidator``).
        var ifRangeValidator: String? {
            if let etag, !etag.hasPrefix("W/") { return etag }
            return self.lastModified
        }
    }

    /// What the resume journal records of one mirror.
    typealias Validators = ResumeJournal.MirrorValidators

    private(set) var mirrors: [Mirror]
    /// The index of the mirror whose answer to the probe describes the file.
    let primary: Int
    /// Which mirror each connection uses.
    private(set) var assignments: [Int: Int] = [:]
    /// The bytes each mirror wrote in this run, by index: which mirrors to blame for a bad piece.
    private(set) var writes: [Int: ByteRangeSet] = [:]

    /// - Parameters:
    ///   - urls: Every URL of the file, in order of preference.
    ///   - primary: The index of the probed one, in `urls`.
    ///   - remote: What its probe found.
    ///   - failed: Mirrors the probe tried before the primary and why they failed: they start dropped.
    ///   - recorded: Validators an earlier run recorded, by URL: the mirrors are held to them from their first
    ///     response on, so that two versions are never spliced.
    init(
        urls: [URL],
        primary: Int,
        remote: RemoteFile,
        failed: [Int: String] = [:],
        recorded: [String: Validators] = [:]
    ) {
        precondition(urls.indices.contains(primary), "the primary is one of the URLs")
        self.primary = primary
        self.mirrors = urls.enumerated().map { index, url in
            if index == primary {
                return Mirror(
                    url: url,
                    fetchURL: remote.url,
                    etag: remote.etag,
                    lastModified: remote.lastModified,
                    isChecked: true
                )
            }
            let saved = recorded[Self.key(url)]
            return Mirror(
                url: url,
                fetchURL: Self.withoutUserInfo(url),
                etag: saved?.etag,
                lastModified: saved?.lastModified,
                isChecked: false,
                droppedBecause: failed[index]
            )
        }
    }

    /// One mirror: the probed file's own URL.
    init(remote: RemoteFile, url: URL) {
        self.init(urls: [url], primary: 0, remote: remote)
    }

    /// How a mirror is named in the resume journal: its URL as given, without user info (no password on disk).
    static func key(_ url: URL) -> String {
        Self.withoutUserInfo(url).absoluteString
    }

    static func withoutUserInfo(_ url: URL) -> URL {
        guard url.user != nil || url.password != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        components.user = nil
        components.password = nil
        return components.url ?? url
    }

    var liveCount: Int { self.mirrors.count { $0.isLive } }

    /// Whether the download has more than one URL (dropped ones included).
    var hasMirrors: Bool { self.mirrors.count > 1 }

    /// The mirror connection `id` uses now: the one it had while it lives, else the live mirror with the fewest
    /// connections (the first of those).
    mutating func assign(connection id: Int) -> Int {
        if let current = self.assignments[id], self.mirrors[current].isLive { return current }
        var counts = [Int](repeating: 0, count: self.mirrors.count)
        for (connection, mirror) in self.assignments where connection != id && self.mirrors[mirror].isLive {
            counts[mirror] += 1
        }
        let chosen =
            self.mirrors.indices.filter { self.mirrors[$0].isLive }.min { counts[$0] < counts[$1] }
            ?? self.primary
        self.assignments[id] = chosen
        return chosen
    }

    /// What a response from mirror `index` must match: the file's length, the mirror's own validators when they
    /// are known, and its URL.
    func remoteFile(for index: Int, file: RemoteFile) -> RemoteFile {
        guard index != self.primary else { return file }
        var remote = file
        let mirror = self.mirrors[index]
        remote.url = mirror.fetchURL
        remote.etag = mirror.etag
        remote.lastModified = mirror.lastModified
        return remote
    }

    /// Records the validators of mirror `index`'s first checked response (`etag`, `lastModified` as it sent them).
    /// Validators an earlier run recorded stay: the response was checked against them.
    mutating func recordChecked(_ index: Int, etag: String?, lastModified: String?) {
        guard !self.mirrors[index].isChecked else { return }
        if self.mirrors[index].etag == nil { self.mirrors[index].etag = etag }
        if self.mirrors[index].lastModified == nil { self.mirrors[index].lastModified = lastModified }
        self.mirrors[index].isChecked = true
    }

    /// Moves mirror `index`'s requests to `location`, a redirect it answered a range request with, as the probe
    /// follows redirects: at most `limit` per mirror, never back to a URL it redirected from, only to `http` and
    /// `https`. Its credentials are those of `location`'s origin from then on (``RequestAuthorization`` picks
    /// them by the URL of each request), so a redirect to another origin carries none. Returns why the mirror
    /// cannot follow, as a sentence; `nil` when it moved, or when `requested` is no longer where its requests go
    /// (several connections met the same redirect; the first one moved the mirror).
    mutating func redirect(_ index: Int, from requested: URL, to location: URL, limit: Int) -> String? {
        var mirror = self.mirrors[index]
        guard requested == mirror.fetchURL else { return nil }
        let visited = Set((mirror.redirectedFrom + [mirror.fetchURL]).map(\.absoluteString))
        do throws(Redirect.Refusal) {
            try Redirect.check(location, visited: visited, hops: mirror.redirectedFrom.count, limit: limit)
        } catch {
            return Self.reason(error, location: location, limit: limit)
        }
        mirror.redirectedFrom.append(mirror.fetchURL)
        mirror.fetchURL = location
        self.mirrors[index] = mirror
        return nil
    }

    /// Why a mirror does not follow its redirect to `location`, as a sentence.
    static func reason(_ refusal: Redirect.Refusal, location: URL?, limit: Int) -> String {
        let target = location.map(Self.key) ?? ""
        return switch refusal {
        case .noLocation: "it redirected without a usable Location header."
        case .notHTTP: "it redirects to \(target), which is not an http or https URL."
        case .loop: "it redirects in a loop (\(target) again)."
        case .tooMany: "it redirects more than \(limit) times."
        }
    }

    /// Drops mirror `index` for `reason`, unless it is the last one in use. `true` when it was dropped (or had been
    /// already); `false` when it is the last: the caller's error then ends the download.
    mutating func drop(_ index: Int, because reason: String) -> Bool {
        guard self.mirrors[index].isLive else { return true }
        guard self.liveCount > 1 else { return false }
        self.mirrors[index].droppedBecause = reason
        return true
    }

    /// Records that mirror `index` wrote `range`.
    mutating func noteWritten(_ range: Range<Int64>, by index: Int) {
        self.writes[index, default: ByteRangeSet()].insert(range)
    }

    /// The same mirrors with no bytes written yet: for a run that starts over from zero.
    func forgettingWrites() -> MirrorSet {
        var copy = self
        copy.writes = [:]
        return copy
    }

    /// The mirrors that wrote a byte of `range` in this run, in order.
    func writers(of range: Range<Int64>) -> [Int] {
        self.writes.filter { $0.value.overlaps(range) }.map(\.key).sorted()
    }

    /// Drops every live mirror that wrote a byte of `range` (a piece whose digest is wrong) for `reason`, except
    /// the last one in use. Returns the indices dropped now.
    mutating func dropMirrors(thatWrote range: Range<Int64>, because reason: String) -> [Int] {
        self.writers(of: range).filter { self.mirrors[$0].isLive && self.drop($0, because: reason) }
    }

    /// The validators to record in the journal, by ``key(_:)``: every mirror whose validators are known (a checked mirror
    /// that sends none is recorded without them).
    var validatorsToRecord: [String: Validators] {
        var result: [String: Validators] = [:]
        for mirror in self.mirrors where mirror.isChecked || mirror.etag != nil || mirror.lastModified != nil {
            result[Self.key(mirror.url)] = Validators(etag: mirror.etag, lastModified: mirror.lastModified)
        }
        return result
    }

    /// Every mirror (no user info) and why it was dropped, for the error when the last one fails.
    var summary: String {
        self.mirrors.map { mirror in
            Self.key(mirror.url) + (mirror.droppedBecause.map { " (\($0))" } ?? "")
        }.joined(separator: "; ")
    }
}
