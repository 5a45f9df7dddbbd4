@testable import HeadUnitCore
import HeadUnitWire
import Testing

/// The rules of section 21 in the value type alone.
@Suite struct PhoneLinkTests {
    static let token = "00112233445566778899aabbccddeeff"

    func carried() -> PhoneLink {
        var link = PhoneLink()
        link.carry(peer: 1, token: Self.token)
        return link
    }

    @Test func onlyANetworkFailureAllowsResumption() {
        #expect(PeerDeparture.lost.allowsResumption)
        #expect(PeerDeparture.cutOff(.heartbeatTimeout).allowsResumption)
        #expect(PeerDeparture.cutOff(.slowConsumer).allowsResumption)
        #expect(!PeerDeparture.saidGoodbye.allowsResumption)
        #expect(!PeerDeparture.cutOff(.tooManyErrors).allowsResumption)
        #expect(!PeerDeparture.cutOff(.shuttingDown).allowsResumption)
    }

    @Test func aLostPhoneWaitsAndResumesWithItsToken() throws {
        var link = carried()
        let lostSerial = link.lost(.lost)
        let serial = try #require(lostSerial)
        #expect(link.isReconnecting && link.wasLost(1) && link.peer == nil && link.carriesApps)
        link.keep(.sessionConfiguration(HUSessionConfiguration()))
        let replay = try link.resume(peer: 2, token: Self.token, newToken: "new").get()
        #expect(replay.count == 1)
        #expect(link.peer == 2 && link.token == "new" && link.backlog.isEmpty)
        // The grace timer of the loss no longer applies.
        let stale = link.graceExpired(serial: serial)
        #expect(!stale)
        #expect(link.peer == 2)
    }

    @Test func refusals() throws {
        var link = PhoneLink()
        let r1 = link.resume(peer: 2, token: Self.token, newToken: "x")

        #expect(r1 == .failure(.nothingToResume))
        link = carried()
        let r2 = link.resume(peer: 1, token: Self.token, newToken: "x")

        #expect(r2 == .failure(.carryingApps))
        let r3 = link.resume(peer: 2, token: Self.token, newToken: "x")

        #expect(r3 == .failure(.nothingToResume))
        _ = link.lost(.lost)
        let r4 = link.resume(peer: 2, token: "f" + Self.token.dropFirst(), newToken: "x")

        #expect(r4 == .failure(.wrongToken))
        let r5 = link.resume(peer: 2, token: "", newToken: "x")

        #expect(r5 == .failure(.wrongToken))
        // A wrong token leaves the session waiting.
        #expect(link.isReconnecting)
    }

    @Test func aGoodbyeOrTheGracePeriodEndsIt() throws {
        var link = carried()
        let ended = link.lost(.saidGoodbye)
        #expect(ended == nil)
        #expect(!link.carriesApps)
        link = carried()
        let lostSerial = link.lost(.cutOff(.heartbeatTimeout))
        let serial = try #require(lostSerial)
        let expired = link.graceExpired(serial: serial)
        #expect(expired)
        #expect(!link.carriesApps)
        let r6 = link.resume(peer: 2, token: Self.token, newToken: "x")

        #expect(r6 == .failure(.nothingToResume))
    }

    /// Issue 47: a scene's configuration is state; an HMI flipping the
    /// vehicle state while the phone is away keeps one per scene, the latest.
    @Test func aScenesConfigurationIsKeptOnceTheLatestWhateverTheChanges() throws {
        var link = carried()
        _ = link.lost(.lost)
        link.keep(.appEvent(HUAppEvent.with { $0.appID = "a" }))
        for flip in 0..<(PhoneLink.maxBacklog * 4) {
            for scene in [UInt32(1), 2] {
                link.keep(.sessionConfiguration(HUSessionConfiguration.with { $0.appID = "a"; $0.sceneID = scene; $0.limitLists = flip % 2 == 1 }))
            }
        }
        #expect(!link.backlogOverflowed)
        #expect(link.backlog.count == 3)
        let kept = link.backlog.compactMap { if case .sessionConfiguration(let c) = $0 { return c } else { return nil } }
        #expect(kept.map(\.sceneID) == [1, 2] && kept.allSatisfy(\.limitLists))
        let r = link.resume(peer: 2, token: Self.token, newToken: "next")
        #expect((try? r.get().count) == 3)
    }

    @Test func aFullBacklogSpoilsTheResumption() throws {
        var link = carried()
        _ = link.lost(.lost)
        for _ in 0..<PhoneLink.maxBacklog { link.keep(.appEvent(HUAppEvent())) }
        #expect(!link.backlogOverflowed)
        link.keep(.appEvent(HUAppEvent()))
        #expect(link.backlogOverflowed)
    }

    /// The Car keeps the apps of a lost phone, queues what it would have sent,
    /// and replays it after the Resumed answer.
    @Test func theCarReplaysWhatThePhoneMissed() throws {
        var car = Car(configuration: CarConfiguration(vehicle: .standard, entitlements: .acceptAll))
        _ = car.peerJoined(1, info: PeerInfo(role: .phone, name: "p", transport: .tcp, resumptionToken: Self.token))
        _ = car.peerJoined(2, info: PeerInfo(role: .hmi, name: "h", transport: .unix))
        var announce = HUAnnounceApps()
        announce.apps = [HUAppInfo.with { $0.appID = "a"; $0.displayName = "A"; $0.entitlements = ["com.apple.developer.carplay-audio"] }]
        _ = car.receive(HUEnvelope.with { $0.requestID = 1; $0.announceApps = announce }, from: 1, nowMilliseconds: 0)
        _ = car.receive(HUEnvelope.with { $0.requestID = 2; $0.launchApp = HULaunchApp.with { $0.appID = "a" } }, from: 2, nowMilliseconds: 0)
        let effects = car.peerLeft(1, departure: .lost)
        #expect(effects.contains { if case .startTimer(.resumeGrace, 30_000) = $0 { return true }; return false })
        #expect(car.status().phoneLink == .reconnecting)
        _ = car.receive(HUEnvelope.with { $0.requestID = 3; $0.closeApp = HUCloseApp.with { $0.appID = "a" } }, from: 2, nowMilliseconds: 0)
        _ = car.peerJoined(3, info: PeerInfo(role: .phone, name: "p", transport: .tcp, resumptionToken: "next"))
        let resumed = car.receive(HUEnvelope.with { $0.requestID = 4; $0.resumeSession = HUResumeSession.with { $0.resumptionToken = Self.token } }, from: 3, nowMilliseconds: 0)
        let toPhone = resumed.compactMap { effect -> HUEnvelope? in
            if case .send(3, let envelope) = effect { return envelope }
            return nil
        }
        #expect(toPhone.first?.result.resumed.replayed == 1)
        #expect(toPhone.first?.result.resumed.resumptionToken == "next")
        #expect(toPhone.first?.result.resumed.scenes.isEmpty == true)
        #expect(toPhone.dropFirst().first?.sceneDisconnected.reason == .closedByCar)
    }
}
