import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 47 item 3 and issue 48 bugs 2 to 4 over real sockets: the car's
/// microphone only while a voice-control template is shown on the main
/// screen, its use published in the metadata stream; an app's streams end
/// with APP_CLOSED when its scenes end; the microphone starts after the very
/// request that wants it (PROTOCOL.md 24.3, 24.6, 19.5).
private let navigation = "com.example.maps"
private let music = "com.example.music"
private let pcmStereo = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
private let voiceControl = HUTemplate.with {
    $0.id = "voice"
    $0.voiceControl = HUVoiceControlTemplate.with {
        $0.states = [HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening"] }]
        $0.activeStateID = "listening"
    }
}

@Suite("The microphone only while shown, and published", .serialized)
struct MicrophoneSocketTests {
    typealias Rig = AudioStreamSocketTests.Rig
    typealias AudioPhone = AudioStreamSocketTests.AudioPhone

    /// A cluster subscribed to the metadata stream.
    static func subscribe(_ rig: Rig) throws -> RecordingPeer {
        let cluster = RecordingPeer(try rig.daemon.connectUnix())
        try cluster.client.handshake(role: .cluster, name: "cluster")
        #expect(try cluster.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        return cluster
    }

    /// Waits for the metadata's audio section to say the microphone streams
    /// to `appID` (empty: to nobody).
    @discardableResult
    static func published(_ cluster: RecordingPeer, _ appID: String) throws -> HUAudioSection {
        try cluster.waitFor { envelope -> HUAudioSection? in
            if case .metadataUpdate(let update) = envelope.body, update.state.hasAudio, update.state.audio.microphoneAppID == appID {
                return update.state.audio
            }
            return nil
        }
    }

    /// Everything the daemon sent the phone up to now: a request answered
    /// after all of it (a refused CloseAudioStream changes nothing).
    static func barrier(_ phone: AudioPhone) throws {
        #expect(try phone.request(.closeAudioStream(HUCloseAudioStream.with { $0.streamID = 4242 })).code == .unknownSession)
    }

    static func microphoneStarted(_ phone: AudioPhone) throws -> HUMicrophoneStarted {
        try phone.waitFor { envelope -> HUMicrophoneStarted? in
            if case .microphoneStarted(let started) = envelope.body { return started }
            return nil
        }
    }

    static func closed(_ phone: AudioPhone, type: HUAudioStreamType) throws -> HUAudioStreamClosed {
        try phone.waitFor { envelope -> HUAudioStreamClosed? in
            if case .audioStreamClosed(let closed) = envelope.body, closed.type == type { return closed }
            return nil
        }
    }

    /// Reads microphone MEDIA until `count` frames came on `stream`, granting each back.
    static func readMicrophone(_ phone: AudioPhone, stream: UInt32, count: Int) throws {
        var read = 0
        let deadline = RawSocketClient.now() + 30
        while read < count, RawSocketClient.now() < deadline {
            try phone.pump(timeout: 1)
            for (channel, payload) in phone.media {
                #expect(channel == stream)
                read += 1
                try phone.client.send(.audioCredit(HUAudioCredit.with { $0.streamID = stream; $0.frames = UInt32((payload.count - 8) / 2) }))
            }
            phone.media.removeAll()
        }
        #expect(read >= count, "\(count) microphone frames arrived")
    }

    /// No microphone MEDIA after its AudioStreamClosed: whatever was read up
    /// to the close is dropped, and nothing comes before an answer sent after it.
    static func nothingMoreAfterTheClose(_ phone: AudioPhone) throws {
        phone.media.removeAll()
        try barrier(phone)
        #expect(phone.media.isEmpty, "microphone audio after its AudioStreamClosed")
    }

    /// The attack: a navigation app launched once keeps its main scene
    /// connected; another app on screen, it presents a voice-control template
    /// on that hidden scene. No microphone, nothing published; once the driver
    /// shows the app, the microphone streams and the metadata says so; going
    /// home, or another app on screen, stops it at once (VOICE_CONTROL_HIDDEN).
    @Test func aHiddenSceneGetsNoMicrophoneAndGoingHomeStopsIt() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            let cluster = try Self.subscribe(rig)
            let scene = try rig.launch(navigation)
            func template(_ op: HUTemplateRequest.OneOf_Op) -> HUEnvelope.OneOf_Body {
                .templateRequest(HUTemplateRequest.with { $0.appID = navigation; $0.sceneID = scene; $0.op = op })
            }
            #expect(try rig.phone.request(template(.setRoot(NavWire.mapRoot()))).code == .ok)
            let _ = try rig.launch(music)  // on screen now; the map's scene stays connected

            #expect(try rig.phone.request(template(.present(voiceControl))).code == .ok)
            try Self.barrier(rig.phone)
            #expect(!rig.phone.log.contains { if case .microphoneStarted = $0.body { true } else { false } }, "a hidden scene got the microphone")
            #expect(rig.phone.media.isEmpty)
            // Everything the cluster was sent for that request came before this answer.
            #expect(try cluster.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
            #expect(!cluster.log.contains { envelope in
                if case .metadataUpdate(let update) = envelope.body { return !update.state.audio.microphoneAppID.isEmpty }
                return false
            })

            // The driver opens the app: the template is on screen.
            #expect(try rig.hmi.request(.launchApp(HULaunchApp.with { $0.appID = navigation })).code == .ok)
            let started = try Self.microphoneStarted(rig.phone)
            #expect(started.appID == navigation && started.purpose == .voiceControl)
            let shown = try Self.published(cluster, navigation)
            #expect(shown.microphonePurpose == .voiceControl)
            try Self.readMicrophone(rig.phone, stream: started.stream.streamID, count: 5)

            // The driver goes home: the microphone stops at once, and the metadata says so.
            #expect(try rig.hmi.request(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() })).code == .ok)
            let hidden = try Self.closed(rig.phone, type: .microphone)
            #expect(hidden.streamID == started.stream.streamID && hidden.reason == .voiceControlHidden)
            try Self.nothingMoreAfterTheClose(rig.phone)
            try Self.published(cluster, "")

            // Shown again, it starts again; another app on screen stops it.
            #expect(try rig.hmi.request(.launchApp(HULaunchApp.with { $0.appID = navigation })).code == .ok)
            let again = try Self.microphoneStarted(rig.phone)
            #expect(again.appID == navigation && again.stream.streamID != started.stream.streamID)
            try Self.published(cluster, navigation)
            #expect(try rig.hmi.request(.launchApp(HULaunchApp.with { $0.appID = music })).code == .ok)
            let covered = try Self.closed(rig.phone, type: .microphone)
            #expect(covered.streamID == again.stream.streamID && covered.reason == .voiceControlHidden)
            try Self.nothingMoreAfterTheClose(rig.phone)
            try Self.published(cluster, "")
            cluster.close()
        }
    }

    /// Issue 48 bug 2: AppClosed and the HMI's CloseApp end the app's MAIN
    /// and ALTERNATE streams with APP_CLOSED, not FOCUS_LOST (24.3).
    @Test func scenesEndingCloseTheAppsStreamsWithAppClosed() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(music)
            let main = try rig.phone.open(music, .main, pcmStereo)
            #expect(main.code == .ok, "\(main.message)")
            let _ = try rig.launch(navigation)
            #expect(try rig.phone.request(.navigationRequest(HUNavigationRequest.with {
                $0.appID = navigation; $0.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 10_000 })
            })).code == .ok)
            let prompt = try rig.phone.open(navigation, .alternate, pcmStereo)
            #expect(prompt.code == .ok, "\(prompt.message)")

            #expect(try rig.phone.request(.appClosed(HUAppClosed.with { $0.appID = music })).code == .ok)
            let mainClosed = try Self.closed(rig.phone, type: .main)
            #expect(mainClosed.streamID == main.audioStream.streamID && mainClosed.reason == .appClosed && mainClosed.appID == music)

            #expect(try rig.hmi.request(.closeApp(HUCloseApp.with { $0.appID = navigation })).code == .ok)
            let promptClosed = try Self.closed(rig.phone, type: .alternate)
            #expect(promptClosed.streamID == prompt.audioStream.streamID && promptClosed.reason == .appClosed && promptClosed.appID == navigation)
        }
    }

    /// Issue 48 bugs 3 and 4: during the car's own call, a VOICE stream
    /// starts the microphone right after its Result (before the answer to a
    /// request sent after it), the metadata shows it; when the app's scenes
    /// end, the VOICE stream and the microphone end (APP_CLOSED), its MEDIA
    /// is dropped without a word and no microphone audio follows.
    @Test func aVoiceStreamDuringTheCarsCallStartsTheMicrophoneAtOnceAndEndsWithItsApp() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            let cluster = try Self.subscribe(rig)
            let _ = try rig.launch(music)
            #expect(try rig.hmi.request(.setVehicleState(HUSetVehicleState.with { $0.state.callActive = true })).code == .ok)

            let voice = try rig.phone.open(music, .voice, pcmStereo)
            #expect(voice.code == .ok, "\(voice.message)")
            // A request that settles audio at its end (any template request
            // does), answered NOT_CONNECTED: the microphone must not wait for it.
            let barrier = try rig.phone.request(.templateRequest(HUTemplateRequest.with {
                $0.appID = music; $0.sceneID = 9999; $0.op = .pop(HUPopTemplate())
            }))
            #expect(barrier.code != .ok)
            #expect(rig.phone.log.contains { if case .microphoneStarted = $0.body { true } else { false } },
                    "MicrophoneStarted came before the answer to the next request")
            let started = try Self.microphoneStarted(rig.phone)
            #expect(started.appID == music && started.purpose == .call)
            let shown = try Self.published(cluster, music)
            #expect(shown.microphonePurpose == .call)
            try Self.readMicrophone(rig.phone, stream: started.stream.streamID, count: 3)

            #expect(try rig.phone.request(.appClosed(HUAppClosed.with { $0.appID = music })).code == .ok)
            let voiceClosed = try Self.closed(rig.phone, type: .voice)
            #expect(voiceClosed.streamID == voice.audioStream.streamID && voiceClosed.reason == .appClosed)
            let microphoneClosed = try Self.closed(rig.phone, type: .microphone)
            #expect(microphoneClosed.streamID == started.stream.streamID && microphoneClosed.reason == .appClosed)
            try Self.published(cluster, "")
            // MEDIA on the closed stream: in flight, dropped without a word (no refusal, no credit).
            let creditBefore = rig.phone.credit[voice.audioStream.streamID, default: 0]
            try rig.phone.sendMedia(voice.audioStream.streamID, timestamp: 0, [UInt8](repeating: 0, count: 4 * 960), frames: 960)
            try Self.nothingMoreAfterTheClose(rig.phone)
            #expect(!rig.phone.log.contains { envelope in
                if case .result(let result) = envelope.body { return envelope.requestID == 0 && result.code != .ok }
                return false
            })
            #expect(rig.phone.credit[voice.audioStream.streamID, default: 0] == creditBefore - 960, "no credit came back for it")
            cluster.close()
        }
    }
}
