import Foundation
import Testing

@testable import Downpour
@testable import DownpourAria2

@Suite("Checksums and server digests")
struct IntegrityParsingTests {
    // The digests of "abc", in hexadecimal and base64.
    static let sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    static let sha256Base64 = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    static let sha512 =
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
    static let sha512Base64 = "3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw=="
    static let sha1 = "a9993e364706816aba3e25717850c26c9cd0d89d"
    static let sha1Base64 = "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="
    static let md5 = "900150983cd24fb0d6963f7d28e17f72"
    static let md5Base64 = "kAFQmDzST7DWlj99KOF/cg=="

    @Test("TYPE=DIGEST as aria2 takes it: any case, hexadecimal or base64")
    func parsing() {
        #expect(Checksum(parsing: "sha-256=\(Self.sha256)") == Checksum(algorithm: .sha256, digest: Self.sha256))
        #expect(Checksum(parsing: "SHA-256=\(Self.sha256.uppercased())")?.digest == Self.sha256)
        #expect(Checksum(parsing: "sha-256=\(Self.sha256Base64)")?.digest == Self.sha256)
        #expect(Checksum(parsing: "sha-512=\(Self.sha512)")?.algorithm == .sha512)
        #expect(Checksum(parsing: "sha-1=\(Self.sha1)")?.algorithm == .sha1)
        #expect(Checksum(parsing: "Md5=\(Self.md5)")?.algorithm == .md5)
        #expect(Checksum(parsing: " sha-256 = \(Self.sha256) ")?.digest == Self.sha256)
        #expect(Checksum(parsing: "sha-256=\(Self.sha256)")?.description == "sha-256=\(Self.sha256)")
        #expect(Checksum(parsing: "sha-256=\(Self.sha1)") == nil, "a SHA-1 length for SHA-256")
        #expect(Checksum(parsing: "sha-256=\(Self.sha256.dropLast())") == nil)
        #expect(Checksum(parsing: "sha-256=\(Self.sha256.dropLast())g") == nil, "not hexadecimal")
        #expect(Checksum(parsing: "sha-384=\(Self.sha256)") == nil, "an algorithm Downpour does not have")
        #expect(Checksum(parsing: "sha256=\(Self.sha256)") == nil, "aria2's names only")
        #expect(Checksum(parsing: Self.sha256) == nil, "no type")
        #expect(Checksum(parsing: "sha-256=") == nil)
    }

    @Test("a configuration validates its checksum, and stays Codable with and without one")
    func configuration() throws {
        var configuration = DownloadConfiguration()
        configuration.checksum = Checksum(algorithm: .sha256, digest: "abc")
        #expect(throws: DownloadError.self) { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("64 hexadecimal digits"), "\(error.message)")
        }
        configuration.checksum = Checksum(algorithm: .md5, digest: Self.md5.uppercased())
        try configuration.validate()

        let data = try JSONEncoder().encode(configuration)
        #expect(try JSONDecoder().decode(DownloadConfiguration.self, from: data) == configuration)
        #expect(String(decoding: data, as: UTF8.self).contains("\"md5\""))
        // A configuration stored before there were checksums decodes to none.
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object.removeValue(forKey: "checksum")
        let old = try JSONSerialization.data(withJSONObject: object)
        #expect(try JSONDecoder().decode(DownloadConfiguration.self, from: old).checksum == nil)
    }

    @Test("the running digest of every algorithm", arguments: Checksum.Algorithm.allCases)
    func runningDigest(algorithm: Checksum.Algorithm) {
        let expected = [.sha256: Self.sha256, .sha512: Self.sha512, .sha1: Self.sha1, .md5: Self.md5][algorithm]
        var digest = RunningDigest(algorithm)
        Array("a".utf8).withUnsafeBytes { digest.update($0) }
        Array("bc".utf8).withUnsafeBytes { digest.update($0) }
        #expect(digest.finalize() == Checksum(algorithm: algorithm, digest: expected!))
    }

    @Test("Repr-Digest (RFC 9530): SHA-256 and SHA-512 byte sequences; anything else is ignored")
    func reprDigest() {
        #expect(
            ServerDigest.parseReprDigest("sha-256=:\(Self.sha256Base64):") == [
                Checksum(algorithm: .sha256, digest: Self.sha256)
            ]
        )
        #expect(
            ServerDigest.parseReprDigest("sha-512=:\(Self.sha512Base64):, sha-256=:\(Self.sha256Base64):;x=1")
                == [
                    Checksum(algorithm: .sha512, digest: Self.sha512),
                    Checksum(algorithm: .sha256, digest: Self.sha256),
                ]
        )
        #expect(ServerDigest.parseReprDigest("md5=:\(Self.md5Base64):").isEmpty, "not an RFC 9530 algorithm")
        #expect(ServerDigest.parseReprDigest("sha-384=:\(Self.sha256Base64):").isEmpty)
        #expect(ServerDigest.parseReprDigest("sha-256=\(Self.sha256Base64)").isEmpty, "not a byte sequence")
        #expect(ServerDigest.parseReprDigest("sha-256=:\(Self.sha1Base64):").isEmpty, "the wrong length")
        #expect(ServerDigest.parseReprDigest("sha-256=:not base64!:").isEmpty)
        #expect(ServerDigest.parseReprDigest("").isEmpty)
    }

    @Test("Digest (RFC 3230): SHA-256, SHA-512, SHA (SHA-1) and MD5 in base64, names in any case")
    func digest() {
        #expect(
            ServerDigest.parseDigest("SHA-256=\(Self.sha256Base64)") == [
                Checksum(algorithm: .sha256, digest: Self.sha256)
            ]
        )
        #expect(
            ServerDigest.parseDigest("MD5=\(Self.md5Base64), sha=\(Self.sha1Base64),UNIXsum=30637") == [
                Checksum(algorithm: .md5, digest: Self.md5),
                Checksum(algorithm: .sha1, digest: Self.sha1),
            ]
        )
        #expect(ServerDigest.parseDigest("SHA-512=\(Self.sha512Base64)").first?.algorithm == .sha512)
        #expect(ServerDigest.parseDigest("SHA-256=\(Self.md5Base64)").isEmpty, "the wrong length")
    }

    @Test("Repr-Digest wins over Digest; SHA-256 over the others")
    func preference() {
        let both = ServerDigest.expected(
            reprDigest: "sha-512=:\(Self.sha512Base64):, sha-256=:\(Self.sha256Base64):",
            digest: "MD5=\(Self.md5Base64)"
        )
        #expect(
            both == ExpectedChecksum(checksum: Checksum(algorithm: .sha256, digest: Self.sha256), source: .reprDigest)
        )
        let fallback = ServerDigest.expected(reprDigest: "sha-384=:abc:", digest: "md5=\(Self.md5Base64)")
        #expect(fallback == ExpectedChecksum(checksum: Checksum(algorithm: .md5, digest: Self.md5), source: .digest))
        #expect(ServerDigest.expected(reprDigest: nil, digest: nil) == nil)
        #expect(ServerDigest.expected(reprDigest: "unknown=:abc:", digest: "crc32c=AAAA") == nil)
    }

    @Test("the mismatch error names the algorithm, both digests and where the expected one came from")
    func mismatchMessage() {
        let error = DownloadError.checksumMismatch(
            ChecksumMismatch(
                expected: Checksum(algorithm: .sha256, digest: Self.sha256),
                source: .reprDigest,
                actual: String(repeating: "0", count: 64)
            )
        )
        #expect(error.code == .checksumMismatch)
        #expect(error.message.contains("SHA-256"))
        #expect(error.message.contains(Self.sha256))
        #expect(error.message.contains(String(repeating: "0", count: 64)))
        #expect(error.message.contains("the server's Repr-Digest"))
        #expect(!error.message.contains("--"), "the library names no command-line flags")
        #expect(error.description == error.message)
        #expect(error.checksumMismatch?.source == .reprDigest)
    }

    @Test("aria2's checksum option")
    func aria2Option() throws {
        var options = Aria2DownloadSettings()
        try options.apply(name: "checksum", value: "sha-1=\(Self.sha1)")
        #expect(options.configuration.checksum == Checksum(algorithm: .sha1, digest: Self.sha1))
        #expect(Aria2Option.named("checksum")?.scope == .download)
        #expect(throws: DownloadError.self) { try options.apply(name: "checksum", value: "crc32=1234") }
        do {
            try options.apply(name: "checksum", value: "sha-256=12")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("'checksum'"))
        }
    }
}
