import HeadUnitWire
import NIOCore

// External Accessory sessions: the Car checks who is asking, the AccessoryHub
// keeps the sessions (PROTOCOL.md section 18).
extension Car {
    /// An accessory-session message; true when `body` was one.
    mutating func receiveAccessoryMessage(_ body: HUEnvelope.OneOf_Body, requestID: UInt32, from peer: PeerID) -> Bool {
        var outputs: [AccessoryHub.Output] = []
        let outcome: Result<HUResult, RuleViolation>
        switch body {
        case .serveProtocols(let serve):
            outcome = Self.outcome(accessories.serve(serve.protocols, by: peer, outputs: &outputs))
        case .openSession(let open):
            outcome = openSession(open, from: peer, outputs: &outputs)
        case .answerSession(let answerSession):
            outcome = Self.outcome(accessories.answer(answerSession, from: peer, outputs: &outputs))
        case .closeSession(let close):
            outcome = Self.outcome(accessories.close(close, from: peer, outputs: &outputs))
        case .sessionCredit(let credit):
            // One-way: answered only when refused, and then it counts as a protocol error (18.5).
            if let violation = accessories.credit(credit, from: peer, outputs: &outputs) {
                perform(outputs)
                effects.append(.refuseRequest(peer, violation.result, requestID: requestID))
            } else {
                perform(outputs)
            }
            return true
        default:
            return false
        }
        // Every request that ends sessions: the events it caused first, then its Result (18.6).
        perform(outputs)
        answer(peer, requestID, outcome)
        return true
    }

    static func outcome(_ violation: RuleViolation?) -> Result<HUResult, RuleViolation> {
        violation.map { .failure($0) } ?? .ok
    }

    /// OpenSession's checks before the hub's: NO_PHONE, UNKNOWN_APP,
    /// ENTITLEMENT_REFUSED, NOT_ALLOWED_FOR_CATEGORY, UNKNOWN_PROTOCOL (then
    /// the hub's PROTOCOL_UNAVAILABLE, TOO_MANY_SESSIONS).
    mutating func openSession(_ open: HUOpenSession, from peer: PeerID, outputs: inout [AccessoryHub.Output]) -> Result<HUResult, RuleViolation> {
        let app: AppState
        switch announcedApp(open.appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return .failure(violation)
        }
        guard let category = app.category else {
            return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
        }
        guard category == .automaker else {
            return .failure(RuleViolation(.notAllowedForCategory, "only automaker apps (carplay-protocols) open accessory sessions"))
        }
        let key = AccessoryProtocols.key(open.protocol)
        guard app.matchedProtocols.contains(where: { AccessoryProtocols.key($0) == key }) else {
            return .failure(RuleViolation(.unknownProtocol, "'\(open.protocol)' is not one of the app's matched protocols (\(app.matchedProtocols.joined(separator: ", ")))"))
        }
        return accessories.open(appID: open.appID, protocol: open.protocol, phone: peer, outputs: &outputs).map { session in
            var result = HUResult()
            result.accessorySession = session
            return result
        }
    }

    /// Session bytes in a DATA frame: passed on, or refused.
    public mutating func receiveData(channel: UInt32, _ payload: ByteBuffer, from peer: PeerID) -> [CarEffect] {
        var outputs: [AccessoryHub.Output] = []
        accessories.data(channel: channel, payload, from: peer, outputs: &outputs)
        perform(outputs)
        return takeEffects()
    }

    /// Where a DATA frame goes: `receiveData`'s checks without its bytes,
    /// for a server that passes on the frame as it was read. The common case,
    /// a frame within credit, is `.relay` and allocates nothing.
    public mutating func routeData(channel: UInt32, byteCount: Int, from peer: PeerID) -> DataRoute {
        var outputs: [AccessoryHub.Output] = []
        if let receiver = accessories.route(channel: channel, length: UInt64(byteCount), from: peer, outputs: &outputs) {
            return .relay(to: receiver)
        }
        guard !outputs.isEmpty else { return .handled([]) }
        perform(outputs)
        return .handled(takeEffects())
    }

    mutating func perform(_ outputs: [AccessoryHub.Output]) {
        for output in outputs {
            switch output {
            case .send(let peer, let body):
                if phoneLink.wasLost(peer) { sendToPhone(body) } else { emit(peer, body: body) }
            case .data(let peer, let channel, let payload): effects.append(.sendData(peer, channel: channel, payload))
            case .refuseData(let peer, let code, let message): effects.append(.refuseData(peer, code, message))
            case .availabilityChanged(let keys): sendAvailability(changed: keys)
            case .startOpenTimer(let channel, let serial):
                effects.append(.startTimer(.accessoryOpen(channel: channel, serial: serial), milliseconds: AccessoryHub.openTimeoutMilliseconds))
            case .cancelOpenTimer(let channel, let serial): effects.append(.cancelTimer(.accessoryOpen(channel: channel, serial: serial)))
            }
        }
    }

    /// Tells each automaker app that uses one of the changed protocols what it can use now.
    mutating func sendAvailability(changed keys: Set<String>) {
        for appID in appOrder {
            guard let app = apps[appID], app.category == .automaker,
                app.matchedProtocols.contains(where: { keys.contains(AccessoryProtocols.key($0)) })
            else { continue }
            sendAvailability(of: appID)
        }
    }

    mutating func sendAvailability(of appID: String) {
        guard let app = apps[appID] else { return }
        let hub = accessories
        sendToPhone(.accessoryAvailability(HUAccessoryAvailability.with { availability in
            availability.appID = appID
            availability.protocols = app.matchedProtocols.map { name in
                HUProtocolAvailability.with { $0.protocol = name; $0.available = hub.isAvailable(name) }
            }
        }))
    }

    func accessoryStatus() -> [HUAccessoryProtocolStatus] {
        configuration.vehicle.accessoryProtocols.map { name in
            HUAccessoryProtocolStatus.with {
                $0.protocol = name
                $0.available = accessories.isAvailable(name)
                $0.servedBy = accessories.server(of: name) ?? 0
                $0.sessions = UInt32(accessories.sessionCount(of: name))
            }
        }
    }
}
