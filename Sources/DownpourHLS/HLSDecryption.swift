import Crypto
import Downpour
import Foundation
import _CryptoExtras

/// The decryption of HLS segments under `EXT-X-KEY:METHOD=AES-128` (RFC 8216, 5.2): AES-128 in CBC mode with PKCS#7
/// padding, with the 16-byte key fetched from the key's URI and the IV the playlist gives or the segment's media
/// sequence number (``HLSMediaPlaylist/Key/iv(forSequence:)``).
enum HLSDecryption {
    /// The MPEG-TS sync byte, at the start of every 188-byte packet.
    static let transportStreamSync: UInt8 = 0x47
    static let transportStreamPacket = 188

    /// Decrypts one segment.
    ///
    /// - Throws: ``DownloadError`` `remoteMisbehaved` when the key is not 16 bytes, or the segment does not
    ///   decrypt with it (a wrong key, or damaged bytes: its length or padding is wrong).
    static func decrypt(
        _ ciphertext: [UInt8],
        key: [UInt8],
        iv: [UInt8],
        segment: URL,
        keyURL: URL
    ) throws(DownloadError) -> [UInt8] {
        guard key.count == 16 else {
            throw DownloadError(
                code: .remoteMisbehaved,
                message: "The HLS key at \(keyURL.absoluteString) is \(key.count) bytes, not the 16 of an AES-128 key."
            )
        }
        do {
            let plain = try AES._CBC.decrypt(
                ciphertext,
                using: SymmetricKey(data: key),
                iv: try AES._CBC.IV(ivBytes: iv)
            )
            return [UInt8](plain)
        } catch {
            throw DownloadError(
                code: .remoteMisbehaved,
                message: "The HLS segment \(segment.absoluteString) does not decrypt with the key from "
                    + "\(keyURL.absoluteString): the key is not this segment's, or the segment is damaged."
            )
        }
    }

    /// Whether `bytes` can be an MPEG-TS segment: every 188-byte packet starts with the sync byte 0x47. A segment
    /// decrypted with a wrong key whose padding happened to look right fails this. Only for MPEG-TS segments (no
    /// `EXT-X-MAP`): fMP4 fragments and packed audio are encrypted with AES-128 too, and have no sync bytes.
    static func isTransportStream(_ bytes: some Collection<UInt8>) -> Bool {
        guard !bytes.isEmpty, bytes.count % Self.transportStreamPacket == 0 else { return false }
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard bytes[index] == Self.transportStreamSync else { return false }
            index = bytes.index(index, offsetBy: Self.transportStreamPacket)
        }
        return true
    }
}
