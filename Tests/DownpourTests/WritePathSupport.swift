import DownpourTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded

@testable import Downpour

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A scratch file of zero bytes opened as an ``OutputFile``, for the tests of the write path.
struct ScratchOutput {
    let directory: String
    let path: String
    let file: OutputFile

    /// - Parameters:
    ///   - size: The length of the file, all zero bytes.
    ///   - vectorWrite: What the file calls instead of `pwritev`.
    init(size: Int, vectorWrite: @escaping OutputFile.VectorWrite = OutputFile.systemVectorWrite) throws {
        self.directory =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("downpour-unit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        self.path = self.directory + "/out.part"
        self.file = try OutputFile.openLocked(at: self.path, vectorWrite: vectorWrite)
        try self.file.startOver(length: Int64(size))
    }

    func contents() throws -> [UInt8] {
        try [UInt8](Data(contentsOf: URL(fileURLWithPath: self.path)))
    }

    func remove() {
        self.file.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

/// `pwritev` that records how many vectors each call was given.
final class VectorWriteLog: Sendable {
    private let counts = NIOLockedValueBox<[Int]>([])

    var vectorCounts: [Int] { self.counts.withLockedValue { $0 } }

    var vectorWrite: OutputFile.VectorWrite {
        { [counts] descriptor, vectors, count, offset in
            counts.withLockedValue { $0.append(Int(count)) }
            return OutputFile.systemVectorWrite(descriptor, vectors, count, offset)
        }
    }
}

/// The value of a completed future, or its error.
func result<Value: Sendable>(of future: EventLoopFuture<Value>, on loop: EmbeddedEventLoop) -> Result<Value, any Error>?
{
    loop.run()
    let box = NIOLockedValueBox<Result<Value, any Error>?>(nil)
    future.whenComplete { result in box.withLockedValue { $0 = result } }
    return box.withLockedValue { $0 }
}

/// `bytes` in one buffer of its own size: a large read, kept as it is.
func exactBuffer(_ bytes: ArraySlice<UInt8>) -> ByteBuffer {
    var buffer = ByteBufferAllocator().buffer(capacity: bytes.count)
    buffer.writeBytes(bytes)
    return buffer
}

/// `bytes` at the start of a 64 KiB buffer, as NIO reads a few bytes from a slow socket.
func mostlyEmptyBuffer(_ bytes: ArraySlice<UInt8>) -> ByteBuffer {
    var buffer = ByteBufferAllocator().buffer(capacity: 64 * 1024)
    buffer.writeBytes(bytes)
    return buffer
}
