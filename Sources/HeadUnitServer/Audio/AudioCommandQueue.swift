import HeadUnitCore
import NIOConcurrencyHelpers

/// The hand-over from the serving loop to the audio engine's thread
/// (PROTOCOL.md section 24.5): a bounded queue of commands, the stop, and
/// whether the engine's thread was started. Credit bounds what can be in it
/// (each stream's window); `capacity` is a backstop.
// @unchecked: every stored property is guarded by `lock`.
final class AudioCommandQueue: @unchecked Sendable {
    static let capacity = 2048

    private let lock = ConditionLock(value: 0)  // 1: commands (or a stop) waiting
    private var queue: [AudioStreams.EngineCommand] = []
    private var stopping = false
    private var started = false
    /// Commands refused because the queue was full.
    private var refusedCount = 0

    var refused: Int {
        lock.lock()
        defer { lock.unlock() }
        return refusedCount
    }

    /// True the first time only: the caller starts the engine's thread.
    func startOnce() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !started else { return false }
        started = true
        return true
    }

    /// From the serving loop; false when the queue is full.
    func submit(_ command: AudioStreams.EngineCommand) -> Bool {
        lock.lock()
        guard queue.count < Self.capacity else {
            refusedCount += 1
            lock.unlock(withValue: 1)
            return false
        }
        queue.append(command)
        lock.unlock(withValue: 1)
        return true
    }

    /// Asks the engine's thread to end; false when it was never started (nothing to stop).
    func stop() -> Bool {
        lock.lock()
        guard started else {
            lock.unlock()
            return false
        }
        stopping = true
        lock.unlock(withValue: 1)
        return true
    }

    /// From the engine's thread: what the loop handed over, and whether to
    /// stop. `wait`: asleep until the loop has something (an idle engine).
    func take(wait: Bool) -> (commands: [AudioStreams.EngineCommand], stop: Bool) {
        if wait {
            lock.lock(whenValue: 1)
        } else {
            lock.lock()
        }
        let commands = queue
        queue.removeAll(keepingCapacity: true)
        let stop = stopping
        lock.unlock(withValue: 0)
        return (commands, stop)
    }
}
