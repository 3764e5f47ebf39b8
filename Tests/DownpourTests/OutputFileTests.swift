#if os(Linux)
import DownpourTestSupport
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import Downpour

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("OutputFile: vectored writes that the system cuts short")
struct OutputFileTests {
    /// `pwritev` as a busy system may answer: of every three calls one is interrupted (EINTR) before writing
    /// anything, and the others write at most the next of `limits` bytes, possibly ending mid-vector.
    final class ShortWriter: Sendable {
        private struct State {
            var calls = 0
            var vectorCounts: [Int] = []
        }

        private let limits: [Int]
        private let state = NIOLockedValueBox(State())

        init(limits: [Int]) {
            self.limits = limits
        }

        var vectorCounts: [Int] { self.state.withLockedValue { $0.vectorCounts } }

        var vectorWrite: OutputFile.VectorWrite {
            { [self] descriptor, vectors, count, offset in
                let call = self.state.withLockedValue { state in
                    state.calls += 1
                    state.vectorCounts.append(Int(count))
                    return state.calls
                }
                if call % 3 == 0 {
                    errno = EINTR
                    return -1
                }
                // Hand the system only the first `limit` bytes of the vectors.
                var left = self.limits[call % self.limits.count]
                var shortened: [iovec] = []
                for index in 0..<Int(count) where left > 0 {
                    var vector = vectors[index]
                    vector.iov_len = min(vector.iov_len, left)
                    left -= vector.iov_len
                    shortened.append(vector)
                }
                return OutputFile.systemVectorWrite(descriptor, shortened, Int32(shortened.count), offset)
            }
        }
    }

    /// `content` cut into buffers of the given sizes, in turn; every `emptyEvery`-th buffer is an empty one.
    static func buffers(of content: [UInt8], sizes: [Int], emptyEvery: Int = 7) -> [ByteBuffer] {
        var buffers: [ByteBuffer] = []
        var start = 0
        while start < content.count {
            if buffers.count % emptyEvery == emptyEvery - 1 {
                buffers.append(ByteBuffer())
            }
            let size = min(sizes[buffers.count % sizes.count], content.count - start)
            var buffer = ByteBufferAllocator().buffer(capacity: size + 16)
            // Readable bytes that do not start at the beginning of the storage.
            buffer.writeBytes([0xEE, 0xEE])
            buffer.moveReaderIndex(forwardBy: 2)
            buffer.writeBytes(content[start..<(start + size)])
            buffers.append(buffer)
            start += size
        }
        return buffers
    }

    @Test(
        "short counts and EINTR, over more buffers than one call takes: every byte still lands in place",
        arguments: [
            ([1], 20_000), ([7, 4096, 100_000], 3_000_000), ([1_000_000], 3_000_000), ([3, 65_536], 1_000_000),
        ]
    )
    func shortWrites(limits: [Int], count: Int) throws {
        let content = makeTestContent(count: count, seed: 23)
        let writer = ShortWriter(limits: limits)
        let output = try ScratchOutput(size: count + 2000, vectorWrite: writer.vectorWrite)
        defer { output.remove() }
        let buffers = Self.buffers(of: content, sizes: [1, 999, 2048, 3])
        try output.file.write(buffers, at: 1000)
        let file = try output.contents()
        #expect(file[..<1000].allSatisfy { $0 == 0 })
        #expect(file[1000..<(1000 + count)] == content[...])
        #expect(file[(1000 + count)...].allSatisfy { $0 == 0 })
        #expect(writer.vectorCounts.allSatisfy { $0 <= 1024 }, "more vectors than IOV_MAX in one call")
        #expect(writer.vectorCounts.count > 2, "the writes were not cut short")
        if buffers.count > 1024 {
            #expect(writer.vectorCounts.first == 1024)
        }
    }

    @Test("a write that makes no progress is an error, not a loop")
    func noProgress() throws {
        let output = try ScratchOutput(size: 100, vectorWrite: { _, _, _, _ in 0 })
        defer { output.remove() }
        #expect(throws: DownloadError.self) {
            try output.file.write([ByteBuffer(bytes: [1, 2, 3])], at: 0)
        }
    }

    @Test("a failed write names the offset and the cause")
    func failure() throws {
        let output = try ScratchOutput(
            size: 100,
            vectorWrite: { _, _, _, _ in
                errno = ENOSPC
                return -1
            }
        )
        defer { output.remove() }
        let error = #expect(throws: DownloadError.self) {
            try output.file.write([ByteBuffer(bytes: [1, 2, 3])], at: 42)
        }
        #expect(error?.code == .localIO)
        #expect(error?.message.contains("at byte 42: No space left on device") == true, "\(String(describing: error))")
    }
}
#endif
