/// Counts a peer's non-fatal protocol errors in a sliding one-second window
/// and says when it has spent its budget. Kept apart from the protocol rules
/// (as swift-nio-http2's DOSHeuristics is) so either can change alone.
public struct ErrorBudget: Sendable {
    public let maxPerSecond: UInt32
    /// Times (ms) of the errors in the last second, oldest first; at most maxPerSecond + 1.
    private var recent: [UInt64] = []
    private static let window: UInt64 = 1_000

    public init(maxPerSecond: UInt32) {
        self.maxPerSecond = maxPerSecond
        recent.reserveCapacity(Int(min(maxPerSecond, 64)) + 1)
    }

    /// Records one error at `now`. Returns false once more than
    /// `maxPerSecond` errors fall within one second: the peer must be cut off.
    public mutating func record(now: UInt64) -> Bool {
        // The window is (now - 1 s, now]: an error exactly one second old no longer counts.
        var drop = 0
        while drop < recent.count, recent[drop] + Self.window <= now { drop += 1 }
        if drop > 0 { recent.removeFirst(drop) }
        recent.append(now)
        // Bounded even if the caller keeps going after the verdict.
        if recent.count > Int(maxPerSecond) + 1 { recent.removeFirst() }
        return recent.count <= Int(maxPerSecond)
    }

    public var errorsInWindow: Int { recent.count }
}
