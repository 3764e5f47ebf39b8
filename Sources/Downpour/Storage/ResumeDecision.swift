/// Whether a journal from an earlier run may be continued against the remote file as probed now.
enum ResumeDecision: Equatable {
    /// Continue; with a warning when nothing proves the file unchanged.
    case resume(warning: String?)
    /// Throw the old bytes away, for this reason.
    case startOver(String)

    init(journal: ResumeJournal, remote: RemoteFile, partSize: Int64) {
        guard let length = remote.length, length == journal.length else {
            self = .startOver(
                "The remote file is now \(remote.length.map { "\($0) bytes" } ?? "of unknown length"), "
                    + "not \(journal.length) bytes as in the last run: it changed. Starting over."
            )
            return
        }
        var changes: [String] = []
        if let old = journal.etag, old != remote.etag {
            changes.append("ETag \(old) → \(remote.etag ?? "none")")
        }
        if let old = journal.lastModified, old != remote.lastModified {
            changes.append("Last-Modified '\(old)' → '\(remote.lastModified ?? "none")'")
        }
        guard changes.isEmpty else {
            self = .startOver(
                "The remote file changed since the last run (\(changes.joined(separator: "; "))). Starting over."
            )
            return
        }
        guard partSize == length else {
            self = .startOver("The partial file is \(partSize) bytes, not \(length) as expected. Starting over.")
            return
        }
        if journal.etag == nil && journal.lastModified == nil {
            self = .resume(
                warning: "The server sends no ETag or Last-Modified, so it cannot be proven that the remote file "
                    + "is unchanged since the last run; resuming because the length matches."
            )
        } else {
            self = .resume(warning: nil)
        }
    }
}
