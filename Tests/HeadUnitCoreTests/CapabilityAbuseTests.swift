import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Issue 47's abuse tables (RELIABILITY.md, "Abuse tables by capability"):
/// what one peer could do through templates and remote commands to the
/// driver or to another app, where no other suite shows it cannot.
@Suite struct CapabilityAbuseTests {
    let audio = [EntitlementKey.audio]

    /// An app launched once and then left stays connected and keeps its stack,
    /// but its pushes and alerts never reach the main screen while another app
    /// is shown there, and the driver's input cannot be sent to them.
    @Test func anAppOffTheMainScreenChangesNothingTheDriverSeesOrTouches() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("shown", audio), ("hidden", audio)])
        let hiddenScene = h.launch("hidden")
        #expect(h.template("hidden", hiddenScene, .setRoot(listTemplate("hidden-root", items: 1))).code == .ok)
        let shownScene = h.launch("shown")
        #expect(h.template("shown", shownScene, .setRoot(listTemplate("shown-root", items: 1))).code == .ok)
        _ = h.drain(h.hmi)

        #expect(h.template("hidden", hiddenScene, .push(listTemplate("hidden-two", items: 1))).code == .ok)
        #expect(h.template("hidden", hiddenScene, .present(alertTemplate("hidden-alert"))).code == .ok)
        let mainScreenUpdates = h.drain(h.hmi).filter { envelope in
            if case .screenUpdate(let update) = envelope.body { return update.screen == .main }
            return false
        }
        #expect(mainScreenUpdates.isEmpty, "the hidden app's templates reached the main screen: \(mainScreenUpdates)")

        // The driver's input names what the main screen shows, never the hidden alert.
        _ = h.drain(h.phone)
        let press = h.request(h.hmi, .hmiInput(HUHmiInput.with {
            $0.templateID = "hidden-alert"
            $0.pressButton = HUButtonPressed.with { $0.buttonID = "ok" }
        }))
        #expect(press.code == .unknownTemplate)
        #expect(!h.drain(h.phone).contains { if case .appEvent = $0.body { return true } else { return false } })

        // The driver brings the app back: its stack and alert were kept for it.
        _ = h.launch("hidden")
        let full = h.drain(h.hmi).compactMap { envelope -> HURenderedScreen? in
            if case .screenUpdate(let update) = envelope.body, update.screen == .main, case .full(let screen) = update.change { return screen }
            return nil
        }.last
        #expect(full?.appID == "hidden")
        #expect(full?.stack == ["hidden-root", "hidden-two"])
        #expect(full?.presented.id == "hidden-alert")
    }

    /// A second phone connection (or any peer that did not announce the app)
    /// cannot speak for the announcing phone's apps: whatever app id it names,
    /// every app-scoped request is UNKNOWN_APP (PROTOCOL.md 16.2 step 2) and
    /// the real app's screen and session are untouched.
    @Test func aPeerThatDidNotAnnounceAnAppCannotSpeakForIt() {
        var h = CarHarness()
        let intruder: PeerID = 3
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        h.join(intruder, .phone)
        _ = h.announce([("a", audio)])
        let scene = h.launch("a")
        #expect(h.template("a", scene, .setRoot(listTemplate("root", items: 1))).code == .ok)
        _ = h.drain(h.hmi)
        _ = h.drain(h.phone)

        let spoofed: [HUEnvelope.OneOf_Body] = [
            .templateRequest(HUTemplateRequest.with { $0.appID = "a"; $0.sceneID = scene; $0.setRoot = alertTemplate("spoof") }),
            .appClosed(HUAppClosed.with { $0.appID = "a" }),
            .completeEvent(HUCompleteEvent.with { $0.appID = "a"; $0.eventID = 1 }),
            .remoteCommandAnswer(HURemoteCommandAnswer.with { $0.appID = "a"; $0.commandID = 1; $0.status = .success }),
            .navigationRequest(HUNavigationRequest.with { $0.appID = "a"; $0.hideTripPreviews = HUHideTripPreviews() }),
        ]
        for body in spoofed {
            let result = h.request(intruder, body)
            #expect(result.code == .unknownApp, "\(body): \(result)")
        }
        #expect(h.drain(h.hmi).isEmpty, "the HMI was sent something")
        #expect(h.drain(h.phone).isEmpty, "the real phone was sent something")
        // The real app carries on.
        #expect(h.template("a", scene, .push(listTemplate("two", items: 1))).code == .ok)
    }

    /// One app cannot answer (and so end) a remote command the driver sent
    /// another app: UNKNOWN_EVENT (23.5), and the HMI still waits for the app it asked.
    @Test func anAppCannotAnswerAnotherAppsRemoteCommand() throws {
        let music = RemoteCommandsTests.music
        let podcasts = RemoteCommandsTests.podcasts
        var h = RemoteCommandsTests.playing([music, podcasts], commands: [RemoteCommandsTests.state(.pause)])
        let pause = RemoteCommandsTests.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with {
            $0.appID = music
            $0.call = RemoteCommandsTests.call(.pause)
        }))
        let id = try #require(pause.event).commandID
        #expect(pause.event?.appID == music)
        let stolen = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with {
            $0.appID = podcasts
            $0.commandID = id
            $0.status = .commandFailed
        }))
        #expect(stolen.code == .unknownEvent)
        #expect(RemoteCommandsTests.answerOf(&h, pause.requestID) == nil, "the HMI was answered by the wrong app")
        #expect(h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with {
            $0.appID = music
            $0.commandID = id
            $0.status = .success
        })).code == .ok)
        let answer = RemoteCommandsTests.answerOf(&h, pause.requestID)
        #expect(answer?.code == .ok)
        #expect(answer?.remoteCommand.appID == music)
        #expect(answer?.remoteCommand.status == .success)
    }

    /// A touch or a wheel key while the app's phone is reconnecting is refused
    /// NOT_CONNECTED at once (23.3 step 3): a Pause kept and delivered seconds
    /// later would surprise the driver, so nothing is kept for the phone.
    @Test func aCommandWhileThePhoneIsReconnectingIsNotConnectedAndNeverDeliveredLate() {
        let music = RemoteCommandsTests.music
        var h = CarHarness()
        // A phone that may resume (it has a token), playing, with Pause declared.
        h.apply(h.car.peerJoined(h.phone, info: PeerInfo(role: .phone, name: "phone", transport: .unix, resumptionToken: String(repeating: "t", count: 32))))
        h.join(h.hmi, .hmi)
        _ = h.announce([(music, audio)])
        let scene = h.launch(music)
        #expect(h.template(music, scene, .updateNowPlaying(HUNowPlayingTemplate.with {
            $0.title = "Song"; $0.durationSeconds = 200; $0.playbackRate = 1
        })).code == .ok)
        #expect(h.request(h.phone, .remoteCommands(HURemoteCommands.with {
            $0.appID = music
            $0.commands = [RemoteCommandsTests.state(.pause)]
        })).code == .ok)
        h.apply(h.car.peerLeft(h.phone, departure: .lost))
        #expect(h.car.status().phoneLink == .reconnecting)
        let touch = h.request(h.hmi, .sendRemoteCommand(HUSendRemoteCommand.with {
            $0.appID = music
            $0.call = RemoteCommandsTests.call(.pause)
        }))
        #expect(touch.code == .notConnected)
        let key = h.request(h.hmi, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        #expect(key.code == .notConnected)
        #expect(!h.car.phoneLink.backlog.contains { if case .remoteCommandEvent = $0 { return true } else { return false } })
    }
}
