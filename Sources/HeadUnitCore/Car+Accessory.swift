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

    /// Each automaker app that uses one of the changed protocols is owed its
    /// availability: sent when the phone's connection can take it
    /// (`takeOwedToPhone`), the state at that moment, never one event per
    /// change (18.2). A phone away is owed it until it resumes.
    mutating func sendAvailability(changed keys: Set<String>) {
        for appID in templates.appOrder {
            guard let app = templates.apps[appID], app.category == .automaker,
                app.matchedProtocols.contains(where: { keys.contains(AccessoryProtocols.key($0)) })
            else { continue }
            owedAvailability.mayHaveChanged(appID)
        }
    }

    /// Whether each of the app's matched protocols is available now, in their order.
    func currentAvailability(of appID: String) -> [Bool]? {
        Self.availability(of: templates.apps[appID], hub: accessories)
    }

    static func availability(of app: AppState?, hub: AccessoryHub) -> [Bool]? {
        guard let app, app.category == .automaker else { return nil }
        return app.matchedProtocols.map { hub.isAvailable($0) }
    }

    /// Sends `appID` its availability now, to the connected phone (at
    /// AnnounceApps and ResumeSession: the phone's own request).
    mutating func sendAvailability(of appID: String) {
        guard let phonePeer, let available = currentAvailability(of: appID) else { return }
        emit(phonePeer, body: availabilityEvent(appID, available))
        owedAvailability.sent(appID, available)
    }

    func availabilityEvent(_ appID: String, _ available: [Bool]) -> HUEnvelope.OneOf_Body {
        let names = templates.apps[appID]?.matchedProtocols ?? []
        return .accessoryAvailability(HUAccessoryAvailability.with { event in
            event.appID = appID
            event.protocols = zip(names, available).map { name, isAvailable in
                HUProtocolAvailability.with { $0.protocol = name; $0.available = isAvailable }
            }
        })
    }

    /// The availability the phone is owed (18.2), when `keepingUp` says its
    /// connection takes writes: one `AccessoryAvailability` per app whose
    /// protocols changed since its connection was last told, in announce
    /// order. While the phone is behind or away nothing is sent and nothing
    /// piles up: the apps stay owed, and what is sent later is the state then.
    public mutating func takeOwedToPhone(keepingUp: (PeerID) -> Bool) -> [CarEffect] {
        guard !owedAvailability.isEmpty, let phonePeer, keepingUp(phonePeer) else { return [] }
        let (apps, hub) = (templates.apps, accessories)
        let due = owedAvailability.take(in: templates.appOrder) { Self.availability(of: apps[$0], hub: hub) }
        return due.map { due in
            var envelope = HUEnvelope()
            envelope.body = availabilityEvent(due.appID, due.available)
            return .send(phonePeer, envelope)
        }
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
