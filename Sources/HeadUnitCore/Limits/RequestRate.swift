/// A token bucket over a peer's requests (MESSAGE and PING frames): it may
/// sustain `perSecond` and burst as many at once. sdl_core's default of 1000
/// frames a second per app is the baseline. O(1) per request, no history.
public struct RequestRate: Sendable, Equatable {
    /// 0: no limit.
    public let perSecond: UInt32
    /// Tokens in thousandths, so a millisecond's refill is exact.
    private var milliTokens: UInt64
    private var lastRefill: UInt64

    public init(perSecond: UInt32, now: UInt64) {
        self.perSecond = perSecond
        self.milliTokens = UInt64(perSecond) * 1000
        self.lastRefill = now
    }

    /// Takes one token at `now`; false when the bucket is empty (the request must be refused).
    public mutating func take(now: UInt64) -> Bool {
        guard perSecond > 0 else { return true }
        let capacity = UInt64(perSecond) * 1000
        if now > lastRefill {
            // perSecond tokens per 1000 ms = perSecond milli-tokens per ms.
            milliTokens = min(capacity, milliTokens + (now - lastRefill) * UInt64(perSecond))
            lastRefill = now
        }
        guard milliTokens >= 1000 else { return false }
        milliTokens -= 1000
        return true
    }
}
