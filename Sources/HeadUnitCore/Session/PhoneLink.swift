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
        case .lost, .cutOff(.heartbeatTimeout), .cutOff(.slowConsumer): return true
        case .saidGoodbye, .cutOff: return false
        }
    }
}

/// The phone that carries the apps: connected, or lost and waiting to resume
/// within the grace period (PROTOCOL.md section 21). While it is away, what
/// the car would send it is kept (bounded) and replayed when it resumes.
struct PhoneLink: Sendable {
    enum State: Sendable, Equatable {
        case none
        case connected(peer: PeerID, token: String)
        /// `serial` names the grace timer of this loss; `formerPeer` is the lost connection.
        case reconnecting(formerPeer: PeerID, token: String, serial: UInt64)
    }

    /// What a phone away may have queued for it before resuming is given up.
    static let maxBacklog = 256

    private(set) var state: State = .none
    /// Bodies the car had for the phone while it was away, in order.
    private(set) var backlog: [HUEnvelope.OneOf_Body] = []
    private(set) var backlogOverflowed = false
    private var nextSerial: UInt64 = 1

    /// The connected phone carrying the apps.
    var peer: PeerID? {
        if case .connected(let peer, _) = state { return peer }
        return nil
    }

    /// A phone carries apps, connected or not: the apps and scenes exist.
    var carriesApps: Bool { state != .none }

    var isReconnecting: Bool { graceSerial != nil }

    /// The grace timer's serial while reconnecting.
    var graceSerial: UInt64? {
        if case .reconnecting(_, _, let serial) = state { return serial }
        return nil
    }

    /// Whether `peer` was the connection this reconnecting phone lost (what
    /// was addressed to it goes to the backlog).
    func wasLost(_ peer: PeerID) -> Bool {
        if case .reconnecting(let former, _, _) = state { return former == peer }
        return false
    }

    var wire: HUPhoneLink {
        switch state {
        case .none: return .none
        case .connected: return .connected
        case .reconnecting: return .reconnecting
        }
    }

    /// The token the connected phone holds (empty when none).
    var token: String {
        switch state {
        case .none: return ""
        case .connected(_, let token), .reconnecting(_, let token, _): return token
        }
    }

    /// `peer`'s apps were accepted: it carries them, under its token.
    mutating func carry(peer: PeerID, token: String) {
        state = .connected(peer: peer, token: token)
        backlog = []
        backlogOverflowed = false
    }

    /// The connected phone's connection is gone; returns the grace timer's
    /// serial when the apps are kept for it, nil when they end now.
    mutating func lost(_ departure: PeerDeparture) -> UInt64? {
        guard case .connected(let peer, let token) = state, departure.allowsResumption, !token.isEmpty else {
            end()
            return nil
        }
        let serial = nextSerial
        nextSerial += 1
        state = .reconnecting(formerPeer: peer, token: token, serial: serial)
        return serial
    }

    /// Keeps a message for the phone that is away. Past `maxBacklog` the
    /// session can no longer be resumed without loss: `backlogOverflowed`.
    mutating func keep(_ body: HUEnvelope.OneOf_Body) {
        guard backlog.count < Self.maxBacklog else {
            backlogOverflowed = true
            return
        }
        backlog.append(body)
    }

    enum ResumeRefusal: Error, Equatable {
        case carryingApps, nothingToResume, wrongToken
    }

    /// A new connection presents `token`. On success it carries the apps under
    /// `newToken`, and the backlog is handed over (to be sent after the answer).
    mutating func resume(peer: PeerID, token: String, newToken: String) -> Result<[HUEnvelope.OneOf_Body], ResumeRefusal> {
        switch state {
        case .none:
            return .failure(.nothingToResume)
        case .connected(let current, _):
            return .failure(current == peer ? .carryingApps : .nothingToResume)
        case .reconnecting(_, let expected, _):
            guard Self.sameToken(token, expected) else { return .failure(.wrongToken) }
            let replay = backlog
            carry(peer: peer, token: newToken)
            return .success(replay)
        }
    }

    /// The grace timer `serial` fired: true when it still applies (the phone did not resume).
    mutating func graceExpired(serial: UInt64) -> Bool {
        guard case .reconnecting(_, _, let current) = state, current == serial else { return false }
        end()
        return true
    }

    mutating func end() {
        state = .none
        backlog = []
        backlogOverflowed = false
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
