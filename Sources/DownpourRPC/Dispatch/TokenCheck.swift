import Crypto
import DownpourJSON

/// Checks the `token:` secret in constant time: both sides are hashed (SHA-256) after a random 32-byte key made at
/// start, and the two digests are compared in full (as aria2's `validateToken` does with HMAC), so neither the
/// secret's length nor the first differing byte shows in the time taken. The key makes the digest of a guess
/// unpredictable; it is one hash per call, no allocation.
struct TokenCheck: Sendable {
    private let key: [UInt8]
    private let expected: [UInt8]?

    /// `secret` `nil` or empty: every call is authorized.
    init(secret: String?) {
        var generator = SystemRandomNumberGenerator()
        self.key = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        if let secret, !secret.isEmpty {
            self.expected = Self.digest(secret, key: self.key)
        } else {
            self.expected = nil
        }
    }

    var requiresToken: Bool { self.expected != nil }

    /// Whether a call with `token` (the text after `token:`, `nil` when none was given) may run.
    func authorizes(_ token: String?) -> Bool {
        guard let expected = self.expected else { return true }
        guard let token else { return false }
        let actual = Self.digest(token, key: self.key)
        var difference: UInt8 = 0
        for index in 0..<expected.count { difference |= expected[index] ^ actual[index] }
        return difference == 0
    }

    /// A call's parameters with a leading `token:SECRET` taken off: the secret (`nil` when none was given) and the
    /// rest. aria2 takes it off whether or not the method needs it.
    static func split(_ params: [JSONValue]) -> (token: String?, rest: [JSONValue]) {
        guard case .string(let first)? = params.first, first.hasPrefix("token:") else { return (nil, params) }
        return (String(first.dropFirst(6)), Array(params.dropFirst()))
    }

    private static func digest(_ text: String, key: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: key)
        var text = text
        text.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return Array(hash.finalize())
    }
}
