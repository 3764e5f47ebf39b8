extension RangeTestServer {
    /// One request as the server received it.
    public struct RecordedRequest: Sendable {
        /// The request method, e.g. `"GET"` or `"HEAD"`.
        public var method: String
        /// The request target as received: path and query, e.g. `"/file.bin"` or `"/redirect-to?url=..."`.
        public var uri: String
        /// All request headers, in the order they were received.
        public var headers: [(name: String, value: String)]
        /// The 1-based index of the TCP connection the request came on, in the order connections were accepted.
        public var connectionID: Int
        /// When the request head arrived.
        public var receivedAt: ContinuousClock.Instant
        /// The status of the answer, e.g. 206; 0 while unknown.
        public var status: Int
        /// For a `GET` of the content with one satisfiable `bytes` range: the bytes that range names, resolved
        /// against the length of the content the request was answered from (`bytes=10-` is `10..<length`).
        /// Recorded whether or not the answer honoured it (see ``status``); `nil` without such a range.
        public var requestedRange: Range<Int>?
        /// The rate in bytes per second that a ``Fault/throttle(bytesPerSecond:everyNthConnection:)`` fault
        /// holds the request's connection to, or `nil` when no throttle applies to the connection.
        public var throttle: Int?
        /// Body bytes of the answer whose write to the socket succeeded: what the server paid for this request.
        public var bodyBytesSent = 0

        /// The first value of the header `name` (compared case-insensitively), or `nil` when it was not sent.
        public func header(_ name: String) -> String? {
            let lowercasedName = name.lowercased()
            return self.headers.first { $0.name.lowercased() == lowercasedName }?.value
        }
    }

    /// What a ``RangeTestServer`` has seen and sent so far.
    public struct Statistics: Sendable {
        /// Body bytes sent for the requests whose target is `uri`: what one download cost the server, when each
        /// download has a path of its own.
        public func bodyBytesSent(for uri: String) -> Int {
            self.requests.lazy.filter { $0.uri == uri }.reduce(0) { $0 + $1.bodyBytesSent }
        }

        /// Every request, in the order the server handled it.
        public var requests: [RecordedRequest]
        /// GET requests received, on all routes.
        public var getRequests: Int
        /// HEAD requests received, on all routes.
        public var headRequests: Int
        /// TCP connections accepted.
        public var connections: Int
        /// TCP connections accepted and not closed yet.
        public var openConnections: Int
        /// Which ones: their numbers (``RecordedRequest/connectionID``).
        public var openConnectionIDs: Set<Int> = []
        /// The most TCP connections that were open at once.
        public var mostOpenConnections: Int
        /// Response body bytes whose write to a socket succeeded, on all routes.
        public var bodyBytesSent: Int

        init() {
            self.requests = []
            self.getRequests = 0
            self.headRequests = 0
            self.connections = 0
            self.openConnections = 0
            self.mostOpenConnections = 0
            self.bodyBytesSent = 0
        }
    }
}
