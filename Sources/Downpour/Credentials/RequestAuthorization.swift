import Foundation

/// What one download sends to say who it is, decided request by request for the URL being requested.
///
/// Basic credentials and the configured `Authorization`, `Cookie` and `Proxy-Authorization` headers go only to
/// the origin (scheme, host, port) of the requested URL: after a redirect to another origin they are left out,
/// as curl leaves them out without `--location-trusted`. Cookies from the jar go wherever the jar says they
/// match, so a cookie for one host is never sent to another, and a cookie for the host redirected to is.
struct RequestAuthorization: Sendable {
    /// The origin of the URL the download was asked for.
    let origin: Origin
    /// Basic credentials for ``origin``.
    let credentials: Credentials?
    /// The cookie jar, when cookies are in use.
    let cookies: CookieStore?
    /// Basic credentials for the origins of the download's other URLs (mirrors): from each one's own user info or
    /// `.netrc` entry, never those of ``origin``.
    var otherCredentials: [Origin: Credentials] = [:]

    /// `headers` (the configured ones) as they may be sent with a request for `url`, with the credentials and
    /// cookies that belong to it.
    func headers(_ headers: [HTTPHeaderField], for url: URL) -> [HTTPHeaderField] {
        var result = headers
        let isHome = Origin(url) == self.origin
        if !isHome {
            result.removeAll { $0.carriesCredentials }
            if let own = self.otherCredentials[Origin(url)] {
                result.append(HTTPHeaderField(name: "Authorization", value: own.basicAuthorization))
            }
        }
        if isHome, let credentials, !result.contains(where: { $0.name.lowercased() == "authorization" }) {
            result.append(HTTPHeaderField(name: "Authorization", value: credentials.basicAuthorization))
        }
        if let cookie = self.cookies?.cookieHeader(for: url) {
            if let index = result.firstIndex(where: { $0.name.lowercased() == "cookie" }) {
                result[index].value += "; " + cookie
            } else {
                result.append(HTTPHeaderField(name: "Cookie", value: cookie))
            }
        }
        return result
    }
}

extension DownloadConfiguration {
    /// This configuration for a request of `url` that an answer from `home` named (an HLS segment, its key): the
    /// credentials and the headers that carry them (`Authorization`, `Cookie`, `Proxy-Authorization`) stay with
    /// `home`'s origin, as they do across a redirect. Cookies from the jar still go where the jar says they match.
    package func named(by home: URL, for url: URL) -> DownloadConfiguration {
        guard Origin(url) != Origin(home) else { return self }
        var configuration = self
        configuration.credentials = nil
        configuration.headers.removeAll { $0.carriesCredentials }
        return configuration
    }
}
