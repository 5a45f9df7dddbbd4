/// Who a new connection is, as far as admission can tell at accept: the
/// remote address of a TCP peer (any transport that has one; TLS in front
/// changes nothing), or the kernel's credentials of a Unix peer.
public enum AdmissionPeer: Sendable, Equatable {
    /// The remote address without its port ("192.168.1.20"); "" when unknown.
    case tcp(address: String)
    /// SO_PEERCRED; nil when it could not be read.
    case unix(PeerCredentials?)
    /// A TCP connection whose first flight carried a verified admission
    /// ticket of this paired device (`acceptTicket` said yes): a paired
    /// phone on its way to authenticating, which no stranger evicts.
    case pairedTCP(address: String, device: String)
}

/// What to do with a TCP connection before its first flight was read.
public enum FirstFlightDecision: Sendable, Equatable {
    /// Wait for its ClientHello.
    case wait
    /// Wait for its ClientHello, and close this older waiting connection
    /// (silently: it has sent nothing, there is no TLS to speak in).
    case waitClosing(UInt64)
}

/// What to do with a new connection.
public enum AdmissionDecision: Sendable, Equatable {
    /// Take it.
    case admit
    /// Take it, and make room: tell connection `evict` Goodbye{CONNECTION_EVICTED}
    /// with `reason` and close it. It is no longer counted.
    case admitEvicting(UInt64, reason: String)
    /// Goodbye{TOO_MANY_CONNECTIONS} with this reason, and close.
    case refuse(String)
}

/// Connection admission (PROTOCOL.md section 10.1) as a value: the caps per
/// transport and in all, a small separate cap for TCP connections that have
/// not authenticated (at which the oldest of them is evicted, so a stranger
/// holding connections open cannot keep the owner's phone out: it only ever
/// shortens its own connections' lives), per-address limits on those, and on
/// the Unix socket a share kept for the users the configuration names. The
/// server feeds it accepts, authentications and closes; no sockets, no clock.
public struct Admission: Sendable {
    public let caps: ConnectionCaps
    private let access: PeerAccessPolicy

    private struct Entry: Sendable {
        var transport: Transport
        /// The TCP remote address.
        var source: String
        /// It said Hello (and was answered): a phone on its way to authenticating.
        var greeted = false
        /// A Unix peer in the reserved share.
        var reserved: Bool
        /// The paired device a TCP phone authenticated as.
        var device: String? = nil
        /// The paired device whose verified ticket admitted it, until it authenticates.
        var claim: String? = nil
    }

    private var entries: [UInt64: Entry] = [:]
    private var unix = 0
    private var tcp = 0
    /// Unix connections outside the reserved share.
    private var unreservedUnix = 0
    /// Unauthenticated TCP connections, oldest first (at most the cap: small).
    private var unauthenticated: [UInt64] = []
    /// Per address, what is left of its eviction budget (a token bucket in
    /// thousandths) and when it was last refilled. At most `maxSources`.
    private var evictionBudgets: [String: (milli: UInt64, at: UInt64)] = [:]
    private static let maxSources = 64
    /// TCP connections whose first flight (the TLS ClientHello) has not been
    /// read yet, oldest first, with their address; at most `caps.maxTCPFirstFlight`.
    private var firstFlights: [(id: UInt64, address: String)] = []
    /// The largest ticket counter accepted per paired device: a ticket must
    /// be above it (one per verified device, so bounded by the paired list).
    private var ticketCounters: [String: UInt64] = [:]

    public init(caps: ConnectionCaps, access: PeerAccessPolicy = PeerAccessPolicy()) {
        self.caps = caps
        self.access = access
    }

    /// Unix slots kept for the users an access rule names: none when no rule
    /// is configured (nobody to keep them for), never more than the Unix cap.
    public var unixReserve: Int { access.isUnrestricted ? 0 : max(0, min(caps.unixReserved, caps.maxUnix)) }

    public var total: Int { unix + tcp }
    public var tcpConnections: Int { tcp }
    public var unixConnections: Int { unix }
    public var unauthenticatedTCP: Int { unauthenticated.count }
    public var waitingForFirstFlight: Int { firstFlights.count }

    /// A TCP connection was accepted; its first flight is still to come. It
    /// is never refused: the oldest waiting connection (of its own address
    /// first, when that address holds its share) makes room. An honest
    /// phone's ClientHello follows its connect at once, so evicting it
    /// before it is read takes `maxTCPFirstFlight` accepts in that instant.
    public mutating func firstFlightArriving(_ id: UInt64, address: String) -> FirstFlightDecision {
        var decision = FirstFlightDecision.wait
        let perSource = max(1, caps.maxTCPFirstFlightPerSource)
        if firstFlights.count(where: { $0.address == address }) >= perSource,
            let own = firstFlights.firstIndex(where: { $0.address == address })
        {
            decision = .waitClosing(firstFlights.remove(at: own).id)
        } else if firstFlights.count >= max(1, caps.maxTCPFirstFlight) {
            decision = .waitClosing(firstFlights.removeFirst().id)
        }
        firstFlights.append((id, address))
        return decision
    }

    /// The connection's first flight was read, it waited too long, or it closed.
    public mutating func firstFlightEnded(_ id: UInt64) {
        firstFlights.removeAll { $0.id == id }
    }

    /// A ticket of `device` whose signature verified: accepted when its
    /// counter is above every earlier one of that device (a replayed
    /// ClientHello is not), and then remembered.
    public mutating func acceptTicket(device: String, counter: UInt64) -> Bool {
        if let last = ticketCounters[device], counter <= last { return false }
        ticketCounters[device] = counter
        return true
    }

    /// The paired device forgets its tickets when it is removed (a new pairing starts again).
    public mutating func forgetTickets(of device: String) {
        ticketCounters[device] = nil
    }

    /// A connection was accepted (`id` is new and increasing: a higher id is a newer connection).
    public mutating func admit(_ id: UInt64, _ peer: AdmissionPeer, now: UInt64) -> AdmissionDecision {
        switch peer {
        case .unix(let credentials):
            if total >= caps.maxTotal { return .refuse("the daemon holds its maximum of \(caps.maxTotal) connections") }
            if unix >= caps.maxUnix { return .refuse("the Unix socket holds its maximum of \(caps.maxUnix) connections") }
            let reserved = credentials.map(access.names) ?? false
            if !reserved, unreservedUnix >= caps.maxUnix - unixReserve {
                let who = credentials.map { "uid \($0.uid) gid \($0.gid)" } ?? "a peer whose credentials could not be read"
                return .refuse(
                    "the Unix socket holds \(unreservedUnix) connections of users no access rule names; its other \(unixReserve) of \(caps.maxUnix) are kept for the configured users, and \(who) is not one")
            }
            entries[id] = Entry(transport: .unix, source: "", reserved: reserved)
            unix += 1
            if !reserved { unreservedUnix += 1 }
            return .admit
        case .pairedTCP(let address, let device):
            // One connection on its way per device: a retry takes the place of the one before it.
            if let earlier = entries.first(where: { $0.value.claim == device })?.key {
                remove(earlier)
                entries[id] = Entry(transport: .tcp, source: address, reserved: false, claim: device)
                tcp += 1
                return .admitEvicting(earlier, reason: "a newer connection of the same paired device (its ticket verified) took its place")
            }
            var decision = AdmissionDecision.admit
            if tcp >= caps.maxTCP || total >= caps.maxTotal {
                // A paired phone makes room among strangers, whatever their addresses' budgets:
                // first those that have not said Hello, then the oldest.
                guard let victim = unauthenticated.first(where: { entries[$0]?.greeted == false }) ?? unauthenticated.first else {
                    return .refuse("TCP holds its maximum of \(caps.maxTCP) connections, all of them authenticated or paired phones on their way")
                }
                remove(victim)
                decision = .admitEvicting(victim, reason: "not authenticated, and a paired phone (its ticket verified) needed the slot")
            }
            entries[id] = Entry(transport: .tcp, source: address, reserved: false, claim: device)
            tcp += 1
            return decision
        case .tcp(let address):
            var decision = AdmissionDecision.admit
            if let (victim, reason) = tcpVictim(for: address) {
                // Its own connections an address may replace at will; others' only within its budget.
                if entries[victim]?.source != address, !takeEviction(address, now: now) {
                    return .refuse(
                        "every unauthenticated TCP slot is taken, and this address already made room \(caps.tcpEvictionsPerSourcePerSecond) times in the last second")
                }
                // The newcomer takes the victim's place: no count grows.
                remove(victim)
                decision = .admitEvicting(victim, reason: reason)
            } else if tcp >= caps.maxTCP {
                return .refuse("TCP holds its maximum of \(caps.maxTCP) connections (phones), all of them authenticated")
            } else if total >= caps.maxTotal {
                return .refuse("the daemon holds its maximum of \(caps.maxTotal) connections")
            }
            entries[id] = Entry(transport: .tcp, source: address, reserved: false)
            tcp += 1
            unauthenticated.append(id)
            return decision
        }
    }

    /// Which unauthenticated connection a newcomer from `address` replaces, if it must.
    private func tcpVictim(for address: String) -> (UInt64, String)? {
        let perSource = max(1, caps.maxTCPUnauthenticatedPerSource)
        let fromSource = unauthenticated.filter { entries[$0]?.source == address }
        if fromSource.count >= perSource, let oldest = fromSource.first {
            return (oldest, "a newer connection from the same address took its place (at most \(perSource) unauthenticated connections per address)")
        }
        guard unauthenticated.count >= max(1, caps.maxTCPUnauthenticated) || (tcp >= caps.maxTCP && !unauthenticated.isEmpty) else { return nil }
        // Connections that have not even said Hello go first (a phone that
        // has is one round trip from being safe); among them, the oldest of
        // the address holding the most: a crowd makes room before a lone phone.
        let silent = unauthenticated.filter { entries[$0]?.greeted == false }
        let candidates = silent.isEmpty ? unauthenticated : silent
        var held: [String: Int] = [:]
        for id in candidates { held[entries[id]?.source ?? "", default: 0] += 1 }
        let most = held.values.max() ?? 0
        guard let oldest = candidates.first(where: { held[entries[$0]?.source ?? ""] == most }) else { return nil }
        let cap = tcp >= caps.maxTCP ? "TCP's cap of \(caps.maxTCP) connections" : "the cap of \(caps.maxTCPUnauthenticated) unauthenticated TCP connections"
        return (oldest, "not authenticated, and the oldest when a newer connection reached \(cap)")
    }

    /// Takes one eviction from `address`'s budget; false when it has none left.
    private mutating func takeEviction(_ address: String, now: UInt64) -> Bool {
        let rate = UInt64(max(1, caps.tcpEvictionsPerSourcePerSecond))
        let capacity = rate * 1000
        var budget = evictionBudgets[address] ?? (milli: capacity, at: now)
        if now > budget.at { budget = (min(capacity, budget.milli + (now - budget.at) * rate), now) }
        guard budget.milli >= 1000 else {
            evictionBudgets[address] = budget
            return false
        }
        budget.milli -= 1000
        if evictionBudgets[address] == nil, evictionBudgets.count >= Self.maxSources {
            // Bounded: forget the address that evicted longest ago (a full bucket is the default anyway).
            if let stalest = evictionBudgets.min(by: { $0.value.at < $1.value.at })?.key { evictionBudgets[stalest] = nil }
        }
        evictionBudgets[address] = budget
        return true
    }

    /// A connection a previous daemon process handed over: established
    /// already, always counted (PROTOCOL.md section 22).
    public mutating func restore(_ id: UInt64, _ peer: AdmissionPeer) {
        switch peer {
        case .unix(let credentials):
            let reserved = credentials.map(access.names) ?? false
            entries[id] = Entry(transport: .unix, source: "", reserved: reserved)
            unix += 1
            if !reserved { unreservedUnix += 1 }
        case .tcp(let address), .pairedTCP(let address, _):
            entries[id] = Entry(transport: .tcp, source: address, reserved: false)
            tcp += 1
        }
    }

    /// The connection's Hello was accepted (a TCP phone now authenticating):
    /// it is evicted only after every connection that has not said Hello.
    public mutating func greeted(_ id: UInt64) {
        entries[id]?.greeted = true
    }

    /// The connection authenticated (a TCP phone's Authenticate, or any
    /// handshake where none is required): it is never evicted as a stranger
    /// from now on. A TCP phone that authenticated as `device` when that
    /// device already holds `maxTCPPerDevice` authenticated connections
    /// makes room among its own: the answer is the oldest of them, which
    /// the server tells Goodbye{CONNECTION_EVICTED} with the reason (a
    /// phone whose link dropped reconnects at once; one phone cannot hold
    /// TCP's every slot and keep another paired phone out).
    @discardableResult
    public mutating func authenticated(_ id: UInt64, device: String? = nil) -> (victim: UInt64, reason: String)? {
        unauthenticated.removeAll { $0 == id }
        entries[id]?.claim = nil
        guard let device, entries[id]?.transport == .tcp else { return nil }
        entries[id]?.device = device
        let held = entries.filter { $0.value.device == device }.keys.sorted()
        let cap = max(1, caps.maxTCPPerDevice)
        guard held.count > cap, let oldest = held.first, oldest != id else { return nil }
        remove(oldest)
        return (oldest, "a newer connection of the same paired device took its place (at most \(cap) authenticated TCP connections per device)")
    }

    /// Authenticated TCP connections of `device`.
    public func connections(ofDevice device: String) -> Int {
        entries.values.filter { $0.device == device }.count
    }

    /// The connection closed (a no-op for one already evicted or never admitted).
    public mutating func release(_ id: UInt64) {
        remove(id)
    }

    public func isAuthenticated(_ id: UInt64) -> Bool {
        entries[id] != nil && !unauthenticated.contains(id) && entries[id]?.claim == nil
    }

    private mutating func remove(_ id: UInt64) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        switch entry.transport {
        case .unix:
            unix -= 1
            if !entry.reserved { unreservedUnix -= 1 }
        case .tcp:
            tcp -= 1
            unauthenticated.removeAll { $0 == id }
        }
    }
}
