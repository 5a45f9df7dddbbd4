import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// PROTOCOL.md section 21 over real sockets: a phone whose connection drops
/// (no Goodbye) resumes with its token and finds its apps, scenes and stacks;
/// the HMI and the cluster see "reconnecting", not a reset; after the grace
/// period, or after a Goodbye, everything ends as a disconnect.
@Suite("Phone resumption")
struct ResumptionTests {
    static let appID = "com.example.app"

    /// An HMI, a cluster subscribed to metadata, and a phone on TCP whose app
    /// runs with a stack of two templates.
    struct Car {
        let daemon: TestDaemon
        let hmi: RawSocketClient
        let cluster: RawSocketClient
        let phone: RawSocketClient
        let token: String
        let grace: UInt32
        let sceneID: UInt32

        init(limits: [String: UInt64] = [:]) throws {
            daemon = try TestDaemon.launch(limits: limits)
            hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            cluster = try daemon.connectUnix()
            try cluster.handshake(role: .cluster)
            try cluster.send(.subscribeMetadata(HUSubscribeMetadata()), requestID: 1)
            #expect(try cluster.readResult().result.code == .ok)
            phone = try daemon.connectTCP()
            try phone.handshake(role: .phone, name: "Alice's iPhone")
            let (_, result) = try RequestErrorTests.announce(phone, [RequestErrorTests.app(ResumptionTests.appID)])
            #expect(result.code == .ok)
            token = result.appDecisions.resumptionToken
            grace = result.appDecisions.resumeGraceMs
            #expect(try RequestErrorTests.launch(hmi, ResumptionTests.appID).1.code == .ok)
            sceneID = try SpecDecisionTests.Car.sceneConnected(phone).sceneID
            try ResumptionTests.request(phone, .setRoot(TemplateSessionErrorTests.list("root")), scene: sceneID, id: 10)
            try ResumptionTests.request(phone, .push(TemplateSessionErrorTests.list("second")), scene: sceneID, id: 11)
            // What the HMI was shown so far (the home screen before the launch) is read past.
            #expect(try ResumptionTests.status(hmi).app.first?.scene.first?.stack == ["root", "second"])
        }

        func stop() { _ = try? daemon.terminate() }
    }

    static func request(_ phone: RawSocketClient, _ op: HUTemplateRequest.OneOf_Op, scene: UInt32, id: UInt32) throws {
        try phone.send(.templateRequest(HUTemplateRequest.with { $0.appID = appID; $0.sceneID = scene; $0.op = op }), requestID: id)
        let (answered, result) = try phone.readResult()
        #expect(answered == id)
        #expect(result.code == .ok, "\(result.message)")
    }

    static func resume(_ phone: RawSocketClient, token: String, requestID: UInt32 = 5) throws -> HUResult {
        try phone.send(.resumeSession(HUResumeSession.with { $0.resumptionToken = token }), requestID: requestID)
        return try phone.readResult().result
    }

    /// Reads until a HomeScreen with `link` arrives; fails on anything that
    /// would be a reset (the app's scene ending, the main screen going home).
    static func homeScreen(_ hmi: RawSocketClient, link: HUPhoneLink, timeout: Double = 10) throws -> HUHomeScreen? {
        let deadline = RawSocketClient.now() + timeout
        while RawSocketClient.now() < deadline {
            let envelope = try hmi.readEnvelope(timeout: max(0, deadline - RawSocketClient.now()))
            switch envelope.body {
            case .homeScreen(let home) where home.phoneLink == link:
                return home
            case .screenUpdate(let update) where update.screen == .main && link != .none:
                if case .full(let screen) = update.change { #expect(screen.hasTop, "the main screen went home") }
            default:
                continue
            }
        }
        return nil
    }

    static func phoneSection(_ cluster: RawSocketClient, link: HUPhoneLink, timeout: Double = 10) throws -> HUPhoneSection? {
        let deadline = RawSocketClient.now() + timeout
        while RawSocketClient.now() < deadline {
            let envelope = try cluster.readEnvelope(timeout: max(0, deadline - RawSocketClient.now()))
            if case .metadataUpdate(let update) = envelope.body, update.state.hasPhone, update.state.phone.link == link {
                return update.state.phone
            }
        }
        return nil
    }

    static func status(_ hmi: RawSocketClient) throws -> HUStatus {
        try hmi.send(.getStatus(HUGetStatus()), requestID: 77)
        return try hmi.readResult().result.status
    }

    /// Done-means: a phone resumes its session after a 3 s drop.
    @Test func aPhoneResumesItsSessionAfterA3sDrop() async throws {
        try await onOwnThread {
            let car = try Car()
            defer { car.stop() }
            #expect(car.token.count == 32)
            #expect(car.grace == 30_000)

            // Wi-Fi drops: the socket closes with no Goodbye.
            car.phone.close()
            let home = try Self.homeScreen(car.hmi, link: .reconnecting)
            #expect(home?.icons.map(\.appID) == [Self.appID])
            #expect(home?.deviceName == "Test Phone")
            #expect(try Self.phoneSection(car.cluster, link: .reconnecting)?.deviceName == "Test Phone")
            var status = try Self.status(car.hmi)
            #expect(status.phoneLink == .reconnecting)
            #expect(status.app.first?.scene.first?.stack == ["root", "second"])

            // While it is away the car changes: the phone is told when it is back.
            try car.hmi.send(.setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = true } }), requestID: 30)
            #expect(try car.hmi.readResult().result.code == .ok)
            Thread.sleep(forTimeInterval: 3)

            let phone = try car.daemon.connectTCP()
            try phone.handshake(role: .phone, name: "Alice's iPhone")
            let result = try Self.resume(phone, token: car.token)
            #expect(result.code == .ok, "\(result.message)")
            let resumed = result.resumed
            #expect(resumed.resumptionToken.count == 32)
            #expect(resumed.resumptionToken != car.token)
            #expect(resumed.apps.map(\.appID) == [Self.appID])
            #expect(resumed.apps.first?.scene.first?.stack == ["root", "second"])
            #expect(resumed.scenes.map(\.sceneID) == [car.sceneID])
            #expect(resumed.scenes.first?.vehicleState.driving == true)
            #expect(resumed.replayed == 1)
            // The replay: the driving state's SessionConfiguration.
            let replayed = try phone.readEnvelope()
            #expect(replayed.sessionConfiguration.limitLists == true)
            #expect(replayed.sessionConfiguration.sceneID == car.sceneID)

            // The HMI and cluster see the phone back; the session goes on where it was.
            #expect(try Self.homeScreen(car.hmi, link: .connected) != nil)
            #expect(try Self.phoneSection(car.cluster, link: .connected) != nil)
            try Self.request(phone, .pop(HUPopTemplate()), scene: car.sceneID, id: 12)
            status = try Self.status(car.hmi)
            #expect(status.phoneLink == .connected)
            #expect(status.app.first?.scene.first?.stack == ["root"])

            // The old token is spent.
            let thief = try car.daemon.connectTCP()
            try thief.handshake(role: .phone)
            #expect(try Self.resume(thief, token: car.token).code == .resumeRefused)
        }
    }

    /// After the grace period the apps end as a disconnect; the token is refused.
    @Test func afterTheGracePeriodEverythingIsCleanedUp() async throws {
        try await onOwnThread {
            let car = try Car(limits: ["resumeGraceMs": 800])
            defer { car.stop() }
            #expect(car.grace == 800)
            car.phone.close()
            #expect(try Self.homeScreen(car.hmi, link: .reconnecting) != nil)
            let home = try Self.homeScreen(car.hmi, link: .none)
            #expect(home?.icons.isEmpty == true)
            #expect(try Self.phoneSection(car.cluster, link: .none) != nil)
            let status = try Self.status(car.hmi)
            #expect(status.apps == 0)
            let phone = try car.daemon.connectTCP()
            try phone.handshake(role: .phone)
            let refused = try Self.resume(phone, token: car.token)
            #expect(refused.code == .resumeRefused)
            // The phone announces afresh and starts over.
            #expect(try RequestErrorTests.announce(phone, [RequestErrorTests.app(Self.appID)], requestID: 6).1.code == .ok)
        }
    }

    /// A phone that says Goodbye meant to leave: its apps end at once.
    @Test func aPhoneThatSaysGoodbyeCannotResume() async throws {
        try await onOwnThread {
            let car = try Car()
            defer { car.stop() }
            try car.phone.send(.goodbye(HUGoodbye.with { $0.code = .ok; $0.reason = "user disconnected" }))
            #expect(car.phone.waitForClose())
            let home = try Self.homeScreen(car.hmi, link: .none)
            #expect(home?.icons.isEmpty == true)
            let phone = try car.daemon.connectTCP()
            try phone.handshake(role: .phone)
            #expect(try Self.resume(phone, token: car.token).code == .resumeRefused)
        }
    }

    /// A phone silent past the heartbeat timeout (a half-open Wi-Fi link) is
    /// cut off, and may resume.
    @Test func aPhoneCutOffByTheHeartbeatResumes() async throws {
        try await onOwnThread {
            let car = try Car(limits: ["heartbeatIntervalMs": 300, "heartbeatTimeoutMs": 1500])
            defer { car.stop() }
            // The phone stops answering (no reads, no PONGs) and the daemon cuts
            // it off; the HMI and cluster stay alive by pinging.
            var status = HUStatus()
            let deadline = RawSocketClient.now() + 10
            repeat {
                #expect(try car.hmi.pingRoundTrip())
                #expect(try car.cluster.pingRoundTrip())
                status = try Self.status(car.hmi)
                Thread.sleep(forTimeInterval: 0.2)
            } while status.phoneLink != .reconnecting && RawSocketClient.now() < deadline
            #expect(status.phoneLink == .reconnecting)
            let phone = try car.daemon.connectTCP()
            try phone.handshake(role: .phone)
            let result = try Self.resume(phone, token: car.token)
            #expect(result.code == .ok, "\(result.message)")
            #expect(result.resumed.apps.first?.scene.first?.stack == ["root", "second"])
        }
    }

    /// A wrong token does not end the waiting session; a phone that announces
    /// afresh replaces it (a phone that lost its token need not wait).
    @Test func aWrongTokenIsRefusedAndAFreshAnnounceReplacesTheWaitingSession() async throws {
        try await onOwnThread {
            let car = try Car()
            defer { car.stop() }
            car.phone.close()
            #expect(try Self.homeScreen(car.hmi, link: .reconnecting) != nil)
            let phone = try car.daemon.connectTCP()
            try phone.handshake(role: .phone)
            #expect(try Self.resume(phone, token: String(repeating: "0", count: 32)).code == .resumeRefused)
            #expect(try Self.status(car.hmi).phoneLink == .reconnecting)
            let (_, result) = try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.other")], requestID: 6)
            #expect(result.code == .ok)
            let home = try Self.homeScreen(car.hmi, link: .connected)
            #expect(home?.icons.map(\.appID) == ["com.example.other"])
        }
    }
}

/// The same through the SDK: `PhoneSession.resume` rebinds the app and its
/// scene, and the new connection drives it on.
@Suite("Phone resumption through the SDK", .serialized)
struct ResumptionSDKTests {
    @Test func theSDKResumesAndDrivesTheSceneOn() async throws {
        let daemon = try await TestDaemon.start()
        defer { daemon.stop() }
        let app = RequestErrorTests.app(ResumptionTests.appID)
        let first = try await PhoneSession.connect(to: daemon.unixEndpoint, deviceName: "sdk phone")
        try await first.announce([app])
        let token = await first.resumptionToken
        #expect(token.count == 32)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try RequestErrorTests.launch(hmi, ResumptionTests.appID).1.code == .ok)
        let controller = try await first.waitForScene(appID: ResumptionTests.appID)
        try await controller.setRootTemplate(TemplateSessionErrorTests.list("root"))

        await first.connection.drop()
        var status = HUStatus()
        for _ in 0..<50 where status.phoneLink != .reconnecting {
            status = try ResumptionTests.status(hmi)
            if status.phoneLink != .reconnecting { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        #expect(status.phoneLink == .reconnecting)

        let second = try await PhoneSession.connect(to: daemon.unixEndpoint, deviceName: "sdk phone")
        let resumed = try await second.resume(token: token, apps: [app])
        #expect(resumed.apps.map(\.appID) == [ResumptionTests.appID])
        #expect(await second.resumptionToken == resumed.resumptionToken)
        let again = try #require(await second.interfaceController(for: ResumptionTests.appID))
        #expect(again.scene.sceneID == controller.scene.sceneID)
        try await again.pushTemplate(TemplateSessionErrorTests.list("next"))
        status = try ResumptionTests.status(hmi)
        #expect(status.phoneLink == .connected)
        #expect(status.app.first?.scene.first?.stack == ["root", "next"])
        await second.close()
    }
}
