import Foundation
import NIOHTTP1
import Testing

@testable import Downpour

@Suite("A window of a resource (an HLS byte range) seen as a file")
struct ResourceWindowTests {
    static let url = URL(string: "http://a.example/v/all.ts")!
    /// Bytes 1000..<5000 of the resource: a file of 4000 bytes.
    static let window = ResourceWindow(1000..<5000)

    @Test(
        "each Range asked is moved into the window, never past its end",
        arguments: [
            ("bytes=0-99", "bytes=1000-1099"),
            ("bytes=3900-3999", "bytes=4900-4999"),
            ("bytes=0-8388607", "bytes=1000-4999"),  // the probe's first request
            ("bytes=2000-", "bytes=3000-4999"),
            ("bytes=-500", "bytes=4500-4999"),
            ("bytes=-9000", "bytes=1000-4999"),
            // A first byte past the window is moved as it is: the server's bytes are outside, and refused.
            ("bytes=4000-4100", "bytes=5000-5100"),
            ("bytes=4000-", "bytes=5000-5000"),
            ("items=0-9", "items=0-9"),
            ("bytes=9-2", "bytes=9-2"),
        ]
    )
    func asking(_ asked: String, _ sent: String) {
        #expect(Self.window.asking(asked) == sent)
    }

    static func head(_ status: HTTPResponseStatus, _ headers: [(String, String)]) -> HTTPResponseHead {
        HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers))
    }

    @Test("a 206 is moved back: its range into the window, its length the window's, whole-file digests dropped")
    func partial() throws {
        let viewed = try Self.window.view(
            Self.head(
                .partialContent,
                [
                    ("Content-Range", "bytes 1000-1099/90000"), ("ETag", "\"v1\""),
                    ("Repr-Digest", "sha-256=:AAAA:"), ("Digest", "SHA-256=AAAA"),
                ]
            ),
            isHead: false,
            url: Self.url
        )
        #expect(viewed.status == .partialContent)
        #expect(viewed.headers.first(name: "Content-Range") == "bytes 0-99/4000")
        #expect(viewed.headers.first(name: "ETag") == "\"v1\"")
        #expect(viewed.headers.first(name: "Repr-Digest") == nil)
        #expect(viewed.headers.first(name: "Digest") == nil)
        let unknownLength = try Self.window.view(
            Self.head(.partialContent, [("Content-Range", "bytes 4900-4999/*")]),
            isHead: false,
            url: Self.url
        )
        #expect(unknownLength.headers.first(name: "Content-Range") == "bytes 3900-3999/4000")
    }

    @Test("a HEAD's length becomes the window's; a redirect and an error status pass as they are")
    func headAndOthers() throws {
        let head = try Self.window.view(
            Self.head(.ok, [("Content-Length", "90000"), ("Accept-Ranges", "bytes")]),
            isHead: true,
            url: Self.url
        )
        #expect(head.headers.first(name: "Content-Length") == "4000")
        for status in [HTTPResponseStatus.found, .notFound, .serviceUnavailable] {
            let original = Self.head(status, [("Content-Length", "12")])
            #expect(try Self.window.view(original, isHead: false, url: Self.url) == original)
        }
        // A window that is the whole resource may come whole.
        let all = ResourceWindow(0..<90000)
        let whole = Self.head(.ok, [("Content-Length", "90000")])
        #expect(try all.view(whole, isHead: false, url: Self.url) == whole)
        // A HEAD without a length says nothing to move.
        let noLength = Self.head(.ok, [("Accept-Ranges", "bytes")])
        #expect(try Self.window.view(noLength, isHead: true, url: Self.url) == noLength)
    }

    @Test(
        "what cannot give the window is refused, naming the bytes asked",
        arguments: [
            (200, "Content-Length", "90000", false, "does not serve byte ranges"),  // ranges ignored
            (203, "Content-Length", "90000", false, "does not serve byte ranges"),  // a proxy's whole copy
            (200, "Transfer-Encoding", "chunked", false, "does not serve byte ranges"),
            (200, "Content-Length", "3000", false, "is 3000 bytes long"),
            (200, "Content-Length", "4500", true, "is 4500 bytes long"),  // a HEAD of a shorter resource
            (206, "Content-Range", "bytes 1000-1099/4500", false, "is 4500 bytes long"),
            (206, "Content-Range", "bytes 900-1099/90000", false, "the server sent 'bytes 900-1099/90000'"),
            (206, "Content-Range", "bytes 4000-5000/90000", false, "the server sent"),
            (416, "Content-Range", "bytes */800", false, "is 800 bytes long"),
        ] as [(UInt, String, String, Bool, String)]
    )
    func refused(_ code: UInt, _ name: String, _ value: String, _ isHead: Bool, _ says: String) {
        let error = #expect(throws: DownloadError.self) {
            try Self.window.view(
                Self.head(HTTPResponseStatus(statusCode: Int(code)), [(name, value)]),
                isHead: isHead,
                url: Self.url
            )
        }
        #expect(error?.code == .remoteMisbehaved)
        #expect(error?.message.contains("bytes 1000-4999 of http://a.example/v/all.ts") == true)
        #expect(error?.message.contains(says) == true, "\(error?.message ?? "")")
    }
}
