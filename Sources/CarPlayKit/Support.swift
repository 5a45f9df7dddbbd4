import HeadUnitWire
import NIOConcurrencyHelpers

/// A lock around one stored property of a CarPlayKit object.
///
/// CarPlayKit's templates, items and buttons are classes you mutate from any
/// task, the way UIKit code mutates them on the main thread. Every mutable
/// stored property is wrapped in `CPLocked`, so each read and write is atomic;
/// that is why those classes can be `@unchecked Sendable`. You never use it
/// directly.
@propertyWrapper
public struct CPLocked<Value>: @unchecked Sendable {
    private final class Box: @unchecked Sendable {
        let lock = NIOLock()
        var value: Value
        init(_ value: Value) { self.value = value }
    }
    private let box: Box

    /// Wraps the initial value.
    public init(wrappedValue: Value) { box = Box(wrappedValue) }

    /// The value, read and written under the lock.
    public var wrappedValue: Value {
        get { box.lock.withLock { box.value } }
        nonmutating set { box.lock.withLock { box.value = newValue } }
    }

    /// `$name`: the wrapper itself, for read-and-write in one step.
    public var projectedValue: CPLocked<Value> { self }

    /// Sets the value and answers the one it replaced, under one lock.
    func exchange(_ newValue: Value) -> Value {
        box.lock.withLock {
            let old = box.value
            box.value = newValue
            return old
        }
    }

    /// Reads and changes the value under one lock.
    func withValue<T>(_ body: (inout Value) -> T) -> T {
        box.lock.withLock { body(&box.value) }
    }
}

/// A weak reference that can live in a `CPLocked` (delegates are weak, as in CarPlay).
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

/// Runs the car requests of one scene one after another, in the order they were made,
/// so an item update made before a push reaches the car before the push.
final class RequestQueue: @unchecked Sendable {
    private let lock = NIOLock()
    // ---- under lock
    private var last: Task<Void, Never>?
    private var firstError: CPError?

    /// Runs `operation` after every earlier one; answers its result.
    func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await schedule(operation).value
    }

    /// Schedules `operation` without waiting; a failure is kept for `drain()`.
    func post(_ operation: @escaping @Sendable () async throws -> Void) {
        _ = schedule { [weak self] in
            do { try await operation() } catch { self?.record(error) }
        }
    }

    /// Waits for everything scheduled so far; throws the first failure of a posted operation since the last drain.
    func drain() async throws {
        let tail = lock.withLock { last }
        await tail?.value
        let error: CPError? = lock.withLock {
            defer { firstError = nil }
            return firstError
        }
        if let error { throw error }
    }

    private func record(_ error: Error) {
        lock.withLock { if firstError == nil { firstError = CPError(error) } }
    }

    /// Queues `operation` behind every earlier one, now; its task answers its result.
    func schedule<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) -> Task<T, Error> {
        lock.withLock {
            let previous = last
            let task = Task { () async throws -> T in
                await previous?.value
                return try await operation()
            }
            last = Task { _ = try? await task.value }
            return task
        }
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
