import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Which user's process holds the other end of a loopback TCP connection, so that a server on `127.0.0.1` can
/// serve only its own user (the SOCKS5 relay, and the daemon without a secret).
///
/// On Linux the kernel is asked for exactly that socket (`NETLINK_SOCK_DIAG`, as `ss -e` does: one look-up,
/// whatever the number of sockets); where that is not available, `/proc/net/tcp` and `/proc/net/tcp6` are read.
/// Elsewhere there is nothing to tell users apart by, and every peer counts as the current user.
package enum PeerOwner {
    /// Whether the connection from `remote` to `local` comes from a process of the current user. A connection
    /// whose peer cannot be found (it has closed already) does not.
    package static func isCurrentUser(local: SocketAddress?, remote: SocketAddress?) -> Bool {
        #if os(Linux)
        guard let local, let remote else { return false }
        switch self.uid(ofPeer: remote, connectedTo: local) {
        case .found(let uid): return uid == getuid()
        case .notFound: return false
        case .unknowable: return true
        }
        #else
        return true
        #endif
    }

    /// What a look-up found.
    package enum Lookup: Sendable, Hashable {
        case found(UInt32)
        /// No such socket (it has closed).
        case notFound
        /// Neither the kernel nor `/proc` can be asked.
        case unknowable
    }

    #if os(Linux)
    /// The uid owning the socket bound to `remote` and connected to `local`.
    package static func uid(ofPeer remote: SocketAddress, connectedTo local: SocketAddress) -> Lookup {
        if let answer = self.askKernel(peer: remote, local: local) { return answer }
        guard let localPort = local.port, let remotePort = remote.port,
            let localHex = self.hexAddress(local), let remoteHex = self.hexAddress(remote)
        else { return .unknowable }
        let path = remoteHex.count > 8 ? "/proc/net/tcp6" : "/proc/net/tcp"
        guard let table = self.readWhole(path) else { return .unknowable }
        let found = self.owner(
            in: table,
            local: remoteHex + ":" + self.hex(remotePort),
            remote: localHex + ":" + self.hex(localPort)
        )
        return found.map(Lookup.found) ?? .notFound
    }

    /// `SOCK_DIAG_BY_FAMILY` for one TCP socket; `nil` when the kernel cannot be asked.
    private static func askKernel(peer: SocketAddress, local: SocketAddress) -> Lookup? {
        guard let peerPort = peer.port, let localPort = local.port,
            let peerBytes = self.addressBytes(peer), let localBytes = self.addressBytes(local),
            peerBytes.count == localBytes.count
        else { return nil }
        let family: UInt8 = peerBytes.count == 4 ? UInt8(AF_INET) : UInt8(AF_INET6)
        let descriptor = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 4)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        // struct nlmsghdr (16) + struct inet_diag_req_v2 (56): the socket's own end is "src", its peer "dst".
        var request: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value) { request += $0 } }
        func padded(_ bytes: [UInt8]) -> [UInt8] { bytes + [UInt8](repeating: 0, count: 16 - bytes.count) }
        append(UInt32(72))  // nlmsg_len
        append(UInt16(20))  // SOCK_DIAG_BY_FAMILY
        append(UInt16(1))  // NLM_F_REQUEST
        append(UInt32(1))  // nlmsg_seq
        append(UInt32(0))  // nlmsg_pid
        request += [family, UInt8(IPPROTO_TCP), 0, 0]
        append(UInt32.max)  // every state
        append(UInt16(peerPort).bigEndian)
        append(UInt16(localPort).bigEndian)
        request += padded(peerBytes) + padded(localBytes)
        append(UInt32(0))  // any interface
        append(UInt32.max)  // INET_DIAG_NOCOOKIE
        append(UInt32.max)
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        guard sent == request.count else { return nil }

        var reply = [UInt8](repeating: 0, count: 8192)
        var count = -1
        repeat {
            count = reply.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        } while count < 0 && errno == EINTR
        guard count >= 16 else { return nil }
        func read32(_ offset: Int) -> UInt32 {
            reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        }
        let type = reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4, as: UInt16.self) }
        switch type {
        case 20 where count >= 84:
            // struct inet_diag_msg after the header: family, state, timer, retrans (4), id (48), expires, rqueue,
            // wqueue (12), uid.
            return .found(read32(80))
        case 2 where count >= 20:
            // NLMSG_ERROR: ENOENT is "no such socket"; anything else (no inet_diag here) falls back.
            let error = Int32(bitPattern: read32(16))
            return error == -ENOENT ? .notFound : nil
        default:
            return nil
        }
    }

    /// The address's bytes in network order: 4 for IPv4, 16 for IPv6.
    private static func addressBytes(_ address: SocketAddress) -> [UInt8]? {
        guard let text = address.ipAddress else { return nil }
        let family: Int32
        var bytes: [UInt8]
        switch address.protocol {
        case .inet:
            family = AF_INET
            bytes = [UInt8](repeating: 0, count: 4)
        case .inet6:
            family = AF_INET6
            bytes = [UInt8](repeating: 0, count: 16)
        default:
            return nil
        }
        let parsed = bytes.withUnsafeMutableBytes { inet_pton(family, text, $0.baseAddress) }
        return parsed == 1 ? bytes : nil
    }

    /// The address as `/proc/net/tcp` writes it: each 32-bit word in host order, in hexadecimal.
    private static func hexAddress(_ address: SocketAddress) -> String? {
        guard let bytes = self.addressBytes(address) else { return nil }
        return stride(from: 0, to: bytes.count, by: 4).map { start in
            let word = bytes[start..<start + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let digits = String(word, radix: 16, uppercase: true)
            return String(repeating: "0", count: 8 - digits.count) + digits
        }.joined()
    }

    /// The whole of a file that says its size is 0, as those of `/proc` do, read until its end.
    private static func readWhole(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    #endif

    /// The uid of the IPv4 loopback socket bound to `localPort` and connected to `remotePort`, from a table in
    /// the form of `/proc/net/tcp`.
    static func owner(in table: String, localPort: Int, remotePort: Int) -> UInt32? {
        self.owner(in: table, local: "0100007F:" + self.hex(localPort), remote: "0100007F:" + self.hex(remotePort))
    }

    /// The uid of the socket whose local and remote ends are written as in a `/proc/net/tcp` table.
    static func owner(in table: String, local: String, remote: String) -> UInt32? {
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 7, fields[1] == local, fields[2] == remote else { continue }
            return UInt32(fields[7])
        }
        return nil
    }

    private static func hex(_ port: Int) -> String {
        let digits = String(port, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
