import HeadUnitWire

/// How a peer's connection ended, as far as the Car is concerned.
public enum PeerDeparture: Sendable, Equatable {
    /// EOF or a reset with no Goodbye either way (a Wi-Fi drop, a crashed phone).
    case lost
    /// The peer sent Goodbye: it meant to leave.
    case saidGoodbye
    /// The daemon sent Goodbye(code) and closed it.
    case cutOff(HUErrorCode)

    /// A phone gone this way may resume (PROTOCOL.md section 21): the network
    /// failed it, not a decision of either side or a broken protocol.
    var allowsResumption: Bool {
        switch self {
        // CONNECTION_EVICTED reaches a joined phone only when a newer
        // connection of the same paired device took its place (section 10.1).
        case .lost, .cutOff(.heartbeatTimeout), .cutOff(.slowConsumer), .cutOff(.connectionEvicted): return true
        case .saidGoodbye, .cutOff: return false
        }
    }
}

/// The phone that carries the apps: connected, or lost and waiting to resume
/// within the grace period (PROTOCOL.md section 21). While it is away, what
/// the car would send it is kept (bounded) and replayed when it resumes.
struct PhoneLink: Sendable {
    // Plain stored fields rather than an enum with payloads: Swift 6.3.1's
    // optimizer crashed (ownership verifier, CopyPropagation) on switches over
    // such an enum inlined into the Car's mutating methods.

    /// What a phone away may have queued for it before resuming is given up.
    static let maxBacklog = 256

    /// The connected phone carrying the apps (nil while reconnecting or none).
    private(set) var peer: PeerID?
    /// The token of the phone carrying the apps, connected or reconnecting ("" when none).
    private(set) var token = ""
    /// The paired device that carries the apps (PROTOCOL.md section 20); nil
    /// for a phone that did not authenticate. Only the same may resume.
    private(set) var deviceID: String?
    /// While reconnecting: the lost connection, and the serial naming the grace timer of this loss.
    private(set) var formerPeer: PeerID?
    private(set) var graceSerial: UInt64?
    /// Bodies the car had for the phone while it was away, in order.
    private(set) var backlog: [HUEnvelope.OneOf_Body] = []
    private(set) var backlogOverflowed = false
    private var nextSerial: UInt64 = 1

    /// A phone carries apps, connected or not: the apps and scenes exist.
    var carriesApps: Bool { peer != nil || graceSerial != nil }

    var isReconnecting: Bool { graceSerial != nil }

    /// Whether `peer` was the connection this reconnecting phone lost (what
    /// was addressed to it goes to the backlog).
    func wasLost(_ peer: PeerID) -> Bool { graceSerial != nil && formerPeer == peer }

    var wire: HUPhoneLink {
        if peer != nil { return .connected }
        return graceSerial != nil ? .reconnecting : .none
    }

    /// `peer`'s apps were accepted: it carries them, under its token.
    mutating func carry(peer: PeerID, token: String, deviceID: String? = nil) {
        self = PhoneLink(nextSerial: nextSerial)
        self.peer = peer
        self.token = token
        self.deviceID = deviceID
    }

    private init(nextSerial: UInt64) { self.nextSerial = nextSerial }
    /// The connected phone as a daemon restart handed it over (CarSnapshot).
    /// A phone that was reconnecting at that moment is not carried over.
    init(restoringPeer peer: PeerID, token: String, deviceID: String?) {
        self.peer = peer
        self.token = token
        self.deviceID = deviceID
    }

    init() {}

    /// The connected phone's connection is gone; returns the grace timer's
    /// serial when the apps are kept for it, nil when they end now.
    mutating func lost(_ departure: PeerDeparture) -> UInt64? {
        guard let current = peer, departure.allowsResumption, !token.isEmpty else {
            end()
            return nil
        }
        let serial = nextSerial
        nextSerial += 1
        peer = nil
        formerPeer = current
        graceSerial = serial
        return serial
    }

    /// Keeps a message for the phone that is away. Past `maxBacklog` the
    /// session can no longer be resumed without loss: `backlogOverflowed`.
    /// A scene's `SessionConfiguration` is state: it replaces the one kept
    /// for the same scene (the latest wins, at the end), so an HMI changing
    /// the vehicle state while the phone is away never fills the backlog.
    mutating func keep(_ body: HUEnvelope.OneOf_Body) {
        if case .sessionConfiguration(let configuration) = body {
            backlog.removeAll {
                if case .sessionConfiguration(let kept) = $0 { return kept.appID == configuration.appID && kept.sceneID == configuration.sceneID }
                return false
            }
        }
        guard backlog.count < Self.maxBacklog else {
            backlogOverflowed = true
            return
        }
        backlog.append(body)
    }

    enum ResumeRefusal: Error, Equatable {
        case carryingApps, nothingToResume, wrongToken, otherDevice
    }

    /// A new connection presents `token`. On success it carries the apps under
    /// `newToken`, and the backlog is handed over (to be sent after the answer).
    mutating func resume(
        peer newPeer: PeerID, token presented: String, newToken: String, deviceID newDevice: String? = nil
    ) -> Result<[HUEnvelope.OneOf_Body], ResumeRefusal> {
        if let current = peer { return .failure(current == newPeer ? .carryingApps : .nothingToResume) }
        guard graceSerial != nil else { return .failure(.nothingToResume) }
        guard Self.sameToken(presented, token) else { return .failure(.wrongToken) }
        // A leaked token does not let another paired device take the session
        // (its apps were judged by this device's allow-list).
        guard newDevice == deviceID else { return .failure(.otherDevice) }
        let replay = backlog
        carry(peer: newPeer, token: newToken, deviceID: deviceID)
        return .success(replay)
    }

    /// The grace timer `serial` fired: true when it still applies (the phone did not resume).
    mutating func graceExpired(serial: UInt64) -> Bool {
        guard graceSerial == serial else { return false }
        end()
        return true
    }

    mutating func end() {
        self = PhoneLink(nextSerial: nextSerial)
    }

    /// Compares in time independent of where the first difference is, so a
    /// guesser learns nothing from how fast it was refused.
    static func sameToken(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count, !x.isEmpty else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
