/// The limits a refused `PairStart` names in `Result.limit` (PROTOCOL.md
/// section 20.2): the car writes them, a phone schedules on them.
public enum PairingLimitNames {
    /// PAIRING_THROTTLED: `limit_value` is how long to wait, in ms, before a
    /// `PairStart` from this source can start (its backoff and the car's rate).
    public static let retryAfter = "pairing.retry_after_ms"
    /// PAIRING_THROTTLED: the connection made its `limit_value` attempts; connect again.
    public static let attemptsPerConnection = "pairing.attempts_per_connection"
}
