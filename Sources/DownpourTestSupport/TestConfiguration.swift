import Downpour

/// The download settings every test target starts from: short waits, so retries do not slow the suite, and
/// frequent progress. A test that needs other values passes them, so the values a test runs with are in one place.
/// - Parameters:
///   - connections: Connections per download.
///   - minimumSplitSize: The smallest range split off a connection's lease (small, so small test files split).
///   - idleRead: How long a connection may go without a byte before it is retried.
///   - journalInterval: How often the journal is saved (the library's default when `nil`).
public func testConfiguration(
    connections: Int = 4,
    minimumSplitSize: Int64 = 64 * 1024,
    idleRead: Duration = .seconds(10),
    journalInterval: Duration? = nil
) -> DownloadConfiguration {
    var configuration = DownloadConfiguration()
    configuration.connections = connections
    configuration.minimumSplitSize = minimumSplitSize
    configuration.retry = .init(maximumTries: 5, wait: .milliseconds(10), maximumWait: .seconds(2))
    configuration.timeouts = .init(connect: .seconds(10), idleRead: idleRead)
    configuration.writeBufferSize = 64 * 1024
    configuration.progressInterval = .milliseconds(20)
    if let journalInterval { configuration.journalInterval = journalInterval }
    return configuration
}
