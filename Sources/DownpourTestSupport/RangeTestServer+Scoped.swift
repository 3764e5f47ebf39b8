extension RangeTestServer {
    /// Starts a server, runs `body` with it, and shuts the server down afterwards, whether `body` returns or
    /// throws.
    public static func withServer<Result>(
        content: [UInt8],
        faults: [Fault] = [],
        etag: String? = "\"downpour-test-v1\"",
        lastModified: String? = "Wed, 21 Oct 2026 07:28:00 GMT",
        _ body: (RangeTestServer) async throws -> Result
    ) async throws -> Result {
        let server = try await RangeTestServer.start(
            content: content,
            faults: faults,
            etag: etag,
            lastModified: lastModified
        )
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }
}
