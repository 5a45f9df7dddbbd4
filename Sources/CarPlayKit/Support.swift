import Foundation
import HeadUnitWire
import NIOConcurrencyHelpers

/// A weak reference that can live in a collection or a value (delegates are weak, as in CarPlay).
struct Weak<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object?) { self.object = object }
}

/// A weak reference to a Sendable object may be shared: the runtime makes
/// loading and clearing a weak reference atomic.
extension Weak: Sendable where Object: Sendable {}

/// Ids for elements the app did not name: unique in the process, readable in `headunitctl watch`.
enum ElementID {
    private static let counter = NIOLockedValueBox<[String: Int]>([:])

    static func make(_ prefix: String) -> String {
        let n = counter.withLockedValue { counts -> Int in
            counts[prefix, default: 0] += 1
            return counts[prefix]!
        }
        return "\(prefix)-\(n)"
    }
}

/// Runs `body` on the main actor: at once when called there (a handler
/// calling its completion), else as soon as the main actor is free.
func onMainActor(_ body: @escaping @MainActor @Sendable () -> Void) {
    if Thread.isMainThread {
        MainActor.assumeIsolated(body)
    } else {
        Task { @MainActor in body() }
    }
}

/// Runs the car requests of one app one after another, in the order they were made,
/// so an item update made before a push reaches the car before the push.
/// On the main actor like every CarPlayKit object: an operation starts there
/// and leaves it only while it awaits the car.
@MainActor
final class RequestQueue {
    private var last: Task<Void, Never>?
    private var firstError: CPError?

    /// Runs `operation` after every earlier one; answers its result.
    func run<T: Sendable>(_ operation: @escaping @MainActor @Sendable () async throws -> T) async throws -> T {
        try await schedule(operation).value
    }

    /// Schedules `operation` without waiting; a failure is kept for `drain()`.
    func post(_ operation: @escaping @MainActor @Sendable () async throws -> Void) {
        _ = schedule { [weak self] in
            do { try await operation() } catch { self?.record(error) }
        }
    }

    /// Waits for everything scheduled so far; throws the first failure of a posted operation since the last drain.
    func drain() async throws {
        await last?.value
        if let error = firstError {
            firstError = nil
            throw error
        }
    }

    private func record(_ error: Error) {
        if firstError == nil { firstError = CPError(error) }
    }

    /// Queues `operation` behind every earlier one, now; its task answers its result.
    func schedule<T: Sendable>(_ operation: @escaping @MainActor @Sendable () async throws -> T) -> Task<T, Error> {
        let previous = last
        let task = Task { @MainActor () async throws -> T in
            await previous?.value
            return try await operation()
        }
        last = Task { _ = try? await task.value }
        return task
    }
}

extension Array where Element == String {
    /// Variants are sent longest first (the car shows the longest that fits).
    var longestFirst: [String] {
        enumerated().sorted { lhs, rhs in
            let (l, r) = (lhs.element.unicodeScalars.count, rhs.element.unicodeScalars.count)
            return l != r ? l > r : lhs.offset < rhs.offset
        }.map(\.element)
    }
}
