import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// The car's microphone only while a voice-control template is shown on the
/// main screen, and its use in the metadata stream (issue 47 item 3); an
/// app's streams and microphone end with APP_CLOSED when its scenes end, and
/// the microphone starts after the very request that wants it (issue 48 bugs
/// 2 to 4). PROTOCOL.md 24.3 and 24.6, as pure values: no socket, no clock.
@Suite struct MicrophoneRuleTests {
    static let maps = "com.example.maps"
    static let music = "com.example.music"
    static let pcm = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
    static let voiceControl = HUTemplate.with {
        $0.id = "voice"
        $0.voiceControl = HUVoiceControlTemplate.with {
            $0.states = [HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening"] }]
            $0.activeStateID = "listening"
        }
    }

    // MARK: - The rule alone

    @Test func theListeningAssistantThenTheShownVoiceControlTemplateThenTheLineThenTheCarsCall() {
        func wanted(_ shown: String?, _ holder: String?, _ carCall: Bool, _ voices: [String], assistant: Bool = false) -> MicrophoneUse? {
            MicrophoneRule.wanted(
                assistantListening: assistant, voiceControlShown: shown, lineHolder: holder, vehicleCallActive: carCall, voiceStreamApps: { voices })
        }
        #expect(wanted(Self.maps, nil, false, [], assistant: true) == MicrophoneUse(appID: AssistantSession.audioOwner, purpose: .assistant))
        #expect(wanted(nil, nil, false, [Self.music]) == nil, "a voice stream alone, with no call, takes nothing")
        #expect(wanted(Self.maps, "chat", true, ["chat"]) == MicrophoneUse(appID: Self.maps, purpose: .voiceControl))
        #expect(wanted(nil, "chat", true, [Self.music, "chat"]) == MicrophoneUse(appID: "chat", purpose: .call))
        #expect(wanted(nil, "chat", false, [Self.music]) == nil, "the line's holder needs a voice stream of its own")
        #expect(wanted(nil, nil, true, [Self.music, "chat"]) == MicrophoneUse(appID: Self.music, purpose: .call))
        #expect(wanted(nil, nil, true, []) == nil)
        var asked = false
        _ = MicrophoneRule.wanted(assistantListening: false, voiceControlShown: nil, lineHolder: nil, vehicleCallActive: false, voiceStreamApps: { asked = true; return [] })
        #expect(!asked, "outside a call the streams are not read (the rule runs after every input)")
    }

    @Test func eachStopHasItsReason() {
        let voice = MicrophoneUse(appID: Self.maps, purpose: .voiceControl)
        let call = MicrophoneUse(appID: "chat", purpose: .call)
        #expect(MicrophoneRule.stopReason(voice, appAlive: true, voiceControlPresented: true) == .voiceControlHidden)
        #expect(MicrophoneRule.stopReason(voice, appAlive: true, voiceControlPresented: false) == .voiceControlDismissed)
        #expect(MicrophoneRule.stopReason(call, appAlive: true, voiceControlPresented: false) == .callEnded)
        #expect(MicrophoneRule.stopReason(voice, appAlive: false, voiceControlPresented: true) == .appClosed)
        #expect(MicrophoneRule.stopReason(call, appAlive: false, voiceControlPresented: false) == .appClosed)
    }

    // MARK: - Through the Car

    static func harness() -> CarHarness {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        #expect(h.announce([(maps, [EntitlementKey.maps]), (music, [EntitlementKey.audio])]).code == .ok)
        return h
    }

    /// The microphone's starts and stops the phone was told, in order.
    static func microphone(_ h: inout CarHarness) -> [HUEnvelope.OneOf_Body] {
        h.drain(h.phone).compactMap(\.body).filter {
            switch $0 {
            case .microphoneStarted: return true
            case .audioStreamClosed(let closed): return closed.type == .microphone
            default: return false
            }
        }
    }

    static func published(_ h: inout CarHarness) -> MicrophoneUse? {
        _ = h.car.takeMetadata()
        let audio = h.car.clusterFeed.state.audio
        return audio.microphoneAppID.isEmpty ? nil : MicrophoneUse(appID: audio.microphoneAppID, purpose: audio.microphonePurpose)
    }

    @Test func aHiddenSceneThatPresentsVoiceControlGetsNoMicrophone() {
        var h = Self.harness()
        let scene = h.launch(Self.maps)
        #expect(h.template(Self.maps, scene, .setRoot(listTemplate("root", items: 1))).code == .ok)
        // Another app on screen: the navigation app's scene stays connected, hidden.
        _ = h.launch(Self.music)
        #expect(h.template(Self.maps, scene, .present(Self.voiceControl)).code == .ok)
        #expect(Self.microphone(&h).isEmpty && !h.engine.contains(where: { if case .microphone(stream: _?) = $0 { true } else { false } }))
        #expect(Self.published(&h) == nil)
        // The home screen: still not shown.
        #expect(h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() })).code == .ok)
        #expect(Self.microphone(&h).isEmpty)

        // The driver opens the app: its template is on screen, the microphone starts and is published.
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Self.maps })).code == .ok)
        guard case .microphoneStarted(let started)? = Self.microphone(&h).first else { Issue.record("no microphone once shown"); return }
        #expect(started.appID == Self.maps && started.purpose == .voiceControl)
        #expect(Self.published(&h) == MicrophoneUse(appID: Self.maps, purpose: .voiceControl))

        // The driver goes home: it stops at once, hidden (the template is still presented).
        #expect(h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() })).code == .ok)
        guard case .audioStreamClosed(let closed)? = Self.microphone(&h).first else { Issue.record("going home kept the microphone"); return }
        #expect(closed.streamID == started.stream.streamID && closed.reason == .voiceControlHidden)
        #expect(h.engine.last == .microphone(stream: nil))
        #expect(Self.published(&h) == nil)

        // Shown again, then another app goes on screen: it starts and stops again.
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Self.maps })).code == .ok)
        guard case .microphoneStarted(let again)? = Self.microphone(&h).first else { Issue.record("no microphone when shown again"); return }
        #expect(again.stream.streamID != started.stream.streamID)
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Self.music })).code == .ok)
        guard case .audioStreamClosed(let hidden)? = Self.microphone(&h).first else { Issue.record("another app on screen kept the microphone"); return }
        #expect(hidden.streamID == again.stream.streamID && hidden.reason == .voiceControlHidden)

        // Shown and dismissed: VOICE_CONTROL_DISMISSED.
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Self.maps })).code == .ok)
        #expect(Self.microphone(&h).count == 1)
        #expect(h.template(Self.maps, scene, .dismiss(HUPopTemplate())).code == .ok)
        guard case .audioStreamClosed(let dismissed)? = Self.microphone(&h).first else { Issue.record("dismissing kept the microphone"); return }
        #expect(dismissed.reason == .voiceControlDismissed)
    }

    /// Issue 48 bug 2: scenes ending close the app's streams with APP_CLOSED, not FOCUS_LOST.
    @Test func anAppsScenesEndingClosesItsStreamsWithAppClosed() {
        var h = Self.harness()
        let scene = h.launch(Self.music)
        #expect(h.request(h.phone, .templateRequest(HUTemplateRequest.with {
            $0.appID = Self.music; $0.sceneID = scene
            $0.updateNowPlaying = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 1 }
        })).code == .ok)
        let main = h.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = Self.music; $0.type = .main; $0.format = Self.pcm }))
        #expect(main.code == .ok)
        _ = h.launch(Self.maps)
        #expect(h.request(h.phone, .navigationRequest(HUNavigationRequest.with {
            $0.appID = Self.maps; $0.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })
        })).code == .ok)
        let prompt = h.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = Self.maps; $0.type = .alternate; $0.format = Self.pcm }))
        #expect(prompt.code == .ok)
        _ = h.drain(h.phone)
        func closed() -> [HUAudioStreamClosed] {
            h.drain(h.phone).compactMap { if case .audioStreamClosed(let closed) = $0.body { closed } else { nil } }
        }
        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = Self.music })).code == .ok)
        #expect(closed().map { [$0.streamID: $0.reason] } == [[main.audioStream.streamID: .appClosed]])
        #expect(h.request(h.hmi, .closeApp(HUCloseApp.with { $0.appID = Self.maps })).code == .ok)
        #expect(closed().map { [$0.streamID: $0.reason] } == [[prompt.audioStream.streamID: .appClosed]])
    }

    /// Issue 48 bugs 3 and 4: a VOICE stream opened during the car's call
    /// starts the microphone after that very request, and ends with its app's scenes.
    @Test func aVoiceStreamDuringTheCarsCallStartsTheMicrophoneAtOnceAndEndsWithItsApp() {
        var h = Self.harness()
        _ = h.launch(Self.music)
        #expect(h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state.callActive = true })).code == .ok)
        _ = h.drain(h.phone)
        let voice = h.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = Self.music; $0.type = .voice; $0.format = Self.pcm }))
        #expect(voice.code == .ok)
        // The Result first, then the microphone: no other request needed.
        let sent = h.drain(h.phone)
        guard sent.count == 2, case .result = sent[0].body, case .microphoneStarted(let started) = sent[1].body else {
            Issue.record("the microphone did not start after the request: \(sent)"); return
        }
        #expect(started.appID == Self.music && started.purpose == .call)
        #expect(Self.published(&h) == MicrophoneUse(appID: Self.music, purpose: .call))

        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = Self.music })).code == .ok)
        let closed = h.drain(h.phone).compactMap { if case .audioStreamClosed(let closed) = $0.body { closed } else { nil } }
        #expect(closed.map(\.type) == [.voice, .microphone] && closed.allSatisfy { $0.reason == .appClosed })
        #expect(Self.published(&h) == nil)
        // Its MEDIA in flight is dropped without a word, and never credited.
        var payload = ByteBuffer()
        payload.writeInteger(UInt64(0))
        payload.writeBytes([UInt8](repeating: 0, count: 4 * 96))
        h.apply(h.car.receiveMedia(channel: voice.audioStream.streamID, payload, from: h.phone))
        #expect(h.refusedData[h.phone, default: []].isEmpty)
        #expect(!h.engine.contains { if case .frame(stream: voice.audioStream.streamID, _, _, _) = $0 { true } else { false } })
        // The car's microphone sends nothing more to it.
        h.apply(h.car.microphoneCaptured(stream: started.stream.streamID, timestamp: 0, pcm: ByteBuffer(bytes: [0, 0, 0, 0])))
        #expect(h.media[h.phone, default: []].isEmpty)
    }
}
