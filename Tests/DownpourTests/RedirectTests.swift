import Foundation
import Testing

@testable import Downpour

@Suite("Redirect rules")
struct RedirectTests {
    static let here = URL(string: "http://a.example/dir/f.iso")!

    @Test(
        "which statuses redirect, and where to",
        arguments: [
            (301, "/g.iso", "http://a.example/g.iso"),
            (302, "h.iso", "http://a.example/dir/h.iso"),
            (303, "https://b.example/f.iso", "https://b.example/f.iso"),
            (307, "//c.example/f.iso", "http://c.example/f.iso"),
            (308, "?v=2", "http://a.example/dir/f.iso?v=2"),
            (200, "/g.iso", nil),
            (304, "/g.iso", nil),
        ] as [(UInt, String, String?)]
    )
    func target(_ status: UInt, _ location: String, _ expected: String?) throws {
        #expect(try Redirect.target(status: status, location: location, from: Self.here)?.absoluteString == expected)
    }

    @Test("a redirect without a usable Location is refused")
    func noLocation() {
        #expect(throws: Redirect.Refusal.noLocation) {
            try Redirect.target(status: 302, location: nil, from: Self.here)
        }
    }

    @Test("the next hop: http or https, not seen before, within the limit")
    func check() {
        let visited: Set = ["http://a.example/dir/f.iso", "http://b.example/f.iso"]
        func refusal(_ next: String, hops: Int) -> Redirect.Refusal? {
            do throws(Redirect.Refusal) {
                try Redirect.check(URL(string: next)!, visited: visited, hops: hops, limit: 2)
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal("https://c.example/f.iso", hops: 1) == nil)
        #expect(refusal("ftp://c.example/f.iso", hops: 0) == .notHTTP)
        #expect(refusal("http://b.example/f.iso", hops: 0) == .loop)
        #expect(refusal("https://c.example/f.iso", hops: 2) == .tooMany)
    }
}
