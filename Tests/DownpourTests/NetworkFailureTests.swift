import NIOCore
import NIOPosix
import NIOSSL
import Testing

@testable import Downpour

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which transport failures end a download at once: nothing answers there, as curl, wget and aria2c judge it.
@Suite struct NetworkFailureTests {
    @Test func classifies() throws {
        let refused = IOError(errnoCode: ECONNREFUSED, reason: "connect")
        #expect(NetworkFailure(refused) == .refused)
        #expect(NetworkFailure(IOError(errnoCode: ECONNRESET, reason: "read")) == .other)
        #expect(NetworkFailure(ChannelError.connectTimeout(.seconds(10))) == .other)
        #expect(NetworkFailure(NIOSSLExtraError.failedToValidateHostname) == .certificate)
        #expect(NetworkFailure(NIOSSLError.handshakeFailed(.sslError([]))) == .other)
    }

    @Test("A failure ends at once unless it may pass; a refusal is retried when asked")
    func endsAtOnce() {
        #expect(NetworkFailure.refused.endsAtOnce(retryingRefused: false))
        #expect(!NetworkFailure.refused.endsAtOnce(retryingRefused: true))
        #expect(NetworkFailure.unknownHost.endsAtOnce(retryingRefused: true))
        #expect(NetworkFailure.certificate.endsAtOnce(retryingRefused: true))
        #expect(!NetworkFailure.other.endsAtOnce(retryingRefused: false))
    }
}
