import Downpour
import Foundation
import Testing

@Suite("Metalink documents")
struct MetalinkTests {
    static let sha256 = String(repeating: "ab", count: 32)
    static let sha1 = String(repeating: "cd", count: 20)
    static let md5 = String(repeating: "ef", count: 16)

    @Test("Metalink 4: size, digests strongest first, pieces, URLs by priority, non-HTTP left out")
    func version4() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <published>2026-01-01T00:00:00Z</published>
              <file name="example.iso">
                <size>600000</size>
                <hash type="md5">\(Self.md5.uppercased())</hash>
                <hash type="sha-256">\(Self.sha256)</hash>
                <hash type="sha-384">00</hash>
                <pieces length="262144" type="sha-1">
                  <hash>\(Self.sha1)</hash>
                  <hash>\(Self.sha1)</hash>
                  <hash>\(Self.sha1)</hash>
                </pieces>
                <url location="de" priority="2">http://de.example.com/example.iso</url>
                <url priority="1">https://example.com/example.iso</url>
                <url location="US">http://us.example.com/example.iso</url>
                <url priority="1">ftp://ftp.example.com/example.iso</url>
                <metaurl mediatype="torrent" priority="1">http://example.com/example.iso.torrent</metaurl>
              </file>
            </metalink>
            """
        let metalink = try Metalink(parsing: Data(xml.utf8))
        let file = try #require(metalink.files.first)
        #expect(metalink.files.count == 1)
        #expect(file.name == "example.iso")
        #expect(file.size == 600_000)
        #expect(file.checksums.map(\.algorithm) == [.sha256, .md5])
        #expect(file.strongestChecksum == Checksum(algorithm: .sha256, digest: Self.sha256))
        #expect(file.checksums.last?.digest == Self.md5)
        let pieces = try #require(file.pieces)
        #expect(pieces.algorithm == .sha1)
        #expect(pieces.pieceLength == 262_144)
        #expect(pieces.digests.count == 3)
        #expect(pieces.range(ofPiece: 2, length: 600_000) == 524_288..<600_000)
        #expect(
            file.sources.map(\.url.absoluteString) == [
                "https://example.com/example.iso", "http://de.example.com/example.iso",
                "http://us.example.com/example.iso",
            ]
        )
        #expect(file.sources.map(\.priority) == [1, 2, 999_999])
        #expect(file.sources.map(\.location) == [nil, "de", "us"])
        // Preferred locations first (aria2's --metalink-location), in their order otherwise.
        #expect(file.sources(preferring: ["US", "de"]).map(\.location) == ["de", "us", nil])
        #expect(file.sources(preferring: ["jp"]) == file.sources)
        #expect(file.sources(preferring: []) == file.sources)
    }

    @Test("Metalink 3: preference, verification, pieces by index, several files")
    func version3() throws {
        let xml = """
            <?xml version="1.0" encoding="utf-8"?>
            <metalink version="3.0" xmlns="http://www.metalinker.org/">
              <files>
                <file name="a.bin">
                  <size>10</size>
                  <verification>
                    <hash type="sha1">\(Self.sha1)</hash>
                    <pieces length="5" type="sha1">
                      <hash piece="1">\(String(repeating: "11", count: 20))</hash>
                      <hash piece="0">\(String(repeating: "00", count: 20))</hash>
                    </pieces>
                  </verification>
                  <resources>
                    <url type="http" preference="10">http://slow.example.com/a.bin</url>
                    <url type="http" location="fr" preference="100">http://fast.example.com/a.bin</url>
                  </resources>
                </file>
                <file name="sub/b.bin">
                  <resources><url type="http">http://example.com/b.bin</url></resources>
                </file>
                <file name="c.bin">
                  <resources><url type="ftp">ftp://example.com/c.bin</url></resources>
                </file>
              </files>
            </metalink>
            """
        let metalink = try Metalink(parsing: Data(xml.utf8))
        #expect(metalink.files.map(\.name) == ["a.bin", "sub/b.bin"])
        let a = metalink.files[0]
        #expect(a.sources.map(\.url.host) == ["fast.example.com", "slow.example.com"])
        #expect(a.sources.map(\.priority) == [1, 91])
        #expect(a.checksums == [Checksum(algorithm: .sha1, digest: Self.sha1)])
        #expect(a.pieces?.digests.first == String(repeating: "00", count: 20))
        #expect(a.pieces?.digests.last == String(repeating: "11", count: 20))
        #expect(metalink.files[1].size == nil)
        #expect(metalink.files[1].pieces == nil)
    }

    @Test(
        "Refused documents say why",
        arguments: [
            (
                "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"../etc/passwd\"><url>http://h/x</url></file></metalink>",
                "leaves the download directory"
            ),
            (
                "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"/etc/passwd\"><url>http://h/x</url></file></metalink>",
                "leaves the download directory"
            ),
            (
                "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file><url>http://h/x</url></file></metalink>",
                "has no name"
            ),
            (
                "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"x\"><hash type=\"sha-256\">abc</hash><url>http://h/x</url></file></metalink>",
                "64 hexadecimal digits"
            ),
            (
                "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"x\"><url>ftp://h/x</url></file></metalink>",
                "no file with an http or https URL"
            ),
            ("<html><body>not a metalink</body></html>", "root element is <html>"),
            ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"x\">", "not well-formed"),
            ("", "is empty"),
        ]
    )
    func refused(xml: String, reason: String) {
        #expect {
            try Metalink(parsing: Data(xml.utf8))
        } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .invalidRequest && error.message.contains(reason)
        }
    }

    @Test("--metalink-location: the URLs at the given locations first, each group best first")
    func preferredLocations() {
        let source = { (url: String, location: String?) in
            Metalink.Source(url: URL(string: url)!, priority: 1, location: location)
        }
        let file = Metalink.File(
            name: "f",
            size: nil,
            checksums: [],
            pieces: nil,
            sources: [
                source("http://a/f", "us"), source("http://b/f", "de"), source("http://c/f", nil),
                source("http://d/f", "fr"),
            ]
        )
        let order = { (locations: [String]) in file.sources(preferring: locations).map(\.url.host!) }
        #expect(order([]) == ["a", "b", "c", "d"])
        #expect(order(["FR", " de"]) == ["b", "d", "a", "c"])
        #expect(order(["jp"]) == ["a", "b", "c", "d"])
    }

    @Test("Recognised by media type and by extension")
    func recognition() {
        #expect(Metalink.isMetalink(contentType: "application/metalink4+xml"))
        #expect(Metalink.isMetalink(contentType: "Application/Metalink+XML; charset=utf-8"))
        #expect(!Metalink.isMetalink(contentType: "application/xml"))
        #expect(Metalink.isMetalink(contentType: "\t application/metalink4+xml \t; q=1"))
        #expect(!Metalink.isMetalink(contentType: "application/metalink4+xmlx"))
        #expect(!Metalink.isMetalink(contentType: "application/metalink4 +xml"))
        #expect(!Metalink.isMetalink(contentType: ""))
        #expect(Metalink.isMetalink(path: "/pub/ubuntu.iso.meta4"))
        #expect(Metalink.isMetalink(path: "/x.METALINK"))
        #expect(!Metalink.isMetalink(path: "/x.iso"))
    }
}
