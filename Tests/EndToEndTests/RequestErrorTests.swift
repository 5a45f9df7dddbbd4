import HeadUnitWire
import TestSupport
import Testing

/// Request-level error codes (100+) provoked over a real socket. These need
/// the Car (HeadUnitCore/Car*.swift); they never close the connection.
@Suite("Request errors over real sockets")
struct RequestErrorTests {
    static let audio = "com.apple.developer.carplay-audio"

    static func app(_ id: String, entitlements: [String] = [audio]) -> HUAppInfo {
        var app = HUAppInfo()
        app.appID = id
        app.displayName = id
        app.entitlements = entitlements
        return app
    }

    /// Announces apps and returns the decisions.
    static func announce(_ phone: RawSocketClient, _ apps: [HUAppInfo], requestID: UInt32 = 1) throws -> (UInt32, HUResult) {
        var announce = HUAnnounceApps()
        announce.deviceName = "Test Phone"
        announce.apps = apps
        try phone.send(.announceApps(announce), requestID: requestID)
        return try phone.readResult()
    }

    static func launch(_ hmi: RawSocketClient, _ appID: String, requestID: UInt32 = 2) throws -> (UInt32, HUResult) {
        var launch = HULaunchApp()
        launch.appID = appID
        launch.kind = .main
        try hmi.send(.launchApp(launch), requestID: requestID)
        return try hmi.readResult()
    }

    @Test func noPhone() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let (requestID, result) = try Self.launch(hmi, "com.example.audio", requestID: 21)
            #expect(requestID == 21)
            #expect(result.code == .noPhone)
            #expect(try hmi.pingRoundTrip())
        }
    }

    @Test func unknownApp() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            _ = try Self.announce(phone, [Self.app("com.example.audio")])
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            #expect(try Self.launch(hmi, "com.example.nope").1.code == .unknownApp)
        }
    }

    @Test func entitlementRefusedAndNotLaunchable() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(configJSON: "\"entitlements\": {\"allowed\": [\"\(Self.audio)\"]}")
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let (_, result) = try Self.announce(phone, [Self.app("com.example.maps", entitlements: ["com.apple.developer.carplay-maps"])])
            #expect(result.code == .ok)
            let decision = result.appDecisions.decisions.first
            #expect(decision?.accepted == false)
            #expect(decision?.code == .entitlementRefused)
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            #expect(try Self.launch(hmi, "com.example.maps").1.code == .appNotLaunchable)
        }
    }

    @Test func duplicateApp() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let (_, result) = try Self.announce(phone, [Self.app("com.example.audio"), Self.app("com.example.audio")])
            #expect(result.appDecisions.decisions.map(\.code) == [.ok, .duplicateApp])
        }
    }

    @Test func phoneAlreadyConnected() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let first = try daemon.connectUnix()
            try first.handshake(role: .phone, name: "first")
            _ = try Self.announce(first, [Self.app("com.example.audio")])
            let second = try daemon.connectTCP()
            try second.handshake(role: .phone, name: "second")
            #expect(try Self.announce(second, [Self.app("com.example.other")]).1.code == .phoneAlreadyConnected)
        }
    }

    @Test func notYourScene() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            _ = try Self.announce(phone, [Self.app("com.example.a"), Self.app("com.example.b")])
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            #expect(try Self.launch(hmi, "com.example.a").1.code == .ok)
            // The phone learns app a's scene id.
            var sceneID: UInt32?
            while sceneID == nil {
                let envelope = try phone.readEnvelope()
                if case .sceneConnected(let scene) = envelope.body, scene.appID == "com.example.a" { sceneID = scene.sceneID }
            }
            // App b tries to draw into app a's scene.
            var request = HUTemplateRequest()
            request.appID = "com.example.b"
            request.sceneID = sceneID!
            var template = HUTemplate()
            template.id = "root"
            template.list = HUListTemplate()
            request.setRoot = template
            try phone.send(.templateRequest(request), requestID: 5)
            let (requestID, result) = try phone.readResult()
            #expect(requestID == 5)
            #expect(result.code == .notYourScene)
        }
    }
}
