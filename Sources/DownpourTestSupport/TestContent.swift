import Crypto
import Foundation

/// Deterministic pseudo-random bytes for tests and benchmarks.
///
/// The same `count` and `seed` always give the same bytes, on every platform (the generator is SplitMix64,
/// written out little-endian), and different seeds give unrelated bytes. Eight bytes are produced per step,
/// so 100+ MiB take well under a second in a release build.
///
/// - Parameters:
///   - count: How many bytes to make; 0 gives an empty array.
///   - seed: Selects the byte stream.
/// - Returns: `count` pseudo-random bytes.
public func makeTestContent(count: Int, seed: UInt64 = 1) -> [UInt8] {
    precondition(count >= 0, "count must not be negative")
    var generator = SplitMix64(seed: seed)
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initializedCount in
        let raw = UnsafeMutableRawBufferPointer(buffer)
        let wholeWords = count / 8
        var offset = 0
        for _ in 0..<wholeWords {
            raw.storeBytes(of: generator.next().littleEndian, toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        if offset < count {
            var last = generator.next().littleEndian
            withUnsafeBytes(of: &last) { lastBytes in
                for index in 0..<(count - offset) {
                    raw[offset + index] = lastBytes[index]
                }
            }
        }
        initializedCount = count
    }
}

/// The SHA-256 digest of `bytes`, as 64 lowercase hexadecimal digits.
///
/// Contiguous collections (`[UInt8]`, `ArraySlice<UInt8>`, `Data`, ...) are hashed in place; other collections
/// are copied through a small buffer.
public func sha256Hex(_ bytes: some Collection<UInt8>) -> String {
    var hasher = SHA256()
    let hashedInPlace: Void? = bytes.withContiguousStorageIfAvailable { buffer in
        hasher.update(bufferPointer: UnsafeRawBufferPointer(buffer))
    }
    if hashedInPlace == nil {
        var chunk: [UInt8] = []
        chunk.reserveCapacity(hashChunkSize)
        for byte in bytes {
            chunk.append(byte)
            if chunk.count == hashChunkSize {
                hasher.update(data: chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        hasher.update(data: chunk)
    }
    return hexString(hasher.finalize())
}

/// The SHA-256 digest of the file at `path`, as 64 lowercase hexadecimal digits.
///
/// The file is read in 1 MiB chunks, so files of any size can be hashed in bounded memory.
///
/// - Throws: The error from opening or reading the file.
public func sha256Hex(ofFileAt path: String) throws -> String {
    let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    var hasher = SHA256()
    while let chunk = try handle.read(upToCount: fileChunkSize), !chunk.isEmpty {
        hasher.update(data: chunk)
    }
    return hexString(hasher.finalize())
}

private let hashChunkSize = 64 * 1024
private let fileChunkSize = 1024 * 1024

private func hexString(_ digest: SHA256.Digest) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var hex: [UInt8] = []
    hex.reserveCapacity(SHA256.byteCount * 2)
    for byte in digest {
        hex.append(digits[Int(byte >> 4)])
        hex.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: hex, as: UTF8.self)
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough to make test bytes look random; also the
/// reproducible generator of the planner's randomized tests.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
