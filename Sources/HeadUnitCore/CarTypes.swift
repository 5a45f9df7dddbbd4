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
    /// A phone's resumption token, secret and random (the server makes it):
    /// handed to the phone when its apps are accepted (PROTOCOL.md section 21).
    public var resumptionToken: String
    /// A phone that authenticated on TCP (PROTOCOL.md section 20): its paired
    /// device, whose allow-list judges its apps' entitlements.
    public var device: AuthenticatedDevice?

    public init(role: HURole, name: String, transport: Transport, device: AuthenticatedDevice? = nil, resumptionToken: String = "") {
        self.role = role
        self.name = name
        self.transport = transport
        self.device = device
        self.resumptionToken = resumptionToken
    }
}

/// Where a DATA frame goes (`Car.routeData`).
public enum DataRoute: Sendable, Equatable {
    /// Within credit: pass the frame on to this peer, unchanged.
    case relay(to: PeerID)
    /// Not passed on: these effects instead (a refusal, a flow-control end; none for a frame dropped).
    case handled([CarEffect])
}

/// What the car wants done after an input. The server performs these in order.
public enum CarEffect: Sendable, Equatable {
    /// Send an envelope to a peer.
    case send(PeerID, HUEnvelope)
    /// Send a `HomeScreen` or `ScreenUpdate` to every HMI. It is state: the
    /// server encodes it once, and an HMI that is behind gets the latest state
    /// of that stream (`Car.catchUp`) instead of every intermediate one.
    /// `images`: the refs it shows; an HMI not sent one yet gets its
    /// `ImageData` first (`Car.hmiImage`, PROTOCOL.md section 12.6).
    case toHMIs(HMIStream, HUEnvelope, images: [String])
    /// A new HMI: send it the latest state of these streams, in this order
    /// (`Car.catchUp`), as to an HMI that caught up.
    case hmiJoined(PeerID, [HMIStream])
    /// Send Goodbye(code, reason) to a peer and close its connection.
    case close(PeerID, HUErrorCode, String)
    /// Call `Car.timerFired(timer)` after the given milliseconds (replacing a timer of the same identity).
    case startTimer(CarTimer, milliseconds: UInt64)
    case cancelTimer(CarTimer)
    /// Send External Accessory session bytes in a DATA frame on `channel`.
    case sendData(PeerID, channel: UInt32, ByteBuffer)
    /// Send a phone's VIDEO frame payload (header and access unit, as it
    /// came) on `channel` to a viewer; the server drops it instead when the
    /// viewer is behind, and tells `Car.videoDropped` (section 25.5).
    case sendVideo(PeerID, channel: UInt32, ByteBuffer)
    /// A DATA frame from the peer was refused: a non-fatal protocol error that
    /// counts against its error budget (PROTOCOL.md section 10).
    case refuseData(PeerID, HUErrorCode, String)
    /// A one-way message (SessionCredit) was refused: answered with this
    /// Result, counted against the peer's error budget like `refuseData`.
    case refuseRequest(PeerID, HUResult, requestID: UInt32)
    /// A command for the audio mixer, which runs off the serving loop
    /// behind a bounded handoff (PROTOCOL.md section 24).
    case audio(AudioStreams.EngineCommand)
    /// The car's microphone samples in a MEDIA frame on `channel`.
    case sendMedia(PeerID, channel: UInt32, ByteBuffer)
}

/// The state streams an HMI follows: the home screen and each screen.
public enum HMIStream: Hashable, Sendable {
    case home
    case screen(HUScreen)
}

/// Timers the car asks for.
public enum CarTimer: Hashable, Sendable {
    /// An app did not complete an event (item selection, search) in time.
    case completion(eventID: UInt64)
    /// A navigation alert's duration ran out (the car dismisses it).
    case navigationAlert(serial: UInt64)
    /// A navigation banner's time ran out (PROTOCOL.md 19.9).
    case navigationBanner(bannerID: UInt64)
    /// A navigation prompt's duration ran out (the main audio comes back up).
    case navigationPrompt(serial: UInt64)
    /// A phone that joined must have its apps accepted within the announce timeout.
    case announce(peer: PeerID)
    /// A lost phone's grace period ran out: its apps end (PROTOCOL.md section 21).
    case resumeGrace(serial: UInt64)
    /// An accessory did not answer a requested session in time (PROTOCOL.md 18.3).
    case accessoryOpen(channel: UInt32, serial: UInt64)
    /// An app did not answer a remote command in time (PROTOCOL.md section 23).
    case remoteCommand(commandID: UInt64)
    /// A keyframe request held back by `keyframe_request_interval_ms` is due (PROTOCOL.md 25.5).
    case videoKeyframe(channel: UInt32)
    /// An app did not fulfil or fail a call action in time (PROTOCOL.md section 26).
    case callAction(actionID: UInt64)
    /// An incoming call rang `call_ring_timeout_ms` unanswered: the car ends it (PROTOCOL.md 26.6).
    case callRinging(uuid: String)
    /// The phone's assistant sent nothing for `assistant_timeout_ms` (PROTOCOL.md 27.5).
    case assistant
}

/// Everything the car is configured with.
public struct CarConfiguration: Sendable {
    public var vehicle: HUVehicleProfile
    /// What the sessions towards one peer may have in flight (AccessoryHub, PROTOCOL.md 18.5).
    public var accessoryPeerBudget: UInt64 = AccessoryHub.defaultPeerBudget
    public var entitlements: EntitlementPolicy
    /// How long the car waits for an app to complete an event.
    public var completionTimeoutMilliseconds: UInt64
    /// A phone whose apps are not accepted this long after joining is closed (ANNOUNCE_TIMEOUT); 0: never.
    public var announceTimeoutMilliseconds: UInt64
    /// Apps one phone may have announced in all (LIMIT_EXCEEDED `announce.apps`).
    public var maxApps: Int
    /// The range the daemon accepts at start (PROTOCOL.md section 20.6).
    public static let maxAppsRange = 1...256
    /// How long a lost phone's apps are kept for it to resume.
    public var resumeGraceMilliseconds: UInt64
    /// What requests may add up to (PROTOCOL.md section 10.4): the frame size
    /// every state must fit, and the templates one phone may hold.
    public var composed = ComposedLimits()
    /// Remote commands waiting per app, and how long the car waits for an answer (section 23).
    public var remoteCommandLimits = RemoteCommands.Limits()
    /// Base-view video: viewers per screen, keyframe request pacing (section 25.6).
    public var video = VideoRoutes.Limits()
    /// Audio streams: jitter buffer, window, cap (PROTOCOL.md section 24).
    public var audio = AudioStreams.Limits()
    /// Calls in the car, actions waiting per app, and how long an action may wait (section 26).
    public var calls = CallSession.Limits()
    /// How long the phone's assistant may stay silent (section 27).
    public var assistant = AssistantSession.Limits()

    public init(
        vehicle: HUVehicleProfile, entitlements: EntitlementPolicy, completionTimeoutMilliseconds: UInt64 = 10_000,
        announceTimeoutMilliseconds: UInt64 = 10_000, maxApps: Int = 64, resumeGraceMilliseconds: UInt64 = 30_000
    ) {
        self.resumeGraceMilliseconds = resumeGraceMilliseconds
        self.vehicle = vehicle
        // Strings that are not reverse DNS, and repeats, are dropped everywhere (18.1).
        self.vehicle.accessoryProtocols = AccessoryProtocols.declared(vehicle.accessoryProtocols)
        self.entitlements = entitlements
        self.completionTimeoutMilliseconds = completionTimeoutMilliseconds
        self.announceTimeoutMilliseconds = announceTimeoutMilliseconds
        self.maxApps = maxApps
    }
}
