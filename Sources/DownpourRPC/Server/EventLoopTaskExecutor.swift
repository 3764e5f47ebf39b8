import NIOCore

/// Runs the jobs of the tasks that prefer it on one event loop: a `TaskExecutor` (SE-0417) over NIO's loop.
///
/// `RPCPostHandler` answers a request that changes the queue in a task that prefers the loop that read it. The
/// dispatcher and the reply then stay on that loop's thread, with no hop to Swift's global pool and back; and when
/// the queue runs on the same loop (a `DownloadManager` given to the server as its loop), so does the change.
/// Everything else in the daemon (the downloads) runs on the global pool.
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
