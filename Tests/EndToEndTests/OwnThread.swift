import Foundation

/// Runs blocking test work (RawSocketClient's poll and recv, waiting for a
/// process, Thread.sleep) on a thread of its own, not on Swift Testing's
/// cooperative pool. That pool has one thread per core: on a busy 2-core
/// machine two blocked tests starved every async test (a CarPlayKit client's
/// Hello not sent within the daemon's 30 s handshake timeout, issue 24). The
/// body runs in the calling task (on a task executor of its own thread), so
/// `#expect` and `Issue.record` still count against the right test. At most
/// `TestGate.limit` such bodies run at once, as many as the pool let run
/// before: the daemons they start share the machine.
/// `gated` false: a short blocking step of an async test (starting a daemon).
func onOwnThread<T>(gated: Bool = true, _ body: () throws -> T) async throws -> T {
    if gated { await TestGate.shared.acquire() }
    let executor = ThreadTaskExecutor()
    defer {
        executor.stop()
        if gated { Task { await TestGate.shared.release() } }
    }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// Bounds how many blocking test bodies run at once (waiting never blocks a thread).
actor TestGate {
    static let limit = 3
    static let shared = TestGate()
    private var available = TestGate.limit
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty { available += 1 } else { waiters.removeFirst().resume() }
    }
}

/// A task executor with one thread of its own, for as long as it is used.
final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `stopped` are only touched with `condition` held.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in run() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    func stop() {
        condition.withLock {
            stopped = true
            condition.signal()
        }
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            guard !jobs.isEmpty else {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
