import Foundation

/// The rules every redirect follows, the probe's and a mirror's alike: which statuses redirect, where to, and
/// when to stop. A value type with no I/O; each caller words the refusal for its own message.
enum Redirect {
    /// Why a redirect is not followed.
    enum Refusal: Error, Equatable {
        /// A redirect status without a `Location` that makes a URL.
        case noLocation
        /// To something other than an `http` or `https` URL.
        case notHTTP
        /// Back to a URL the chain has been through.
        case loop
        /// One hop more than the limit.
        case tooMany
    }

    /// Where a response with `status` and `location` (its `Location` header) to a request for `url` leads; `nil`
    /// when the status is not a redirect (301, 302, 303, 307, 308).
    static func target(status: UInt, location: String?, from url: URL) throws(Refusal) -> URL? {
        guard [301, 302, 303, 307, 308].contains(status) else { return nil }
        guard let location, let next = URL(string: location, relativeTo: url)?.absoluteURL else {
            throw .noLocation
        }
        return next
    }

    /// Whether a chain that went through `visited` (the current URL included) in `hops` redirects may go on to
    /// `next`, with at most `limit` redirects in all.
    static func check(_ next: URL, visited: Set<String>, hops: Int, limit: Int) throws(Refusal) {
        guard ["http", "https"].contains(next.scheme?.lowercased() ?? "") else { throw .notHTTP }
        guard !visited.contains(next.absoluteString) else { throw .loop }
        guard hops < limit else { throw .tooMany }
    }
}
