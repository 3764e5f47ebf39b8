import NIOHTTP1
import Testing

@testable import DownpourTestSupport

@Suite("The test server's range rules")
struct ResponsePlannerTests {
    static let content = makeTestContent(count: 1000, seed: 29)
    static let etag = "\"v1\""
    static let lastModified = "Wed, 21 Oct 2026 07:28:00 GMT"

    static func planner(etag: String? = etag, faults: [RangeTestServer.Fault] = []) -> ResponsePlanner {
        ResponsePlanner(content: Self.content, faults: faults, etag: etag, lastModified: Self.lastModified)
    }

    /// The answer to one GET of the content with the given request headers.
    static func get(_ headers: [(String, String)], planner: ResponsePlanner = planner()) -> ResponsePlan {
        var progress = planner.makeProgress()
        return planner.plan(method: .GET, uri: "/file.bin", headers: HTTPHeaders(headers), progress: &progress)
    }

    @Test(
        "Range values",
        arguments: [
            ("bytes=0-99", ByteRangeRequest.satisfiable(0..<100)),
            ("bytes=0-0", .satisfiable(0..<1)),
            ("bytes=500-", .satisfiable(500..<1000)),
            ("bytes=990-2000", .satisfiable(990..<1000)),
            ("bytes=999-999", .satisfiable(999..<1000)),
            ("bytes=-100", .satisfiable(900..<1000)),
            ("bytes=-5000", .satisfiable(0..<1000)),
            (" bytes = 1-2 ", .none),
            ("  bytes=1-2  ", .satisfiable(1..<3)),
            ("BYTES=1-2", .satisfiable(1..<3)),
            ("bytes=1000-", .unsatisfiable),
            ("bytes=1000-1001", .unsatisfiable),
            ("bytes=-0", .unsatisfiable),
            ("bytes=5-3", .none),
            ("bytes=0-1,5-6", .none),
            ("items=0-1", .none),
            ("bytes=a-b", .none),
            ("bytes=-", .none),
            ("bytes=+1-2", .none),
            ("bytes=1", .none),
            ("", .none),
        ]
    )
    func rangeValues(value: String, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(value, total: 1000) == expected)
    }

    @Test("an empty content satisfies no range")
    func emptyContent() {
        #expect(ByteRangeRequest("bytes=0-", total: 0) == .unsatisfiable)
        #expect(ByteRangeRequest("bytes=-1", total: 0) == .unsatisfiable)
    }

    @Test("no Range: 200 with the whole body")
    func whole() {
        let plan = Self.get([])
        #expect(plan.status == .ok)
        #expect(plan.headers["Content-Length"] == ["1000"])
        #expect(plan.headers["Content-Range"].isEmpty)
        #expect(plan.headers["Accept-Ranges"] == ["bytes"])
        #expect(plan.body.range == 0..<1000)
        #expect(plan.requestedRange == nil)
    }

    @Test("a satisfiable range: 206 with Content-Range and those bytes")
    func partial() {
        let plan = Self.get([("Range", "bytes=100-199")])
        #expect(plan.status == .partialContent)
        #expect(plan.headers["Content-Range"] == ["bytes 100-199/1000"])
        #expect(plan.headers["Content-Length"] == ["100"])
        #expect(plan.body.range == 100..<200)
        #expect(plan.body.bytes == Self.content)
        #expect(plan.requestedRange == 100..<200)
    }

    @Test("a range past the end: 416 with the length")
    func unsatisfiable() {
        let plan = Self.get([("Range", "bytes=1000-")])
        #expect(plan.status == .rangeNotSatisfiable)
        #expect(plan.headers["Content-Range"] == ["bytes */1000"])
        #expect(plan.body.range.isEmpty)
        #expect(plan.requestedRange == nil)
    }

    @Test("several ranges: 200 with the whole body")
    func multipleRanges() {
        let plan = Self.get([("Range", "bytes=0-1,5-6")])
        #expect(plan.status == .ok)
        #expect(plan.body.range == 0..<1000)
    }

    @Test(
        "If-Range: a strong match or the Last-Modified date gives the range, anything else the whole body",
        arguments: [
            // The server's strong ETag, exactly.
            ("\"v1\"", 206),
            ("  \"v1\" ", 206),
            // Another ETag.
            ("\"v2\"", 200),
            // A weak ETag never matches, not even the same one.
            ("W/\"v1\"", 200),
            // The Last-Modified date, exactly; another date.
            ("Wed, 21 Oct 2026 07:28:00 GMT", 206),
            ("Thu, 22 Oct 2026 07:28:00 GMT", 200),
        ]
    )
    func ifRange(ifRange: String, status: Int) {
        let plan = Self.get([("Range", "bytes=10-19"), ("If-Range", ifRange)])
        #expect(plan.status.code == UInt(status))
        #expect(plan.body.range == (status == 206 ? 10..<20 : 0..<1000))
        #expect(plan.headers["Content-Length"] == [status == 206 ? "10" : "1000"])
        // Honoured or not, the log records what was asked.
        #expect(plan.requestedRange == 10..<20)
    }

    @Test("a server with a weak ETag gives no range to an If-Range with that ETag; the date still works")
    func weakServerETag() {
        let planner = Self.planner(etag: "W/\"v1\"")
        #expect(Self.get([("Range", "bytes=10-19"), ("If-Range", "W/\"v1\"")], planner: planner).status == .ok)
        let byDate = Self.get([("Range", "bytes=10-19"), ("If-Range", Self.lastModified)], planner: planner)
        #expect(byDate.status == .partialContent)
    }

    @Test("HEAD describes the content without a body")
    func head() {
        let planner = Self.planner()
        var progress = planner.makeProgress()
        let plan = planner.plan(method: .HEAD, uri: "/file.bin", headers: HTTPHeaders(), progress: &progress)
        #expect(plan.status == .ok)
        #expect(plan.headers["Content-Length"] == ["1000"])
        #expect(plan.headers["ETag"] == [Self.etag])
        #expect(plan.headers["Last-Modified"] == [Self.lastModified])
        #expect(plan.body.range.isEmpty)
    }

    @Test("ignoreRange: 200 and the whole body for any range")
    func ignoredRange() {
        let plan = Self.get([("Range", "bytes=10-19")], planner: Self.planner(faults: [.ignoreRange]))
        #expect(plan.status == .ok)
        #expect(plan.body.range == 0..<1000)
    }
}
