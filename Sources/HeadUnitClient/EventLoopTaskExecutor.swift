import NIOCore

/// Runs tasks on a NIO event loop. A task that prefers this executor
/// (`withTaskExecutorPreference`) and talks to a connection on the same loop
/// never changes thread: its request is written inline and its answer resumes
/// it on the loop. On a 2-core machine that saves two cross-thread wakeups
/// (~45 us each) per round trip. The benchmark uses it; apps may.
@available(macOS 15.0, *)
public final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    public let eventLoop: EventLoop

    public init(_ eventLoop: EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}

extension HeadUnitConnection {
    /// An executor running on this connection's event loop.
    @available(macOS 15.0, *)
    public var taskExecutor: EventLoopTaskExecutor { EventLoopTaskExecutor(eventLoop) }
}
