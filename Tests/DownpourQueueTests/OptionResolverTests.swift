import Downpour
import DownpourAria2
import DownpourHLS
import Testing

@testable import DownpourQueue

/// ``OptionResolver`` as a table: the defaults, the global options and a download's own, layer over layer, as the
/// request and as `aria2.getOption` answers them.
@Suite("OptionResolver")
struct OptionResolverTests {
    static func option(_ name: String, _ value: String) -> QueueOption { QueueOption(name: name, value: value) }

    struct Row: Sendable, CustomTestStringConvertible {
        let globals: [QueueOption]
        let own: [QueueOption]
        /// `split`, `max-download-limit` and the header lines of the request.
        let connections: Int
        let maximumRate: Int64?
        let headers: [String]
        /// What `getOption` answers for `split` and `header`.
        let answeredSplit: String
        let answeredHeader: String?
        let note: String
        var testDescription: String { self.note }
    }

    static let base = Aria2DownloadSettings(directory: "/downloads")

    static let rows: [Row] = [
        Row(
            globals: [],
            own: [],
            connections: base.configuration.connections,
            maximumRate: nil,
            headers: [],
            answeredSplit: "\(base.configuration.connections)",
            answeredHeader: nil,
            note: "nothing set: the defaults"
        ),
        Row(
            globals: [option("split", "8"), option("max-download-limit", "1M")],
            own: [],
            connections: 8,
            maximumRate: 1_048_576,
            headers: [],
            answeredSplit: "8",
            answeredHeader: nil,
            note: "the globals over the defaults"
        ),
        Row(
            globals: [option("split", "8"), option("max-download-limit", "1M")],
            own: [option("split", "2")],
            connections: 2,
            maximumRate: 1_048_576,
            headers: [],
            answeredSplit: "2",
            answeredHeader: nil,
            note: "a download's own over the globals, name by name"
        ),
        Row(
            globals: [option("header", "X-A: 1"), option("header", "X-B: 2")],
            own: [],
            connections: base.configuration.connections,
            maximumRate: nil,
            headers: ["X-A: 1", "X-B: 2"],
            answeredSplit: "\(base.configuration.connections)",
            answeredHeader: "X-A: 1\nX-B: 2\n",
            note: "a list's lines add up within a layer, one a line in the answer"
        ),
        Row(
            globals: [option("header", "X-A: 1"), option("header", "X-B: 2")],
            own: [option("header", "X-C: 3")],
            connections: base.configuration.connections,
            maximumRate: nil,
            headers: ["X-C: 3"],
            answeredSplit: "\(base.configuration.connections)",
            answeredHeader: "X-C: 3\n",
            note: "a download's header replaces the global lines, as in aria2"
        ),
        Row(
            globals: [option("split", "8"), option("rpc-listen-port", "7000")],
            own: [option("no-such-option", "1")],
            connections: 8,
            maximumRate: nil,
            headers: [],
            answeredSplit: "8",
            answeredHeader: nil,
            note: "names that are not a download's option do not reach the request"
        ),
    ]

    @Test("layer over layer", arguments: rows)
    func layers(_ row: Row) throws {
        let resolver = OptionResolver(base: Self.base, globals: row.globals)
        let request = try resolver.requestOptions(row.own)
        #expect(request.configuration.connections == row.connections)
        #expect(request.configuration.maximumRate == row.maximumRate)
        #expect(request.configuration.headers.map { "\($0.name): \($0.value)" } == row.headers)
        let answer = resolver.downloadOptions(row.own)
        #expect(answer.filter { $0.name == "split" }.map(\.value) == [row.answeredSplit])
        #expect(answer.first { $0.name == "header" }?.value == row.answeredHeader)
        // Each option is answered once.
        #expect(Set(answer.map(\.name)).count == answer.count)
    }

    @Test("a bad value names its option, whichever layer it came from", arguments: [true, false])
    func badValue(fromGlobals: Bool) {
        let bad = [Self.option("split", "many")]
        let resolver = OptionResolver(base: Self.base, globals: fromGlobals ? bad : [])
        #expect {
            _ = try resolver.requestOptions(fromGlobals ? [] : bad)
        } throws: { error in
            (error as? QueueError)?.option == "split" && (error as? QueueError)?.reason == .invalidRequest
        }
    }

    @Test("the HLS options are the daemon's too: media=file saves a playlist, a bad media-video names itself")
    func playlistOptions() throws {
        let resolver = OptionResolver(base: Self.base, globals: [Self.option("media", "file")])
        #expect(try !resolver.requestOptions([]).configuration.followsPlaylists)
        #expect(try resolver.requestOptions([Self.option("media", "auto")]).configuration.followsPlaylists)
        #expect(try resolver.requestOptions([Self.option("media-video", "720p")]).mediaVideo == HLSVideoChoice("720p"))
        #expect {
            _ = try resolver.requestOptions([Self.option("media-video", "not a choice")])
        } throws: { error in
            (error as? QueueError)?.option == "media-video" && (error as? QueueError)?.reason == .invalidRequest
        }
    }
}
