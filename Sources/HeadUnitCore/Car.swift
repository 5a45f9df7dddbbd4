import HeadUnitWire

/// The whole car as one value: phones, apps, scenes, template stacks and the
/// HMI. Inputs come in as method calls; what must happen comes out as effects.
/// No I/O, no clocks: time arrives as `nowMilliseconds` (monotonic).
public struct Car: Sendable {
    public private(set) var configuration: CarConfiguration

    public init(configuration: CarConfiguration) {
        self.configuration = configuration
    }

    /// A peer completed the handshake (role already checked against transport).
    public mutating func peerJoined(_ peer: PeerID, info: PeerInfo) -> [CarEffect] {
        []
    }

    /// An envelope from an established peer.
    public mutating func receive(_ envelope: HUEnvelope, from peer: PeerID, nowMilliseconds: UInt64) -> [CarEffect] {
        []
    }

    /// The peer's connection is gone (closed, timed out or cut off).
    public mutating func peerLeft(_ peer: PeerID) -> [CarEffect] {
        []
    }

    public mutating func timerFired(_ timer: CarTimer, nowMilliseconds: UInt64) -> [CarEffect] {
        []
    }

    /// The daemon is stopping: every scene ends, peers are told why.
    public mutating func shutdown(reason: String) -> [CarEffect] {
        []
    }

    public func status() -> HUStatus {
        HUStatus()
    }
}
