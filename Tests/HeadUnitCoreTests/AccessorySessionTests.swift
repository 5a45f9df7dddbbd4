import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// External Accessory matching and sessions (PROTOCOL.md section 18), each rule a test named after it.
@Suite("Accessory sessions")
struct AccessorySessionTests {
    static let performance = "com.openmotors.performance"
    static let climate = "com.openmotors.climate"
    let accessory: PeerID = 3
    let accessory2: PeerID = 4

    /// A car whose vehicle declares {performance, climate}, a phone, an HMI and one accessory peer.
    func harness() -> CarHarness {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        h.join(accessory, .accessory)
        h.join(accessory2, .accessory)
        return h
    }

    func announce(_ h: inout CarHarness, _ apps: [(String, [String])]) -> [HUAppDecision] {
        h.request(h.phone, .announceApps(HUAnnounceApps.with {
            $0.apps = apps.map { app in
                HUAppInfo.with { $0.appID = app.0; $0.displayName = app.0; $0.entitlements = [EntitlementKey.protocols]; $0.accessoryProtocols = app.1 }
            }
        })).appDecisions.decisions
    }

    func serve(_ h: inout CarHarness, _ peer: PeerID, _ protocols: [String]) -> HUResult {
        h.request(peer, .serveProtocols(HUServeProtocols.with { $0.protocols = protocols }))
    }

    /// Opens a session and has the accessory accept it; returns the channel.
    func openAccepted(_ h: inout CarHarness, app: String, _ name: String) -> UInt32 {
        let result = h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = app; $0.protocol = name }))
        #expect(result.code == .ok, "\(result.message)")
        let channel = result.accessorySession.channel
        #expect(h.request(accessory, .answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = true })).code == .ok)
        return channel
    }

    /// A car whose sessions towards one peer may hold one window in all (18.5).
    func tightBudgetHarness() -> CarHarness {
        var h = CarHarness()
        var configuration = CarConfiguration(vehicle: .standard, entitlements: .acceptAll)
        configuration.accessoryPeerBudget = UInt64(AccessoryHub.initialCredit)
        h.car = Car(configuration: configuration)
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        h.join(accessory, .accessory)
        return h
    }

    /// Apps "a" and "b" each open a session to the accessory.
    func twoSessions(_ h: inout CarHarness) -> (first: UInt32, second: UInt32) {
        _ = announce(&h, [("a", [Self.performance]), ("b", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        return (openAccepted(&h, app: "a", Self.performance), openAccepted(&h, app: "b", Self.performance))
    }

    /// The accessory grants `bytes` on `channel` (one-way, no answer).
    func accessoryGrants(_ h: inout CarHarness, _ channel: UInt32, _ bytes: Int) {
        h.apply(h.car.receive(HUEnvelope.with { $0.sessionCredit = HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(bytes) } },
                              from: accessory, nowMilliseconds: h.now))
    }

    static func requestedCredits(_ envelopes: [HUEnvelope]) -> [UInt32] {
        envelopes.compactMap { if case .sessionRequested(let r) = $0.body { return r.initialCredit } else { return nil } }
    }

    static func grants(_ envelopes: [HUEnvelope]) -> [HUSessionCredit] {
        envelopes.compactMap { if case .sessionCredit(let c) = $0.body { return c } else { return nil } }
    }

    @Test func creditAddsUpPerPeerAndWhatIsHeldIsPassedOnAsTheBudgetFrees() {
        var h = tightBudgetHarness()
        let (first, second) = twoSessions(&h)
        // The phone's budget went to the first session; the second's accessory waits.
        #expect(Self.requestedCredits(h.drain(accessory)) == [AccessoryHub.initialCredit, 0])
        // The first session ends: its share goes to the second, as a SessionCredit from the daemon.
        #expect(h.request(h.phone, .closeSession(HUCloseSession.with { $0.channel = first })).code == .ok)
        let passed = Self.grants(h.drain(accessory))
        #expect(passed.map(\.channel) == [second] && passed.map(\.bytes) == [AccessoryHub.initialCredit])
    }

    /// A grant on a direction whose sender finished is dropped, but the bytes
    /// it grants back leave the receiver's budget: they held it until the
    /// whole session ended, and sessions finished one way towards each peer
    /// held both budgets, each waiting on the other (found by
    /// `HeadUnitBench --accessory-sessions 16` with 512 KiB windows).
    @Test func bytesGrantedBackAfterTheSenderFinishedFreeTheBudget() {
        var h = tightBudgetHarness()
        let (first, second) = twoSessions(&h)
        _ = h.drain(h.phone)
        _ = h.drain(accessory)
        // The first app sends its whole window to the accessory and finishes
        // its direction; the second holds no credit towards the accessory.
        let window = Int(AccessoryHub.initialCredit)
        h.apply(h.car.receiveData(channel: first, ByteBuffer(repeating: 7, count: window), from: h.phone))
        #expect(h.request(h.phone, .closeSession(HUCloseSession.with { $0.channel = first; $0.half = true })).code == .ok)
        #expect(Self.grants(h.drain(h.phone)).isEmpty)
        // The accessory read it all and grants it back: dropped, yet the budget frees for the second session.
        accessoryGrants(&h, first, window)
        let passed = Self.grants(h.drain(h.phone))
        #expect(passed.map(\.channel) == [second] && passed.map(\.bytes) == [AccessoryHub.initialCredit])
        _ = h.drain(accessory)  // SessionFinished
        // More granted on the finished direction is dropped: nothing passed on, no error.
        accessoryGrants(&h, first, 4096)
        #expect(h.drain(h.phone).isEmpty && h.drain(accessory).isEmpty)
    }

    /// Freed budget goes round the sessions waiting towards a peer: one
    /// passed part of what it waits for goes behind the others, so a session
    /// with a window as wide as the budget does not take all of it while it
    /// streams (PROTOCOL.md 18.5).
    @Test func freedBudgetGoesRoundTheWaitingSessions() {
        var h = tightBudgetHarness()
        let (first, second) = twoSessions(&h)
        _ = h.drain(h.phone)
        // The accessory widens the first session's window past the budget; its app sends a window.
        accessoryGrants(&h, first, 128 << 10)
        h.apply(h.car.receiveData(channel: first, ByteBuffer(repeating: 7, count: Int(AccessoryHub.initialCredit)), from: h.phone))
        // Each half window the accessory grants back goes to the session next in turn.
        var passed: [UInt32] = []
        for _ in 0..<3 {
            accessoryGrants(&h, first, 32 << 10)
            passed += Self.grants(h.drain(h.phone)).map(\.channel)
            // The session given credit spends it, so the budget is in flight again.
            if let last = passed.last { h.apply(h.car.receiveData(channel: last, ByteBuffer(repeating: 1, count: 32 << 10), from: h.phone)) }
        }
        // (Oldest first alone, the second would have taken both halves of its window before the first got any.)
        #expect(passed == [second, first, second])
    }

    @Test func creditHeldForAPeerThatLeftIsNotSentToIt() {
        var h = tightBudgetHarness()
        _ = announce(&h, [("a", [Self.performance]), ("b", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        _ = openAccepted(&h, app: "a", Self.performance)
        _ = openAccepted(&h, app: "b", Self.performance)
        _ = h.drain(accessory)
        _ = h.drain(h.phone)
        // The harness fails any send to a peer that is not connected.
        h.apply(h.car.peerLeft(accessory))
        #expect(Self.closedReasons(h.drain(h.phone)) == [.accessoryGone, .accessoryGone])
    }

    static func closedReasons(_ envelopes: [HUEnvelope]) -> [HUSessionCloseReason] {
        envelopes.compactMap { if case .sessionClosed(let closed) = $0.body { return closed.reason } else { return nil } }
    }

    // Seed 003: vehicle {performance, climate}; Track Laps {performance}; Comfort Cruise {climate, radio}; Charge Up {electric}.
    @Test func seed003TrackLapsAndComfortCruiseAppearChargeUpDoesNot() {
        var h = harness()
        let decisions = announce(&h, [
            ("track-laps", [Self.performance]),
            ("comfort-cruise", [Self.climate, "com.openmotors.radio"]),
            ("charge-up", ["com.openmotors.electric"]),
        ])
        #expect(decisions.map(\.accepted) == [true, true, false])
        #expect(decisions[0].matchedProtocols == [Self.performance])
        #expect(decisions[1].matchedProtocols == [Self.climate])
        #expect(decisions[2].code == .entitlementRefused)
        #expect(decisions[1].vehicleProtocols == [Self.performance, Self.climate])
        #expect(h.car.homeScreen().icons.map(\.appID) == ["track-laps", "comfort-cruise"])
    }

    @Test func protocolStringsDifferingOnlyInCaseAreTheSameProtocolInTheVehiclesSpelling() {
        var h = harness()
        let decisions = announce(&h, [("app", ["COM.OpenMotors.Climate"])])
        #expect(decisions[0].matchedProtocols == [Self.climate])
        #expect(serve(&h, accessory, ["com.openmotors.CLIMATE"]).code == .ok)
        #expect(h.car.accessories.isAvailable(Self.climate))
    }

    @Test func stringsThatAreNotReverseDNSNeverMatchAndCannotBeServed() {
        #expect(AccessoryProtocols.isValid("com.acme.climate"))
        #expect(!AccessoryProtocols.isValid("climate"))
        #expect(!AccessoryProtocols.isValid("com..climate"))
        #expect(!AccessoryProtocols.isValid("com.-acme.climate"))
        #expect(!AccessoryProtocols.isValid("com.acme climate"))
        #expect(!AccessoryProtocols.isValid(String(repeating: "a.", count: 128) + "b"))
        #expect(AccessoryProtocols.match(app: ["climate", "com.openmotors.climate "], vehicle: [Self.climate]).isEmpty)
        var h = harness()
        #expect(serve(&h, accessory, ["climate"]).code == .invalidArgument)
    }

    @Test func aDeclaredProtocolWithNoServingPeerIsDeclaredUnavailable() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        let availability = h.drain(h.phone).compactMap { envelope -> HUAccessoryAvailability? in
            if case .accessoryAvailability(let a) = envelope.body { return a } else { return nil }
        }
        #expect(availability.map(\.protocols) == [[HUProtocolAvailability.with { $0.protocol = Self.performance; $0.available = false }]])
        let status = h.car.status().accessoryProtocols
        #expect(status.map(\.protocol) == [Self.performance, Self.climate] && status.map(\.available) == [false, false])
        #expect(h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "track-laps"; $0.protocol = Self.performance })).code == .protocolUnavailable)
    }

    @Test func appsAreToldWhenTheirProtocolBecomesAvailableOrGoesAway() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance]), ("comfort-cruise", [Self.climate])])
        _ = h.drain(h.phone)
        #expect(serve(&h, accessory, [Self.performance]).code == .ok)
        let told = h.drain(h.phone).compactMap { envelope -> HUAccessoryAvailability? in
            if case .accessoryAvailability(let a) = envelope.body { return a } else { return nil }
        }
        #expect(told.map(\.appID) == ["track-laps"] && told.first?.protocols.first?.available == true)
        _ = h.car.peerLeft(accessory)
        h.apply(h.car.peerLeft(accessory))
        #expect(!h.car.accessories.isAvailable(Self.performance))
    }

    @Test func aSecondPeerServingAServedProtocolIsRefusedTheFirstKeepsIt() {
        var h = harness()
        #expect(serve(&h, accessory, [Self.performance]).code == .ok)
        #expect(serve(&h, accessory2, [Self.performance, Self.climate]).code == .protocolAlreadyServed)
        #expect(h.car.accessories.server(of: Self.climate) == nil, "a refused request changes nothing")
        #expect(serve(&h, accessory, ["com.openmotors.radio"]).code == .unknownProtocol)
        // Once the first withdraws it, the second may serve it.
        #expect(serve(&h, accessory, []).code == .ok)
        #expect(serve(&h, accessory2, [Self.performance]).code == .ok)
    }

    @Test func onlyAutomakerAppsOpenSessionsAndOnlyOnTheirMatchedProtocols() {
        var h = harness()
        _ = h.announce([("radio", [EntitlementKey.audio])])
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance, Self.climate])
        #expect(h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "radio"; $0.protocol = Self.performance })).code == .notAllowedForCategory)
        #expect(h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "track-laps"; $0.protocol = Self.climate })).code == .unknownProtocol)
        #expect(h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "nope"; $0.protocol = Self.climate })).code == .unknownApp)
    }

    @Test func theServingPeerIsToldWhichAppProtocolAndChannelAndMayRefuse() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        _ = h.drain(accessory)
        let result = h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "track-laps"; $0.protocol = Self.performance }))
        let channel = result.accessorySession.channel
        #expect(channel != 0)
        guard case .sessionRequested(let requested) = h.drain(accessory).first?.body else { Issue.record("no SessionRequested"); return }
        #expect(requested.appID == "track-laps" && requested.protocol == Self.performance && requested.channel == channel)
        #expect(requested.initialCredit == AccessoryHub.initialCredit)
        _ = h.drain(h.phone)
        #expect(h.request(accessory, .answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = false; $0.reason = "track mode needs the car parked" })).code == .ok)
        #expect(Self.closedReasons(h.drain(h.phone)) == [.refused])
        // A session not awaiting an answer cannot be answered.
        #expect(h.request(accessory, .answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = true })).code == .unknownSession)
    }

    @Test func bytesFlowBothWaysInOrderUnchangedWithinCredit() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let channel = openAccepted(&h, app: "track-laps", Self.performance)
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(bytes: [1, 2, 3]), from: h.phone))
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(bytes: [4, 5]), from: h.phone))
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(bytes: [9]), from: accessory))
        #expect(h.data[accessory]?.map(\.bytes) == [[1, 2, 3], [4, 5]])
        #expect(h.data[accessory]?.map(\.channel) == [channel, channel])
        #expect(h.data[h.phone]?.map(\.bytes) == [[9]])
    }

    @Test func dataBeyondTheCreditClosesTheSessionWithFlowControl() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let channel = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone); _ = h.drain(accessory)
        let window = Int(AccessoryHub.initialCredit)
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(repeating: 7, count: window), from: h.phone))
        #expect(h.data[accessory]?.count == 1)
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(bytes: [1]), from: h.phone))
        #expect(h.refusedData[h.phone] == [.flowControl])
        #expect(Self.closedReasons(h.drain(h.phone)) == [.flowControl])
        #expect(Self.closedReasons(h.drain(accessory)) == [.flowControl])
        // Bytes still in flight when the session closed are dropped, not errors (18.6).
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(bytes: [1]), from: h.phone))
        #expect(h.refusedData[h.phone] == [.flowControl])
        h.apply(h.car.receiveData(channel: channel + 100, ByteBuffer(bytes: [1]), from: h.phone))
        #expect(h.refusedData[h.phone] == [.flowControl, .notConnected])
    }

    /// The server's path (`routeData`: the frame's length, not its bytes)
    /// decides as `receiveData` does, in 18.4/18.5's order, spending credit.
    @Test func routingDataDecidesAsReceivingItDoes() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let channel = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone); _ = h.drain(accessory)
        let window = Int(AccessoryHub.initialCredit)
        #expect(h.car.routeData(channel: channel, byteCount: 0, from: h.phone) == .handled([]), "empty: accepted, not passed on")
        #expect(h.car.routeData(channel: channel, byteCount: window - 1, from: h.phone) == .relay(to: accessory))
        #expect(h.car.routeData(channel: channel, byteCount: 1, from: accessory) == .relay(to: h.phone))
        // One byte of credit is left: two bytes end the session, events first.
        guard case .handled(let effects) = h.car.routeData(channel: channel, byteCount: 2, from: h.phone) else {
            Issue.record("over credit, yet relayed")
            return
        }
        h.apply(effects)
        #expect(h.refusedData[h.phone] == [.flowControl])
        #expect(Self.closedReasons(h.drain(h.phone)) == [.flowControl])
        #expect(Self.closedReasons(h.drain(accessory)) == [.flowControl])
        // In flight at the close: dropped without a word; no session at all: NOT_CONNECTED.
        #expect(h.car.routeData(channel: channel, byteCount: 1, from: h.phone) == .handled([]))
        guard case .handled(let refused) = h.car.routeData(channel: channel + 100, byteCount: 1, from: h.phone) else {
            Issue.record("no session, yet relayed")
            return
        }
        h.apply(refused)
        #expect(h.refusedData[h.phone] == [.flowControl, .notConnected])
    }

    @Test func creditGrantsArePassedOnAndBounded() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let channel = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone)
        let window = Int(AccessoryHub.initialCredit)
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(repeating: 1, count: window), from: h.phone))
        // The accessory read it and grants more: the grant reaches the app, unanswered.
        let before = h.sent[accessory]?.count ?? 0
        h.apply(h.car.receive(HUEnvelope.with { $0.sessionCredit = HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(window) } }, from: accessory, nowMilliseconds: h.now))
        #expect((h.sent[accessory]?.count ?? 0) == before, "an accepted credit is not answered")
        #expect(h.drain(h.phone).contains { if case .sessionCredit(let c) = $0.body { return c.bytes == UInt32(window) } else { return false } })
        h.apply(h.car.receiveData(channel: channel, ByteBuffer(repeating: 2, count: window), from: h.phone))
        #expect(h.refusedData[h.phone] == nil)
        // Granting past the bound (the peer's budget, 512 KiB here) is refused.
        let tooMuch = h.request(accessory, .sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(AccessoryHub.defaultPeerBudget) + 1 }))
        #expect(tooMuch.code == .invalidArgument && tooMuch.limit == "session.credit_bytes")
        #expect(tooMuch.limitValue == UInt32(AccessoryHub.defaultPeerBudget))
    }

    /// Issue 25, speed: a receiver may widen one session's window to its
    /// peer's whole budget (512 KiB by default), and to 256 KiB whatever the
    /// budget (what every client may rely on), never more.
    @Test func theWindowCapIsThePeersBudgetNeverUnder256KiB() {
        for (budget, cap) in [(AccessoryHub.defaultPeerBudget, AccessoryHub.defaultPeerBudget), (UInt64(AccessoryHub.initialCredit), AccessoryHub.maxCredit)] {
            var h = CarHarness()
            var configuration = CarConfiguration(vehicle: .standard, entitlements: .acceptAll)
            configuration.accessoryPeerBudget = budget
            h.car = Car(configuration: configuration)
            h.join(h.hmi, .hmi)
            h.join(h.phone, .phone)
            h.join(accessory, .accessory)
            _ = announce(&h, [("track-laps", [Self.performance])])
            _ = serve(&h, accessory, [Self.performance])
            let channel = openAccepted(&h, app: "track-laps", Self.performance)
            _ = h.drain(h.phone)
            // The window starts at 64 KiB; widening it to the cap is accepted, unanswered.
            let before = h.sent[accessory]?.count ?? 0
            let widen = UInt32(cap) - AccessoryHub.initialCredit
            h.apply(h.car.receive(HUEnvelope.with { $0.sessionCredit = HUSessionCredit.with { $0.channel = channel; $0.bytes = widen } }, from: accessory, nowMilliseconds: h.now))
            #expect((h.sent[accessory]?.count ?? 0) == before, "budget \(budget): widening to \(cap) is accepted")
            let oneMore = h.request(accessory, .sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = 1 }))
            #expect(oneMore.code == .invalidArgument && oneMore.limit == "session.credit_bytes" && oneMore.limitValue == UInt32(cap), "budget \(budget)")
        }
    }

    @Test func oneOpenSessionPerAppAndProtocolTheSecondReplacesTheFirst() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let first = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone); _ = h.drain(accessory)
        let second = openAccepted(&h, app: "track-laps", Self.performance)
        #expect(first != second)
        #expect(Self.closedReasons(h.drain(h.phone)) == [.replaced])
        #expect(Self.closedReasons(h.drain(accessory)) == [.replaced])
        #expect(h.car.accessories.sessions.keys.sorted() == [second])
    }

    @Test func twoAppsMayUseTheSameProtocolAtOnce() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance]), ("lap-timer", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let a = openAccepted(&h, app: "track-laps", Self.performance)
        let b = openAccepted(&h, app: "lap-timer", Self.performance)
        #expect(a != b && h.car.accessories.sessions.count == 2)
    }

    @Test func eitherSideClosesWithAReasonTheOtherIsTold() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        let channel = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(accessory)
        #expect(h.request(h.phone, .closeSession(HUCloseSession.with { $0.channel = channel; $0.detail = "done" })).code == .ok)
        #expect(Self.closedReasons(h.drain(accessory)) == [.closedByApp])
        // Closing a session that closed recently is not an error: both sides may close at once (18.6).
        #expect(h.request(h.phone, .closeSession(HUCloseSession.with { $0.channel = channel })).code == .ok)
        #expect(h.request(h.phone, .closeSession(HUCloseSession.with { $0.channel = channel + 100 })).code == .unknownSession)
        let again = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone)
        #expect(h.request(accessory, .closeSession(HUCloseSession.with { $0.channel = again })).code == .ok)
        #expect(Self.closedReasons(h.drain(h.phone)) == [.closedByAccessory])
    }

    @Test func sessionsEndWhenTheAccessoryThePhoneOrTheAppGoes() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance]), ("comfort-cruise", [Self.climate])])
        _ = serve(&h, accessory, [Self.performance])
        _ = serve(&h, accessory2, [Self.climate])
        _ = openAccepted(&h, app: "track-laps", Self.performance)
        // The accessory goes: the app is told why.
        _ = h.drain(h.phone)
        h.apply(h.car.peerLeft(accessory))
        #expect(Self.closedReasons(h.drain(h.phone)) == [.accessoryGone])
        // The app closes: the accessory is told.
        let climate = h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "comfort-cruise"; $0.protocol = Self.climate })).accessorySession.channel
        #expect(h.request(accessory2, .answerSession(HUAnswerSession.with { $0.channel = climate; $0.accept = true })).code == .ok)
        _ = h.drain(accessory2)
        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = "comfort-cruise" })).code == .ok)
        #expect(Self.closedReasons(h.drain(accessory2)) == [.appClosed])
        // The phone goes: the accessory is told.
        let reopened = h.request(h.phone, .openSession(HUOpenSession.with { $0.appID = "comfort-cruise"; $0.protocol = Self.climate })).accessorySession.channel
        #expect(reopened != 0)
        _ = h.drain(accessory2)
        h.apply(h.car.peerLeft(h.phone))
        #expect(Self.closedReasons(h.drain(accessory2)) == [.phoneGone])
        #expect(h.car.accessories.sessions.isEmpty)
    }

    /// Found by the long fuzz run: a phone leaving for good (Goodbye, or no
    /// resumption token) was sent its own SessionClosed after it had gone.
    @Test(arguments: [PeerDeparture.saidGoodbye, .cutOff(.tooManyErrors), .lost])
    func aPhoneGoneForGoodIsNotToldItsSessionsClosedTheAccessoryIs(departure: PeerDeparture) {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        _ = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(accessory)
        let effects = h.car.peerLeft(h.phone, departure: departure)
        let toPhone = effects.filter {
            switch $0 {
            case .send(h.phone, _): return true
            default: return false
            }
        }
        #expect(toPhone.isEmpty, "the phone has gone: \(toPhone)")
        h.apply(effects)
        #expect(Self.closedReasons(h.drain(accessory)) == [.phoneGone])
        #expect(h.car.accessories.sessions.isEmpty)
    }

    @Test func withdrawingAProtocolEndsItsSessions() {
        var h = harness()
        _ = announce(&h, [("track-laps", [Self.performance])])
        _ = serve(&h, accessory, [Self.performance])
        _ = openAccepted(&h, app: "track-laps", Self.performance)
        _ = h.drain(h.phone)
        #expect(serve(&h, accessory, []).code == .ok)
        #expect(Self.closedReasons(h.drain(h.phone)) == [.protocolWithdrawn])
    }
}
