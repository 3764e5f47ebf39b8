import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1

/// One download's cookie jar while it runs: starts as ``DownloadConfiguration/cookies`` and takes in every
/// `Set-Cookie` the servers send, behind a lock; ``Download/cookies`` reads it.
final class CookieStore: Sendable {
    private let jar: NIOLockedValueBox<CookieJar>

    init(_ jar: CookieJar) {
        self.jar = NIOLockedValueBox(jar)
    }

    var snapshot: CookieJar {
        self.jar.withLockedValue { $0 }
    }

    func cookieHeader(for url: URL) -> String? {
        let now = Date()
        return self.jar.withLockedValue { $0.cookieHeader(for: url, now: now) }
    }

    /// Takes in the `Set-Cookie` headers of a response to `url`.
    func absorb(_ headers: HTTPHeaders, from url: URL) {
        let values = headers["Set-Cookie"]
        guard !values.isEmpty else { return }
        let now = Date()
        self.jar.withLockedValue { jar in
            for value in values {
                jar.setCookie(value, from: url, now: now)
            }
        }
    }
}
