import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking loopback TCP client for requests no HTTP client sends: half a request, a handshake from a page,
/// a WebSocket that never answers a ping. Its calls run on NIO's thread pool (``run(_:)``), never on the
/// concurrency pool the server's handlers share.
final class RawSocket: @unchecked Sendable {
    // @unchecked: one test task uses a socket at a time; the descriptor is only read after init.
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var errno: Int32
        var description: String { "\(self.call) failed: errno \(self.errno)" }
    }

    let descriptor: Int32

    /// Connects to `127.0.0.1:port`.
    init(port: Int) throws {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw Failure(call: "socket", errno: errno) }
        // A safety net so a server that never answers fails the test instead of hanging it: two minutes, not a
        // limit on the server.
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw Failure(call: "connect", errno: errno)
        }
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
    }

    /// Runs blocking socket work on NIO's thread pool.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(self.descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw Failure(call: "send", errno: errno) }
            sent += count
        }
    }

    /// Reads until the peer closes; throws when the two-minute safety net runs out first.
    func readUntilClosed() throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return received }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return received }
                throw Failure(call: "recv", errno: errno)
            }
            received += buffer[0..<count]
        }
    }

    /// Reads until a response head has ended; returns it.
    func readHead() throws -> String {
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while !received.ends(with: Array("\r\n\r\n".utf8)) {
            let count = recv(self.descriptor, &byte, 1, 0)
            if count < 0, errno == EINTR { continue }
            guard count == 1 else { throw Failure(call: "recv", errno: count == 0 ? 0 : errno) }
            received.append(byte)
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Whether nothing has come from the peer (no byte and no end), without waiting and without reading.
    func hasNothingToRead() throws -> Bool {
        var byte: UInt8 = 0
        while true {
            let count = recv(self.descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
            if count >= 0 { return false }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return true
            default: throw Failure(call: "recv", errno: errno)
            }
        }
    }

    /// Whether the peer has closed, without waiting: `true` on end of stream or reset, `false` while it is open.
    /// Bytes waiting are read and dropped.
    func isClosedByPeer() throws -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                recv(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if count == 0 { return true }
            if count > 0 { continue }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return false
            case ECONNRESET: return true
            default: throw Failure(call: "recv", errno: errno)
            }
        }
    }
}

extension Array where Element: Equatable {
    func ends(with suffix: [Element]) -> Bool {
        self.count >= suffix.count && Array(self[(self.count - suffix.count)...]) == suffix
    }
}
