import Foundation

/// Runs blocking test work (RawSocketClient's poll and recv, waiting for a
/// process) on a thread of its own and awaits its result. Swift Testing runs
/// tests on the cooperative pool, which has one thread per core: a test that
/// blocks one of them on a busy 2-core machine starves every async test (a
/// client's Hello not sent within the daemon's handshake timeout, issue 24).
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
