import Foundation
import Testing

/// `downpour daemon` refuses to start in a mode a web page or the network could drive, and says why.
@Suite("The daemon's unsafe options", .timeLimit(.minutes(10)))
struct DaemonSecurityCLITests {
    @Test(
        "options that open the daemon to pages or the network need a secret; a bad origin or host is named",
        arguments: [
            (["--rpc-allow-origin-all"], "--rpc-allow-origin-all"),
            (["--rpc-listen-all"], "--rpc-listen-all"),
            (["--rpc-allow-origin", "ariang.example"], "ariang.example"),
            (["--rpc-allow-host", "a/b"], "a/b"),
            (["--rpc-max-connections", "0"], "--rpc-max-connections"),
            (["--rpc-request-timeout", "0"], "--rpc-request-timeout"),
        ]
    )
    func refused(_ options: [String], _ named: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let result = try await Binary.run(
            ["daemon", "--rpc-listen-port", "0", "--state-dir", scratch.file("state"), "-d", scratch.file("out")]
                + options
        )
        #expect(result.status == 2, "\(options): \(result.standardError)")
        #expect(result.standardError.contains(named), "\(options): \(result.standardError)")
        if options.first == "--rpc-allow-origin-all" || options.first == "--rpc-listen-all" {
            #expect(result.standardError.contains("secret"), "\(result.standardError)")
        }
        // It never listened, so nothing was stored.
        #expect(!FileManager.default.fileExists(atPath: scratch.file("state/downpour.sqlite")))
    }
}
