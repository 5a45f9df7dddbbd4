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
    /// A TCP phone that must authenticate has this long from connecting to
    /// be authenticated (Hello, Pair, Authenticate: two or three round trips).
    public var authTimeoutMilliseconds: UInt64
    /// Frames a phone may send between Welcome and authentication, all kinds
    /// together: Pair and Authenticate need two; the rest is slack.
    public var maxUnauthenticatedFrames: UInt32
    /// Non-fatal protocol errors tolerated in any sliding second.
    public var maxErrorsPerSecond: UInt32
    /// Announced in Welcome; the Car enforces it.
    public var completionTimeoutMilliseconds: UInt64
    /// Requests (MESSAGE and PING frames) per second, sustained; 0: no limit.
    public var maxRequestsPerSecond: UInt32
    /// String, image and element limits of one message (section 10).
    public var message: MessageLimits
    /// A phone whose apps are not accepted this long after Welcome is closed; 0: never.
    public var announceTimeoutMilliseconds: UInt64
    /// Announced in Welcome; the Car keeps a lost phone's apps this long (section 21).
    public var resumeGraceMilliseconds: UInt64

    public static let defaultMaxPayloadBytes: UInt32 = 1 << 20

    /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6).
    /// A frame must carry Welcome; clients accept at most 16 MiB.
    public static let maxPayloadBytesRange: ClosedRange<UInt32> = 1_024...16 << 20
    public static let heartbeatIntervalRange: ClosedRange<UInt64> = 100...600_000
    public static let heartbeatTimeoutRange: ClosedRange<UInt64> = 100...3_600_000
    public static let handshakeTimeoutRange: ClosedRange<UInt64> = 100...600_000
    public static let authTimeoutRange: ClosedRange<UInt64> = 100...600_000
    /// Pair and Authenticate need two frames.
    public static let maxUnauthenticatedFramesRange: ClosedRange<UInt32> = 2...64
    public static let maxErrorsPerSecondRange: ClosedRange<UInt32> = 1...1_000
    public static let completionTimeoutRange: ClosedRange<UInt64> = 100...600_000
    /// The top is a bench's "no limit" (the rate's arithmetic holds far past it).
    public static let maxRequestsPerSecondRange: ClosedRange<UInt32> = 1...1_000_000_000
    public static let announceTimeoutRange: ClosedRange<UInt64> = 100...3_600_000
    public static let resumeGraceRange: ClosedRange<UInt64> = 100...3_600_000

    public init(
        maxPayloadBytes: UInt32 = ConnectionLimits.defaultMaxPayloadBytes,
        heartbeatIntervalMilliseconds: UInt64 = 5_000,
        heartbeatTimeoutMilliseconds: UInt64 = 15_000,
        handshakeTimeoutMilliseconds: UInt64 = 5_000,
        maxErrorsPerSecond: UInt32 = 10,
        completionTimeoutMilliseconds: UInt64 = 10_000,
        maxRequestsPerSecond: UInt32 = 1000,
        message: MessageLimits = MessageLimits(),
        announceTimeoutMilliseconds: UInt64 = 10_000,
        resumeGraceMilliseconds: UInt64 = 30_000,
        authTimeoutMilliseconds: UInt64 = 3_000,
        maxUnauthenticatedFrames: UInt32 = 8
    ) {
        self.authTimeoutMilliseconds = authTimeoutMilliseconds
        self.maxUnauthenticatedFrames = maxUnauthenticatedFrames
        self.resumeGraceMilliseconds = resumeGraceMilliseconds
        self.maxPayloadBytes = maxPayloadBytes
        self.heartbeatIntervalMilliseconds = heartbeatIntervalMilliseconds
        self.heartbeatTimeoutMilliseconds = heartbeatTimeoutMilliseconds
        self.handshakeTimeoutMilliseconds = handshakeTimeoutMilliseconds
        self.maxErrorsPerSecond = maxErrorsPerSecond
        self.completionTimeoutMilliseconds = completionTimeoutMilliseconds
        self.maxRequestsPerSecond = maxRequestsPerSecond
        self.message = message
        self.announceTimeoutMilliseconds = announceTimeoutMilliseconds
    }

    /// The wire form sent in Welcome.
    public var wire: HULimits {
        var limits = HULimits()
        limits.maxPayloadBytes = maxPayloadBytes
        limits.heartbeatIntervalMs = UInt32(clamping: heartbeatIntervalMilliseconds)
        limits.heartbeatTimeoutMs = UInt32(clamping: heartbeatTimeoutMilliseconds)
        limits.completionTimeoutMs = UInt32(clamping: completionTimeoutMilliseconds)
        limits.maxErrorsPerSecond = maxErrorsPerSecond
        limits.maxRequestsPerSecond = maxRequestsPerSecond
        limits.maxStringBytes = UInt32(clamping: message.maxStringBytes)
        limits.maxImageBytes = UInt32(clamping: message.maxImageBytes)
        limits.maxMessageElements = UInt32(clamping: message.maxElements)
        limits.announceTimeoutMs = UInt32(clamping: announceTimeoutMilliseconds)
        limits.resumeGraceMs = UInt32(clamping: resumeGraceMilliseconds)
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
        // Welcome.vehicle lists the protocols the daemon really declares (18.1).
        self.vehicle.accessoryProtocols = AccessoryProtocols.declared(vehicle.accessoryProtocols)
        self.daemonName = daemonName
    }
}
