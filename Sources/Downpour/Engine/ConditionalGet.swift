/// What ``DownloadConfiguration/conditionalGet`` makes of an output file that exists already, from its
/// modification time and the server's `Last-Modified`. Whole seconds: HTTP dates have no finer resolution.
enum ConditionalGet: Equatable {
    /// The local file is at least as new as the remote one: keep it, download nothing.
    case keep
    /// The remote file is newer: download it and replace the local one.
    case replace
    /// The server gave no usable `Last-Modified`: download as if the option were not set.
    case undecided

    init(localModified: Int64, remoteLastModified: String?) {
        guard let remote = remoteLastModified.flatMap(HTTPDate.parse) else {
            self = .undecided
            return
        }
        self = Double(localModified) >= remote ? .keep : .replace
    }
}
