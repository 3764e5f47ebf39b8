import NIOCore

/// Hashes one piece of a download's file: reads it back with `pread` (its bytes are usually still in the page
/// cache) and hashes it, on the blocking-I/O threads, in chunks of ``PrefixHasher/chunkSize``.
enum PieceHasher {
    /// The digest of the bytes of `range` in `file`.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` when the file cannot be read or is shorter than `range`,
    ///   ``DownloadError/Code/cancelled``.
    static func digest(
        of range: Range<Int64>,
        in file: OutputFile,
        algorithm: Checksum.Algorithm
    ) async throws(DownloadError) -> Checksum {
        try await BlockingIO.run { () throws(DownloadError) -> Checksum in
            var digest = RunningDigest(algorithm)
            var offset = range.lowerBound
            while offset < range.upperBound {
                let count = Int(min(Int64(PrefixHasher.chunkSize), range.upperBound - offset))
                let chunk = try file.read(count: count, at: offset)
                guard chunk.readableBytes == count else {
                    throw DownloadError(
                        code: .localIO,
                        message: "'\(file.path)' ends at byte \(offset + Int64(chunk.readableBytes)), before the "
                            + "\(range.upperBound) bytes written to it: something else changed the file."
                    )
                }
                chunk.withUnsafeReadableBytes { digest.update($0) }
                offset += Int64(count)
            }
            return digest.finalize()
        }
    }
}
