import HeadUnitCore
import HeadUnitSecurity
import NIOCore

/// Admission as the host runs it (PROTOCOL.md section 10.1): the Core's
/// counts (`Admission`: caps, the unauthenticated TCP set, the Unix
/// reserve), the TCP connections still waiting for their first flight, and
/// the floods of refusals and evictions, logged once a second.
struct HostAdmission {
    var counts: Admission
    /// TCP connections waiting for their first flight, by the id `counts` knows them under.
    private var firstFlightChannels: [UInt64: Channel] = [:]
    private var nextFirstFlightID: UInt64 = 1
    var evictions = FloodLog()
    var refusals = FloodLog()

    init(counts: Admission) {
        self.counts = counts
    }

    /// Counts a TCP connection waiting for its ClientHello in; returns its id
    /// and the older one that must close to make room, if any.
    mutating func firstFlightArriving(_ channel: Channel) -> (id: UInt64, closing: Channel?) {
        let id = nextFirstFlightID
        nextFirstFlightID += 1
        var closing: Channel?
        if case .waitClosing(let older) = counts.firstFlightArriving(id, address: AdmissionSource.key(channel.remoteAddress)) {
            closing = firstFlightChannels.removeValue(forKey: older)
        }
        firstFlightChannels[id] = channel
        return (id, closing)
    }

    mutating func firstFlightEnded(_ id: UInt64) {
        firstFlightChannels[id] = nil
        counts.firstFlightEnded(id)
    }

    /// A stop: connections that sent nothing yet are owed nothing.
    mutating func closeFirstFlights() {
        for channel in firstFlightChannels.values { channel.close(promise: nil) }
    }
}

/// A notice a flood repeats (refused connections, evictions, failed
/// accepts): logged at most once a second, with how many it stands for.
struct FloodLog {
    private var unlogged = 0
    private var lastLogged: UInt64?

    /// Counts one at `now` (milliseconds); returns how many the line to log
    /// stands for, or nil within a second of the last line.
    mutating func note(now: UInt64) -> Int? {
        unlogged += 1
        if let lastLogged, now < lastLogged + 1_000 { return nil }
        lastLogged = now
        defer { unlogged = 0 }
        return unlogged
    }
}

extension CarHost {
    /// Counts a new connection in, or returns why it must be turned away.
    /// When it takes an unauthenticated connection's place, that one is told
    /// Goodbye{CONNECTION_EVICTED} now.
    func admit(_ peer: PeerID, _ who: AdmissionPeer) -> String? {
        switch admission.counts.admit(peer, who, now: eventLoop.nowMilliseconds) {
        case .admit:
            return nil
        case .admitEvicting(let victim, let reason):
            noteEviction(reason)
            connections[victim]?.closeWithGoodbye(.connectionEvicted, reason)
            return nil
        case .refuse(let reason):
            return reason
        }
    }

    /// A TCP connection was accepted and waits for its ClientHello: counted
    /// among those (never refused; the oldest waiting one may be closed to
    /// make room). Returns the id `firstFlightEnded` takes.
    func firstFlightArriving(_ channel: Channel) -> UInt64 {
        let (id, closing) = admission.firstFlightArriving(channel)
        if let closing {
            noteEviction("waited for its first flight the longest when a newer connection needed the room")
            closing.close(promise: nil)
        }
        return id
    }

    func firstFlightEnded(_ id: UInt64) {
        admission.firstFlightEnded(id)
    }

    /// The paired device whose admission ticket the ClientHello's server
    /// name carries, when it verifies with that device's key for this car's
    /// key and its counter is new (section 10.1); nil otherwise (a stranger).
    func ticketClaim(serverName: String?) -> String? {
        guard let serverName, let ticket = AdmissionTicket(serverName: serverName),
            let device = pairing.device(ticket.deviceID), let carKey = configuration.carIdentity?.publicKeyDER,
            ticket.verifies(publicKey: device.publicKey, carKeyDER: carKey)
        else { return nil }
        guard admission.counts.acceptTicket(device: device.id, counter: ticket.counter) else {
            // Debug only: whoever can copy a ClientHello can repeat it at will.
            logger.debug("an admission ticket was replayed", metadata: ["device": "\(device.id)"])
            return nil
        }
        return device.id
    }

    /// A connection handed over by the previous process: counted, never refused.
    func readmit(_ peer: PeerID, _ who: AdmissionPeer) {
        admission.counts.restore(peer, who)
    }

    func release(_ peer: PeerID) {
        admission.counts.release(peer)
    }

    /// A TCP phone said Hello and must now authenticate.
    func greeted(_ peer: PeerID) {
        admission.counts.greeted(peer)
    }

    /// Like refusals: a churn of strangers is logged once a second with a count.
    func noteEviction(_ reason: String) {
        guard let evicted = admission.evictions.note(now: eventLoop.nowMilliseconds) else { return }
        logger.notice("evicting unauthenticated connections", metadata: ["reason": "\(reason)", "evicted": "\(evicted)"])
    }

    /// A flood of connections is logged once a second with a count, not once each.
    func noteRefusedConnection(_ reason: String) {
        guard let refused = admission.refusals.note(now: eventLoop.nowMilliseconds) else { return }
        logger.notice("refusing connections over the cap", metadata: ["reason": "\(reason)", "refused": "\(refused)"])
    }
}
