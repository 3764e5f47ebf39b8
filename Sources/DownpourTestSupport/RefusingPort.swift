#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A port on 127.0.0.1 where every connection is refused, for as long as this value is open.
///
/// A socket is bound to the port but never listens: a connection to it is answered with a reset, and no other
/// socket can take the port meanwhile. The port of a server that has shut down is no such thing: in a test run
/// with many servers, the next one to start may be given it and answer.
public final class RefusingPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws(RefusingPortError) {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw RefusingPortError(step: "socket", errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard bound else {
            let failure = errno
            _ = close(descriptor)
            throw RefusingPortError(step: "bind", errno: failure)
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    public func url(_ path: String = "/file.bin") -> String {
        "http://127.0.0.1:\(self.port)\(path)"
    }

    deinit {
        _ = close(self.descriptor)
    }
}

public struct RefusingPortError: Error, CustomStringConvertible {
    public var step: String
    public var errno: Int32

    public var description: String {
        "Cannot reserve a port on 127.0.0.1: \(self.step) failed with errno \(self.errno)."
    }
}
