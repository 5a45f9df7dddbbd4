import HeadUnitWire
import NIOCore

/// External Accessory sessions as a value (PROTOCOL.md section 18): which
/// accessory peer serves which of the vehicle's protocols, and every session
/// between an automaker app and an accessory, with its flow-control credit.
///
/// The hub never buffers bytes: a side may send only what the daemon passed
/// on of the other side's grants. Credit adds up per receiving peer: all the
/// sessions towards one peer together may have at most `peerBudget` bytes
/// granted-and-unspent plus sent-and-not-yet-granted-back; what a receiver
/// grants beyond that is held here and passed on as the peer's budget frees
/// up (18.5). So however many sessions a peer has, the daemon queues at most
/// `peerBudget` bytes of DATA for it while it reads and grants honestly.
public struct AccessoryHub: Sendable {
    /// The window each direction of a session starts with (the receiver's view).
    public static let initialCredit: UInt32 = 64 << 10
    /// The most a receiver may have granted and not yet received, per session
    /// direction, whatever the daemon's configuration: every client may rely
    /// on a window this wide (18.5).
    public static let maxCredit: UInt64 = 256 << 10
    /// Per receiving peer, what its sessions' senders may hold in credit plus
    /// send before the receiver grants it back: by default half the write
    /// buffer's high-water mark (an eighth of `max_outbound_bytes`, 512 KiB),
    /// so session bytes alone never make an honest reader look behind (10.5).
    public static let defaultPeerBudget: UInt64 = 512 << 10
    let peerBudget: UInt64
    /// The outstanding credit a receiver may grant per session direction: its
    /// peer's whole budget (one session alone may use all that its receiver
    /// may be sent: the window is what bounds a session's speed), never less
    /// than `maxCredit` (issue 25).
    public var creditCap: UInt64 { max(Self.maxCredit, peerBudget) }
    /// Caps on sessions (opening or open) (PROTOCOL.md 18.3).
    public static let maxSessionsPerApp = 16
    public static let maxSessionsPerPhone = 256
    public static let maxSessionsPerAccessory = 256
    /// How long an accessory may leave a requested session unanswered.
    public static let openTimeoutMilliseconds: UInt64 = 10_000
    /// Channels of a peer's recent sessions: DATA and grants still in flight
    /// on them when they closed are dropped without a word (18.6).
    static let recentlyClosedKept = 256

    public enum Output: Equatable, Sendable {
        case send(PeerID, HUEnvelope.OneOf_Body)
        case data(PeerID, channel: UInt32, ByteBuffer)
        /// A DATA frame refused: counts against the sender's error budget.
        case refuseData(PeerID, HUErrorCode, String)
        /// These protocols (keys) became available or unavailable.
        case availabilityChanged(Set<String>)
        /// The session on `channel` must be answered within `openTimeoutMilliseconds`.
        case startOpenTimer(channel: UInt32, serial: UInt64)
        case cancelOpenTimer(channel: UInt32, serial: UInt64)
    }

    /// One direction of a session: what its sender may still send, what its
    /// receiver granted that is not passed on yet, and what was sent and not
    /// yet granted back.
    struct Direction: Sendable, Equatable {
        var credit: UInt64 = 0
        var held: UInt64 = UInt64(AccessoryHub.initialCredit)
        var inFlight: UInt64 = 0
        /// The sender sent its last byte (CloseSession{half}).
        var finished = false

        /// What this direction takes of its receiver's budget.
        var committed: UInt64 { credit + inFlight }

        /// A DATA frame within credit: its bytes are in flight until granted back.
        mutating func spend(_ length: UInt64) {
            credit -= length
            inFlight += length
        }
    }

    struct Session: Sendable, Equatable {
        let channel: UInt32
        let serial: UInt64
        let appID: String
        let protocolName: String
        let phone: PeerID
        let accessory: PeerID
        var open = false
        var toAccessory = Direction()
        var toApp = Direction()

        func other(than peer: PeerID) -> PeerID { peer == phone ? accessory : phone }
        func has(_ peer: PeerID) -> Bool { peer == phone || peer == accessory }
    }

    /// The vehicle's protocols, in its spelling, by key.
    let declared: [String: String]
    /// Which accessory peer serves each protocol (by key).
    private(set) var servers: [String: PeerID] = [:]
    private(set) var sessions: [UInt32: Session] = [:]
    private var nextChannel: UInt32 = 1
    private var nextSerial: UInt64 = 1
    /// Per receiving peer: the budget its sessions' directions take now.
    private var committed: [PeerID: UInt64] = [:]
    /// Per receiving peer: channels with credit held back, oldest first.
    private var waiting: [PeerID: [UInt32]] = [:]
    /// Per peer: channels of its sessions that closed recently, oldest first.
    private var recentlyClosed: [PeerID: [UInt32]] = [:]
    /// A peer whose sessions are being ended because it left: it is sent no
    /// credit meanwhile (it has no connection to send it on).
    var departing: PeerID?

    public init(vehicleProtocols: [String], peerBudget: UInt64 = AccessoryHub.defaultPeerBudget) {
        self.peerBudget = max(UInt64(AccessoryHub.initialCredit), peerBudget)
        var declared: [String: String] = [:]
        for name in AccessoryProtocols.declared(vehicleProtocols) {
            declared[AccessoryProtocols.key(name)] = name
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

    /// Replaces what `peer` serves. Each string goes through every check in
    /// turn, in list order; the whole request is refused on the first failure:
    /// INVALID_ARGUMENT (not reverse DNS), UNKNOWN_PROTOCOL (not declared),
    /// PROTOCOL_ALREADY_SERVED (another peer has it). Duplicates are served once.
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
    /// automaker) and that `name` is one of its matched protocols. Then:
    /// PROTOCOL_UNAVAILABLE, TOO_MANY_SESSIONS (per app, phone, accessory).
    mutating func open(appID: String, protocol name: String, phone: PeerID, outputs: inout [Output]) -> Result<HUAccessorySession, RuleViolation> {
        let key = AccessoryProtocols.key(name)
        guard let spelling = declared[key], let accessory = servers[key] else {
            return .failure(RuleViolation(.protocolUnavailable, "no accessory serves '\(name)' now"))
        }
        let replaced = sessions.values.first { $0.appID == appID && AccessoryProtocols.key($0.protocolName) == key }?.channel
        let others = sessions.values.filter { $0.channel != replaced }
        let caps: [(String, Int, (Session) -> Bool)] = [
            ("sessions.per_app", Self.maxSessionsPerApp, { $0.appID == appID }),
            ("sessions.per_phone", Self.maxSessionsPerPhone, { $0.phone == phone }),
            ("sessions.per_accessory", Self.maxSessionsPerAccessory, { $0.accessory == accessory }),
        ]
        for (limit, cap, counts) in caps where others.filter(counts).count >= cap {
            return .failure(RuleViolation(
                .tooManySessions, "at most \(cap) sessions (\(limit)); close one first", limit: limit, limitValue: UInt32(cap)))
        }
        // One session per app and protocol, as on iOS: the new one replaces the old.
        if let replaced, let old = sessions[replaced] {
            end(old, reason: .replaced, detail: "", outputs: &outputs)
        }
        let channel = takeChannel()
        let serial = nextSerial
        nextSerial += 1
        var session = Session(channel: channel, serial: serial, appID: appID, protocolName: spelling, phone: phone, accessory: accessory)
        // The accessory's sending credit comes out of the phone's budget now;
        // the app's out of the accessory's when the accessory accepts.
        let initial = take(from: phone, upTo: &session.toApp)
        sessions[channel] = session
        if session.toApp.held > 0 { waiting[phone, default: []].append(channel) }
        outputs.append(.send(accessory, .sessionRequested(HUSessionRequested.with {
            $0.channel = channel
            $0.appID = appID
            $0.protocol = spelling
            $0.initialCredit = UInt32(initial)
            $0.window = Self.initialCredit
        })))
        outputs.append(.startOpenTimer(channel: channel, serial: serial))
        return .success(HUAccessorySession.with { $0.channel = channel; $0.protocol = spelling })
    }

    /// Channels count up from 1 (0 is the channel of every other frame kind),
    /// wrapping after 2^32-1, skipping ones in use (sessions are few: this ends quickly).
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
        outputs.append(.cancelOpenTimer(channel: session.channel, serial: session.serial))
        guard answer.accept else {
            end(session, reason: .refused, detail: answer.reason, tellAccessory: false, outputs: &outputs)
            return nil
        }
        session.open = true
        let initial = take(from: session.accessory, upTo: &session.toAccessory)
        sessions[answer.channel] = session
        if session.toAccessory.held > 0 { waiting[session.accessory, default: []].append(session.channel) }
        outputs.append(.send(session.phone, .sessionOpened(HUSessionOpened.with {
            $0.appID = session.appID
            $0.channel = session.channel
            $0.protocol = session.protocolName
            $0.initialCredit = UInt32(initial)
            $0.window = Self.initialCredit
        })))
        return nil
    }

    /// An accessory left a session opening too long.
    mutating func openTimedOut(channel: UInt32, serial: UInt64, outputs: inout [Output]) {
        guard let session = sessions[channel], session.serial == serial, !session.open else { return }
        let seconds = Double(Self.openTimeoutMilliseconds) / 1000
        end(session, reason: .openTimeout, detail: "the accessory did not answer within \(seconds) s", outputs: &outputs)
    }

    /// Either side ends a session (the other side is told), or with `half`
    /// only its own direction (the other side gets SessionFinished; once both
    /// directions are finished the session closes, FINISHED to both).
    mutating func close(_ close: HUCloseSession, from peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        guard let session = sessions[close.channel], session.has(peer) else {
            // Both sides closing at once: the second close finds it gone.
            if isRecentlyClosed(close.channel, by: peer) { return nil }
            return RuleViolation(.unknownSession, "no session of this connection on channel \(close.channel)")
        }
        guard close.half else {
            let reason: HUSessionCloseReason = peer == session.phone ? .closedByApp : .closedByAccessory
            end(session, reason: reason, detail: close.detail, tellPhone: peer != session.phone, tellAccessory: peer != session.accessory, outputs: &outputs)
            return nil
        }
        let fromApp = peer == session.phone
        guard session.open, !(fromApp ? session.toAccessory : session.toApp).finished else {
            return RuleViolation(.unknownSession, "no open session of this connection on channel \(close.channel) with its direction still open")
        }
        var updated = session
        let receiver = session.other(than: peer)
        // Credit left unspent is no longer the receiver's worry.
        if fromApp { finish(&updated.toAccessory, receiver: receiver) } else { finish(&updated.toApp, receiver: receiver) }
        sessions[close.channel] = updated
        outputs.append(.send(receiver, .sessionFinished(HUSessionFinished.with {
            $0.appID = session.appID
            $0.channel = session.channel
            $0.protocol = session.protocolName
            $0.detail = close.detail
        })))
        if updated.toAccessory.finished, updated.toApp.finished {
            end(updated, reason: .finished, detail: close.detail, outputs: &outputs)
        } else {
            release(to: receiver, outputs: &outputs)
        }
        return nil
    }

    private mutating func finish(_ direction: inout Direction, receiver: PeerID) {
        committed[receiver, default: 0] -= direction.credit
        direction.credit = 0
        direction.held = 0
        direction.finished = true
    }

    /// A receiver grants its sender `bytes` more: passed on at once while the
    /// receiver's budget allows, else held and passed on as it frees up.
    mutating func credit(_ credit: HUSessionCredit, from peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        guard var session = sessions[credit.channel], session.open, session.has(peer) else {
            if isRecentlyClosed(credit.channel, by: peer) { return nil }
            return RuleViolation(.unknownSession, "no open session of this connection on channel \(credit.channel)")
        }
        guard credit.bytes > 0 else { return RuleViolation(.invalidArgument, "a credit of 0 bytes") }
        let fromApp = peer == session.phone
        // The direction towards the granting peer.
        var direction = fromApp ? session.toApp : session.toAccessory
        let outstanding = direction.credit + direction.held + UInt64(credit.bytes)
        guard outstanding <= creditCap else {
            return RuleViolation(
                .invalidArgument, "credit outstanding would be \(outstanding) bytes (at most \(creditCap))",
                limit: "session.credit_bytes", limitValue: UInt32(clamping: creditCap))
        }
        // The bytes it grants back leave the receiver's budget, whether or not
        // its sender finished: a finished direction's last bytes in flight
        // held it until the whole session ended, and sessions finished one way
        // towards each peer held both budgets, each waiting on the other.
        let returned = min(direction.inFlight, UInt64(credit.bytes))
        direction.inFlight -= returned
        committed[peer, default: 0] -= returned
        // Its sender finished: nothing more will come, the rest has no use.
        if !direction.finished {
            if direction.held == 0 { waiting[peer, default: []].append(credit.channel) }
            direction.held += UInt64(credit.bytes)
        }
        if fromApp { session.toApp = direction } else { session.toAccessory = direction }
        sessions[credit.channel] = session
        release(to: peer, outputs: &outputs)
        return nil
    }

    /// Session bytes, passed on unchanged and uncopied within the sender's credit.
    mutating func data(channel: UInt32, _ payload: ByteBuffer, from peer: PeerID, outputs: inout [Output]) {
        if let receiver = route(channel: channel, length: UInt64(payload.readableBytes), from: peer, outputs: &outputs) {
            outputs.append(.data(receiver, channel: channel, payload))
        }
    }

    /// The checks of a DATA frame of `length` bytes, in 18.4/18.5's order:
    /// the receiving peer when it is to be passed on (credit spent), else nil
    /// with what to do instead in `outputs` (nothing for a frame dropped).
    /// Per frame: one lookup, the session updated in place (no copy of it).
    mutating func route(channel: UInt32, length: UInt64, from peer: PeerID, outputs: inout [Output]) -> PeerID? {
        guard let index = sessions.index(forKey: channel), sessions.values[index].open, sessions.values[index].has(peer) else {
            // Sent before the sender learnt that the session closed: not an error.
            if isRecentlyClosed(channel, by: peer) { return nil }
            outputs.append(.refuseData(peer, .notConnected, "no open External Accessory session of this connection on channel \(channel)"))
            return nil
        }
        let fromApp = peer == sessions.values[index].phone
        let direction = fromApp ? sessions.values[index].toAccessory : sessions.values[index].toApp
        guard !direction.finished else {
            outputs.append(.refuseData(peer, .notConnected, "this connection finished sending on channel \(channel) (CloseSession{half})"))
            return nil
        }
        guard length > 0 else { return nil }
        guard length <= direction.credit else {
            let detail = "\(length) bytes sent with \(direction.credit) bytes of credit"
            // The events first, then the sender's Result (section 4).
            let session = sessions.values[index]
            end(session, reason: .flowControl, detail: detail, outputs: &outputs)
            outputs.append(.refuseData(peer, .flowControl, detail))
            return nil
        }
        if fromApp {
            sessions.values[index].toAccessory.spend(length)
            return sessions.values[index].accessory
        } else {
            sessions.values[index].toApp.spend(length)
            return sessions.values[index].phone
        }
    }

    // MARK: - Budget

    /// Moves what `direction`'s receiver has room for from held to credit; returns how much.
    private mutating func take(from receiver: PeerID, upTo direction: inout Direction) -> UInt64 {
        let used = committed[receiver, default: 0]
        let room = used < peerBudget ? peerBudget - used : 0
        let give = min(room, direction.held)
        direction.held -= give
        direction.credit += give
        committed[receiver] = used + give
        return give
    }

    /// Passes held credit on to the senders towards `receiver`, oldest first,
    /// while its budget has room: each as one SessionCredit from the daemon.
    /// A session given part of what it waits for goes behind the others
    /// still waiting: freed budget goes round them in turn, not all to the
    /// first while it streams (with windows as wide as the budget, the
    /// sessions behind it got nothing until it finished).
    private mutating func release(to receiver: PeerID, outputs: inout [Output]) {
        guard var queue = waiting[receiver], !queue.isEmpty else { return }
        var index = 0
        var partly: UInt32?
        while index < queue.count, committed[receiver, default: 0] < peerBudget {
            let channel = queue[index]
            guard var session = sessions[channel] else { index += 1; continue }
            let toApp = receiver == session.phone
            var direction = toApp ? session.toApp : session.toAccessory
            let give = take(from: receiver, upTo: &direction)
            if toApp { session.toApp = direction } else { session.toAccessory = direction }
            sessions[channel] = session
            if give > 0, session.other(than: receiver) != departing {
                outputs.append(.send(session.other(than: receiver), .sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(give) })))
            }
            if direction.held > 0 {
                if give > 0 { partly = channel }
                break
            }
            index += 1
        }
        queue.removeFirst(index)
        if let partly, queue.count > 1, queue.first == partly {
            queue.removeFirst()
            queue.append(partly)
        }
        waiting[receiver] = queue.isEmpty ? nil : queue
    }

    // MARK: - Endings

    /// The accessory peer is gone: its protocols become unavailable, its sessions end.
    mutating func accessoryLeft(_ peer: PeerID, outputs: inout [Output]) {
        let keys = Set(servers.filter { $0.value == peer }.keys)
        for key in keys { servers[key] = nil }
        closeSessions(outputs: &outputs, reason: .accessoryGone, tellAccessory: false) { $0.accessory == peer }
        if !keys.isEmpty { outputs.append(.availabilityChanged(keys)) }
    }

    /// A connection is gone: nothing of it is kept.
    mutating func forget(_ peer: PeerID) {
        recentlyClosed[peer] = nil
        waiting[peer] = nil
        if committed[peer] == 0 { committed[peer] = nil }
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
            end(session, reason: reason, detail: "", tellPhone: tellPhone, tellAccessory: tellAccessory, outputs: &outputs)
        }
    }

    /// Removes a session: its budget goes back to its peers (passed on to
    /// their other sessions), its channel is remembered as recently closed.
    private mutating func end(
        _ session: Session, reason: HUSessionCloseReason, detail: String, tellPhone: Bool = true, tellAccessory: Bool = true,
        outputs: inout [Output]
    ) {
        sessions[session.channel] = nil
        if !session.open { outputs.append(.cancelOpenTimer(channel: session.channel, serial: session.serial)) }
        committed[session.phone, default: 0] -= session.toApp.committed
        committed[session.accessory, default: 0] -= session.toAccessory.committed
        for peer in [session.phone, session.accessory] {
            var recent = recentlyClosed[peer, default: []]
            recent.append(session.channel)
            if recent.count > Self.recentlyClosedKept { recent.removeFirst() }
            recentlyClosed[peer] = recent
        }
        let closed = Self.closed(session, reason, detail)
        if tellPhone { outputs.append(.send(session.phone, .sessionClosed(closed))) }
        if tellAccessory { outputs.append(.send(session.accessory, .sessionClosed(closed))) }
        release(to: session.phone, outputs: &outputs)
        release(to: session.accessory, outputs: &outputs)
    }

    private func isRecentlyClosed(_ channel: UInt32, by peer: PeerID) -> Bool {
        recentlyClosed[peer]?.contains(channel) == true
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
