/// Why ``RPCServer`` will not start.
public enum RPCServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``RPCServerConfiguration/listenAll`` without a ``RPCServerConfiguration/secret``.
    case listenAllWithoutSecret
    /// ``RPCServerConfiguration/allowOriginAll`` without a ``RPCServerConfiguration/secret``.
    case allowOriginAllWithoutSecret
    /// A port outside 0...65535.
    case invalidPort(Int)
    /// An allowed host that is not `name` or `name:port`.
    case invalidHost(String)
    /// An allowed origin that is not `scheme://host[:port]`.
    case invalidOrigin(String)
    /// A limit out of its range: what, and what it must be.
    case invalidLimit(String, String)

    public var description: String {
        switch self {
        case .listenAllWithoutSecret:
            return "Listening on all interfaces needs a secret: without one anybody on the network could add downloads."
        case .allowOriginAllWithoutSecret:
            return "Allowing every origin needs a secret: without one any web page the user opens could add "
                + "downloads and write files anywhere the daemon can."
        case .invalidPort(let port):
            return "\(port) is not a TCP port (0 to 65535)."
        case .invalidHost(let host):
            return "'\(host)' is not a host name (NAME or NAME:PORT)."
        case .invalidOrigin(let origin):
            return "'\(origin)' is not an origin (SCHEME://HOST[:PORT], e.g. https://ariang.example)."
        case .invalidLimit(let name, let range):
            return "The \(name) must be \(range)."
        }
    }
}
