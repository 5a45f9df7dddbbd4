import Foundation
import HeadUnitWire
import TestSupport
import Testing

/// The phone's assistant over real sockets (PROTOCOL.md section 27): the
/// voice button opens it on the car, the microphone streams to the phone
/// while it listens, the music waits and comes back, the driver's typed
/// request reaches the phone, and each refusal (27.6's codes and the others
/// it uses) has its code.
@Suite("The phone's assistant over real sockets", .serialized)
struct AssistantSocketTests {
    static let music = "com.example.music"
    static let chat = "com.example.chat"

    struct Rig {
        let daemon: TestDaemon
        let hmi: RecordingPeer
        let phone: RecordingPeer
        let cluster: RecordingPeer

        static func start(assistant: Bool = true) throws -> Rig {
            let daemon = try TestDaemon.launch()
            let hmi = RecordingPeer(try daemon.connectUnix())
            try hmi.client.handshake(role: .hmi, name: "hmi")
            let cluster = RecordingPeer(try daemon.connectUnix())
            try cluster.client.handshake(role: .cluster, name: "cluster")
            #expect(try cluster.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
            let phone = RecordingPeer(try daemon.connectUnix())
            try phone.client.handshake(role: .phone, name: "phone")
            let announced = try phone.request(.announceApps(HUAnnounceApps.with {
                $0.deviceName = "phone"
                $0.assistant = assistant
                $0.apps = [
                    HUAppInfo.with { $0.appID = music; $0.displayName = "Music"; $0.entitlements = ["com.apple.developer.carplay-audio"] },
                    HUAppInfo.with { $0.appID = chat; $0.displayName = "Chat"; $0.entitlements = ["com.apple.developer.carplay-communication"] },
                ]
            }))
            #expect(announced.code == .ok, "\(announced.message)")
            return Rig(daemon: daemon, hmi: hmi, phone: phone, cluster: cluster)
        }

        func voiceButton() throws -> HUResult {
            try hmi.request(.carButton(HUCarButtonPressed.with { $0.button = .voice }))
        }

        func event() throws -> HUAssistantEvent {
            try phone.waitFor { if case .assistantEvent(let event) = $0.body { event } else { nil } }
        }

        func update(_ session: UInt64, _ state: HUAssistantState, text: String = "", end: Bool = false) throws -> HUResult {
            try phone.request(.assistantUpdate(HUAssistantUpdate.with {
                $0.sessionID = session
                $0.state = state
                $0.text = text
                $0.end = end
            }))
        }

        /// The metadata stream's audio section once `match` holds.
        func audio(_ match: @escaping (HUAudioSection) -> Bool) throws -> HUAudioSection {
            try cluster.waitFor { envelope -> HUAudioSection? in
                if case .metadataUpdate(let update) = envelope.body, update.state.hasAudio, match(update.state.audio) { return update.state.audio }
                return nil
            }
        }

        func stop() {
            hmi.close()
            phone.close()
            cluster.close()
            _ = try? daemon.terminate()
        }
    }

    @Test func theVoiceButtonOpensTheAssistantWithTheMicrophoneAndTheMusicComesBackAfter() async throws {
        try await onOwnThread {
            let rig = try Rig.start()
            defer { rig.stop() }
            // The music plays: its app owns the main audio.
            let launched = try rig.hmi.request(.launchApp(HULaunchApp.with { $0.appID = Self.music }))
            #expect(launched.code == .ok)
            let scene = try rig.phone.waitFor { if case .sceneConnected(let c) = $0.body { c.sceneID } else { nil } }
            #expect(try rig.phone.request(.templateRequest(HUTemplateRequest.with {
                $0.appID = Self.music
                $0.sceneID = scene
                $0.updateNowPlaying = HUNowPlayingTemplate.with { $0.title = "Song"; $0.durationSeconds = 200; $0.playbackRate = 1 }
            })).code == .ok)
            _ = try rig.audio { $0.appID == Self.music && !$0.mainPaused }

            let opened = try rig.voiceButton()
            #expect(opened.code == .ok && opened.assistant.sessionID != 0)
            let started = try rig.event()
            #expect(started.sessionID == opened.assistant.sessionID && started.started.source == .voiceButton)
            _ = try rig.audio { $0.mainPaused && $0.voiceSessionActive && $0.promptStyle == .none }

            // Listening: the microphone is the phone's (its MEDIA: MicrophoneSocketTests).
            #expect(try rig.update(started.sessionID, .listening).code == .ok)
            let microphone = try rig.phone.waitFor { if case .microphoneStarted(let m) = $0.body { m } else { nil } }
            #expect(microphone.appID == "" && microphone.purpose == .assistant)
            let shown = try rig.hmi.waitFor { if case .homeScreen(let h) = $0.body, h.assistant.state == .listening { h } else { nil } }
            #expect(shown.assistant.sessionID == started.sessionID)

            // The driver's typed request reaches the phone; the assistant answers and ends.
            let said = try rig.hmi.request(.assistantInput(HUAssistantInput.with {
                $0.say = HUAssistantSay.with { $0.text = "send a message to Jane saying on my way" }
            }))
            #expect(said.code == .ok && said.assistant.sessionID == started.sessionID)
            let heard = try rig.event()
            #expect(heard.heard.text == "send a message to Jane saying on my way")
            #expect(try rig.update(started.sessionID, .speaking, text: "Message sent to Jane").code == .ok)
            let closed = try rig.phone.waitFor { if case .audioStreamClosed(let c) = $0.body, c.type == .microphone { c } else { nil } }
            #expect(closed.reason == .assistantNotListening)
            let exchange = try rig.hmi.waitFor { if case .homeScreen(let h) = $0.body, h.assistant.state == .speaking { h } else { nil } }
            #expect(exchange.assistant.turns.map(\.text) == ["send a message to Jane saying on my way", "Message sent to Jane"])
            #expect(try rig.update(started.sessionID, .unspecified, end: true).code == .ok)
            let ended = try rig.hmi.waitFor { if case .homeScreen(let h) = $0.body, h.hasLastAssistantEnded { h } else { nil } }
            #expect(!ended.hasAssistant && ended.lastAssistantEnded.reason == .byAssistant)
            // The music comes back.
            _ = try rig.audio { !$0.mainPaused && !$0.voiceSessionActive && $0.appID == Self.music }
        }
    }

    @Test func everyRefusalOfAnAssistantMessageHasItsCode() async throws {
        try await onOwnThread {
            let bare = try Rig.start(assistant: false)
            #expect(try bare.voiceButton().code == .noAssistant)
            #expect(try bare.update(1, .listening).code == .noAssistant)
            bare.stop()

            let rig = try Rig.start()
            defer { rig.stop() }
            // Roles: the HMI is the driver, the phone the assistant.
            #expect(try rig.hmi.request(.assistantUpdate(HUAssistantUpdate())).code == .notForRole)
            #expect(try rig.phone.request(.assistantInput(HUAssistantInput())).code == .notForRole)
            #expect(try rig.hmi.request(.assistantInput(HUAssistantInput())).code == .invalidArgument)
            #expect(try rig.hmi.request(.assistantInput(HUAssistantInput.with { $0.end = HUAssistantEnd() })).code == .unknownSession)
            let unknownApp = try rig.hmi.request(.assistantInput(HUAssistantInput.with { $0.start = HUAssistantStart.with { $0.appID = "com.example.nobody" } }))
            #expect(unknownApp.code == .unknownApp)
            let long = try rig.hmi.request(.assistantInput(HUAssistantInput.with { $0.say = HUAssistantSay.with { $0.text = String(repeating: "x", count: 513) } }))
            #expect(long.code == .invalidArgument && long.limit == "assistant.textBytes" && long.limitValue == 512)
            #expect(try rig.update(1, .listening).code == .unknownSession)

            let opened = try rig.voiceButton()
            #expect(opened.code == .ok)
            #expect(try rig.event().started.source == .voiceButton)
            #expect(try rig.hmi.request(.assistantInput(HUAssistantInput.with { $0.start = HUAssistantStart() })).code == .assistantBusy)
            #expect(try rig.update(opened.assistant.sessionID, .starting).code == .invalidArgument)
            // The car's own call outranks it: the session ends, and a new one is refused.
            var state = try rig.hmi.request(.getStatus(HUGetStatus())).status.vehicleState
            state.callActive = true
            #expect(try rig.hmi.request(.setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
            let ended = try rig.event()
            #expect(ended.sessionID == opened.assistant.sessionID && ended.ended.reason == .call)
            #expect(try rig.voiceButton().code == .assistantBusy)

            // Notifications (27.7): a body is refused, one without is shown; the HMI names what the car holds.
            func post(_ app: String, body: String = "") throws -> HUResult {
                try rig.phone.request(.postNotification(HUPostNotification.with {
                    $0.appID = app; $0.notificationID = "n1"; $0.category = .message; $0.sender = "Alice"; $0.body = body
                }))
            }
            #expect(try post(Self.chat, body: "See you at 6").code == .notificationNotAllowed)
            #expect(try post(Self.music).code == .notAllowedForCategory)
            #expect(try rig.hmi.request(.postNotification(HUPostNotification())).code == .notForRole)
            #expect(try post(Self.chat).code == .ok)
            let shown = try rig.hmi.waitFor { if case .homeScreen(let h) = $0.body, !h.notifications.isEmpty { h } else { nil } }
            #expect(shown.notifications.map(\.sender) == ["Alice"])
            let unknown = try rig.hmi.request(.notificationInput(HUNotificationInput.with {
                $0.select = HUNotificationRef.with { $0.appID = Self.chat; $0.notificationID = "n2" }
            }))
            #expect(unknown.code == .unknownNotification)
            #expect(rig.daemon.isRunning)
        }
    }
}
