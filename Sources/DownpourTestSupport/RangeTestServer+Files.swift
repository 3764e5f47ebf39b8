extension RangeTestServer {
    /// A resource served at a path of its own, beside the content every other path serves: an HLS playlist, a
    /// segment, a key. `HEAD` answers with its length and type; `GET` with the whole of it, or one `bytes` range
    /// (206), or 416. No fault applies to it but its own ``failures``.
    public struct ServedFile: Sendable {
        public var bytes: [UInt8]
        public var contentType: String
        /// The first this many `GET`s answer `500`; the next ones serve the file.
        public var failures: Int

        public init(_ bytes: [UInt8], contentType: String = "application/octet-stream", failures: Int = 0) {
            self.bytes = bytes
            self.contentType = contentType
            self.failures = failures
        }

        public init(text: String, contentType: String, failures: Int = 0) {
            self.init(Array(text.utf8), contentType: contentType, failures: failures)
        }
    }
}
