import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Accessory availability is state owed to each automaker app, never a log
/// another peer can fill (PROTOCOL.md 18.2, issue 47 item 4): a flapping
/// accessory neither floods a slow phone nor overflows an away phone's backlog.
@Suite("Accessory availability as state")
struct AccessoryAvailabilityTests {
    static let performance = "com.openmotors.performance"
    static let climate = "com.openmotors.climate"
    let accessory: PeerID = 3
    static let token = String(repeating: "t", count: 32)

    /// A phone (resumable) with `count` automaker apps on both protocols, an HMI and an accessory.
    func harness(apps count: Int) -> CarHarness {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.apply(h.car.peerJoined(h.phone, info: PeerInfo(role: .phone, name: "phone", transport: .unix, resumptionToken: Self.token)))
        h.join(accessory, .accessory)
        let decisions = h.request(h.phone, .announceApps(HUAnnounceApps.with {
            $0.apps = (0..<count).map { index in
                HUAppInfo.with {
                    $0.appID = "app\(index)"
                    $0.displayName = "App \(index)"
                    $0.entitlements = [EntitlementKey.protocols]
                    $0.accessoryProtocols = [Self.performance, Self.climate]
                }
            }
        })).appDecisions.decisions
        #expect(decisions.count == count && decisions.allSatisfy(\.accepted))
        return h
    }

    /// `flips` ServeProtocols requests alternating serving the performance protocol and withdrawing it.
    func flap(_ h: inout CarHarness, _ flips: Int) {
        for flip in 0..<flips {
            let served = flip % 2 == 0 ? [Self.performance] : []
            #expect(h.request(accessory, .serveProtocols(HUServeProtocols.with { $0.protocols = served })).code == .ok)
        }
    }

    static func availability(_ envelopes: [HUEnvelope]) -> [HUAccessoryAvailability] {
        envelopes.compactMap { if case .accessoryAvailability(let a) = $0.body { return a } else { return nil } }
    }

    @Test func aThousandFlipsToAPhoneBehindLeaveOneEventPerAppWithTheLastState() {
        var h = harness(apps: 64)
        #expect(Self.availability(h.drain(h.phone)).count == 64, "each app is told once when accepted")
        h.phoneKeepsUp = false
        flap(&h, 1_001)  // ends served
        #expect(Self.availability(h.drain(h.phone)).isEmpty, "nothing is queued for a phone behind")
        #expect(h.car.owedAvailability.owed.count == 64, "one owed state per app, however many flips")
        // The phone takes writes again: one event per app, the state now.
        h.apply(h.car.takeOwedToPhone { _ in true })
        let told = Self.availability(h.drain(h.phone))
        #expect(told.map(\.appID) == (0..<64).map { "app\($0)" })
        #expect(told.allSatisfy { $0.protocols.map(\.available) == [true, false] })
        #expect(h.car.takeOwedToPhone { _ in true }.isEmpty, "nothing is owed twice")
    }

    @Test func aFlipUndoneBeforeItWasDeliveredCostsNothing() {
        var h = harness(apps: 4)
        _ = h.drain(h.phone)
        h.phoneKeepsUp = false
        flap(&h, 1_000)  // ends withdrawn, as the apps were last told
        h.apply(h.car.takeOwedToPhone { _ in true })
        #expect(Self.availability(h.drain(h.phone)).isEmpty)
    }

    @Test func aPhoneKeepingUpIsToldEachChangeOnceAfterTheInputThatMadeIt() {
        var h = harness(apps: 2)
        _ = h.drain(h.phone)
        flap(&h, 3)
        let told = Self.availability(h.drain(h.phone))
        #expect(told.map(\.appID) == ["app0", "app1", "app0", "app1", "app0", "app1"])
        #expect(told.map { $0.protocols[0].available } == [true, true, false, false, true, true])
    }

    @Test func anAwayPhonesBacklogDoesNotGrowWithFlipsAndItResumesToTheFinalState() {
        var h = harness(apps: 2)
        _ = h.drain(h.phone)
        h.apply(h.car.peerLeft(h.phone, departure: .lost))
        #expect(h.car.status().phoneLink == .reconnecting)
        // An ECU restarting in a loop for as long as 10 s at 20 flips a second, many times over.
        flap(&h, 2_001)  // ends served
        #expect(h.car.phoneLink.backlog.isEmpty && !h.car.phoneLink.backlogOverflowed)
        #expect(h.car.owedAvailability.owed.count == 2)
        let next: PeerID = 5
        h.apply(h.car.peerJoined(next, info: PeerInfo(role: .phone, name: "phone", transport: .unix, resumptionToken: "next")))
        let result = h.request(next, .resumeSession(HUResumeSession.with { $0.resumptionToken = Self.token }))
        #expect(result.code == .ok, "\(result.message)")
        #expect(result.resumed.replayed == 0)
        // The Result first, then each app's availability as it is now.
        let toPhone = h.drain(next)
        #expect(toPhone.first?.result.code == .ok)
        let told = Self.availability(Array(toPhone.dropFirst()))
        #expect(told.map(\.appID) == ["app0", "app1"])
        #expect(told.allSatisfy { $0.protocols.map(\.available) == [true, false] })
        #expect(toPhone.count == 3)
    }

    /// Accessories are not carried over a restart (section 22): once the
    /// connections are back, each app is told its availability as the new process sees it.
    @Test func afterARestoreEachAppIsToldItsAvailabilityAsTheNewProcessSeesIt() throws {
        var h = harness(apps: 2)
        flap(&h, 1)  // served: the apps were told so
        #expect(Self.availability(h.drain(h.phone)).count == 4)
        let (car, effects) = try Car.restoring(h.car.snapshot(), configuration: h.car.configuration)
        h.car = car
        h.apply(effects)
        h.apply(h.car.peerLeft(accessory))  // it was not handed over
        h.apply(h.car.restoredConnectionsBack())
        let told = Self.availability(h.drain(h.phone))
        #expect(told.map(\.appID) == ["app0", "app1"])
        #expect(told.allSatisfy { $0.protocols.map(\.available) == [false, false] })
    }

    @Test func theValueKeepsOneOwedStatePerAppAndSendsOnlyWhatDiffers() {
        var owed = OwedAvailability()
        owed.sent("a", [false])
        for _ in 0..<1_000 { owed.mayHaveChanged("a"); owed.mayHaveChanged("b") }
        #expect(owed.owed == ["a", "b"])
        let now: [String: [Bool]] = ["a": [false], "b": [true]]
        let due = owed.take(in: ["a", "b", "gone"]) { now[$0] }
        #expect(due.map(\.appID) == ["b"] && due.first?.available == [true])
        #expect(owed.isEmpty)
        owed.mayHaveChanged("b")
        #expect(owed.take(in: ["a", "b"]) { now[$0] }.isEmpty, "b was told this state already")
    }
}
