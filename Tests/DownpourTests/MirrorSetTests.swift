import Foundation
import Logging
import Testing

@testable import Downpour
@testable import DownpourAria2

@Suite("MirrorSet")
struct MirrorSetTests {
    static let urls = [
        URL(string: "http://a.example/f.iso")!,
        URL(string: "http://user:secret@b.example/f.iso")!,
        URL(string: "http://c.example/f.iso")!,
    ]
    static let remote = RemoteFile(
        url: URL(string: "http://a.example/real/f.iso")!,
        length: 1000,
        acceptsRanges: true,
        etag: "\"a\"",
        lastModified: "Wed, 21 Oct 2026 07:28:00 GMT"
    )

    @Test("connections go round-robin over the live mirrors and keep theirs; a dropped mirror's move to the others")
    func assignment() {
        var set = MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote)
        func assign(_ connections: [Int]) -> [Int] { connections.map { set.assign(connection: $0) } }
        #expect(assign(Array(1...6)) == [0, 1, 2, 0, 1, 2])
        #expect(assign([2]) == [1], "a connection keeps its live mirror")
        let dropped = set.drop(1, because: "gone.")
        #expect(dropped)
        // Connections 2 and 5 move, one to each of the others.
        #expect(assign([2, 5]) == [0, 2])
        #expect(assign([1, 3, 4, 6]) == [0, 2, 0, 2])
        #expect(set.liveCount == 2)
    }

    @Test("a mirror that failed the probe starts dropped; the last mirror is never dropped")
    func lastOneStays() {
        var set = MirrorSet(urls: Self.urls, primary: 1, remote: Self.remote, failed: [0: "refused."])
        #expect(set.liveCount == 2)
        let assigned = (1...3).map { set.assign(connection: $0) }
        #expect(assigned == [1, 2, 1])
        let drops = [
            set.drop(2, because: "another length."), set.drop(1, because: "404."), set.drop(2, because: "again."),
        ]
        // The last one in use stays; dropping a dropped mirror is no news.
        #expect(drops == [true, false, true])
        #expect(set.mirrors[1].isLive)
        #expect(set.summary.contains("http://a.example/f.iso (refused.)"))
        #expect(set.summary.contains("http://c.example/f.iso (another length.)"))
    }

    @Test("the primary is the probed file; another mirror is held to its own validators once checked")
    func validators() {
        var set = MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote)
        #expect(set.remoteFile(for: 0, file: Self.remote) == Self.remote)
        let unchecked = set.remoteFile(for: 1, file: Self.remote)
        #expect(unchecked.url.absoluteString == "http://b.example/f.iso", "no user info in the fetched URL")
        #expect(unchecked.length == 1000)
        #expect(unchecked.etag == nil && unchecked.lastModified == nil && unchecked.ifRangeValidator == nil)
        set.recordChecked(1, etag: "\"b\"", lastModified: nil)
        set.recordChecked(1, etag: "\"later\"", lastModified: "x")
        let checked = set.remoteFile(for: 1, file: Self.remote)
        #expect(checked.etag == "\"b\"" && checked.lastModified == nil, "the first checked response's validators")
        #expect(set.validatorsToRecord["http://b.example/f.iso"]?.etag == "\"b\"", "no password on disk")
        #expect(set.validatorsToRecord["http://a.example/f.iso"]?.etag == "\"a\"")
        #expect(set.validatorsToRecord["http://c.example/f.iso"] == nil, "nothing known of an unchecked mirror")
    }

    @Test("a mirror's redirects are followed: bounded, never in a loop, http and https only")
    func redirects() {
        var set = MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote)
        let d = URL(string: "http://d.example/f.iso")!
        let e = URL(string: "https://e.example/f.iso")!
        let b = URL(string: "http://b.example/f.iso")!
        #expect(set.redirect(1, from: b, to: d, limit: 2) == nil)
        #expect(set.remoteFile(for: 1, file: Self.remote).url == d, "its requests go where it redirected")
        // A second connection that met the same redirect finds the mirror moved already.
        #expect(set.redirect(1, from: b, to: d, limit: 2) == nil)
        #expect(set.mirrors[1].redirectedFrom == [b])
        #expect(set.redirect(1, from: d, to: b, limit: 2) == "it redirects in a loop (http://b.example/f.iso again).")
        #expect(set.redirect(1, from: d, to: e, limit: 2) == nil)
        let f = URL(string: "http://f.example/f.iso")!
        #expect(set.redirect(1, from: e, to: f, limit: 2) == "it redirects more than 2 times.")
        let ftp = URL(string: "ftp://c.example/f.iso")!
        #expect(set.redirect(2, from: Self.urls[2], to: ftp, limit: 2)?.contains("not an http") == true)
        #expect(set.mirrors[1].fetchURL == e && set.mirrors[2].fetchURL == Self.urls[2])
        // The journal still knows each mirror by the URL it was given.
        #expect(set.mirrors[1].url == Self.urls[1])
    }

    @Test("validators from an earlier run hold a mirror from its first response on")
    func recorded() {
        let recorded = ["http://c.example/f.iso": ResumeJournal.MirrorValidators(etag: "\"c1\"", lastModified: nil)]
        var set = MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote, recorded: recorded)
        #expect(set.remoteFile(for: 2, file: Self.remote).ifRangeValidator == "\"c1\"")
        set.recordChecked(2, etag: "\"c1\"", lastModified: "Thu, 22 Oct 2026 07:28:00 GMT")
        #expect(set.mirrors[2].etag == "\"c1\"")
    }

    @Test("a bad piece drops the mirrors that wrote a byte of it, never the last one")
    func attribution() {
        var set = MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote)
        set.noteWritten(0..<100, by: 0)
        set.noteWritten(100..<200, by: 1)
        set.noteWritten(200..<300, by: 2)
        set.noteWritten(300..<400, by: 1)
        #expect(set.writers(of: 150..<250) == [1, 2])
        #expect(set.writers(of: 400..<500).isEmpty)
        let first = set.dropMirrors(thatWrote: 350..<360, because: "a bad piece.")
        let again = set.dropMirrors(thatWrote: 350..<360, because: "a bad piece.")
        let wide = set.dropMirrors(thatWrote: 0..<300, because: "a bad piece.")
        #expect(first == [1])
        #expect(again.isEmpty, "already dropped")
        #expect(wide == [0], "mirror 2 is the last")
        #expect(set.liveCount == 1 && set.mirrors[2].isLive)
        let fresh = set.forgettingWrites()
        #expect(fresh.writers(of: 0..<400).isEmpty && fresh.liveCount == 1)
    }

    @Test("a session drops the mirrors that wrote a bad piece, with a notice each, and moves their connections")
    func sessionAttribution() async throws {
        let downloader = Downloader(configuration: .init())
        let configuration = DownloadConfiguration(connections: 3)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mirrors-\(UUID().uuidString)").path
        let file = try OutputFile.openLocked(at: path)
        let hub = DownloadEventHub()
        let session = TransferSession(
            transport: try downloader.transport(for: configuration, logger: Logger(label: "test")),
            file: file,
            remoteFile: Self.remote,
            headers: [],
            configuration: configuration,
            logger: Logger(label: "test"),
            hub: hub,
            budget: downloader.connectionBudget,
            pacing: .unlimited,
            authorization: RequestAuthorization(origin: Origin(Self.urls[0]), credentials: nil, cookies: nil),
            mirrors: MirrorSet(urls: Self.urls, primary: 0, remote: Self.remote)
        )
        #expect((1...3).map { session.mirror(forConnection: $0).index } == [0, 1, 2])
        session.prefetched(0..<50)
        session.written(50..<100, connection: 1)
        session.written(100..<200, connection: 2)
        session.written(200..<300, connection: 3)

        let dropped = session.dropMirrors(thatWrote: 150..<250, reason: "its piece 1 has the wrong digest.")
        #expect(dropped == [Self.urls[1], Self.urls[2]])
        #expect(!session.lastMirrorFailed(DownloadError(code: .network, message: "x.")).message.contains("secret"))
        #expect(session.mirror(forConnection: 2).index == 0 && session.mirror(forConnection: 3).index == 0)
        #expect(session.dropMirrors(thatWrote: 0..<10, reason: "the probe's bytes are bad.").isEmpty, "the last one")
        #expect(session.mirrors.liveCount == 1)

        var notices: [String] = []
        for await event in hub.subscribe() {
            if case .notice(let text) = event { notices.append(text) }
            if notices.count == 2 { break }
        }
        // No password in a notice.
        #expect(
            notices[0] == "Dropped the mirror http://b.example/f.iso: its piece 1 has the wrong digest. 2 URLs left."
        )
        #expect(notices[1] == "Dropped the mirror \(Self.urls[2]): its piece 1 has the wrong digest. 1 URL left.")
        let sources = session.snapshot().connections.map { $0.source?.absoluteString }
        #expect(
            sources == ["http://a.example/real/f.iso", "http://a.example/real/f.iso", "http://a.example/real/f.iso"]
        )
        file.close()
        unlink(path)
        await downloader.shutdown()
    }

    @Test("credentials of one origin never go to a mirror on another; a mirror's own do")
    func credentials() {
        var authorization = RequestAuthorization(
            origin: Origin(Self.urls[0]),
            credentials: Credentials(user: "home", password: "pw"),
            cookies: nil
        )
        authorization.otherCredentials[Origin(Self.urls[1])] = Credentials(userInfoOf: Self.urls[1])
        let configured = [HTTPHeaderField(name: "Authorization", value: "Bearer home-token")]
        let home = authorization.headers([], for: Self.urls[0])
        #expect(home.map(\.value) == [Credentials(user: "home", password: "pw").basicAuthorization])
        let b = authorization.headers(configured, for: URL(string: "http://b.example/f.iso")!)
        #expect(b.map(\.value) == [Credentials(user: "user", password: "secret").basicAuthorization])
        let c = authorization.headers(configured, for: Self.urls[2])
        #expect(c.isEmpty)
    }

    @Test("a request's mirrors survive a JSON round trip; requests stored without them decode; a bad one is refused")
    func codable() throws {
        var request = try DownloadRequest(url: "https://127.0.0.1/a.iso", destination: .file("a.iso"))
        request.mirrors = [URL(string: "https://127.0.0.2/a.iso")!]
        let encoded = try JSONEncoder().encode(request)
        #expect(try JSONDecoder().decode(DownloadRequest.self, from: encoded) == request)
        let keys = try JSONSerialization.jsonObject(with: encoded) as? [String: Any]
        #expect(Set(keys?.keys ?? [:].keys) == ["url", "mirrors", "destination", "configuration"])

        let old = #"{"url":"https://127.0.0.1/a","destination":{"directory":{"_0":"."}}}"#
        #expect(try JSONDecoder().decode(DownloadRequest.self, from: Data(old.utf8)).mirrors == [])
        let bad = #"{"url":"https://127.0.0.1/a","mirrors":["ftp://x/a"],"destination":{"directory":{"_0":"."}}}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DownloadRequest.self, from: Data(bad.utf8)) }
        #expect(throws: DownloadError.self) {
            try DownloadRequest(url: URL(string: "http://a/x")!, mirrors: [URL(string: "file:///etc/passwd")!])
        }
        let twice = try DownloadRequest(
            url: URL(string: "http://a/x")!,
            mirrors: [URL(string: "http://b/x")!, URL(string: "http://a/x")!]
        )
        #expect(twice.urls.map(\.absoluteString) == ["http://a/x", "http://b/x"])
    }

    @Test("aria2 options: several URIs are one request with mirrors")
    func aria2Options() throws {
        let request = try Aria2DownloadSettings().request(uris: ["http://a/x", "http://b/x"])
        #expect(request.url.absoluteString == "http://a/x")
        #expect(request.mirrors.map(\.absoluteString) == ["http://b/x"])
        #expect(throws: DownloadError.self) { try Aria2DownloadSettings().request(uris: ["http://a/x", "not a url"]) }
    }

    @Test("journals: mirror validators round-trip; a journal written without them decodes")
    func journal() throws {
        let journal = ResumeJournal(
            sourceURL: "http://a/x",
            finalURL: "http://a/x",
            length: 10,
            etag: "\"a\"",
            lastModified: nil,
            done: ByteRangeSet([0..<5]),
            mirrors: ["http://b/x": .init(etag: "\"b\"", lastModified: nil)]
        )
        let decoded = try ResumeJournal.decode(journal.encode())
        #expect(decoded == journal)
        #expect(decoded.asSeen(by: "http://b/x").etag == "\"b\"")
        #expect(decoded.asSeen(by: "http://c/x").etag == "\"a\"")
        let old = ResumeJournal(
            sourceURL: "http://a/x",
            finalURL: "http://a/x",
            length: 10,
            etag: nil,
            lastModified: nil,
            done: ByteRangeSet()
        )
        let text = String(decoding: old.encode(), as: UTF8.self)
        #expect(!text.contains("mirrors"), "a journal of one URL is written as before")
        #expect(try ResumeJournal.decode(old.encode()).mirrors == nil)
    }
}
