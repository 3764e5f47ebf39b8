import Downpour
import Foundation
import Testing

@testable import DownpourQueue

@Suite("Aria2ErrorCode")
struct Aria2ErrorCodeTests {
    static let cases: [(DownloadError, Int)] = [
        (DownloadError(code: .httpStatus, message: "404", httpStatus: 404), 3),
        (DownloadError(code: .httpStatus, message: "401", httpStatus: 401), 24),
        (DownloadError(code: .httpStatus, message: "503", httpStatus: 503), 29),
        (DownloadError(code: .httpStatus, message: "500", httpStatus: 500), 1),
        (DownloadError(code: .network, message: "reset"), 6),
        (DownloadError(code: .outputExists, message: "exists"), 13),
        (DownloadError(code: .checksumMismatch, message: "mismatch"), 32),
        (
            DownloadError(
                code: .localIO,
                message: "full",
                underlying: SystemCallError(systemCall: "pwritev", errno: ENOSPC)
            ), 9
        ),
        (
            DownloadError(
                code: .localIO,
                message: "denied",
                underlying: SystemCallError(systemCall: "open", errno: EACCES)
            ), 17
        ),
        (DownloadError(code: .remoteChanged, message: "changed"), 22),
        (DownloadError(code: .remoteMisbehaved, message: "lied"), 22),
        (DownloadError(code: .invalidRequest, message: "bad"), 28),
        (DownloadError(code: .alreadyRunning, message: "locked"), 11),
        (DownloadError(code: .cancelled, message: "cancelled"), 1),
    ]

    @Test("DownloadError codes map to aria2's", arguments: cases)
    func code(_ error: DownloadError, _ expected: Int) {
        #expect(Aria2ErrorCode(error).rawValue == expected)
    }
}
