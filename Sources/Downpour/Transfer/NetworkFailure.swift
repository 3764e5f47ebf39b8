import AsyncHTTPClient
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What kind of failure a transport error is, for deciding whether trying again can help.
///
/// curl, wget and aria2c end at once where nothing answers: a refused connection, a name that does not exist, a
/// certificate that fails verification. A name server that timed out or failed (`EAI_AGAIN`), a time-out, a reset:
/// those may pass, and are tried again.
enum NetworkFailure: Sendable, Hashable {
    /// The host refused the connection: no server listens on the port.
    case refused
    /// The name does not exist (NXDOMAIN: `EAI_NONAME`, or no address of any family: `EAI_NODATA`).
    case unknownHost
    /// The server's certificate failed verification.
    case certificate
    /// Anything else: it may pass.
    case other

    init(_ error: any Error) {
        switch error {
        case let error as IOError where error.errnoCode == ECONNREFUSED:
            self = .refused
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty {
                let lookups = [error.dnsAError, error.dnsAAAAError].compactMap { $0 }
                self = !lookups.isEmpty && lookups.allSatisfy(Self.isNoSuchName) ? .unknownHost : .other
            } else {
                let refused = error.connectionErrors.allSatisfy {
                    ($0.error as? IOError)?.errnoCode == ECONNREFUSED
                }
                self = refused ? .refused : .other
            }
        case let error as NIOSSLError:
            self = "\(error)".contains("CERTIFICATE_VERIFY_FAILED") ? .certificate : .other
        case let error as NIOSSLExtraError:
            self = error == .failedToValidateHostname ? .certificate : .other
        default:
            self = .other
        }
    }

    /// A lookup that says the name does not exist, as opposed to a resolver that could not answer.
    private static func isNoSuchName(_ error: any Error) -> Bool {
        guard let unknown = error as? SocketAddressError.UnknownHost else { return false }
        #if canImport(Glibc) || canImport(Musl)
        return unknown.errorCode == Int(EAI_NONAME) || unknown.errorCode == -5  // EAI_NODATA (glibc)
        #else
        return unknown.errorCode == Int(EAI_NONAME)
        #endif
    }

    /// Whether a request to a host this download has not reached yet should end at once, without retries.
    /// - Parameter retryingRefused: retry a refused connection all the same (`retry-on-refused`).
    func endsAtOnce(retryingRefused: Bool) -> Bool {
        switch self {
        case .refused: !retryingRefused
        case .unknownHost, .certificate: true
        case .other: false
        }
    }
}
