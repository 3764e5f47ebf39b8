import Crypto

/// Checks the `token:` secret in constant time: both sides go through HMAC-SHA256 under a random key made at
/// start and the two 32-byte MACs are compared in full (as aria2's `validateToken` does), so neither the secret's
/// length nor the first differing byte shows in the time taken.
struct TokenCheck: Sendable {
    /// The HMAC key's bytes (swift-crypto's `SymmetricKey` is not `Sendable`).
    private let key: [UInt8]
    private let expected: [UInt8]?

    /// `secret` `nil` or empty: every call is authorized.
    init(secret: String?) {
        let key = SymmetricKey(size: .bits256)
        self.key = key.withUnsafeBytes { Array($0) }
        if let secret, !secret.isEmpty {
            self.expected = Self.mac(Array(secret.utf8), key: key)
        } else {
            self.expected = nil
        }
    }

    var requiresToken: Bool { self.expected != nil }

    /// Whether a call with `token` (the text after `token:`, `nil` when none was given) may run.
    func authorizes(_ token: String?) -> Bool {
        guard let expected = self.expected else { return true }
        guard let token else { return false }
        let actual = Self.mac(Array(token.utf8), key: SymmetricKey(data: self.key))
        var difference: UInt8 = 0
        for index in 0..<expected.count { difference |= expected[index] ^ actual[index] }
        return difference == 0
    }

    private static func mac(_ bytes: [UInt8], key: SymmetricKey) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: bytes, using: key))
    }
}
