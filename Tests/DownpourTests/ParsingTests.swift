import Testing

@testable import Downpour

@Suite("Header and argument parsing")
struct ParsingTests {
    @Test("Content-Range forms")
    func contentRange() {
        #expect(ContentRange("bytes 0-99/1000") == ContentRange(range: 0...99, completeLength: 1000))
        #expect(ContentRange("bytes 5-5/*") == ContentRange(range: 5...5, completeLength: nil))
        #expect(ContentRange("bytes */1000") == ContentRange(range: nil, completeLength: 1000))
        #expect(ContentRange("  bytes 0-0/1  ") == ContentRange(range: 0...0, completeLength: 1))
        #expect(ContentRange("bytes 10-5/100") == nil, "last before first")
        #expect(ContentRange("bytes 0-100/100") == nil, "range past the end")
        #expect(ContentRange("bytes */*") == nil)
        #expect(ContentRange("items 0-1/2") == nil)
        #expect(ContentRange("bytes 0--1/2") == nil)
        #expect(ContentRange("bytes -1-2/3") == nil)
        #expect(ContentRange("bytes 0-1/+3") == nil)
        #expect(ContentRange("") == nil)
    }

    @Test("Content-Disposition file names")
    func contentDisposition() {
        #expect(ContentDisposition.filename(fromHeader: "attachment; filename=\"report.pdf\"") == "report.pdf")
        #expect(ContentDisposition.filename(fromHeader: "attachment; filename=plain.txt") == "plain.txt")
        #expect(
            ContentDisposition.filename(
                fromHeader: "attachment; filename=\"fallback.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt"
            ) == "€ rates.txt"
        )
        #expect(
            ContentDisposition.filename(fromHeader: "attachment; filename*=UTF-8''na%C3%AFve.txt; filename=\"x\"")
                == "naïve.txt"
        )
        #expect(ContentDisposition.filename(fromHeader: "attachment; filename*=iso-8859-1'en'%A3.txt") == "£.txt")
        #expect(ContentDisposition.filename(fromHeader: "inline; filename=\"semi;colon.txt\"") == "semi;colon.txt")
        #expect(ContentDisposition.filename(fromHeader: "attachment; filename=\"esc\\\"aped\"") == "esc\"aped")
        #expect(ContentDisposition.filename(fromHeader: "attachment; FILENAME=\"UP.txt\"") == "UP.txt")
        #expect(ContentDisposition.filename(fromHeader: "attachment") == nil)
        // A bad extended value falls back to the plain one.
        #expect(
            ContentDisposition.filename(fromHeader: "attachment; filename*=UTF-8''%ZZ; filename=ok.bin") == "ok.bin"
        )
    }

    @Test("server-suggested names are reduced to safe base names")
    func safeNames() {
        #expect(SafeFileName.sanitize("../../etc/passwd") == "passwd")
        #expect(SafeFileName.sanitize("..\\..\\Windows\\evil.exe") == "evil.exe")
        #expect(SafeFileName.sanitize("/absolute/path.iso") == "path.iso")
        #expect(SafeFileName.sanitize("..") == nil)
        #expect(SafeFileName.sanitize(".") == nil)
        #expect(SafeFileName.sanitize("") == nil)
        #expect(SafeFileName.sanitize("dir/") == "dir")
        #expect(SafeFileName.sanitize("a\u{0}b\nc\u{7F}.txt") == "abc.txt")
        #expect(SafeFileName.sanitize(".bashrc") == "bashrc")
        #expect(SafeFileName.sanitize("  spaced.txt  ") == "spaced.txt")
        #expect(SafeFileName.sanitize(String(repeating: "é", count: 300))!.utf8.count <= 255)
    }

    @Test("size suffixes")
    func sizes() {
        #expect(ByteCount.parse("1048576") == 1_048_576)
        #expect(ByteCount.parse("512K") == 524_288)
        #expect(ByteCount.parse("1M") == 1_048_576)
        #expect(ByteCount.parse("1m") == 1_048_576)
        #expect(ByteCount.parse("2G") == 2_147_483_648)
        #expect(ByteCount.parse("1.5M") == 1_572_864)
        #expect(ByteCount.parse("") == nil)
        #expect(ByteCount.parse("M") == nil)
        #expect(ByteCount.parse("-1M") == nil)
        #expect(ByteCount.parse("10X") == nil)
        #expect(ByteCount.parse("1MiB") == nil)
        #expect(ByteCount.parse("1e3") == nil)
    }

    @Test("Retry-After and back-off")
    func retryAfter() {
        #expect(RetryPolicy.parseRetryAfter("3", now: 0) == .seconds(3))
        #expect(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: 1_445_412_470) == .seconds(10))
        #expect(RetryPolicy.parseRetryAfter("soon", now: 0) == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)

        let policy = RetryPolicy(configuration: .init(maximumTries: 5, wait: .seconds(1), maximumWait: .seconds(10)))
        for retry in 1...8 {
            let delay = policy.delay(beforeRetry: retry)
            let ceiling = min(Duration.seconds(1) * (1 << (retry - 1)), .seconds(10))
            #expect(delay >= ceiling / 2 && delay <= ceiling, "retry \(retry): \(delay)")
        }
        #expect(policy.delay(beforeRetry: 1, retryAfter: .seconds(7)) == .seconds(7))
        #expect(policy.delay(beforeRetry: 1, retryAfter: .seconds(600)) == .seconds(10), "capped")
    }

    @Test("byte range sets merge and find gaps")
    func rangeSets() {
        var set = ByteRangeSet()
        set.insert(10..<20)
        set.insert(30..<40)
        set.insert(20..<30)
        #expect(set.ranges == [10..<40])
        set.insert(0..<5)
        set.insert(50..<60)
        #expect(set.ranges == [0..<5, 10..<40, 50..<60])
        set.insert(3..<55)
        #expect(set.ranges == [0..<60])
        #expect(set.byteCount == 60)
        let other = ByteRangeSet([5..<10, 20..<30])
        #expect(other.gaps(in: 0..<40) == [0..<5, 10..<20, 30..<40])
        #expect(other.gaps(in: 6..<25) == [10..<20])
        #expect(other.contains(22..<28))
        #expect(!other.contains(8..<12))
    }

    @Test("header arguments")
    func headers() throws {
        #expect(HTTPHeaderField(parsing: "X-Token: abc: def") == HTTPHeaderField(name: "X-Token", value: "abc: def"))
        #expect(HTTPHeaderField(parsing: "no colon") == nil)
        #expect(throws: DownloadError.self) { try HTTPHeaderField(name: "Range", value: "bytes=0-").validate() }
        #expect(throws: DownloadError.self) { try HTTPHeaderField(name: "X", value: "a\r\nInjected: 1").validate() }
    }

    @Test("bad URLs are usage errors")
    func badURLs() {
        for text in ["", "not a url", "ftp://example.com/file", "file:///etc/passwd", "http://", "example.com/x"] {
            let error = #expect(throws: DownloadError.self) { try DownloadRequest(url: text) }
            #expect(error?.code == .invalidRequest, "\(text)")
        }
    }
}
