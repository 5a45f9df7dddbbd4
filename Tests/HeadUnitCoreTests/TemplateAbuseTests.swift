import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Issue 47's abuse table, templates: what one app could do through its
/// templates to the driver or to another app (RELIABILITY.md).
@Suite struct TemplateAbuseTests {
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
}
