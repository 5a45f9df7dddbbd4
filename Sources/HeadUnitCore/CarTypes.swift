import HeadUnitWire
import NIOCore

/// Identifies one connection for as long as it is open. Assigned by the server.
public typealias PeerID = UInt64

public enum Transport: String, Sendable {
    case unix, tcp
}

/// A peer that completed the handshake.
public struct PeerInfo: Sendable, Equatable {
    public var role: HURole
    public var name: String
    public var transport: Transport
    /// A phone that authenticated on TCP (PROTOCOL.md section 20): its paired
    /// device, whose allow-list judges its apps' entitlements.
    public var device: AuthenticatedDevice?

    public init(role: HURole, name: String, transport: Transport, device: AuthenticatedDevice? = nil) {
        self.role = role
        self.name = name
        self.transport = transport
        self.device = device
    }
}

/// What the car wants done after an input. The server performs these in order.
public enum CarEffect: Sendable, Equatable {
    /// Send an envelope to a peer.
    case send(PeerID, HUEnvelope)
    /// Send Goodbye(code, reason) to a peer and close its connection.
    case close(PeerID, HUErrorCode, String)
    /// Call `Car.timerFired(timer)` after the given milliseconds (replacing a timer of the same identity).
    case startTimer(CarTimer, milliseconds: UInt64)
    case cancelTimer(CarTimer)
    /// Send External Accessory session bytes in a DATA frame on `channel`.
    case sendData(PeerID, channel: UInt32, ByteBuffer)
    /// A DATA frame from the peer was refused: a non-fatal protocol error that
    /// counts against its error budget (PROTOCOL.md section 10).
    case refuseData(PeerID, HUErrorCode, String)
}

/// Timers the car asks for.
public enum CarTimer: Hashable, Sendable {
    /// An app did not complete an event (item selection, search) in time.
    case completion(eventID: UInt64)
    /// A navigation alert's duration ran out (the car dismisses it).
    case navigationAlert(serial: UInt64)
    /// A navigation prompt's duration ran out (the main audio comes back up).
    case navigationPrompt(serial: UInt64)
}

/// Everything the car is configured with.
public struct CarConfiguration: Sendable {
    public var vehicle: HUVehicleProfile
    public var entitlements: EntitlementPolicy
    /// How long the car waits for an app to complete an event.
    public var completionTimeoutMilliseconds: UInt64

    public init(vehicle: HUVehicleProfile, entitlements: EntitlementPolicy, completionTimeoutMilliseconds: UInt64 = 10_000) {
        self.vehicle = vehicle
        self.entitlements = entitlements
        self.completionTimeoutMilliseconds = completionTimeoutMilliseconds
    }
}
