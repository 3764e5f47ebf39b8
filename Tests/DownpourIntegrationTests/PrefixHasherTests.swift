import DownpourTestSupport
import NIOCore
import Testing

@testable import Downpour

@Suite("Hashing a file as it grows")
struct PrefixHasherTests {
    static let mebibyte: Int64 = 1024 * 1024

    @Test("bytes written again below what was read make the hash start over; the digest is of what is on disk")
    func rewrite() async throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let file = try OutputFile.openLocked(at: directory.file("file.part"))
        defer { file.close() }
        var bytes = makeTestContent(count: 10 * 1024 * 1024 + 5, seed: 81)
        try file.write(ByteBuffer(bytes: bytes), at: 0)
        let hasher = PrefixHasher(algorithm: .sha256, file: file)

        #expect(try await hasher.advance(to: 6 * Self.mebibyte, atMost: 5 * Self.mebibyte))
        #expect(await hasher.hashedBytes == 5 * Self.mebibyte, "no more than asked for")
        #expect(try await hasher.advance(to: 6 * Self.mebibyte))
        #expect(await hasher.hashedBytes == 6 * Self.mebibyte)
        #expect(try await hasher.advance(to: 6 * Self.mebibyte) == false, "nothing new")

        // Past what was read: the hash goes on.
        try Self.rewrite(&bytes, 8_000_000..<8_000_100, in: file, seed: 82)
        hasher.noteRewrite(from: 8_000_000)
        #expect(try await hasher.advance(to: 7 * Self.mebibyte))
        #expect(await hasher.hashedBytes == 7 * Self.mebibyte)

        // Below: it starts over from byte 0, and says so.
        try Self.rewrite(&bytes, 100..<200, in: file, seed: 83)
        hasher.noteRewrite(from: 100)
        #expect(try await hasher.advance(to: 7 * Self.mebibyte))
        #expect(await hasher.hashedBytes == 0)

        let digest = try await hasher.finish(length: Int64(bytes.count))
        #expect(digest == Checksum(algorithm: .sha256, digest: sha256Hex(bytes)))
    }

    static func rewrite(_ bytes: inout [UInt8], _ range: Range<Int>, in file: OutputFile, seed: UInt64) throws {
        bytes.replaceSubrange(range, with: makeTestContent(count: range.count, seed: seed))
        try file.write(ByteBuffer(bytes: bytes[range]), at: Int64(range.lowerBound))
    }
}
