import NIOCore

/// Runs the jobs of the tasks that prefer it on one event loop: a `TaskExecutor` (SE-0417) over NIO's loop.
///
/// `JSONRPCPostHandler` answers each call in a task that prefers the loop that read the request. The dispatcher,
/// the `DownloadManager` actor it asks (a default actor runs on the preferred executor of a task that finds it
/// free) and the reply then stay on that loop's thread, with no hop to Swift's global pool and back. Everything
/// else in the daemon (the downloads and the queue's own work: slots filled, results stored) runs on the global
/// pool, not on the loops that carry the connections.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
