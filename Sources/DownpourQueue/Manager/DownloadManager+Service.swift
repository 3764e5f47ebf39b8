import ServiceLifecycle

/// The manager runs in a `ServiceGroup` as one of its services: it starts the queue (if ``DownloadManager/start()``
/// has not yet: a daemon starts it before its port opens), runs until the group shuts down gracefully, and then
/// pauses the active downloads (their bytes kept) and stores the queue (``DownloadManager/shutdown()``).
///
/// ```swift
/// try await manager.start()   // the queue is loaded before anyone can call
/// let group = ServiceGroup(services: [manager, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
extension DownloadManager: Service {
    public func run() async throws {
        try await self.start()
        try? await gracefulShutdown()
        await self.shutdown()
    }
}
