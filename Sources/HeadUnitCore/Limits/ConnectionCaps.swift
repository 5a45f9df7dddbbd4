/// How many connections the daemon holds, per transport and in all, and how
/// many of them may be strangers (PROTOCOL.md section 10.1). Settings only;
/// `Admission` applies them.
public struct ConnectionCaps: Sendable, Equatable {
    public var maxTotal: Int
    public var maxUnix: Int
    public var maxTCP: Int
    /// TCP connections that have not authenticated yet (no Hello, or a phone
    /// between Welcome and Authenticate). Small: a phone needs two or three
    /// round trips to get through, and a full set evicts its oldest member.
    public var maxTCPUnauthenticated: Int
    /// Unauthenticated TCP connections from one remote address: a newcomer
    /// from an address at this count evicts that address's own oldest.
    public var maxTCPUnauthenticatedPerSource: Int
    /// How many connections of other addresses one address may evict per
    /// second (a burst of as many): strangers reconnecting as fast as they
    /// are evicted cannot churn the set faster than a phone authenticates.
    public var tcpEvictionsPerSourcePerSecond: Int
    /// Unix slots kept for peers whose credentials a configured access rule
    /// names (`hmi_access`, `cluster_access`, `accessory_access`,
    /// `phone_access`): other local users can fill at most `maxUnix - unixReserved`.
    public var unixReserved: Int
    /// Authenticated TCP connections one paired device may hold: its newest
    /// past this evicts its own oldest (CONNECTION_EVICTED), so one phone
    /// cannot fill TCP's cap and keep another paired phone out.
    public var maxTCPPerDevice: Int
    /// TCP connections accepted whose first flight (the TLS ClientHello,
    /// which may carry a paired phone's admission ticket) was not read yet:
    /// past it the oldest is closed. Only a descriptor each: no TLS yet.
    public var maxTCPFirstFlight: Int
    /// Of those, per remote address: past it that address's own oldest is closed.
    public var maxTCPFirstFlightPerSource: Int
    /// How long a TCP connection may take to send its first flight.
    public var tcpFirstFlightTimeoutMilliseconds: UInt64

    /// Defaults: 8 TCP (phones only, one of which carries apps; the rest are
    /// waiting, pairing or resuming), at most 4 of them unauthenticated and 2
    /// per address, 4 evictions a second per address; the rest of 512 for the car's roles, 64 of the Unix
    /// socket's 448 kept for the configured users; 64 connects waiting for their
    /// first flight (16 per address) for at most 2 s.
    public init(
        maxTotal: Int = 512, maxUnix: Int = 448, maxTCP: Int = 8,
        maxTCPUnauthenticated: Int = 4, maxTCPUnauthenticatedPerSource: Int = 2, unixReserved: Int = 64,
        tcpEvictionsPerSourcePerSecond: Int = 4, maxTCPPerDevice: Int = 2,
        maxTCPFirstFlight: Int = 64, maxTCPFirstFlightPerSource: Int = 16, tcpFirstFlightTimeoutMilliseconds: UInt64 = 2_000
    ) {
        self.maxTCPFirstFlight = maxTCPFirstFlight
        self.maxTCPFirstFlightPerSource = maxTCPFirstFlightPerSource
        self.tcpFirstFlightTimeoutMilliseconds = tcpFirstFlightTimeoutMilliseconds
        self.maxTCPPerDevice = maxTCPPerDevice
        self.tcpEvictionsPerSourcePerSecond = tcpEvictionsPerSourcePerSecond
        self.maxTotal = maxTotal
        self.maxUnix = maxUnix
        self.maxTCP = maxTCP
        self.maxTCPUnauthenticated = maxTCPUnauthenticated
        self.maxTCPUnauthenticatedPerSource = maxTCPUnauthenticatedPerSource
        self.unixReserved = unixReserved
    }
}

extension ConnectionCaps {
    /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6).
    /// Past about 16,000 the unit's LimitNOFILE=16384 must grow with them (a
    /// benchmark holds 10,000 idle connections, ~8 KiB each); out of
    /// descriptors, accepting pauses (10.1).
    public static let maxTotalRange = 2...65_536
    public static let maxUnixRange = 1...65_536
    public static let maxTCPRange = 1...1_024
    public static let maxTCPUnauthenticatedRange = 1...256
    public static let maxTCPUnauthenticatedPerSourceRange = 1...256
    public static let tcpEvictionsPerSourcePerSecondRange = 1...1_000
    public static let unixReservedRange = 1...65_536
    public static let maxTCPPerDeviceRange = 1...8
    public static let maxTCPFirstFlightRange = 8...4096
    /// Per source, at most all of `maxTCPFirstFlight`.
    public static func maxTCPFirstFlightPerSourceRange(maxTCPFirstFlight: Int) -> ClosedRange<Int> { 1...max(1, maxTCPFirstFlight) }
    public static let tcpFirstFlightTimeoutRange: ClosedRange<UInt64> = 100...30_000
}
