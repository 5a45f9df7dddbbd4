import HeadUnitWire

/// The per-connection limits the daemon enforces and announces in Welcome.
/// All durations are milliseconds of a monotonic clock.
public struct ConnectionLimits: Sendable, Equatable {
    /// Largest payload either side may send (bytes after the 12-byte header).
    public var maxPayloadBytes: UInt32
    /// The daemon pings an established peer this often; 0 disables the pings.
    public var heartbeatIntervalMilliseconds: UInt64
    /// A peer silent this long (no frame of any kind) is cut off; 0 disables the check.
    public var heartbeatTimeoutMilliseconds: UInt64
    /// A peer that has not sent Hello this long after connecting is cut off.
    public var handshakeTimeoutMilliseconds: UInt64
    /// Non-fatal protocol errors tolerated in any sliding second.
    public var maxErrorsPerSecond: UInt32
    /// Announced in Welcome; the Car enforces it.
    public var completionTimeoutMilliseconds: UInt64

    public static let defaultMaxPayloadBytes: UInt32 = 1 << 20

    public init(
        maxPayloadBytes: UInt32 = ConnectionLimits.defaultMaxPayloadBytes,
        heartbeatIntervalMilliseconds: UInt64 = 5_000,
        heartbeatTimeoutMilliseconds: UInt64 = 15_000,
        handshakeTimeoutMilliseconds: UInt64 = 5_000,
        maxErrorsPerSecond: UInt32 = 10,
        completionTimeoutMilliseconds: UInt64 = 10_000
    ) {
        self.maxPayloadBytes = maxPayloadBytes
        self.heartbeatIntervalMilliseconds = heartbeatIntervalMilliseconds
        self.heartbeatTimeoutMilliseconds = heartbeatTimeoutMilliseconds
        self.handshakeTimeoutMilliseconds = handshakeTimeoutMilliseconds
        self.maxErrorsPerSecond = maxErrorsPerSecond
        self.completionTimeoutMilliseconds = completionTimeoutMilliseconds
    }

    /// The wire form sent in Welcome.
    public var wire: HULimits {
        var limits = HULimits()
        limits.maxPayloadBytes = maxPayloadBytes
        limits.heartbeatIntervalMs = UInt32(clamping: heartbeatIntervalMilliseconds)
        limits.heartbeatTimeoutMs = UInt32(clamping: heartbeatTimeoutMilliseconds)
        limits.completionTimeoutMs = UInt32(clamping: completionTimeoutMilliseconds)
        limits.maxErrorsPerSecond = maxErrorsPerSecond
        return limits
    }
}

/// What every connection of one daemon shares: limits and what Welcome says.
public struct ConnectionConfiguration: Sendable {
    public var limits: ConnectionLimits
    public var vehicle: HUVehicleProfile
    public var daemonName: String
    /// Phone authentication on TCP and SO_PEERCRED rules (PROTOCOL.md section 20).
    public var security = ConnectionSecurity()

    public init(limits: ConnectionLimits = ConnectionLimits(), vehicle: HUVehicleProfile = .standard, daemonName: String = "headunitd") {
        self.limits = limits
        self.vehicle = vehicle
        self.daemonName = daemonName
    }
}
