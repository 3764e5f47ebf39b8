import Crypto
import Downpour
import Foundation
import Testing
import _CryptoExtras

@testable import DownpourHLS

/// ``HLSDecryption``: segments encrypted as packagers do (AES-128-CBC, PKCS#7), decrypted back byte for byte, and a
/// wrong key or a damaged segment refused.
@Suite struct HLSDecryptionTests {
    static let segment = URL(string: "https://cdn.example/seg7.ts")!
    static let keyURL = URL(string: "https://cdn.example/key.bin")!
    static let key: [UInt8] = Array(0x10..<0x20)

    /// Ten MPEG-TS packets: the sync byte, then the packet's number.
    static let transportStream: [UInt8] = (0..<10).flatMap { packet in
        [HLSDecryption.transportStreamSync] + [UInt8](repeating: UInt8(packet), count: 187)
    }

    static func encrypted(_ plain: [UInt8], key: [UInt8], iv: [UInt8]) throws -> [UInt8] {
        [UInt8](try AES._CBC.encrypt(plain, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: iv)))
    }

    @Test("a segment decrypts byte for byte, with the playlist's IV or the one from its sequence number")
    func roundTrip() throws {
        let key = HLSMediaPlaylist.Key(method: .aes128, url: Self.keyURL, iv: nil, keyFormat: nil)
        for iv in [key.iv(forSequence: 7), Array(0..<16)] {
            let ciphertext = try Self.encrypted(Self.transportStream, key: Self.key, iv: iv)
            #expect(ciphertext.count == Self.transportStream.count + 16 - Self.transportStream.count % 16)
            let plain = try HLSDecryption.decrypt(
                ciphertext,
                key: Self.key,
                iv: iv,
                segment: Self.segment,
                keyURL: Self.keyURL
            )
            #expect(plain == Self.transportStream)
            #expect(HLSDecryption.isTransportStream(plain))
        }
    }

    @Test("a wrong key, a damaged segment or a key of the wrong length is refused, naming the segment or the key")
    func refusals() throws {
        let iv = [UInt8](repeating: 0, count: 16)
        let ciphertext = try Self.encrypted(Self.transportStream, key: Self.key, iv: iv)
        // A wrong key gives bad padding almost always; when the padding happens to look right, the sync bytes
        // do not.
        let wrongKey = Array(Self.key.reversed())
        if let plain = try? HLSDecryption.decrypt(
            ciphertext,
            key: wrongKey,
            iv: iv,
            segment: Self.segment,
            keyURL: Self.keyURL
        ) {
            #expect(!HLSDecryption.isTransportStream(plain))
        }
        #expect {
            _ = try HLSDecryption.decrypt(
                Array(ciphertext.dropLast(5)),
                key: Self.key,
                iv: iv,
                segment: Self.segment,
                keyURL: Self.keyURL
            )
        } throws: { error in
            (error as? DownloadError)?.message.contains("seg7.ts does not decrypt") == true
        }
        #expect {
            _ = try HLSDecryption.decrypt(
                ciphertext,
                key: [1, 2, 3],
                iv: iv,
                segment: Self.segment,
                keyURL: Self.keyURL
            )
        } throws: { error in
            (error as? DownloadError)?.message.contains("key.bin is 3 bytes") == true
        }
    }

    @Test("an MPEG-TS segment has the sync byte at every 188th byte")
    func transportStreamCheck() {
        #expect(HLSDecryption.isTransportStream(Self.transportStream))
        var broken = Self.transportStream
        broken[188 * 3] = 0x00
        #expect(!HLSDecryption.isTransportStream(broken))
        #expect(!HLSDecryption.isTransportStream(Self.transportStream.dropLast()))
        #expect(!HLSDecryption.isTransportStream([UInt8]()))
    }
}
