import Foundation

/// A user name and password for HTTP Basic authentication.
///
/// They are sent only to the origin (scheme, host and port) of the requested URL: after a redirect to another
/// origin they are left out, as curl does unless told otherwise.
///
/// ```swift
/// var configuration = DownloadConfiguration()
/// configuration.credentials = Credentials(user: "alice", password: "secret")
/// ```
public struct Credentials: Sendable, Hashable, Codable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The value of an `Authorization` header for Basic authentication (RFC 7617): `Basic` and the base64 of
    /// `user:password` in UTF-8.
    public var basicAuthorization: String {
        "Basic " + Data("\(self.user):\(self.password)".utf8).base64EncodedString()
    }

    /// The user information of `url` (`https://user:password@host/`), percent-decoded; `nil` when it has none.
    init?(userInfoOf url: URL) {
        guard let user = url.user(percentEncoded: false) else { return nil }
        self.init(user: user, password: url.password(percentEncoded: false) ?? "")
    }
}

extension Credentials: CustomStringConvertible {
    /// The user name only: a password never lands in a log.
    public var description: String {
        "Credentials(user: \(self.user), password: ***)"
    }
}
