import Foundation
import NIOHTTP1

/// What the connection handler sends for one request: decided in one place, without I/O.
struct ResponsePlan: Sendable {
    var status: HTTPResponseStatus
    /// Complete response headers, framing (`Content-Length` or `Transfer-Encoding`) included.
    var headers: HTTPHeaders
    /// The body: `bytes[range]`; empty for HEAD and bodiless answers.
    var body: ResponseBody = .empty
    /// When set, send at most this many body bytes and then close the connection instead of ending the response.
    var closeAfterBodyBytes: Int?
    /// The bytes a content `GET`'s single satisfiable `Range` named, honoured or not; for the request log.
    var requestedRange: Range<Int>?
    /// Close the connection without answering (``RangeTestServer/Fault/dropReusedConnection(requests:)``).
    var dropsConnection = false
    /// Where the request is in ``RangeTestServer/Statistics/requests`` (set when it is recorded).
    var logIndex = 0

    init(status: HTTPResponseStatus, headers: HTTPHeaders, body: ResponseBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A slice of a byte array, shared without copying.
struct ResponseBody: Sendable {
    var bytes: [UInt8]
    var range: Range<Int>
    /// Send every byte inverted: a lying server (``RangeTestServer/Fault/lie(fromRequest:requests:)``).
    var invertsBytes = false
    /// Bytes to send inverted (offsets into `bytes`): a damaged piece (``RangeTestServer/Fault/corrupt(_:servings:)``).
    var corruptedRanges: [Range<Int>] = []

    static let empty = ResponseBody(bytes: [], range: 0..<0)

    init(bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.range = range
    }

    init(text: String) {
        self.bytes = Array(text.utf8)
        self.range = 0..<self.bytes.count
    }
}

/// Routes requests and applies the faults. Immutable; the counters it needs live in ``Progress``.
struct ResponsePlanner: Sendable {
    /// One version of the served content with its validators.
    struct ContentVersion: Sendable {
        var bytes: [UInt8]
        var etag: String?
        var lastModified: String?
    }

    /// The counters that faults depend on; kept under the server's lock.
    struct Progress: Sendable {
        /// GET requests for content handled so far.
        var contentGETs = 0
        /// Remaining uses of each body-truncating fault, by index into ``ResponsePlanner/truncations``.
        var truncationsLeft: [Int]
        /// Remaining servings of each corrupted range, by index into ``ResponsePlanner/corruptions``.
        var corruptionsLeft: [Int] = []
        /// Requests on reused connections still to drop unanswered.
        var reusedDropsLeft = 0
        /// The resources served at paths of their own (``RangeTestServer/serve(_:_:)``), by path.
        var files: [String: RangeTestServer.ServedFile] = [:]
        /// GET requests handled for each of ``files``.
        var fileGETs: [String: Int] = [:]
    }

    enum Truncation: Sendable {
        case closeAfter(bytes: Int)
        case missing(bytes: Int)
    }

    private let versions: [ContentVersion]
    /// `versions[i + 1]` is served once `changeThresholds[i]` content GETs have been handled.
    private let changeThresholds: [Int]
    let truncations: [(truncation: Truncation, requests: Int)]
    private let unavailable: [(everyNth: Int, retryAfterSeconds: Int)]
    private let wrongContentRangeFrom: Int?
    private let claimedLength: String?
    private let throttles: [(bytesPerSecond: Int, everyNthConnection: Int)]
    private let contentDispositions: [String]
    private let extraHeaders: [(name: String, value: String)]
    private let lies: [Range<Int>]
    let corruptions: [(range: Range<Int>, servings: Int)]
    private let contentType: String
    private let ignoresRange: Bool
    private let refusesHead: Bool
    private let isChunked: Bool
    private let reusedDrops: Int

    init(content: [UInt8], faults: [RangeTestServer.Fault], etag: String?, lastModified: String?) {
        var changes: [(afterRequests: Int, content: [UInt8])] = []
        var truncations: [(truncation: Truncation, requests: Int)] = []
        var unavailable: [(everyNth: Int, retryAfterSeconds: Int)] = []
        var wrongContentRangeFrom: Int?
        var claimedLength: String?
        var throttles: [(bytesPerSecond: Int, everyNthConnection: Int)] = []
        var contentDispositions: [String] = []
        var extraHeaders: [(name: String, value: String)] = []
        var lies: [Range<Int>] = []
        var corruptions: [(range: Range<Int>, servings: Int)] = []
        var contentType = "application/octet-stream"
        var reusedDrops = 0
        var ignoresRange = false
        var refusesHead = false
        var isChunked = false
        var hasValidators = true

        for fault in faults {
            switch fault.kind {
            case .closeConnection(let afterBytes, let requests):
                truncations.append((.closeAfter(bytes: afterBytes), requests))
            case .shortBody(let missingBytes, let requests):
                truncations.append((.missing(bytes: missingBytes), requests))
            case .ignoreRange:
                ignoresRange = true
            case .refuseHead:
                refusesHead = true
            case .wrongContentRange(let fromRequest):
                wrongContentRangeFrom = min(wrongContentRangeFrom ?? fromRequest, fromRequest)
            case .serviceUnavailable(let everyNth, let retryAfterSeconds):
                unavailable.append((everyNth, retryAfterSeconds))
            case .changeContent(let afterRequests, let newContent):
                changes.append((afterRequests, newContent))
            case .chunkedWithoutLength:
                isChunked = true
            case .throttle(let bytesPerSecond, let everyNthConnection):
                throttles.append((bytesPerSecond, everyNthConnection))
            case .contentDisposition(let value):
                contentDispositions.append(value)
            case .noValidators:
                hasValidators = false
            case .lie(let fromRequest, let requests):
                let (end, overflow) = fromRequest.addingReportingOverflow(requests)
                lies.append(fromRequest..<(overflow ? Int.max : end))
            case .header(let name, let value):
                extraHeaders.append((name, value))
            case .corrupt(let range, let servings):
                corruptions.append((range, servings))
            case .contentType(let value):
                contentType = value
            case .dropReusedConnection(let requests):
                reusedDrops += requests
            case .claimLength(let length):
                claimedLength = length
            }
        }

        // A stable sort keeps the given order for equal thresholds.
        let sortedChanges = changes.enumerated()
            .sorted { ($0.element.afterRequests, $0.offset) < ($1.element.afterRequests, $1.offset) }
            .map(\.element)
        let original = ContentVersion(
            bytes: content,
            etag: hasValidators ? etag : nil,
            lastModified: hasValidators ? lastModified : nil
        )
        self.versions =
            [original]
            + sortedChanges.enumerated().map { index, change in
                ContentVersion(
                    bytes: change.content,
                    etag: original.etag.map { Self.changedETag($0, version: index + 1) },
                    lastModified: original.lastModified.map { Self.changedLastModified($0, version: index + 1) }
                )
            }
        self.changeThresholds = sortedChanges.map(\.afterRequests)
        self.truncations = truncations
        self.unavailable = unavailable
        self.wrongContentRangeFrom = wrongContentRangeFrom
        self.claimedLength = claimedLength
        self.throttles = throttles
        self.contentDispositions = contentDispositions
        self.extraHeaders = extraHeaders
        self.lies = lies
        self.corruptions = corruptions
        self.contentType = contentType
        self.ignoresRange = ignoresRange
        self.refusesHead = refusesHead
        self.isChunked = isChunked
        self.reusedDrops = reusedDrops
    }

    func makeProgress() -> Progress {
        Progress(
            truncationsLeft: self.truncations.map(\.requests),
            corruptionsLeft: self.corruptions.map(\.servings),
            reusedDropsLeft: self.reusedDrops
        )
    }

    /// The body rate for connection `connectionID` (1-based), or `nil` when it is not throttled.
    func throttleRate(forConnection connectionID: Int) -> Int? {
        self.throttles
            .filter { connectionID % $0.everyNthConnection == 0 }
            .map(\.bytesPerSecond)
            .min()
    }

    // MARK: - Planning

    func plan(
        method: HTTPMethod,
        uri: String,
        headers: HTTPHeaders,
        onReusedConnection reused: Bool = false,
        progress: inout Progress
    ) -> ResponsePlan {
        if reused, progress.reusedDropsLeft > 0 {
            progress.reusedDropsLeft -= 1
            var plan = ResponsePlan(status: HTTPResponseStatus(statusCode: 0), headers: [:])
            plan.dropsConnection = true
            return plan
        }
        var plan = self.planWithBody(method: method, uri: uri, headers: headers, progress: &progress)
        if method == .HEAD {
            // The headers still describe what a GET would get; the body is never sent.
            plan.body = .empty
            plan.closeAfterBodyBytes = nil
        }
        return plan
    }

    private func planWithBody(
        method: HTTPMethod,
        uri: String,
        headers: HTTPHeaders,
        progress: inout Progress
    ) -> ResponsePlan {
        if method == .HEAD && self.refusesHead {
            var responseHeaders = HTTPHeaders([("Allow", "GET")])
            responseHeaders.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: .methodNotAllowed, headers: responseHeaders)
        }
        guard method == .GET || method == .HEAD else {
            return Self.textResponse(.methodNotAllowed, extraHeaders: [("Allow", "GET, HEAD")])
        }

        let path = String(uri.prefix { $0 != "?" })
        if let file = progress.files[path] {
            return Self.planFile(file, path: path, method: method, headers: headers, progress: &progress)
        }
        switch Route(uri: uri) {
        case .basicAuth(let user, let password, let rest):
            let expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            guard headers[canonicalForm: "Authorization"].count == 1, headers.first(name: "Authorization") == expected
            else {
                return Self.textResponse(
                    .unauthorized,
                    extraHeaders: [("WWW-Authenticate", "Basic realm=\"downpour-test\", charset=\"UTF-8\"")]
                )
            }
            return self.planWithBody(method: method, uri: rest, headers: headers, progress: &progress)
        case .requireCookie(let name, let value, let rest):
            let sent = headers["Cookie"].flatMap { $0.split(separator: ";") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard sent.contains("\(name)=\(value)") else {
                return Self.textResponse(.forbidden, text: "403 Forbidden: the cookie \(name)=\(value) is missing\n")
            }
            return self.planWithBody(method: method, uri: rest, headers: headers, progress: &progress)
        case .setCookie(let cookie, let onGETOnly, let rest):
            var plan = self.planWithBody(method: method, uri: rest, headers: headers, progress: &progress)
            if method == .GET || !onGETOnly {
                plan.headers.add(name: "Set-Cookie", value: cookie)
            }
            return plan
        case .redirect(let location):
            return ResponsePlan(
                status: .found,
                headers: HTTPHeaders([("Location", location), ("Content-Length", "0")])
            )
        case .status(let status):
            return Self.textResponse(status)
        case .badRequest(let reason):
            return Self.textResponse(.badRequest, text: reason)
        case .content:
            if method == .HEAD {
                return self.planContentHead(progress: progress)
            }
            return self.planContentGet(requestHeaders: headers, progress: &progress)
        }
    }

    /// The answer for a resource served at a path of its own: its first ``RangeTestServer/ServedFile/failures``
    /// GETs fail with 500, then it is served whole or by one range.
    private static func planFile(
        _ file: RangeTestServer.ServedFile,
        path: String,
        method: HTTPMethod,
        headers requestHeaders: HTTPHeaders,
        progress: inout Progress
    ) -> ResponsePlan {
        let total = file.bytes.count
        var headers = HTTPHeaders([("Content-Type", file.contentType), ("Accept-Ranges", "bytes")])
        guard method == .GET else {
            headers.add(name: "Content-Length", value: String(total))
            return ResponsePlan(status: .ok, headers: headers)
        }
        let handled = progress.fileGETs[path, default: 0] + 1
        progress.fileGETs[path] = handled
        if handled <= file.failures {
            return Self.textResponse(.internalServerError, text: "500 Internal Server Error (injected fault)\n")
        }
        var plan: ResponsePlan
        switch requestHeaders.first(name: "Range").map({ ByteRangeRequest($0, total: total) }) ?? .none {
        case .none:
            headers.add(name: "Content-Length", value: String(total))
            plan = ResponsePlan(status: .ok, headers: headers, body: ResponseBody(bytes: file.bytes, range: 0..<total))
        case .unsatisfiable:
            return ResponsePlan(
                status: .rangeNotSatisfiable,
                headers: HTTPHeaders([("Content-Range", "bytes */\(total)"), ("Content-Length", "0")])
            )
        case .satisfiable(let range):
            headers.add(name: "Content-Range", value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)")
            headers.add(name: "Content-Length", value: String(range.count))
            plan = ResponsePlan(
                status: .partialContent,
                headers: headers,
                body: ResponseBody(bytes: file.bytes, range: range)
            )
            plan.requestedRange = range
        }
        return plan
    }

    private func planContentHead(progress: Progress) -> ResponsePlan {
        let version = self.version(afterContentGETs: progress.contentGETs)
        var headers = self.contentHeaders(for: version)
        if !self.isChunked {
            headers.add(name: "Content-Length", value: String(version.bytes.count))
        }
        return ResponsePlan(status: .ok, headers: headers)
    }

    private func planContentGet(requestHeaders: HTTPHeaders, progress: inout Progress) -> ResponsePlan {
        var requestedRange: Range<Int>?
        if let rangeValue = requestHeaders.first(name: "Range") {
            let total = self.version(afterContentGETs: progress.contentGETs).bytes.count
            if case .satisfiable(let range) = ByteRangeRequest(rangeValue, total: total) {
                requestedRange = range
            }
        }
        var plan = self.planContentGetAnswer(requestHeaders: requestHeaders, progress: &progress)
        plan.requestedRange = requestedRange
        return plan
    }

    private func planContentGetAnswer(requestHeaders: HTTPHeaders, progress: inout Progress) -> ResponsePlan {
        progress.contentGETs += 1
        let ordinal = progress.contentGETs
        let version = self.version(afterContentGETs: ordinal - 1)
        let total = version.bytes.count

        if let unavailable = self.unavailable.first(where: { ordinal % $0.everyNth == 0 }) {
            return Self.textResponse(
                .serviceUnavailable,
                text: "503 Service Unavailable (injected fault)\n",
                extraHeaders: [("Retry-After", String(unavailable.retryAfterSeconds))]
            )
        }

        var headers = self.contentHeaders(for: version)
        if self.isChunked {
            headers.add(name: "Transfer-Encoding", value: "chunked")
            var body = ResponseBody(bytes: version.bytes, range: 0..<total)
            body.invertsBytes = self.lies.contains { $0.contains(ordinal) }
            body.corruptedRanges = self.corrupt(body.range, progress: &progress)
            var plan = ResponsePlan(status: .ok, headers: headers, body: body)
            plan.closeAfterBodyBytes = self.truncate(bodyLength: total, progress: &progress)
            return plan
        }

        var status = HTTPResponseStatus.ok
        var range = 0..<total
        if !self.ignoresRange, let rangeValue = requestHeaders.first(name: "Range"),
            Self.ifRangeAllowsRange(requestHeaders.first(name: "If-Range"), version: version)
        {
            switch ByteRangeRequest(rangeValue, total: total) {
            case .none:
                break
            case .unsatisfiable:
                return ResponsePlan(
                    status: .rangeNotSatisfiable,
                    headers: HTTPHeaders([("Content-Range", "bytes */\(total)"), ("Content-Length", "0")])
                )
            case .satisfiable(var asked):
                if let from = self.wrongContentRangeFrom, ordinal >= from {
                    asked = Self.shiftedByOneByte(asked, total: total)
                }
                status = .partialContent
                range = asked
                let length = self.claimedLength ?? String(total)
                headers.add(name: "Content-Range", value: "bytes \(asked.lowerBound)-\(asked.upperBound - 1)/\(length)")
            }
        }
        headers.add(name: "Content-Length", value: String(range.count))
        var body = ResponseBody(bytes: version.bytes, range: range)
        body.invertsBytes = self.lies.contains { $0.contains(ordinal) }
        body.corruptedRanges = self.corrupt(range, progress: &progress)
        var plan = ResponsePlan(status: status, headers: headers, body: body)
        plan.closeAfterBodyBytes = self.truncate(bodyLength: range.count, progress: &progress)
        return plan
    }

    /// The corrupted ranges a body of `range` damages, using up one serving of each.
    private func corrupt(_ range: Range<Int>, progress: inout Progress) -> [Range<Int>] {
        var damaged: [Range<Int>] = []
        for (index, entry) in self.corruptions.enumerated()
        where progress.corruptionsLeft[index] > 0 && entry.range.overlaps(range) {
            progress.corruptionsLeft[index] -= 1
            damaged.append(entry.range.clamped(to: range))
        }
        return damaged
    }

    /// Uses up one request of every truncating fault that has some left, for a body of `bodyLength` bytes;
    /// returns how many bytes to send before closing, or `nil` to send the response normally.
    private func truncate(bodyLength: Int, progress: inout Progress) -> Int? {
        guard bodyLength > 0 else { return nil }
        var limit: Int?
        for (index, entry) in self.truncations.enumerated() where progress.truncationsLeft[index] > 0 {
            progress.truncationsLeft[index] -= 1
            let bytes: Int
            switch entry.truncation {
            case .closeAfter(let afterBytes):
                bytes = min(afterBytes, bodyLength)
            case .missing(let missingBytes):
                bytes = max(bodyLength - missingBytes, 0)
            }
            limit = min(limit ?? bytes, bytes)
        }
        return limit
    }

    /// `range` moved one byte later, clamped to the content; a range starting at the last byte moves one earlier
    /// instead, so that the answer is always wrong.
    private static func shiftedByOneByte(_ range: Range<Int>, total: Int) -> Range<Int> {
        if range.lowerBound + 1 < total {
            return (range.lowerBound + 1)..<min(range.upperBound + 1, total)
        }
        return total > 1 ? (total - 2)..<(total - 1) : range
    }

    private func version(afterContentGETs handled: Int) -> ContentVersion {
        let changes = self.changeThresholds.prefix { $0 <= handled }.count
        return self.versions[changes]
    }

    private func contentHeaders(for version: ContentVersion) -> HTTPHeaders {
        var headers = HTTPHeaders([("Content-Type", self.contentType)])
        if !self.isChunked {
            headers.add(name: "Accept-Ranges", value: "bytes")
        }
        if let etag = version.etag {
            headers.add(name: "ETag", value: etag)
        }
        if let lastModified = version.lastModified {
            headers.add(name: "Last-Modified", value: lastModified)
        }
        for value in self.contentDispositions {
            headers.add(name: "Content-Disposition", value: value)
        }
        for (name, value) in self.extraHeaders {
            headers.add(name: name, value: value)
        }
        return headers
    }

    /// RFC 9110 §13.1.5: a range applies only when `If-Range` is absent or strongly matches the current validator.
    private static func ifRangeAllowsRange(_ ifRange: String?, version: ContentVersion) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
            guard let etag = version.etag, !etag.hasPrefix("W/") else { return false }
            return ifRange == etag
        }
        return version.lastModified == ifRange
    }

    private static func textResponse(
        _ status: HTTPResponseStatus,
        text: String? = nil,
        extraHeaders: [(String, String)] = []
    ) -> ResponsePlan {
        var headers = HTTPHeaders(extraHeaders)
        if status == .noContent || status == .notModified {
            return ResponsePlan(status: status, headers: headers)
        }
        let body = ResponseBody(text: text ?? "\(status.code) \(status.reasonPhrase)\n")
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.range.count))
        return ResponsePlan(status: status, headers: headers, body: body)
    }

    // MARK: - Changed validators

    private static func changedETag(_ etag: String, version: Int) -> String {
        guard etag.hasSuffix("\""), etag.count >= 2 else { return etag + "-changed-\(version)" }
        return etag.dropLast() + "-changed-\(version)\""
    }

    private static func changedLastModified(_ lastModified: String, version: Int) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let base = formatter.date(from: lastModified) ?? Date(timeIntervalSince1970: 1_792_567_680)
        let changed = formatter.string(from: base.addingTimeInterval(Double(version) * 86_400))
        return changed == lastModified ? changed + " " : changed
    }
}

/// Which handler a request target goes to.
enum Route: Equatable {
    case content
    case redirect(location: String)
    case status(HTTPResponseStatus)
    case badRequest(String)
    /// Answer `rest` when the request carries exactly this Basic authorization, else 401.
    case basicAuth(user: String, password: String, rest: String)
    /// Answer `rest` when the request's `Cookie` headers hold `name=value`, else 403.
    case requireCookie(name: String, value: String, rest: String)
    /// Answer `rest`, with this `Set-Cookie` header added (to GET answers only, when `onGETOnly`).
    case setCookie(String, onGETOnly: Bool, rest: String)

    init(uri: String) {
        if let gate = Self.gate(uri) {
            self = gate
            return
        }
        let path: Substring
        let query: Substring?
        if let questionMark = uri.firstIndex(of: "?") {
            path = uri[..<questionMark]
            query = uri[uri.index(after: questionMark)...]
        } else {
            path = uri[...]
            query = nil
        }

        switch path {
        case "/loop/a":
            self = .redirect(location: "/loop/b")
        case "/loop/b":
            self = .redirect(location: "/loop/a")
        case "/redirect-to":
            let encoded = query?.split(separator: "&").first { $0.hasPrefix("url=") }?.dropFirst("url=".count)
            if let encoded, let target = String(encoded).removingPercentEncoding, !target.isEmpty {
                self = .redirect(location: target)
            } else {
                self = .badRequest("/redirect-to needs ?url=PERCENT_ENCODED_URL\n")
            }
        default:
            if let count = Self.number(after: "/redirect/", in: path), count >= 0 {
                self = .redirect(location: count == 0 ? "/file.bin" : "/redirect/\(count - 1)")
            } else if let code = Self.number(after: "/status/", in: path), (200...599).contains(code) {
                self = .status(HTTPResponseStatus(statusCode: code))
            } else {
                self = .content
            }
        }
    }

    /// `/basic-auth/USER/PASSWORD/REST`, `/require-cookie/NAME/VALUE/REST`, `/set-cookie/ENCODED/REST` and
    /// `/set-cookie-on-get/ENCODED/REST`, with percent-encoded segments; `REST` keeps the query.
    private static func gate(_ uri: String) -> Route? {
        func decoded(_ part: Substring) -> String? { String(part).removingPercentEncoding }
        let parts = uri.split(separator: "/", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].isEmpty else { return nil }
        switch parts[1] {
        case "basic-auth", "require-cookie":
            guard parts.count == 5, let first = decoded(parts[2]), let second = decoded(parts[3]) else { return nil }
            let rest = "/" + parts[4]
            return parts[1] == "basic-auth"
                ? .basicAuth(user: first, password: second, rest: rest)
                : .requireCookie(name: first, value: second, rest: rest)
        case "set-cookie", "set-cookie-on-get":
            guard let cookie = decoded(parts[2]) else { return nil }
            return .setCookie(
                cookie,
                onGETOnly: parts[1] == "set-cookie-on-get",
                rest: "/" + parts[3...].joined(separator: "/")
            )
        default:
            return nil
        }
    }

    private static func number(after prefix: String, in path: Substring) -> Int? {
        guard path.hasPrefix(prefix) else { return nil }
        let digits = path.dropFirst(prefix.count)
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        return Int(digits)
    }
}

/// A parsed single `Range: bytes=...` request header (RFC 9110 §14.1.2).
enum ByteRangeRequest: Equatable {
    /// No usable range: absent, malformed, another unit, or several ranges. Answer with the whole body.
    case none
    /// The range does not overlap the content: answer 416.
    case unsatisfiable
    /// Answer 206 with these bytes (never empty, always inside the content).
    case satisfiable(Range<Int>)

    init(_ value: String, total: Int) {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        let unit = "bytes="
        guard trimmed.lowercased().hasPrefix(unit) else {
            self = .none
            return
        }
        let spec = trimmed.dropFirst(unit.count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .none
            return
        }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]

        if first.isEmpty {
            // Suffix range: the last N bytes.
            guard let suffixLength = Self.number(last) else {
                self = .none
                return
            }
            guard suffixLength > 0, total > 0 else {
                self = .unsatisfiable
                return
            }
            self = .satisfiable(max(total - suffixLength, 0)..<total)
            return
        }

        guard let start = Self.number(first) else {
            self = .none
            return
        }
        var end = total - 1
        if !last.isEmpty {
            guard let lastByte = Self.number(last), lastByte >= start else {
                self = .none
                return
            }
            end = min(lastByte, total - 1)
        }
        guard start < total else {
            self = .unsatisfiable
            return
        }
        self = .satisfiable(start..<(end + 1))
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int(text)
    }
}
