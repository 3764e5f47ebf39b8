import Downpour

/// What the command line says about a failed download: the library's message, then what to do about it in this
/// tool's own words (its flags), which the library never names.
enum Remedy {
    static func lines(for error: DownloadError, prefix: String = "downpour: ") -> [String] {
        if error.code == .cancelled {
            return [
                prefix
                    + (error.resumable
                        ? "paused; run the same command again to resume."
                        : "stopped; nothing was kept (this server does not allow resuming).")
            ]
        }
        var lines = [prefix + "error: " + error.message]
        if let hint = self.hint(for: error) {
            lines.append(prefix + hint)
        }
        if error.resumable {
            lines.append(prefix + "what arrived is kept; run the same command again to resume.")
        }
        return lines
    }

    static func hint(for error: DownloadError) -> String? {
        switch error.code {
        case .outputExists:
            return "use --overwrite to replace it, or -o to save under another name."
        case .alreadyRunning:
            return "wait for the other downpour to finish, or stop it (Ctrl-C pauses it and keeps its data)."
        case .invalidRequest:
            return "see 'downpour get --help'."
        case .httpStatus where error.httpStatus == 401:
            return "the server wants credentials: give --http-user and --http-passwd, or a private ~/.netrc entry."
        case .checksumMismatch where error.checksumMismatch?.source == .configuration:
            return "check the --checksum value; if it is right, the server sends a damaged file."
        case .checksumMismatch:
            if case .piece = error.checksumMismatch?.source {
                return "the server sends other bytes than the Metalink describes: a damaged or different file."
            }
            return nil
        case .localIO where error.systemCallError?.isNoSpace == true:
            return "free some space, then run the same command again."
        default:
            return nil
        }
    }
}
