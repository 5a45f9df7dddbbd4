import HeadUnitWire
import NIOCore

/// External Accessory sessions as a value (PROTOCOL.md section 18): which
/// accessory peer serves which of the vehicle's protocols, and every session
/// between an automaker app and an accessory, with its flow-control credit.
///
/// The hub never buffers bytes: a side may send only what the other side
/// granted, so the daemon holds at most `maxCredit` bytes per direction of a
/// session, in the receiving peer's outbound queue.
public struct AccessoryHub: Sendable {
    /// Bytes each side may send before the other grants more.
    public static let initialCredit: UInt32 = 64 << 10
    /// The most a side may have granted and not yet received, per session direction.
    public static let maxCredit: UInt64 = 256 << 10

    public enum Output: Equatable, Sendable {
        case send(PeerID, HUEnvelope.OneOf_Body)
        case data(PeerID, channel: UInt32, ByteBuffer)
        /// A DATA frame refused: counts against the sender's error budget.
        case refuseData(PeerID, HUErrorCode, String)
        /// These protocols (keys) became available or unavailable.
        case availabilityChanged(Set<String>)
    }

    struct Session: Sendable, Equatable {
        let channel: UInt32
        let appID: String
        let protocolName: String
        let phone: PeerID
        let accessory: PeerID
        var open = false
        /// What the app may still send to the accessory, and the reverse.
        var appCredit = UInt64(AccessoryHub.initialCredit)
        var accessoryCredit = UInt64(AccessoryHub.initialCredit)

        func other(than peer: PeerID) -> PeerID { peer == phone ? accessory : phone }
    }

    /// The vehicle's protocols, in its spelling, by key.
    let declared: [String: String]
    /// Which accessory peer serves each protocol (by key).
    private(set) var servers: [String: PeerID] = [:]
    private(set) var sessions: [UInt32: Session] = [:]
    private var nextChannel: UInt32 = 1

    public init(vehicleProtocols: [String]) {
        var declared: [String: String] = [:]
        for name in vehicleProtocols where AccessoryProtocols.isValid(name) {
            declared[AccessoryProtocols.key(name)] = declared[AccessoryProtocols.key(name)] ?? name
        }
        self.declared = declared
    }

    public func isAvailable(_ name: String) -> Bool { servers[AccessoryProtocols.key(name)] != nil }

    func server(of name: String) -> PeerID? { servers[AccessoryProtocols.key(name)] }

    func sessionCount(of name: String) -> Int {
        let key = AccessoryProtocols.key(name)
        return sessions.values.filter { AccessoryProtocols.key($0.protocolName) == key }.count
    }

    // MARK: - Accessory peers

    /// Replaces what `peer` serves. Refused whole on the first bad entry:
    /// INVALID_ARGUMENT (not reverse DNS), UNKNOWN_PROTOCOL (not declared),
    /// PROTOCOL_ALREADY_SERVED (another peer has it).
    mutating func serve(_ names: [String], by peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        var keys = Set<String>()
        for name in names {
            guard AccessoryProtocols.isValid(name) else {
                return RuleViolation(.invalidArgument, "'\(name)' is not a reverse-DNS protocol string")
            }
            let key = AccessoryProtocols.key(name)
            guard declared[key] != nil else {
                return RuleViolation(.unknownProtocol, "the vehicle does not declare '\(name)'")
            }
            if let owner = servers[key], owner != peer {
                return RuleViolation(.protocolAlreadyServed, "'\(declared[key]!)' is served by connection \(owner)")
            }
            keys.insert(key)
        }
        let before = Set(servers.filter { $0.value == peer }.keys)
        for key in before.subtracting(keys) {
            servers[key] = nil
            closeSessions(outputs: &outputs, reason: .protocolWithdrawn) { AccessoryProtocols.key($0.protocolName) == key }
        }
        for key in keys { servers[key] = peer }
        let changed = before.symmetricDifference(keys)
        if !changed.isEmpty { outputs.append(.availabilityChanged(changed)) }
        return nil
    }

    // MARK: - Sessions

    /// An app asks for a session; the caller has checked the app (announced,
    /// automaker) and that `name` is one of its matched protocols.
    mutating func open(appID: String, protocol name: String, phone: PeerID, outputs: inout [Output]) -> Result<HUAccessorySession, RuleViolation> {
        let key = AccessoryProtocols.key(name)
        guard let spelling = declared[key], let accessory = servers[key] else {
            return .failure(RuleViolation(.protocolUnavailable, "no accessory serves '\(name)' now"))
        }
        // One session per app and protocol, as on iOS: the new one replaces the old.
        closeSessions(outputs: &outputs, reason: .replaced, tellPhone: true) {
            $0.appID == appID && AccessoryProtocols.key($0.protocolName) == key
        }
        let channel = takeChannel()
        sessions[channel] = Session(channel: channel, appID: appID, protocolName: spelling, phone: phone, accessory: accessory)
        outputs.append(.send(accessory, .sessionRequested(HUSessionRequested.with {
            $0.channel = channel
            $0.appID = appID
            $0.protocol = spelling
            $0.initialCredit = Self.initialCredit
        })))
        return .success(HUAccessorySession.with { $0.channel = channel; $0.protocol = spelling })
    }

    /// Channels count up from 1 (0 is the channel of every other frame kind),
    /// wrapping, skipping ones in use (sessions are few: this ends quickly).
    private mutating func takeChannel() -> UInt32 {
        while true {
            let channel = nextChannel
            nextChannel = nextChannel == .max ? 1 : nextChannel + 1
            if sessions[channel] == nil { return channel }
        }
    }

    mutating func answer(_ answer: HUAnswerSession, from peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        guard var session = sessions[answer.channel], session.accessory == peer, !session.open else {
            return RuleViolation(.unknownSession, "no session awaits this accessory's answer on channel \(answer.channel)")
        }
        if answer.accept {
            session.open = true
            sessions[answer.channel] = session
            outputs.append(.send(session.phone, .sessionOpened(HUSessionOpened.with {
                $0.appID = session.appID
                $0.channel = session.channel
                $0.protocol = session.protocolName
                $0.initialCredit = Self.initialCredit
            })))
        } else {
            sessions[answer.channel] = nil
            outputs.append(.send(session.phone, .sessionClosed(Self.closed(session, .refused, answer.reason))))
        }
        return nil
    }

    /// Either side ends a session; the other side is told.
    mutating func close(channel: UInt32, detail: String, from peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        guard let session = sessions[channel], session.phone == peer || session.accessory == peer else {
            return RuleViolation(.unknownSession, "no session of this connection on channel \(channel)")
        }
        sessions[channel] = nil
        let reason: HUSessionCloseReason = peer == session.phone ? .closedByApp : .closedByAccessory
        outputs.append(.send(session.other(than: peer), .sessionClosed(Self.closed(session, reason, detail))))
        return nil
    }

    /// A side grants the other `bytes` more; the grant is passed on to the sender.
    mutating func credit(_ credit: HUSessionCredit, from peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        guard var session = sessions[credit.channel], session.open, session.phone == peer || session.accessory == peer else {
            return RuleViolation(.unknownSession, "no open session of this connection on channel \(credit.channel)")
        }
        guard credit.bytes > 0 else { return RuleViolation(.invalidArgument, "a credit of 0 bytes") }
        let fromApp = peer == session.phone
        let outstanding = (fromApp ? session.accessoryCredit : session.appCredit) + UInt64(credit.bytes)
        guard outstanding <= Self.maxCredit else {
            return RuleViolation(
                .invalidArgument, "credit outstanding would be \(outstanding) bytes (at most \(Self.maxCredit))",
                limit: "session.credit_bytes", limitValue: UInt32(Self.maxCredit))
        }
        if fromApp { session.accessoryCredit = outstanding } else { session.appCredit = outstanding }
        sessions[credit.channel] = session
        outputs.append(.send(session.other(than: peer), .sessionCredit(credit)))
        return nil
    }

    /// Session bytes, passed on unchanged and uncopied within the sender's credit.
    mutating func data(channel: UInt32, _ payload: ByteBuffer, from peer: PeerID, outputs: inout [Output]) {
        guard var session = sessions[channel], session.open, session.phone == peer || session.accessory == peer else {
            outputs.append(.refuseData(peer, .notConnected, "no open External Accessory session of this connection on channel \(channel)"))
            return
        }
        let length = UInt64(payload.readableBytes)
        guard length > 0 else { return }
        let fromApp = peer == session.phone
        let credit = fromApp ? session.appCredit : session.accessoryCredit
        guard length <= credit else {
            sessions[channel] = nil
            let detail = "\(length) bytes sent with \(credit) bytes of credit"
            outputs.append(.refuseData(peer, .flowControl, detail))
            outputs.append(.send(session.phone, .sessionClosed(Self.closed(session, .flowControl, detail))))
            outputs.append(.send(session.accessory, .sessionClosed(Self.closed(session, .flowControl, detail))))
            return
        }
        if fromApp { session.appCredit -= length } else { session.accessoryCredit -= length }
        sessions[channel] = session
        outputs.append(.data(session.other(than: peer), channel: channel, payload))
    }

    // MARK: - Endings

    /// The accessory peer is gone: its protocols become unavailable, its sessions end.
    mutating func accessoryLeft(_ peer: PeerID, outputs: inout [Output]) {
        let keys = Set(servers.filter { $0.value == peer }.keys)
        for key in keys { servers[key] = nil }
        closeSessions(outputs: &outputs, reason: .accessoryGone, tellAccessory: false) { $0.accessory == peer }
        if !keys.isEmpty { outputs.append(.availabilityChanged(keys)) }
    }

    mutating func appEnded(_ appID: String, reason: HUSessionCloseReason, tellPhone: Bool, outputs: inout [Output]) {
        closeSessions(outputs: &outputs, reason: reason, tellPhone: tellPhone) { $0.appID == appID }
    }

    mutating func shutdown(outputs: inout [Output]) {
        closeSessions(outputs: &outputs, reason: .shuttingDown, tellPhone: true) { _ in true }
    }

    private mutating func closeSessions(
        outputs: inout [Output], reason: HUSessionCloseReason, tellPhone: Bool = true, tellAccessory: Bool = true,
        where matches: (Session) -> Bool
    ) {
        for channel in sessions.keys.sorted() {
            guard let session = sessions[channel], matches(session) else { continue }
            sessions[channel] = nil
            let closed = Self.closed(session, reason, "")
            if tellPhone { outputs.append(.send(session.phone, .sessionClosed(closed))) }
            if tellAccessory { outputs.append(.send(session.accessory, .sessionClosed(closed))) }
        }
    }

    static func closed(_ session: Session, _ reason: HUSessionCloseReason, _ detail: String) -> HUSessionClosed {
        HUSessionClosed.with {
            $0.appID = session.appID
            $0.channel = session.channel
            $0.protocol = session.protocolName
            $0.reason = reason
            $0.detail = detail
        }
    }
}
