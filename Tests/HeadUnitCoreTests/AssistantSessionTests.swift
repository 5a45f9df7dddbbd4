import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// The phone's assistant (PROTOCOL.md section 27) through the Car as the
/// server drives it: the voice button, the session's states, the focus, the
/// microphone, what outranks it and what ends it.
@Suite struct AssistantSessionTests {
    static let music = "com.example.music"
    static let chat = "com.example.chat"

    /// A phone with an assistant, an audio app playing and a communication app; an HMI watching.
    static func harness(assistant: Bool = true, token: String = "token") -> CarHarness {
        var h = CarHarness()
        h.apply(h.car.peerJoined(h.phone, info: PeerInfo(role: .phone, name: "phone", transport: .unix, resumptionToken: token)))
        h.join(h.hmi, .hmi)
        let announced = h.request(h.phone, .announceApps(HUAnnounceApps.with {
            $0.deviceName = "Test Phone"
            $0.assistant = assistant
            $0.apps = [(music, EntitlementKey.audio), (chat, EntitlementKey.communication)].map { app in
                HUAppInfo.with { $0.appID = app.0; $0.displayName = app.0; $0.entitlements = [app.1] }
            }
        }))
        #expect(announced.code == .ok)
        let scene = h.launch(music)
        #expect(h.template(music, scene, .updateNowPlaying(HUNowPlayingTemplate.with {
            $0.title = "Song"; $0.durationSeconds = 200; $0.playbackRate = 1
        })).code == .ok)
        _ = h.drain(h.phone)
        _ = h.drain(h.hmi)
        return h
    }

    static func voiceButton(_ h: inout CarHarness) -> HUResult {
        h.request(h.hmi, .carButton(HUCarButtonPressed.with { $0.button = .voice }))
    }

    static func input(_ h: inout CarHarness, _ action: HUAssistantInput.OneOf_Action) -> HUResult {
        h.request(h.hmi, .assistantInput(HUAssistantInput.with { $0.action = action }))
    }

    static func update(_ h: inout CarHarness, _ session: UInt64, _ state: HUAssistantState, text: String = "", end: Bool = false) -> HUResult {
        h.request(h.phone, .assistantUpdate(HUAssistantUpdate.with {
            $0.sessionID = session
            $0.state = state
            $0.text = text
            $0.end = end
        }))
    }

    static func events(_ h: inout CarHarness) -> [HUAssistantEvent] {
        h.drain(h.phone).compactMap { if case .assistantEvent(let event) = $0.body { event } else { nil } }
    }

    static func home(_ h: inout CarHarness) -> HUHomeScreen? {
        h.drain(h.hmi).compactMap { if case .homeScreen(let home) = $0.body { home } else { nil } }.last
    }

    @Test func theVoiceButtonOpensTheAssistantInterruptsTheMusicAndTheButtonAgainEndsIt() {
        var h = Self.harness()
        #expect(h.car.audioStreams.mix.pauseMain == false)
        let opened = Self.voiceButton(&h)
        #expect(opened.code == .ok && opened.assistant.sessionID == 1 && !opened.assistant.ended)
        let started = Self.events(&h)
        #expect(started.count == 1 && started[0].sessionID == 1 && started[0].started.source == .voiceButton)
        #expect(h.timers.contains(.assistant))
        // The music is interrupted, prompts are silent, the cluster sees a voice session.
        #expect(h.car.audio.promptStyle == .none && h.car.audioStreams.mix.pauseMain)
        _ = h.car.takeMetadata()
        #expect(h.car.clusterFeed.state.audio.voiceSessionActive)
        let shown = Self.home(&h)
        #expect(shown?.assistant.sessionID == 1 && shown?.assistant.state == .starting)

        // The button again: the session ends, the phone is told, the music comes back.
        let again = Self.voiceButton(&h)
        #expect(again.code == .ok && again.assistant.sessionID == 1 && again.assistant.ended)
        let ended = Self.events(&h)
        #expect(ended.count == 1 && ended[0].ended.reason == .byDriver)
        #expect(!h.timers.contains(.assistant))
        #expect(h.car.audio.promptStyle == .normal && !h.car.audioStreams.mix.pauseMain)
        let after = Self.home(&h)
        #expect(after?.hasAssistant == false && after?.lastAssistantEnded.reason == .byDriver)
    }

    @Test func theMicrophoneStreamsToThePhoneOnlyWhileTheAssistantListens() {
        var h = Self.harness()
        let session = Self.voiceButton(&h).assistant.sessionID
        #expect(MicrophoneRuleTests.microphone(&h).isEmpty, "starting: the phone has not listened yet")
        #expect(Self.update(&h, session, .listening).code == .ok)
        guard case .microphoneStarted(let started)? = MicrophoneRuleTests.microphone(&h).first else { Issue.record("no microphone while listening"); return }
        #expect(started.appID == "" && started.purpose == .assistant)
        #expect(Self.update(&h, session, .thinking, text: "Sending to Jane").code == .ok)
        guard case .audioStreamClosed(let closed)? = MicrophoneRuleTests.microphone(&h).first else { Issue.record("thinking kept the microphone"); return }
        #expect(closed.streamID == started.stream.streamID && closed.reason == .assistantNotListening)
        #expect(Self.update(&h, session, .listening).code == .ok)
        #expect(MicrophoneRuleTests.microphone(&h).count == 1)
        // The phone ends it: no event back (it knows), the microphone stops.
        #expect(Self.update(&h, session, .unspecified, end: true).code == .ok)
        let bodies = h.drain(h.phone).compactMap(\.body)
        #expect(!bodies.contains { if case .assistantEvent = $0 { true } else { false } })
        #expect(bodies.contains { if case .audioStreamClosed(let c) = $0 { c.reason == .assistantNotListening } else { false } })
        #expect(h.car.assistant.lastEnded?.reason == .byAssistant)
    }

    @Test func theAssistantsVoiceStreamPlaysOnlyDuringItsSession() {
        var h = Self.harness()
        func open() -> HUResult {
            h.request(h.phone, .openAudioStream(HUOpenAudioStream.with {
                $0.appID = ""
                $0.type = .voice
                $0.format = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 16_000; $0.channels = 1 }
            }))
        }
        #expect(open().code == .noAudioFocus)
        let session = Self.voiceButton(&h).assistant.sessionID
        let stream = open()
        #expect(stream.code == .ok && stream.audioStream.type == .voice)
        _ = h.drain(h.phone)
        #expect(Self.update(&h, session, .speaking, text: "OK", end: true).code == .ok)
        let closed = h.drain(h.phone).compactMap { if case .audioStreamClosed(let c) = $0.body { c } else { nil } }
        #expect(closed.count == 1 && closed[0].streamID == stream.audioStream.streamID && closed[0].reason == .focusLost)
        // A phone without an assistant has no voice of its own.
        var bare = Self.harness(assistant: false)
        let refused = bare.request(bare.phone, .openAudioStream(HUOpenAudioStream.with {
            $0.appID = ""
            $0.type = .voice
            $0.format = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 16_000; $0.channels = 1 }
        }))
        #expect(refused.code == .noAssistant)
    }

    @Test func startsAreCheckedInOrder() {
        var none = CarHarness()
        none.join(none.hmi, .hmi)
        #expect(Self.voiceButton(&none).code == .noAssistant, "no phone")
        var bare = Self.harness(assistant: false)
        #expect(Self.voiceButton(&bare).code == .noAssistant, "a phone without an assistant")
        #expect(Self.input(&bare, .start(HUAssistantStart())).code == .noAssistant)

        var h = Self.harness()
        #expect(Self.input(&h, .start(HUAssistantStart.with { $0.appID = "com.example.nobody" })).code == .unknownApp)
        let forApp = Self.input(&h, .start(HUAssistantStart.with { $0.appID = Self.chat }))
        #expect(forApp.code == .ok)
        #expect(Self.events(&h).first?.started.appID == Self.chat)
        #expect(Self.input(&h, .start(HUAssistantStart())).code == .assistantBusy, "one session at a time")
        #expect(Self.input(&h, .end(HUAssistantEnd())).code == .ok)
        #expect(Self.input(&h, .end(HUAssistantEnd())).code == .unknownSession, "nothing open to end")
        #expect(h.request(h.hmi, .assistantInput(HUAssistantInput())).code == .invalidArgument, "no action")

        // A call outranks the assistant: refused while one rings.
        #expect(CallSessionTests.report(&h, .newIncoming, CallSessionTests.first, app: Self.chat).code == .ok)
        #expect(Self.voiceButton(&h).code == .assistantBusy)

        // The phone reconnecting: NOT_CONNECTED.
        var away = Self.harness()
        away.apply(away.car.peerLeft(away.phone, departure: .lost))
        #expect(Self.voiceButton(&away).code == .notConnected)
    }

    @Test func sayingOpensASessionWhenNoneIsOpenAndThePhoneHearsTheText() {
        var h = Self.harness()
        #expect(Self.input(&h, .say(HUAssistantSay())).code == .invalidArgument, "empty")
        let long = Self.input(&h, .say(HUAssistantSay.with { $0.text = String(repeating: "a", count: 513) }))
        #expect(long.code == .invalidArgument && long.limit == "assistant.textBytes" && long.limitValue == 512)
        #expect(h.car.assistant.open == nil, "a refused say opens nothing")
        let said = Self.input(&h, .say(HUAssistantSay.with { $0.text = "send a message to Jane saying on my way" }))
        #expect(said.code == .ok)
        let events = Self.events(&h)
        #expect(events.count == 2 && events[0].started.source == .say)
        #expect(events[1].sessionID == said.assistant.sessionID && events[1].heard.text == "send a message to Jane saying on my way")
        // The exchange on the home screen: the driver's turn, then the assistant's; at most eight kept.
        #expect(Self.update(&h, said.assistant.sessionID, .speaking, text: "Sending it").code == .ok)
        let turns = Self.home(&h)?.assistant.turns ?? []
        #expect(turns.map(\.fromDriver) == [true, false] && turns.last?.text == "Sending it")
        for index in 0..<10 {
            #expect(Self.input(&h, .say(HUAssistantSay.with { $0.text = "turn \(index)" })).code == .ok)
        }
        let kept = Self.home(&h)?.assistant.turns ?? []
        #expect(kept.count == AssistantSession.turnsShown && kept.last?.text == "turn 9")
    }

    @Test func updatesAreCheckedInOrder() {
        var h = Self.harness()
        // (An HMI's update is NOT_FOR_ROLE at its connection, before the car: AssistantSocketTests.)
        #expect(h.request(h.hmi, .assistantUpdate(HUAssistantUpdate())).code == .noPhone)
        #expect(Self.update(&h, 1, .listening).code == .unknownSession, "no session open")
        let session = Self.voiceButton(&h).assistant.sessionID
        #expect(Self.update(&h, session + 1, .listening).code == .unknownSession)
        #expect(Self.update(&h, session, .unspecified).code == .invalidArgument)
        #expect(Self.update(&h, session, .starting).code == .invalidArgument, "STARTING is the car's")
        let long = Self.update(&h, session, .speaking, text: String(repeating: "é", count: 257))
        #expect(long.code == .invalidArgument && long.limit == "assistant.textBytes")
        #expect(Self.update(&h, session, .speaking, text: "Hi").code == .ok)
        var bare = Self.harness(assistant: false)
        #expect(Self.update(&bare, 1, .listening).code == .noAssistant)
    }

    @Test func aSilentPhoneTimesOutACallEndsTheSessionAndALostLinkEndsIt() {
        var h = Self.harness()
        let session = Self.voiceButton(&h).assistant.sessionID
        _ = Self.events(&h)
        h.apply(h.car.timerFired(.assistant, nowMilliseconds: h.now + 10_000))
        #expect(Self.events(&h).first?.ended.reason == .timedOut)
        #expect(Self.home(&h)?.lastAssistantEnded == HUAssistantEndedInfo.with { $0.sessionID = session; $0.reason = .timedOut })
        #expect(!h.car.audio.assistantActive)

        // A call rings: it outranks the assistant, which ends (and its microphone with it).
        let second = Self.voiceButton(&h).assistant.sessionID
        #expect(Self.update(&h, second, .listening).code == .ok)
        _ = h.drain(h.phone)
        #expect(CallSessionTests.report(&h, .newIncoming, CallSessionTests.first, app: Self.chat).code == .ok)
        let bodies = h.drain(h.phone).compactMap(\.body)
        #expect(bodies.contains { if case .assistantEvent(let e) = $0 { e.ended.reason == .call } else { false } })
        #expect(bodies.contains { if case .audioStreamClosed(let c) = $0 { c.type == .microphone } else { false } })

        // The car's own call also outranks it.
        var car = Self.harness()
        _ = Self.voiceButton(&car)
        _ = Self.events(&car)
        var state = car.car.vehicleState
        state.callActive = true
        #expect(car.request(car.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
        #expect(Self.events(&car).first?.ended.reason == .call)

        // The phone's link is lost: the session ends; the phone finds why in its backlog.
        var lost = Self.harness()
        _ = Self.voiceButton(&lost)
        _ = Self.events(&lost)
        lost.apply(lost.car.peerLeft(lost.phone, departure: .lost))
        #expect(lost.car.assistant.open == nil && lost.car.assistant.lastEnded?.reason == .phoneGone)
        #expect(lost.car.assistant.available, "a phone that may resume keeps its assistant")
    }

    @Test func aSiriOnlyMessagingAppHasAnIconThatOpensTheAssistantForIt() {
        func phone(assistant: Bool) -> CarHarness {
            var h = CarHarness()
            h.join(h.phone, .phone)
            h.join(h.hmi, .hmi)
            #expect(h.request(h.phone, .announceApps(HUAnnounceApps.with {
                $0.deviceName = "Test Phone"
                $0.assistant = assistant
                $0.apps = [HUAppInfo.with { $0.appID = "com.example.sms"; $0.displayName = "SMS"; $0.entitlements = [EntitlementKey.messaging] }]
            })).code == .ok)
            return h
        }
        var h = phone(assistant: true)
        #expect(Self.home(&h)?.icons.map(\.appID) == ["com.example.sms"])
        let launched = h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = "com.example.sms" }))
        #expect(launched.code == .ok && launched.assistant.sessionID == 1)
        let started = Self.events(&h)
        #expect(started.first?.started.appID == "com.example.sms" && started.first?.started.source == .hmi)
        #expect(h.car.templates.apps["com.example.sms"]?.scenes.isEmpty == true, "no scene: the assistant is its interface")
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = "com.example.sms"; $0.kind = .dashboard })).code == .notAllowedForCategory)
        // Without an assistant nothing serves it: no icon, not launchable (16.1).
        var bare = phone(assistant: false)
        #expect(Self.home(&bare)?.icons.isEmpty == true)
        #expect(bare.request(bare.hmi, .launchApp(HULaunchApp.with { $0.appID = "com.example.sms" })).code == .appNotLaunchable)
    }

    @Test func theAskSiriRowIsAnAudioOrCommunicationAppsAndOpensTheAssistantWithItsAction() {
        var h = Self.harness()
        func list(_ action: HUAssistantCellAction, visibility: HUAssistantCellVisibility = .always) -> HUTemplate {
            var template = listTemplate("root", items: 1)
            if case .list(var list)? = template.kind {
                list.assistantCell = HUAssistantCell.with { $0.visibility = visibility; $0.action = action }
                template.kind = .list(list)
            }
            return template
        }
        let chatScene = h.launch(Self.chat)
        #expect(h.template(Self.chat, chatScene, .setRoot(list(.playMedia))).code == .invalidTemplate, "a calling app's row starts a call")
        #expect(h.template(Self.chat, chatScene, .setRoot(list(.startCall))).code == .ok)
        let musicScene = h.car.templates.apps[Self.music]?.scenes[.main]?.id ?? 0
        #expect(h.template(Self.music, musicScene, .setRoot(list(.startCall))).code == .invalidTemplate)
        #expect(h.template(Self.music, musicScene, .setRoot(list(.unspecified, visibility: .off))).code == .ok, "an invisible row is no row")
        _ = h.drain(h.phone)
        let opened = Self.input(&h, .start(HUAssistantStart.with { $0.appID = Self.chat; $0.cellAction = .startCall }))
        #expect(opened.code == .ok)
        #expect(Self.events(&h).first?.started.cellAction == .startCall)
    }

    @Test func thePhoneGoneForGoodTakesItsAssistantWithIt() {
        var h = Self.harness(token: "")
        h.apply(h.car.peerLeft(h.phone, departure: .saidGoodbye))
        #expect(!h.car.assistant.available)
    }

    @Test func aRestartCarriesThatThePhoneHasAnAssistantButNotTheSession() throws {
        var h = Self.harness()
        _ = Self.voiceButton(&h)
        _ = Self.events(&h)
        h.apply(h.car.prepareForHandover())
        #expect(Self.events(&h).first?.ended.reason == .shuttingDown)
        let snapshot = h.car.snapshot()
        #expect(snapshot.phoneAssistant && snapshot.nextAssistantSessionID == 2)
    }
}

/// Notifications (PROTOCOL.md 27.7) through the Car: who may post, what is
/// refused, the list, the driver's setting, and selecting one.
@Suite struct CarNotificationsTests {
    static let chat = AssistantSessionTests.chat
    static let music = AssistantSessionTests.music

    static func post(_ h: inout CarHarness, _ id: String, app: String = chat, sender: String = "Alice", body: String = "",
                     category: HUNotificationCategory = .message, withdraw: Bool = false) -> HUResult {
        h.request(h.phone, .postNotification(HUPostNotification.with {
            $0.appID = app
            $0.notificationID = id
            $0.category = category
            $0.sender = sender
            $0.conversationID = "conv-" + sender.lowercased()
            $0.body = body
            $0.withdraw = withdraw
        }))
    }

    static func held(_ h: inout CarHarness) -> [String] { h.car.assistant.notifications.held.map(\.notificationID) }

    @Test func postsAreCheckedInOrderAndABodyIsRefused() {
        var h = AssistantSessionTests.harness()
        #expect(Self.post(&h, "n1", app: "com.example.nobody").code == .unknownApp)
        #expect(Self.post(&h, "n1", app: Self.music).code == .notAllowedForCategory, "an audio app has no notifications in the car")
        #expect(Self.post(&h, "").code == .invalidArgument)
        #expect(Self.post(&h, "n1", category: .unspecified).code == .invalidArgument)
        #expect(Self.post(&h, "n1", sender: "").code == .invalidArgument)
        let long = Self.post(&h, "n1", sender: String(repeating: "a", count: 129))
        #expect(long.code == .invalidArgument && long.limit == "notifications.nameBytes")
        #expect(Self.post(&h, "n1", body: "See you at 6").code == .notificationNotAllowed, "the contents never appear in the car")
        #expect(Self.held(&h).isEmpty)
        #expect(Self.post(&h, "n1").code == .ok)
        let home = AssistantSessionTests.home(&h)
        #expect(home?.notifications.first?.sender == "Alice" && home?.notifications.first?.appDisplayName == Self.chat)
        // The same id replaces; a withdrawal removes; a withdrawal of nothing is fine.
        #expect(Self.post(&h, "n2", sender: "Bob").code == .ok)
        #expect(Self.post(&h, "n1", sender: "Alice").code == .ok)
        #expect(Self.held(&h) == ["n1", "n2"])
        #expect(Self.post(&h, "n2", withdraw: true).code == .ok && Self.held(&h) == ["n1"])
        #expect(Self.post(&h, "n9", withdraw: true).code == .ok)
    }

    @Test func anAppPostsAtMostTenAMinuteAndTheCarHoldsSixteen() {
        var h = AssistantSessionTests.harness()
        for index in 0..<CarNotifications.maxPerMinute { #expect(Self.post(&h, "n\(index)").code == .ok) }
        let flooded = Self.post(&h, "n10")
        #expect(flooded.code == .limitExceeded && flooded.limit == "notifications.perMinute" && flooded.limitValue == 10)
        h.now += 60_000
        for index in 10..<20 { #expect(Self.post(&h, "n\(index)").code == .ok) }
        #expect(Self.held(&h).count == CarNotifications.maxHeld && Self.held(&h).first == "n19" && !Self.held(&h).contains("n3"))
    }

    @Test func theDriverTurnsAnAppOffDismissesAndSelectsOneToHearIt() {
        var h = AssistantSessionTests.harness()
        #expect(Self.post(&h, "n1").code == .ok)
        #expect(Self.post(&h, "n2", sender: "Bob").code == .ok)
        func input(_ action: HUNotificationInput.OneOf_Action) -> HUResult {
            h.request(h.hmi, .notificationInput(HUNotificationInput.with { $0.action = action }))
        }
        func ref(_ id: String) -> HUNotificationRef { HUNotificationRef.with { $0.appID = Self.chat; $0.notificationID = id } }
        #expect(input(.dismiss(ref("n9"))).code == .unknownNotification)
        #expect(input(.dismiss(ref("n2"))).code == .ok && Self.held(&h) == ["n1"])
        _ = AssistantSessionTests.events(&h)
        let selected = input(.select(ref("n1")))
        #expect(selected.code == .ok && selected.assistant.sessionID != 0)
        let started = AssistantSessionTests.events(&h).first?.started
        #expect(started?.source == .notification && started?.appID == Self.chat && started?.notification.conversationID == "conv-alice")
        #expect(Self.held(&h).isEmpty, "selected: it leaves the list")
        // Selecting while the assistant is busy keeps the notification.
        #expect(Self.post(&h, "n3").code == .ok)
        #expect(input(.select(ref("n3"))).code == .assistantBusy && Self.held(&h) == ["n3"])
        // Off: its held ones go and its posts are refused; on again, they come.
        #expect(input(.allow(HUNotificationsAllowed.with { $0.appID = "com.example.nobody" })).code == .unknownApp)
        #expect(input(.allow(HUNotificationsAllowed.with { $0.appID = Self.chat; $0.allowed = false })).code == .ok)
        #expect(Self.held(&h).isEmpty && AssistantSessionTests.home(&h)?.notificationsOff == [Self.chat])
        #expect(Self.post(&h, "n4").code == .notificationNotAllowed)
        #expect(input(.allow(HUNotificationsAllowed.with { $0.appID = Self.chat; $0.allowed = true })).code == .ok)
        #expect(Self.post(&h, "n4").code == .ok)
        #expect(h.request(h.hmi, .notificationInput(HUNotificationInput())).code == .invalidArgument)
    }

    @Test func thePhoneGoneForGoodTakesItsNotifications() {
        var h = AssistantSessionTests.harness(token: "")
        #expect(Self.post(&h, "n1").code == .ok)
        h.apply(h.car.peerLeft(h.phone, departure: .saidGoodbye))
        #expect(h.car.assistant.notifications.held.isEmpty)
    }
}
