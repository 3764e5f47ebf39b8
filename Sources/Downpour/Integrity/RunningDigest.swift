import Crypto

/// A digest being computed, for any ``Checksum/Algorithm``: swift-crypto's hash functions behind one type.
struct RunningDigest {
    private enum State {
        case sha256(SHA256)
        case sha512(SHA512)
        case sha1(Insecure.SHA1)
        case md5(Insecure.MD5)
    }

    let algorithm: Checksum.Algorithm
    private var state: State

    init(_ algorithm: Checksum.Algorithm) {
        self.algorithm = algorithm
        switch algorithm {
        case .sha256: self.state = .sha256(SHA256())
        case .sha512: self.state = .sha512(SHA512())
        case .sha1: self.state = .sha1(Insecure.SHA1())
        case .md5: self.state = .md5(Insecure.MD5())
        }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch self.state {
        case .sha256(var hash):
            hash.update(bufferPointer: bytes)
            self.state = .sha256(hash)
        case .sha512(var hash):
            hash.update(bufferPointer: bytes)
            self.state = .sha512(hash)
        case .sha1(var hash):
            hash.update(bufferPointer: bytes)
            self.state = .sha1(hash)
        case .md5(var hash):
            hash.update(bufferPointer: bytes)
            self.state = .md5(hash)
        }
    }

    /// The digest of everything given so far.
    func finalize() -> Checksum {
        switch self.state {
        case .sha256(let hash): Checksum(algorithm: self.algorithm, bytes: hash.finalize())
        case .sha512(let hash): Checksum(algorithm: self.algorithm, bytes: hash.finalize())
        case .sha1(let hash): Checksum(algorithm: self.algorithm, bytes: hash.finalize())
        case .md5(let hash): Checksum(algorithm: self.algorithm, bytes: hash.finalize())
        }
    }
}
