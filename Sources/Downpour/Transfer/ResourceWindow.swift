import Foundation
import NIOHTTP1

/// Bytes ``range`` of a resource, seen by a download as a file of its own: an HLS segment given as a byte range
/// (`EXT-X-BYTERANGE`), fetched with ranged `GET`s and nothing around it.
///
/// The engine plans, probes, resumes and checks the window as it would a file of ``length`` bytes; the transport
/// moves each `Range` it asks by ``range``'s start (``asking(_:)``), and each response head back
/// (``view(_:isHead:url:)``) before anything reads it. A server that ignores ranges cannot give a window and is
/// refused, unless the window is the whole resource.
struct ResourceWindow: Sendable, Hashable {
    /// A response head ``view(_:isHead:url:)`` refused, as the request's error: the server's answer, final, where
    /// other errors of a request are the network's and may be retried.
    struct Refusal: Error {
        var error: DownloadError
    }

    let range: Range<Int64>

    /// - Precondition: `range` is not empty and starts at 0 or later.
    init(_ range: Range<Int64>) {
        precondition(range.lowerBound >= 0 && !range.isEmpty, "a window of no bytes")
        self.range = range
    }

    /// The window's size: the length of the file the engine sees.
    var length: Int64 { self.range.upperBound - self.range.lowerBound }

    /// The `Range` header value for the resource, given one for the window (`bytes=FIRST-LAST`, `bytes=FIRST-` or
    /// `bytes=-SUFFIX`): moved by the window's start, and never past its end, so that the bytes the server sends are
    /// the window's, or refused by ``view(_:isHead:url:)``. Anything else is returned as it is.
    func asking(_ value: String) -> String {
        let text = value.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes="), let dash = text.firstIndex(of: "-") else { return value }
        let firstText = text[text.index(text.startIndex, offsetBy: 6)..<dash]
        let lastText = text[text.index(after: dash)...]
        let first: Int64
        let last: Int64
        if firstText.isEmpty {
            guard let suffix = Int64(decimal: lastText), suffix > 0 else { return value }
            first = max(0, self.length - suffix)
            last = self.length - 1
        } else {
            guard let start = Int64(decimal: firstText) else { return value }
            first = start
            if lastText.isEmpty {
                last = max(start, self.length - 1)
            } else {
                guard let end = Int64(decimal: lastText), start <= end else { return value }
                // A first byte past the window is asked as it is: the server's bytes are outside, and refused.
                last = start < self.length ? min(end, self.length - 1) : end
            }
        }
        let (from, over1) = first.addingReportingOverflow(self.range.lowerBound)
        let (to, over2) = last.addingReportingOverflow(self.range.lowerBound)
        guard !over1, !over2 else { return value }
        return "bytes=\(from)-\(to)"
    }

    /// `head` as the window's: a `206`'s `Content-Range` moved to the window and its length the window's, a
    /// `HEAD`'s `Content-Length` the window's; digests of the whole resource are dropped (they do not describe
    /// the window). Redirects and errors pass as they are.
    ///
    /// - Throws: ``DownloadError/Code/remoteMisbehaved`` for a `200` with more than the window (a server that
    ///   ignores ranges), bytes outside the window, a resource that ends before the window does, a `416`.
    func view(_ head: HTTPResponseHead, isHead: Bool, url: URL) throws(DownloadError) -> HTTPResponseHead {
        var head = head
        let asked = "bytes \(self.range.lowerBound)-\(self.range.upperBound - 1) of \(url.absoluteString)"
        for name in ["Digest", "Repr-Digest", "Content-Digest", "Content-MD5"] {
            head.headers.remove(name: name)
        }
        switch head.status.code {
        case 206:
            guard let header = head.headers.first(name: "Content-Range"), let contentRange = ContentRange(header),
                let sent = contentRange.range
            else { return head }  // the response's own checks name what is wrong
            if let total = contentRange.completeLength, total < self.range.upperBound {
                throw self.endsEarly(total, asked: asked)
            }
            guard sent.lowerBound >= self.range.lowerBound, sent.upperBound < self.range.upperBound else {
                throw DownloadError(
                    code: .remoteMisbehaved,
                    message: "Asked for \(asked), the server sent '\(header)'; nothing was written."
                )
            }
            let first = sent.lowerBound - self.range.lowerBound
            let last = sent.upperBound - self.range.lowerBound
            head.headers.replaceOrAdd(name: "Content-Range", value: "bytes \(first)-\(last)/\(self.length)")
            return head
        case 200..<300:
            // Any success but a 206 is the whole resource (a 203 from a proxy too).
            let length = head.headers.first(name: "Content-Length").flatMap { Int64(decimal: Substring($0)) }
            if isHead {
                // A HEAD without a length says nothing to move: the GETs that follow are checked.
                guard let length else { return head }
                guard length >= self.range.upperBound else { throw self.endsEarly(length, asked: asked) }
                if head.headers.first(name: "Accept-Ranges")?.lowercased() == "none",
                    self.range.lowerBound > 0
                        || length > self.range.upperBound
                {
                    throw self.noRanges(asked: asked)
                }
                head.headers.replaceOrAdd(name: "Content-Length", value: String(self.length))
                return head
            }
            // The whole resource: the window only when it is the whole.
            guard self.range.lowerBound == 0, length == self.range.upperBound else {
                if let length, length < self.range.upperBound { throw self.endsEarly(length, asked: asked) }
                throw self.noRanges(asked: asked)
            }
            return head
        case 416:
            let total = head.headers.first(name: "Content-Range").flatMap(ContentRange.init)?.completeLength
            throw self.endsEarly(total, asked: asked)
        default:
            return head
        }
    }

    private func endsEarly(_ total: Int64?, asked: String) -> DownloadError {
        let length = total.map { " is \($0) bytes long: it" } ?? ""
        return DownloadError(
            code: .remoteMisbehaved,
            message: "Asked for \(asked), which\(length) ends before the range does; nothing was written."
        )
    }

    private func noRanges(asked: String) -> DownloadError {
        DownloadError(
            code: .remoteMisbehaved,
            message: "Asked for \(asked), the server sent the whole resource instead: it does not serve byte "
                + "ranges, and the bytes around the range are not wanted; nothing was written."
        )
    }
}
