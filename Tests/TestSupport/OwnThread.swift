import Foundation
import Testing

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
public func onOwnThread<T>(gated: Bool = true, _ body: () throws -> T) async throws -> T {
    // Inside a test that `.ownThread` already admitted: taking a second turn
    // could wait for itself (every turn held by tests waiting for one more).
    let takesTurn = gated && !TestGate.held
    if takesTurn { await TestGate.shared.acquire() }
    let executor = ThreadTaskExecutor()
    defer {
        executor.stop()
        if takesTurn { Task { await TestGate.shared.release() } }
    }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// Bounds how many blocking test bodies run at once (waiting never blocks a thread).
public actor TestGate {
    public static let limit = 3
    public static let shared = TestGate()
    /// True inside a test body that already holds a turn.
    @TaskLocal public static var held = false
    private var available = TestGate.limit
    private var waiters: [CheckedContinuation<Void, Never>] = []

    public func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    public func release() {
        if waiters.isEmpty { available += 1 } else { waiters.removeFirst().resume() }
    }
}

/// A task executor with one thread of its own, for as long as it is used.
public final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `stopped` are only touched with `condition` held.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false
    static let marker = "ThreadTaskExecutor"
    /// Whether the calling code runs on one of these executors' threads.
    public static var isCurrent: Bool { Thread.current.threadDictionary[marker] as? Bool ?? false }

    public init() {
        let thread = Thread { [self] in run() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    public func stop() {
        condition.withLock {
            stopped = true
            condition.signal()
        }
    }

    private func run() {
        Thread.current.threadDictionary[Self.marker] = true
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

/// `.ownThread` on a suite (or a test): every synchronous test in it runs
/// its body through `onOwnThread`, so its blocking socket calls never hold
/// one of the cooperative pool's threads (two such tests held both on this
/// 2-core machine, and every async test waited behind them).
public struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self  // each test case, not the suite around them
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        await TestGate.shared.acquire()
        let executor = ThreadTaskExecutor()
        defer {
            executor.stop()
            Task { await TestGate.shared.release() }
        }
        try await TestGate.$held.withValue(true) {
            try await withTaskExecutorPreference(executor) { try await function() }
        }
    }
}

extension Trait where Self == OwnThreadTrait {
    public static var ownThread: Self { OwnThreadTrait() }
}
