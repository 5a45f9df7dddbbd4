import HeadUnitWire
import TestSupport
import Testing

/// Issue 47's abuse tables (RELIABILITY.md, "Abuse tables by capability"),
/// over real sockets: what one peer could do to another through the apps of a
/// phone it is not.
@Suite("One peer against another's apps, over real sockets")
struct CapabilityAbuseSocketTests {
    /// A second phone connection speaks for the first phone's app (by its id
    /// and scene id): every request is UNKNOWN_APP (PROTOCOL.md 16.2 step 2,
    /// 16.4, 23.5), and the app's scene and screen carry on.
    @Test func aSecondPhoneCannotDrawIntoOrCloseTheFirstPhonesApp() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            _ = try phone.handshake(role: .phone, name: "owner")
            #expect(try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.a")]).1.code == .ok)
            let hmi = try daemon.connectUnix()
            _ = try hmi.handshake(role: .hmi)
            #expect(try RequestErrorTests.launch(hmi, "com.example.a").1.code == .ok)
            var sceneID: UInt32?
            while sceneID == nil {
                if case .sceneConnected(let scene) = try phone.readEnvelope().body, scene.appID == "com.example.a" { sceneID = scene.sceneID }
            }

            let intruder = try daemon.connectTCP()
            _ = try intruder.handshake(role: .phone, name: "intruder")
            var template = HUTemplate()
            template.id = "spoof"
            template.list = HUListTemplate()
            let spoofed: [HUEnvelope.OneOf_Body] = [
                .templateRequest(HUTemplateRequest.with { $0.appID = "com.example.a"; $0.sceneID = sceneID!; $0.setRoot = template }),
                .appClosed(HUAppClosed.with { $0.appID = "com.example.a" }),
                .remoteCommandAnswer(HURemoteCommandAnswer.with { $0.appID = "com.example.a"; $0.commandID = 1; $0.status = .success }),
            ]
            for (index, body) in spoofed.enumerated() {
                let requestID = UInt32(10 + index)
                try intruder.send(body, requestID: requestID)
                let answer = try intruder.readResult()
                #expect(answer.requestID == requestID)
                #expect(answer.result.code == .unknownApp, "\(body): \(answer.result)")
            }

            // The owner's app still has its scene: its root is accepted, and nothing ended it meanwhile.
            var root = HUTemplate()
            root.id = "root"
            root.list = HUListTemplate()
            try phone.send(.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.a"; $0.sceneID = sceneID!; $0.setRoot = root }), requestID: 20)
            var result: HUResult?
            while result == nil {
                let envelope = try phone.readEnvelope()
                if case .sceneDisconnected(let gone) = envelope.body { Issue.record("the owner's scene ended: \(gone)") }
                if case .result(let answer) = envelope.body, envelope.requestID == 20 { result = answer }
            }
            #expect(result?.code == .ok)
            // And the HMI's main screen shows the owner's root, never the intruder's template.
            var shown: HURenderedScreen?
            while shown?.top.id != "root" {
                let envelope = try hmi.readEnvelope()
                if case .screenUpdate(let update) = envelope.body, update.screen == .main, case .full(let screen) = update.change {
                    #expect(screen.top.id != "spoof")
                    shown = screen
                }
            }
            #expect(shown?.appID == "com.example.a")
        }
    }
}
