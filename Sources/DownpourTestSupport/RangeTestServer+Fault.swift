extension RangeTestServer {
    /// A misbehaviour that a ``RangeTestServer`` injects into its answers.
    ///
    /// Pass any number of faults to ``RangeTestServer/start(content:faults:etag:lastModified:)``; faults of different
    /// kinds work together. Faults apply to the content routes (every path that is not a redirect or status route),
    /// except ``refuseHead``, which refuses `HEAD` on every route.
    ///
    /// Where a fault counts GET requests, it counts the GET requests for content, across all connections, in the
    /// order the server handles them, starting at 1. Redirect and status routes are not counted.
    ///
    /// ``closeConnection(afterBytes:requests:)`` and ``shortBody(missingBytes:requests:)`` each keep their own count
    /// of the responses they may still cut; when both apply to one response, the fewer bytes win. A 503 from
    /// ``serviceUnavailable(everyNth:retryAfterSeconds:)`` or a 416 uses up neither.
    public struct Fault: Sendable, Hashable, CustomStringConvertible {
        enum Kind: Sendable, Hashable {
            case closeConnection(afterBytes: Int, requests: Int)
            case ignoreRange
            case refuseHead
            case wrongContentRange(fromRequest: Int)
            case serviceUnavailable(everyNth: Int, retryAfterSeconds: Int)
            case changeContent(afterRequests: Int, newContent: [UInt8])
            case shortBody(missingBytes: Int, requests: Int)
            case chunkedWithoutLength
            case throttle(bytesPerSecond: Int, everyNthConnection: Int)
            case contentDisposition(String)
            case noValidators
            case lie(fromRequest: Int, requests: Int)
            case header(name: String, value: String)
            case corrupt(range: Range<Int>, servings: Int)
            case contentType(String)
            case dropReusedConnection(requests: Int)
            case claimLength(String)
        }

        let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// Close the connection after sending `afterBytes` body bytes, for the first `requests` GET requests that
        /// carry a body (a 200 or 206 with at least one byte; counted across all connections).
        ///
        /// Headers are sent normally, promising the full length. A body no longer than `afterBytes` is sent whole,
        /// with `Connection: close`, and the connection closed after it (announced, so that whether the client
        /// sends its next request on it before it sees the close is not left to chance).
        public static func closeConnection(afterBytes: Int, requests: Int) -> Fault {
            precondition(afterBytes >= 0 && requests >= 0, "closeConnection needs non-negative arguments")
            return Fault(.closeConnection(afterBytes: afterBytes, requests: requests))
        }

        /// Close a kept-alive connection without answering, for the first `requests` requests (any route and
        /// method) that arrive on a connection that has answered one already: a server that closed an idle
        /// connection just as the client sent its next request on it. Recorded with status 0.
        public static func dropReusedConnection(requests: Int) -> Fault {
            precondition(requests >= 0, "dropReusedConnection needs a non-negative count")
            return Fault(.dropReusedConnection(requests: requests))
        }

        /// Ignore the `Range` header: answer every GET with 200 and the whole body.
        ///
        /// `HEAD` (and the 200 itself) still say `Accept-Ranges: bytes`: a server that lies.
        public static let ignoreRange = Fault(.ignoreRange)

        /// Answer `HEAD` with 405 Method Not Allowed (GET still works, `Range` included).
        public static let refuseHead = Fault(.refuseHead)

        /// Answer range requests with 206 but a `Content-Range` whose start and end are shifted by +1 byte, and the
        /// body of that shifted range (clamped to the end of the content; a range that starts at the last byte is
        /// shifted by -1 instead).
        ///
        /// Applies from the `fromRequest`-th GET request (1-based) on.
        public static func wrongContentRange(fromRequest: Int) -> Fault {
            precondition(fromRequest >= 1, "wrongContentRange counts requests from 1")
            return Fault(.wrongContentRange(fromRequest: fromRequest))
        }

        /// Every `everyNth` GET request (the 2nd, 4th, ... for `everyNth: 2`) gets 503 Service Unavailable with
        /// `Retry-After: retryAfterSeconds` and a small text body.
        public static func serviceUnavailable(everyNth: Int, retryAfterSeconds: Int) -> Fault {
            precondition(everyNth >= 1, "serviceUnavailable needs everyNth >= 1")
            precondition(retryAfterSeconds >= 0, "Retry-After cannot be negative")
            return Fault(.serviceUnavailable(everyNth: everyNth, retryAfterSeconds: retryAfterSeconds))
        }

        /// After `afterRequests` GET requests have been answered, the content is replaced by `newContent` and the
        /// `ETag` and `Last-Modified` change.
        ///
        /// `HEAD` and later GET requests see the new content and validators. A range request whose `If-Range` names
        /// the old validators gets 200 with the full new body; one without `If-Range` gets the range of the new
        /// content. Several `changeContent` faults make successive versions, ordered by `afterRequests`.
        public static func changeContent(afterRequests: Int, newContent: [UInt8]) -> Fault {
            precondition(afterRequests >= 0, "changeContent needs afterRequests >= 0")
            return Fault(.changeContent(afterRequests: afterRequests, newContent: newContent))
        }

        /// Send a `Content-Length` (and `Content-Range`) promising the full asked range, but `missingBytes` fewer
        /// body bytes, then close the connection; for the first `requests` GET requests that carry a body.
        public static func shortBody(missingBytes: Int, requests: Int) -> Fault {
            precondition(missingBytes >= 0 && requests >= 0, "shortBody needs non-negative arguments")
            return Fault(.shortBody(missingBytes: missingBytes, requests: requests))
        }

        /// GET answers 200 with `Transfer-Encoding: chunked`, no `Content-Length`, no `Accept-Ranges`, ignoring
        /// `Range`; `HEAD` answers 200 with no `Content-Length` and no `Accept-Ranges`.
        public static let chunkedWithoutLength = Fault(.chunkedWithoutLength)

        /// Throttle the body of every response on one out of every `everyNthConnection` connections to
        /// `bytesPerSecond`.
        ///
        /// Connections are numbered from 1 in the order they are accepted; connection *k* is throttled when *k* is a
        /// multiple of `everyNthConnection` (so `1` throttles all of them, `3` the 3rd, 6th, ...). The body of
        /// each response is sent so that after *n* bytes the next slice leaves no earlier than start + *n* / rate.
        public static func throttle(bytesPerSecond: Int, everyNthConnection: Int = 1) -> Fault {
            precondition(bytesPerSecond >= 1, "throttle needs bytesPerSecond >= 1")
            precondition(everyNthConnection >= 1, "throttle needs everyNthConnection >= 1")
            return Fault(.throttle(bytesPerSecond: bytesPerSecond, everyNthConnection: everyNthConnection))
        }

        /// Write `length` (any text) as the complete length in every `Content-Range` of a `206`, whatever the real
        /// length: a server that claims a file no disk can hold, say. The bodies are the real bytes.
        public static func claimLength(_ length: String) -> Fault {
            Fault(.claimLength(length))
        }

        /// Add `Content-Disposition: <value>` to `HEAD` and GET responses of the content routes.
        public static func contentDisposition(_ value: String) -> Fault {
            Fault(.contentDisposition(value))
        }

        /// Send no `ETag` and no `Last-Modified`.
        public static let noValidators = Fault(.noValidators)

        /// Send other bytes than the content (every byte inverted) under the same status and headers (`ETag`,
        /// lengths and all), for `requests` GET requests from the `fromRequest`-th on (1-based): a server that lies,
        /// or a mirror behind one name that has another file. Only a digest can tell.
        public static func lie(fromRequest: Int, requests: Int = Int.max) -> Fault {
            precondition(fromRequest >= 1 && requests >= 1, "lie counts requests from 1")
            return Fault(.lie(fromRequest: fromRequest, requests: requests))
        }

        /// Send the bytes of `range` (offsets into the content) inverted in the first `servings` GET responses whose
        /// body holds any of them, under the same status and headers; every other byte, and later responses, are
        /// right: a piece damaged on its way, that a second fetch gets right. `servings: .max` damages it every time.
        public static func corrupt(_ range: Range<Int>, servings: Int = 1) -> Fault {
            precondition(!range.isEmpty && range.lowerBound >= 0 && servings >= 1, "corrupt needs a range and servings")
            return Fault(.corrupt(range: range, servings: servings))
        }

        /// Send `Content-Type: value` on `HEAD` and GET responses of the content routes, instead of
        /// `application/octet-stream`.
        public static func contentType(_ value: String) -> Fault {
            Fault(.contentType(value))
        }

        /// Send `Repr-Digest: value` (RFC 9530) on `HEAD` and GET responses of the content routes.
        public static func reprDigest(_ value: String) -> Fault {
            Fault(.header(name: "Repr-Digest", value: value))
        }

        /// Send `Digest: value` (RFC 3230) on `HEAD` and GET responses of the content routes.
        public static func digest(_ value: String) -> Fault {
            Fault(.header(name: "Digest", value: value))
        }

        public var description: String {
            switch self.kind {
            case .closeConnection(let afterBytes, let requests):
                return "closeConnection(afterBytes: \(afterBytes), requests: \(requests))"
            case .ignoreRange:
                return "ignoreRange"
            case .refuseHead:
                return "refuseHead"
            case .wrongContentRange(let fromRequest):
                return "wrongContentRange(fromRequest: \(fromRequest))"
            case .serviceUnavailable(let everyNth, let retryAfterSeconds):
                return "serviceUnavailable(everyNth: \(everyNth), retryAfterSeconds: \(retryAfterSeconds))"
            case .changeContent(let afterRequests, let newContent):
                return "changeContent(afterRequests: \(afterRequests), newContent: \(newContent.count) bytes)"
            case .shortBody(let missingBytes, let requests):
                return "shortBody(missingBytes: \(missingBytes), requests: \(requests))"
            case .chunkedWithoutLength:
                return "chunkedWithoutLength"
            case .throttle(let bytesPerSecond, let everyNthConnection):
                return "throttle(bytesPerSecond: \(bytesPerSecond), everyNthConnection: \(everyNthConnection))"
            case .contentDisposition(let value):
                return "contentDisposition(\(value))"
            case .noValidators:
                return "noValidators"
            case .lie(let fromRequest, let requests):
                return "lie(fromRequest: \(fromRequest), requests: \(requests))"
            case .dropReusedConnection(let requests):
                return "dropReusedConnection(requests: \(requests))"
            case .header(let name, let value):
                return "header(\(name): \(value))"
            case .corrupt(let range, let servings):
                return "corrupt(\(range.lowerBound)..<\(range.upperBound), servings: \(servings))"
            case .claimLength(let length):
                return "claimLength(\(length))"
            case .contentType(let value):
                return "contentType(\(value))"
            }
        }
    }
}
