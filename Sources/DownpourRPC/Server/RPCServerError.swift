/// Why ``RPCServer`` will not start.
public enum RPCServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``RPCServerConfiguration/listenAll`` without a ``RPCServerConfiguration/secret``.
    case listenAllWithoutSecret
    /// A port outside 0...65535.
    case invalidPort(Int)

    public var description: String {
        switch self {
        case .listenAllWithoutSecret:
            return "Listening on all interfaces needs a secret: without one anybody on the network could add downloads."
        case .invalidPort(let port):
            return "\(port) is not a TCP port (0 to 65535)."
        }
    }
}
