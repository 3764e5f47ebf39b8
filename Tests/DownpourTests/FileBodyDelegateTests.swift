import DownpourTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import Downpour

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Every test is synchronous: an `EmbeddedEventLoop` may only be used on the thread that made it.
@Suite("FileBodyDelegate on an EmbeddedEventLoop")
struct FileBodyDelegateTests {
    static let content = makeTestContent(count: 200_000, seed: 17)
    static let offset = 50_000

    /// One delegate writing into a scratch file of `offset + content.count + 50_000` zero bytes.
    struct Harness {
        let loop = EmbeddedEventLoop()
        let output: ScratchOutput
        let delegate: FileBodyDelegate
        let written = NIOLockedValueBox<[Range<Int64>]>([])
        let dropped = NIOLockedValueBox<Int64>(0)

        init(
            limit: Int64? = nil,
            wanted: Int64? = nil,
            bufferSize: Int = 64 * 1024,
            vectorWrite: @escaping OutputFile.VectorWrite = OutputFile.systemVectorWrite
        ) throws {
            self.output = try ScratchOutput(
                size: FileBodyDelegateTests.offset + FileBodyDelegateTests.content.count + 50_000,
                vectorWrite: vectorWrite
            )
            let (written, dropped) = (self.written, self.dropped)
            let target = FileBodyDelegate.Target(
                offset: Int64(FileBodyDelegateTests.offset),
                limit: limit,
                overflow: { DownloadError(code: .remoteMisbehaved, message: "overflow") },
                checkHead: { head in
                    guard head.status == .partialContent else {
                        throw DownloadError(code: .httpStatus, message: "\(head.status)")
                    }
                },
                claim: { offset in min(offset, wanted ?? offset) },
                written: { range in written.withLockedValue { $0.append(range) } },
                dropped: { count in dropped.withLockedValue { $0 += count } }
            )
            self.delegate = FileBodyDelegate(
                target: target,
                file: self.output.file,
                bufferSize: bufferSize,
                eventLoop: self.loop
            )
        }

        /// Feeds `parts` of the content, in order, from its start; returns how each was taken.
        func feed(_ parts: [ByteBuffer]) -> [Result<Void, any Error>?] {
            parts.map { result(of: self.delegate.receiveBodyPart($0), on: self.loop) }
        }

        func finish() -> Result<Int64, any Error>? {
            result(of: self.delegate.finish(), on: self.loop)
        }

        /// The file holds the content's first `count` bytes at the offset, and zeros everywhere else.
        func expectFile(holdingFirst count: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let bytes = try self.output.contents()
            let start = FileBodyDelegateTests.offset
            #expect(
                bytes[start..<(start + count)] == FileBodyDelegateTests.content[0..<count],
                "the written bytes differ",
                sourceLocation: sourceLocation
            )
            #expect(bytes[..<start].allSatisfy { $0 == 0 }, "bytes before the offset", sourceLocation: sourceLocation)
            #expect(
                bytes[(start + count)...].allSatisfy { $0 == 0 },
                "bytes written past \(start + count)",
                sourceLocation: sourceLocation
            )
        }

        /// The written ranges follow each other from the offset on, and end at `end`.
        func expectWritten(upTo end: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            let ranges = self.written.withLockedValue { $0 }
            var cursor = Int64(FileBodyDelegateTests.offset)
            for range in ranges {
                #expect(range.lowerBound == cursor, "\(ranges)", sourceLocation: sourceLocation)
                cursor = range.upperBound
            }
            #expect(cursor == Int64(end), "\(ranges)", sourceLocation: sourceLocation)
        }
    }

    /// The content cut into parts of the given sizes, repeated until it is used up.
    static func parts(sizes: [Int], upTo end: Int = content.count) -> [ByteBuffer] {
        var parts: [ByteBuffer] = []
        var start = 0
        var index = 0
        while start < end {
            let size = min(sizes[index % sizes.count], end - start)
            let slice = Self.content[start..<(start + size)]
            parts.append(size >= 8 * 1024 ? exactBuffer(slice) : mostlyEmptyBuffer(slice))
            start += size
            index += 1
        }
        return parts
    }

    static func isStop(_ result: Result<Void, any Error>?) -> Bool {
        guard case .failure(let error) = result else { return false }
        return error is FileBodyDelegate.Stop
    }

    @Test("every byte lands at its offset, whatever the sizes of the parts")
    func bytesAtOffsets() throws {
        let harness = try Harness()
        defer { harness.output.remove() }
        let results = harness.feed(Self.parts(sizes: [1, 100, 8191, 8192, 30_000, 65_536, 3]))
        for (index, result) in results.enumerated() {
            guard case .success = result else {
                Issue.record("part \(index): \(String(describing: result))")
                return
            }
        }
        let written = harness.written.withLockedValue { $0 }
        #expect(written.count >= 2, "the parts were written as they came, not all at the end: \(written)")
        #expect(try harness.finish()?.get() == Int64(Self.offset + Self.content.count))
        try harness.expectFile(holdingFirst: Self.content.count)
        harness.expectWritten(upTo: Self.offset + Self.content.count)
    }

    @Test("the planner claims fewer bytes than are pending: only those are written, then Stop")
    func claimedLess() throws {
        let wanted = Self.offset + 100_000
        let harness = try Harness(wanted: Int64(wanted))
        defer { harness.output.remove() }
        // 30 000-byte parts, a write at every third: 90 000 bytes, then 90 000 more of which 10 000 are wanted.
        let results = harness.feed(Self.parts(sizes: [30_000], upTo: 210_000 - 30_000))
        #expect(results.prefix(5).allSatisfy { if case .success = $0 { true } else { false } }, "\(results)")
        #expect(Self.isStop(results[5]), "\(String(describing: results[5]))")
        let later = harness.feed(Self.parts(sizes: [1000], upTo: 1000))
        #expect(Self.isStop(later[0]), "a part after the stop: \(String(describing: later[0]))")
        #expect(try harness.finish()?.get() == Int64(wanted))
        try harness.expectFile(holdingFirst: 100_000)
        harness.expectWritten(upTo: wanted)
        // 80 000 of the second write's 90 000 bytes, and the part after the stop, came for nothing.
        #expect(harness.dropped.withLockedValue { $0 } == 81_000)
    }

    @Test("the planner wants none of the pending bytes: nothing is written, Stop")
    func claimedNothing() throws {
        let harness = try Harness(wanted: Int64(Self.offset), bufferSize: 10_000)
        defer { harness.output.remove() }
        let results = harness.feed(Self.parts(sizes: [12_000], upTo: 12_000))
        #expect(Self.isStop(results[0]), "\(String(describing: results[0]))")
        #expect(try harness.finish()?.get() == Int64(Self.offset))
        try harness.expectFile(holdingFirst: 0)
        #expect(harness.written.withLockedValue { $0 }.isEmpty)
        #expect(harness.dropped.withLockedValue { $0 } == 12_000)
    }

    @Test("a part reaching past the limit fails the request; nothing at or past the limit is written")
    func overflow() throws {
        let limit = Self.offset + 100_000
        let harness = try Harness(limit: Int64(limit))
        defer { harness.output.remove() }
        // 90 000 bytes are written at the third part, 5 000 wait; the last part would end one byte past the limit.
        let parts = Self.parts(sizes: [30_000, 30_000, 30_000, 5_000, 5_001], upTo: 100_001)
        let results = harness.feed(parts)
        #expect(results.prefix(4).allSatisfy { if case .success = $0 { true } else { false } }, "\(results)")
        guard case .failure(let error) = results[4], case .fatal(let failure) = error as? AttemptFailure else {
            Issue.record("the part past the limit was taken: \(String(describing: results[4]))")
            return
        }
        #expect(failure.code == .remoteMisbehaved)
        // What came before the overflow is kept.
        #expect(try harness.finish()?.get() == Int64(Self.offset + 95_000))
        try harness.expectFile(holdingFirst: 95_000)
        harness.expectWritten(upTo: Self.offset + 95_000)
    }

    @Test("a part that ends exactly at the limit is taken")
    func exactlyAtLimit() throws {
        let limit = Self.offset + Self.content.count
        let harness = try Harness(limit: Int64(limit))
        defer { harness.output.remove() }
        let results = harness.feed(Self.parts(sizes: [65_536]))
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } }, "\(results)")
        #expect(try harness.finish()?.get() == Int64(limit))
        try harness.expectFile(holdingFirst: Self.content.count)
    }

    @Test("the head is checked before any body byte")
    func head() throws {
        let harness = try Harness()
        defer { harness.output.remove() }
        let partial = HTTPResponseHead(version: .http1_1, status: .partialContent)
        let whole = HTTPResponseHead(version: .http1_1, status: .ok)
        guard case .success = result(of: harness.delegate.receiveHead(partial), on: harness.loop) else {
            Issue.record("206 refused")
            return
        }
        guard case .failure(let error) = result(of: harness.delegate.receiveHead(whole), on: harness.loop) else {
            Issue.record("200 taken")
            return
        }
        #expect((error as? DownloadError)?.code == .httpStatus)
    }

    #if os(Linux)
    @Test("small reads are copied together; large reads are written from their own buffers")
    func smallReadsCoalesced() throws {
        let log = VectorWriteLog()
        // A buffer larger than everything: one write, at the end.
        let harness = try Harness(bufferSize: 1024 * 1024, vectorWrite: log.vectorWrite)
        defer { harness.output.remove() }
        // 100 reads of 100 bytes (one copy), two of 16 KiB (kept), 100 of 100 bytes again (a second copy).
        var parts: [ByteBuffer] = []
        var start = 0
        for size in Array(repeating: 100, count: 100) + [16_384, 16_384] + Array(repeating: 100, count: 100) {
            let slice = Self.content[start..<(start + size)]
            parts.append(size >= 8 * 1024 ? exactBuffer(slice) : mostlyEmptyBuffer(slice))
            start += size
        }
        let results = harness.feed(parts)
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } })
        #expect(log.vectorCounts.isEmpty, "written before the buffer was full")
        #expect(try harness.finish()?.get() == Int64(Self.offset + start))
        #expect(log.vectorCounts == [4])
        try harness.expectFile(holdingFirst: start)
    }

    @Test("a failed write fails the request and the finish, and nothing counts as written")
    func writeFails() throws {
        let harness = try Harness(
            bufferSize: 10_000,
            vectorWrite: { _, _, _, _ in
                errno = ENOSPC
                return -1
            }
        )
        defer { harness.output.remove() }
        let results = harness.feed(Self.parts(sizes: [12_000], upTo: 24_000))
        guard case .failure(let error) = results[0] else {
            Issue.record("the write did not fail")
            return
        }
        #expect((error as? DownloadError)?.code == .localIO)
        #expect((error as? DownloadError)?.message.contains("No space left") == true, "\(error)")
        guard case .failure(let again) = results[1], case .failure(let atFinish) = harness.finish() else {
            Issue.record("went on after a failed write")
            return
        }
        #expect((again as? DownloadError)?.code == .localIO)
        #expect((atFinish as? DownloadError)?.code == .localIO)
        #expect(harness.written.withLockedValue { $0 }.isEmpty)
    }
    #endif
}
