import ArgumentParser
import Downpour
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct DownpourCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downpour",
        abstract: "Download large files over HTTP(S), fast, over many connections at once.",
        discussion: """
            Exit codes: 0 success, 1 internal error, 2 usage error (bad option or URL), 3 HTTP error status, \
            4 network error after retries, 5 remote file changed or server misbehaved, 6 output file exists, \
            7 local I/O error (disk full, no permission), 8 paused (Ctrl-C or SIGTERM; run the same command to \
            resume), 9 another downpour is writing the same file, 10 the file's digest did not match its checksum, \
            130 stopped at once by a second Ctrl-C.
            """,
        version: "0.1.0",
        subcommands: [GetCommand.self, DaemonCommand.self]
    )
}

/// Exit codes; documented in README.md and docs/exit-codes.md. Stable: scripts rely on them.
enum ExitStatus {
    static let success: Int32 = 0
    static let internalError: Int32 = 1
    static let usage: Int32 = 2
    static let httpStatus: Int32 = 3
    static let network: Int32 = 4
    static let remote: Int32 = 5
    static let outputExists: Int32 = 6
    static let localIO: Int32 = 7
    static let paused: Int32 = 8
    static let alreadyRunning: Int32 = 9
    static let checksumMismatch: Int32 = 10
    static let interrupted: Int32 = 130

    static func code(for error: DownloadError) -> Int32 {
        switch error.code {
        case .invalidRequest: usage
        case .httpStatus: httpStatus
        case .network: network
        case .remoteChanged, .remoteMisbehaved: remote
        case .outputExists: outputExists
        case .localIO: localIO
        case .cancelled: paused
        case .alreadyRunning: alreadyRunning
        case .checksumMismatch: checksumMismatch
        default: internalError
        }
    }
}

@main
enum Main {
    static func main() async {
        let command: any ParsableCommand
        do {
            command = try DownpourCommand.parseAsRoot()
        } catch {
            if DownpourCommand.exitCode(for: error) == .success {
                DownpourCommand.exit(withError: error)
            }
            writeError(DownpourCommand.fullMessage(for: error))
            exit(ExitStatus.usage)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var command = command
                try command.run()
            }
        } catch let error as ExitCode {
            exit(error.rawValue)
        } catch {
            if DownpourCommand.exitCode(for: error) == .validationFailure {
                writeError(DownpourCommand.fullMessage(for: error))
                exit(ExitStatus.usage)
            }
            DownpourCommand.exit(withError: error)
        }
    }
}

func writeError(_ message: String) {
    FileHandle.standardError.write(Data((message.hasSuffix("\n") ? message : message + "\n").utf8))
}
