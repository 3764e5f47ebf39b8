import Foundation

/// The digest a downloaded file must have: an algorithm and the expected value, in lowercase hexadecimal.
///
/// ```swift
/// var configuration = DownloadConfiguration()
/// configuration.checksum = Checksum(parsing: "sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
/// ```
///
/// The file is hashed as its bytes arrive, and never gets its final name unless the digest matches
/// (``DownloadError/Code/checksumMismatch``).
public struct Checksum: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A digest algorithm, named as aria2 names it (`sha-256`, `sha-512`, `sha-1`, `md5`).
    public enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
        case sha256 = "sha-256"
        case sha512 = "sha-512"
        /// Broken against a deliberate attacker; still catches accidents.
        case sha1 = "sha-1"
        /// Broken against a deliberate attacker; still catches accidents.
        case md5 = "md5"

        /// The algorithm called `name` (`sha-256`, `SHA-512`, …: case does not matter); `nil` for another name.
        public init?(name: String) {
            self.init(rawValue: name.lowercased())
        }

        /// aria2's name: `sha-256`, `sha-512`, `sha-1` or `md5`.
        public var name: String { self.rawValue }

        /// The name people know it by: `SHA-256`, `SHA-512`, `SHA-1`, `MD5`.
        public var description: String { self.rawValue.uppercased() }

        /// How many bytes a digest has.
        public var byteCount: Int {
            switch self {
            case .sha256: 32
            case .sha512: 64
            case .sha1: 20
            case .md5: 16
            }
        }
    }

    /// How the digest is computed.
    public var algorithm: Algorithm
    /// The expected digest, in lowercase hexadecimal.
    public var digest: String

    /// A checksum with `digest` given in hexadecimal (either case); ``DownloadConfiguration/validate()`` checks it.
    public init(algorithm: Algorithm, digest: String) {
        self.algorithm = algorithm
        self.digest = digest.lowercased()
    }

    /// Parses `TYPE=DIGEST`, as aria2's `checksum` option takes it: `sha-256=9f86d0…`. The type is one of
    /// ``Algorithm``'s names, in any case; the digest is hexadecimal, or base64 as HTTP digest fields carry it.
    /// `nil` for an unknown type or a digest of the wrong length.
    public init?(parsing text: String) {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        let name = Substring(text[..<equals]).trimmingSpaces()
        let value = Substring(text[text.index(after: equals)...]).trimmingSpaces()
        guard let algorithm = Algorithm(name: String(name)) else { return nil }
        self.init(algorithm: algorithm, encoded: value)
    }

    /// A checksum from a digest in hexadecimal or base64; `nil` unless it decodes to the algorithm's length.
    init?(algorithm: Algorithm, encoded value: Substring) {
        if value.count == 2 * algorithm.byteCount, value.utf8.allSatisfy(Self.isHexDigit) {
            self.init(algorithm: algorithm, digest: String(value))
            return
        }
        guard let bytes = Data(base64Encoded: String(value)), bytes.count == algorithm.byteCount else { return nil }
        self.init(algorithm: algorithm, bytes: bytes)
    }

    /// A checksum with the digest given as its bytes.
    init(algorithm: Algorithm, bytes: some Sequence<UInt8>) {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(algorithm.byteCount * 2)
        for byte in bytes {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        self.init(algorithm: algorithm, digest: String(decoding: hex, as: UTF8.self))
    }

    /// `TYPE=DIGEST`, as ``init(parsing:)`` reads it.
    public var description: String {
        "\(self.algorithm.name)=\(self.digest)"
    }

    /// Checks that the digest is hexadecimal of the algorithm's length.
    func validate() throws(DownloadError) {
        guard self.digest.utf8.count == 2 * self.algorithm.byteCount, self.digest.utf8.allSatisfy(Self.isHexDigit)
        else {
            throw .invalidRequest(
                "A \(self.algorithm) checksum is \(2 * self.algorithm.byteCount) hexadecimal digits, not "
                    + "'\(self.digest)'."
            )
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }
}
