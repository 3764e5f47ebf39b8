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

    /// Decrypts one segment, or one part of it: a part before the last is a whole number of blocks without padding
    /// (`padded: false`), and the next part's IV is this part's last 16 bytes of ciphertext.
    ///
    /// - Throws: ``DownloadError`` `remoteMisbehaved` when the key is not 16 bytes, or the segment does not
    ///   decrypt with it (a wrong key, or damaged bytes: its length or padding is wrong).
    static func decrypt(
        _ ciphertext: some DataProtocol,
        key: [UInt8],
        iv: [UInt8],
        padded: Bool = true,
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
                iv: try AES._CBC.IV(ivBytes: iv),
                noPadding: !padded
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

    /// ``isTransportStream(_:)`` over a segment read in parts.
    struct TransportStreamCheck: Sendable {
        /// Bytes seen so far.
        private(set) var count = 0
        private(set) var isBroken = false

        /// Looks at the next part; `false` once a packet does not start with the sync byte.
        mutating func feed(_ bytes: some Collection<UInt8>) -> Bool {
            var offset =
                (HLSDecryption.transportStreamPacket - self.count % HLSDecryption.transportStreamPacket)
                % HLSDecryption.transportStreamPacket
            while offset < bytes.count, !self.isBroken {
                if bytes[bytes.index(bytes.startIndex, offsetBy: offset)] != HLSDecryption.transportStreamSync {
                    self.isBroken = true
                }
                offset += HLSDecryption.transportStreamPacket
            }
            self.count += bytes.count
            return !self.isBroken
        }

        /// Whether everything fed was whole packets, each starting with the sync byte.
        var isWhole: Bool {
            !self.isBroken && self.count > 0 && self.count % HLSDecryption.transportStreamPacket == 0
        }
    }
}
