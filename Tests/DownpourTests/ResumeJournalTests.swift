import Foundation
import Testing

@testable import Downpour

@Suite("Resume journal")
struct ResumeJournalTests {
    static let journal = ResumeJournal(
        sourceURL: "https://example.com/start.iso",
        finalURL: "https://mirror.example.com/files/start.iso",
        length: 10_000_000,
        etag: "\"abc\"",
        lastModified: "Wed, 21 Oct 2026 07:28:00 GMT",
        done: ByteRangeSet([0..<1_000_000, 4_000_000..<5_500_000])
    )

    @Test("round trip")
    func roundTrip() throws {
        let decoded = try ResumeJournal.decode(Self.journal.encode())
        #expect(decoded == Self.journal)
        #expect(decoded.doneRanges == ByteRangeSet([0..<1_000_000, 4_000_000..<5_500_000]))
    }

    @Test("a journal without validators round-trips too")
    func noValidators() throws {
        let bare = ResumeJournal(
            sourceURL: "http://h/x",
            finalURL: "http://h/x",
            length: 5,
            etag: nil,
            lastModified: nil,
            done: ByteRangeSet()
        )
        #expect(try ResumeJournal.decode(bare.encode()) == bare)
    }

    @Test("another format version is refused")
    func versionMismatch() {
        var bytes = Self.journal.encode()
        let header = Array("downpour-journal 1 ".utf8)
        #expect(Array(bytes.prefix(header.count)) == header)
        bytes.replaceSubrange(0..<header.count, with: Array("downpour-journal 2 ".utf8))
        #expect(throws: ResumeJournal.DecodingError.unsupportedVersion(2)) { try ResumeJournal.decode(bytes) }
    }

    @Test("every truncation is detected")
    func truncated() {
        let bytes = Self.journal.encode()
        for length in 0..<bytes.count {
            let cut = Array(bytes.prefix(length))
            #expect(throws: ResumeJournal.DecodingError.self, "cut at \(length)") { try ResumeJournal.decode(cut) }
        }
    }

    @Test("every single bit flip is detected")
    func bitFlips() {
        let bytes = Self.journal.encode()
        for index in bytes.indices {
            for bit in 0..<8 {
                var flipped = bytes
                flipped[index] ^= UInt8(1 << bit)
                #expect(throws: ResumeJournal.DecodingError.self, "flip of bit \(bit) at \(index)") {
                    try ResumeJournal.decode(flipped)
                }
            }
        }
    }

    @Test("ranges outside the file are refused even with a good checksum")
    func invalidRanges() {
        var bad = Self.journal
        bad.done = [[0, 20_000_000]]
        #expect(throws: ResumeJournal.DecodingError.self) { try ResumeJournal.decode(bad.encode()) }
        bad.done = [[5, 5]]
        #expect(throws: ResumeJournal.DecodingError.self) { try ResumeJournal.decode(bad.encode()) }
        bad.done = [[1, 2, 3]]
        #expect(throws: ResumeJournal.DecodingError.self) { try ResumeJournal.decode(bad.encode()) }
    }

    @Test("something else entirely is not a journal")
    func notAJournal() {
        #expect(throws: ResumeJournal.DecodingError.notAJournal) {
            try ResumeJournal.decode(Array("hello world\n{}\n".utf8))
        }
        #expect(throws: ResumeJournal.DecodingError.truncated) { try ResumeJournal.decode([]) }
    }
}

@Suite("Resume decisions")
struct ResumeDecisionTests {
    static let journal = ResumeJournalTests.journal

    static func remote(
        length: Int64? = 10_000_000,
        etag: String? = "\"abc\"",
        lastModified: String? = "Wed, 21 Oct 2026 07:28:00 GMT"
    ) -> RemoteFile {
        RemoteFile(
            url: URL(string: "https://other.example.com/start.iso")!,
            length: length,
            acceptsRanges: true,
            etag: etag,
            lastModified: lastModified
        )
    }

    @Test("same length and validators: resume, even from another URL")
    func same() {
        #expect(
            ResumeDecision(journal: Self.journal, remote: Self.remote(), partSize: 10_000_000) == .resume(warning: nil)
        )
    }

    @Test("a changed length, ETag or Last-Modified starts over")
    func changed() {
        let cases = [
            Self.remote(length: 10_000_001),
            Self.remote(length: nil),
            Self.remote(etag: "\"def\""),
            Self.remote(etag: nil),
            Self.remote(lastModified: "Thu, 22 Oct 2026 07:28:00 GMT"),
        ]
        for remote in cases {
            guard case .startOver = ResumeDecision(journal: Self.journal, remote: remote, partSize: 10_000_000) else {
                Issue.record("resumed against \(remote)")
                continue
            }
        }
    }

    @Test("a partial file of the wrong size starts over")
    func wrongPartSize() {
        guard case .startOver = ResumeDecision(journal: Self.journal, remote: Self.remote(), partSize: 42) else {
            Issue.record("resumed with a truncated partial file")
            return
        }
    }

    @Test("no validators on either side: resume with a warning")
    func noValidators() {
        var journal = Self.journal
        journal.etag = nil
        journal.lastModified = nil
        let decision = ResumeDecision(
            journal: journal,
            remote: Self.remote(etag: nil, lastModified: nil),
            partSize: 10_000_000
        )
        guard case .resume(let warning?) = decision else {
            Issue.record("expected a resume with a warning, got \(decision)")
            return
        }
        #expect(warning.contains("cannot be proven"))
    }
}
