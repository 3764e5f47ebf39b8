import Foundation

/// What the probe learned about the file on the server.
public struct RemoteFile: Sendable, Hashable {
    /// The URL after redirects: where the bytes are fetched from.
    public var url: URL
    /// The length in bytes, when the server said.
    public var length: Int64?
    /// Whether range requests may be tried. `false` only when the server said so (`Accept-Ranges: none`,
    /// or a `200` to a range request); a server that ignores ranges later is handled then.
    public var acceptsRanges: Bool
    /// The entity tag, as sent (quotes included, `W/` when weak).
    public var etag: String?
    /// The `Last-Modified` date, as sent.
    public var lastModified: String?
    /// The file name from `Content-Disposition`, already reduced to a safe base name.
    public var suggestedFilename: String?
    /// The `Content-Type` of the probe's response, as sent (parameters included).
    public var contentType: String?

    public init(
        url: URL,
        length: Int64?,
        acceptsRanges: Bool,
        etag: String? = nil,
        lastModified: String? = nil,
        suggestedFilename: String? = nil,
        contentType: String? = nil
    ) {
        self.url = url
        self.length = length
        self.acceptsRanges = acceptsRanges
        self.etag = etag
        self.lastModified = lastModified
        self.suggestedFilename = suggestedFilename
        self.contentType = contentType
    }

    /// Whether the download can be cut into ranges.
    public var isSegmentable: Bool {
        self.acceptsRanges && (self.length ?? 0) > 0
    }

    /// The value for `If-Range`: the strong ETag, else `Last-Modified` (RFC 9110 forbids weak tags there).
    public var ifRangeValidator: String? {
        if let etag, !etag.hasPrefix("W/") {
            return etag
        }
        return self.lastModified
    }
}
