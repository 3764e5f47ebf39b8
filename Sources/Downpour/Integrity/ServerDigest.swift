/// The digest of the whole file that a server sends along, in `Repr-Digest` (RFC 9530) or `Digest` (RFC 3230).
///
/// Both are read only from a response that describes the full representation (a `HEAD`, or a `200` to a `GET`),
/// so the digest covers the file as it will be on disk. `Repr-Digest` wins over `Digest`; within one field,
/// SHA-256 is preferred (the fastest of the strong ones), then SHA-512; `Digest` may also give SHA-1 or MD5.
/// Algorithms Downpour does not know, and values that do not decode to a digest of the right length, are
/// ignored.
enum ServerDigest {
    /// The digest to verify the download against, from the values of the response's `Repr-Digest` and `Digest`
    /// fields (each field's lines joined with commas); `nil` when neither gives a usable one.
    static func expected(reprDigest: String?, digest: String?) -> ExpectedChecksum? {
        if let reprDigest, let checksum = Self.preferred(Self.parseReprDigest(reprDigest)) {
            return ExpectedChecksum(checksum: checksum, source: .reprDigest)
        }
        if let digest, let checksum = Self.preferred(Self.parseDigest(digest)) {
            return ExpectedChecksum(checksum: checksum, source: .digest)
        }
        return nil
    }

    /// The members of a `Repr-Digest` dictionary (RFC 9530, a structured field: `sha-256=:BASE64:`, members
    /// separated by commas, parameters after `;`) that name SHA-256 or SHA-512 with a byte-sequence value.
    static func parseReprDigest(_ value: String) -> [Checksum] {
        value.split(separator: ",").compactMap { member in
            let member = member.trimmingSpaces()
            guard let equals = member.firstIndex(of: "=") else { return nil }
            let key = member[..<equals].trimmingSpaces().lowercased()
            guard key == "sha-256" || key == "sha-512", let algorithm = Checksum.Algorithm(name: key) else {
                return nil
            }
            var item = member[member.index(after: equals)...]
            if let semicolon = item.firstIndex(of: ";") { item = item[..<semicolon] }
            item = item.trimmingSpaces()
            guard item.count >= 2, item.first == ":", item.last == ":" else { return nil }
            return Checksum(algorithm: algorithm, encoded: item.dropFirst().dropLast())
        }
    }

    /// The entries of a `Digest` field (RFC 3230: `SHA-256=BASE64`, entries separated by commas, algorithm names
    /// in any case) for SHA-256, SHA-512, SHA-1 (`SHA`) and MD5.
    static func parseDigest(_ value: String) -> [Checksum] {
        value.split(separator: ",").compactMap { entry in
            let entry = entry.trimmingSpaces()
            guard let equals = entry.firstIndex(of: "=") else { return nil }
            let name = entry[..<equals].trimmingSpaces().lowercased()
            guard let algorithm = name == "sha" ? .sha1 : Checksum.Algorithm(name: name) else { return nil }
            return Checksum(algorithm: algorithm, encoded: entry[entry.index(after: equals)...].trimmingSpaces())
        }
    }

    private static func preferred(_ checksums: [Checksum]) -> Checksum? {
        let order: [Checksum.Algorithm] = [.sha256, .sha512, .sha1, .md5]
        return checksums.min { order.firstIndex(of: $0.algorithm)! < order.firstIndex(of: $1.algorithm)! }
    }
}
