import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Audio focus (PROTOCOL.md section 19.8): the car's source, the phone's app, navigation prompts.
@Suite struct AudioFocusTests {
    @Test func activatingTheAppsAudioStopsTheCarsOwnSource() {
        var audio = AudioFocus()
        audio.vehicleChanged(carSource: "FM 101.1", callActive: false, voiceSessionActive: false)
        #expect(audio.main == .car(source: "FM 101.1"))
        // A paused app does not take the audio.
        audio.nowPlaying(appID: "radio", playing: false, spoken: false)
        #expect(audio.main == .car(source: "FM 101.1"))
        audio.nowPlaying(appID: "radio", playing: true, spoken: false)
        #expect(audio.main == .phone(appID: "radio"))
        #expect(audio.section.mainOwner == .phone && audio.section.appID == "radio")
        // The driver picks the radio again.
        audio.vehicleChanged(carSource: "FM 95.5", callActive: false, voiceSessionActive: false)
        #expect(audio.main == .car(source: "FM 95.5"))
    }

    /// Issue 48, Q18 and Q25 (PROTOCOL.md 19.8): an app that pauses keeps
    /// the main audio; a voice session ends the prompt that plays, its own app's too.
    @Test func aPausedAppKeepsTheMainAudioAndAVoiceSessionEndsEvenItsOwnPrompt() {
        var audio = AudioFocus()
        audio.nowPlaying(appID: "maps", playing: true, spoken: false)
        audio.nowPlaying(appID: "maps", playing: false, spoken: false)
        #expect(audio.main == .phone(appID: "maps"))
        #expect(AudioStreams.focusProblem(.main, appID: "maps", focus: audio) == nil)
        // Another app playing takes it.
        audio.nowPlaying(appID: "radio", playing: true, spoken: false)
        #expect(AudioStreams.focusProblem(.main, appID: "maps", focus: audio) != nil)
        guard case .success = audio.startPrompt(appID: "maps", durationMilliseconds: 3000) else {
            Issue.record("prompt refused")
            return
        }
        #expect(audio.prompt?.appID == "maps")
        audio.setVoiceSession(appID: "maps", active: true)
        #expect(audio.prompt == nil)
        #expect(AudioStreams.focusProblem(.alternate, appID: "maps", focus: audio) != nil)
        #expect(audio.promptStyle == .none)
    }

    @Test func navigationPromptsDuckTheMainAudio() {
        var audio = AudioFocus()
        audio.nowPlaying(appID: "radio", playing: true, spoken: false)
        #expect(audio.startPrompt(appID: "maps", durationMilliseconds: 3000).success == 1)
        let section = audio.section
        #expect(section.promptAppID == "maps" && section.mainDucked && !section.mainPaused)
        let ended = audio.endPrompt(appID: "maps")
        #expect(ended)
        #expect(!audio.section.mainDucked && audio.section.promptAppID.isEmpty)
    }

    @Test func navigationPromptsPauseSpokenAudio() {
        var audio = AudioFocus()
        audio.nowPlaying(appID: "podcasts", playing: true, spoken: true)
        _ = audio.startPrompt(appID: "maps", durationMilliseconds: 3000)
        #expect(audio.section.mainPaused && !audio.section.mainDucked)
    }

    @Test func promptsAreHeldAFewSecondsAtMost() {
        var audio = AudioFocus()
        let long = audio.startPrompt(appID: "maps", durationMilliseconds: 10_001).failure
        #expect(long?.code == .invalidArgument && long?.limit == "navigation.prompt.durationMs" && long?.limitValue == 10_000)
        #expect(audio.startPrompt(appID: "maps", durationMilliseconds: 0).failure?.code == .invalidArgument)
        // A stale timer (an older serial) does not end a newer prompt.
        _ = audio.startPrompt(appID: "maps", durationMilliseconds: 1000)
        _ = audio.startPrompt(appID: "maps", durationMilliseconds: 1000)
        let stale = audio.endPrompt(serial: 1)
        let current = audio.endPrompt(serial: 2)
        #expect(!stale && current)
    }

    @Test func promptStyleIsShortDuringACallAndNoneDuringAVoiceSession() {
        var audio = AudioFocus()
        #expect(audio.promptStyle == .normal)
        audio.vehicleChanged(carSource: "", callActive: true, voiceSessionActive: false)
        #expect(audio.promptStyle == .short)
        audio.vehicleChanged(carSource: "", callActive: true, voiceSessionActive: true)
        #expect(audio.promptStyle == .none)
        #expect(audio.startPrompt(appID: "maps", durationMilliseconds: 1000).failure?.code == .invalidPosition)
        audio.vehicleChanged(carSource: "", callActive: false, voiceSessionActive: false)
        audio.setVoiceSession(appID: "maps", active: true)
        #expect(audio.promptStyle == .none)
        audio.setVoiceSession(appID: "maps", active: false)
        #expect(audio.promptStyle == .normal)
    }

    @Test func anAppGoingAwayReleasesItsAudio() {
        var audio = AudioFocus()
        audio.nowPlaying(appID: "radio", playing: true, spoken: false)
        _ = audio.startPrompt(appID: "maps", durationMilliseconds: 1000)
        audio.appGone("maps")
        #expect(audio.prompt == nil)
        #expect(audio.main == .phone(appID: "radio"))
        audio.appGone("radio")
        #expect(audio.main == .none)
    }
}

@Suite struct CarAudioTests {
    @Test func navigationAppsAreToldThePromptStyleWhenACallStarts() {
        var h = CarHarness()
        _ = h.navigationApp()
        _ = h.drain(h.phone)
        var state = HUVehicleState()
        state.callActive = true
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state }))
        #expect(h.navigationEvents() == [.promptStyle(.short)])
        // Unchanged: not told again.
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state }))
        #expect(h.navigationEvents().isEmpty)
        #expect(h.metadata().audio.promptStyle == .short && h.metadata().audio.callActive)
    }

    @Test func aVoiceSessionNeedsTheVoiceControlTemplatePresented() {
        var h = CarHarness()
        let scene = h.navigationApp()
        #expect(h.navigate(.setVoiceSession(HUVoiceSession.with { $0.active = true })).code == .invalidPosition)
        #expect(h.template(Nav.appID, scene, .present(Fixture.voiceControl("voice"))).code == .ok)
        _ = h.drain(h.phone)
        #expect(h.navigate(.setVoiceSession(HUVoiceSession.with { $0.active = true })).code == .ok)
        #expect(h.navigationEvents() == [.promptStyle(.none)])
        #expect(h.metadata().audio.voiceAppID == Nav.appID)
    }

    /// Presented is not enough: a navigation app whose voice-control
    /// template is hidden (the home screen, or another app, on the main
    /// screen) cannot start a voice session and silence every prompt (19.8).
    @Test func aVoiceSessionNeedsTheVoiceControlTemplateShown() {
        var h = CarHarness()
        let scene = h.navigationApp()
        #expect(h.template(Nav.appID, scene, .present(Fixture.voiceControl("voice"))).code == .ok)
        #expect(h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() })).code == .ok)
        _ = h.drain(h.phone)
        let hidden = h.navigate(.setVoiceSession(HUVoiceSession.with { $0.active = true }))
        #expect(hidden.code == .invalidPosition && hidden.message.contains("shown"))
        #expect(h.navigationEvents().isEmpty)
        #expect(h.metadata().audio.voiceAppID.isEmpty && h.metadata().audio.promptStyle == .normal)
        // Ending one that never started is still OK.
        #expect(h.navigate(.setVoiceSession(HUVoiceSession.with { $0.active = false })).code == .ok)
        // The driver opens the app: its template is shown, the session starts.
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Nav.appID })).code == .ok)
        _ = h.drain(h.phone)
        #expect(h.navigate(.setVoiceSession(HUVoiceSession.with { $0.active = true })).code == .ok)
        #expect(h.metadata().audio.voiceAppID == Nav.appID)
    }

    @Test func aPromptDucksTheRadioAndTheCarEndsItOnTime() {
        var h = CarHarness()
        _ = h.navigationApp()
        var state = HUVehicleState()
        state.carAudioSource = "FM 101.1"
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state }))
        #expect(h.navigate(.startPrompt(HUAudioPrompt.with { $0.durationMs = 2500 })).code == .ok)
        var audio = h.metadata().audio
        #expect(audio.mainOwner == .car && audio.carSource == "FM 101.1" && audio.mainDucked && audio.promptAppID == Nav.appID)
        #expect(h.timers.contains(.navigationPrompt(serial: 1)))
        h.apply(h.car.timerFired(.navigationPrompt(serial: 1), nowMilliseconds: h.now + 2500))
        audio = h.metadata().audio
        #expect(!audio.mainDucked && audio.promptAppID.isEmpty)
    }
}
