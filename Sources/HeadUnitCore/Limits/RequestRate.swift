/// A token bucket over a peer's frames: it may sustain `perSecond` requests
/// (MESSAGE and PING frames) and burst as many at once. sdl_core's default
/// of 1000 frames a second per app is the baseline. A DATA frame takes a
/// sixteenth of a token: credit bounds its bytes, this bounds how many
/// (empty ones included) a peer can make the daemon handle (PROTOCOL.md
/// section 10.2). O(1) per frame, no history.
public struct RequestRate: Sendable, Equatable {
    /// 0: no limit.
    public let perSecond: UInt32
    /// Tokens in 1/16000ths, so a millisecond's refill and a DATA frame's cost are exact.
    private var units: UInt64
    private var lastRefill: UInt64

    /// What one request (MESSAGE or PING frame) costs.
    public static let request: UInt64 = 16_000
    /// What one DATA frame costs: a sixteenth of a request.
    public static let dataFrame: UInt64 = 1_000
    /// DATA frames a peer may send for each request of its rate.
    public static let dataFramesPerRequest = request / dataFrame

    public init(perSecond: UInt32, now: UInt64) {
        self.perSecond = perSecond
        self.units = UInt64(perSecond) * Self.request
        self.lastRefill = now
    }

    /// Takes `cost` (a request by default) at `now`; false when the bucket
    /// holds less (the frame must be refused).
    public mutating func take(now: UInt64, cost: UInt64 = RequestRate.request) -> Bool {
        guard perSecond > 0 else { return true }
        let capacity = UInt64(perSecond) * Self.request
        if now > lastRefill {
            // perSecond tokens per 1000 ms = perSecond * 16 units per ms.
            units = min(capacity, units + (now - lastRefill) * UInt64(perSecond) * (Self.request / 1000))
            lastRefill = now
        }
        guard units >= cost else { return false }
        units -= cost
        return true
    }
}
