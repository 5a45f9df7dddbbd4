import HeadUnitWire

/// PROTOCOL.md §27: the phone's assistant (the voice button, its session,
/// the microphone while it listens, the driver's typed words) and the
/// notifications, with their refusals (the orders of §16.22).
enum AssistantChecks {
    static let appID = "com.example.conformance.assistant"

    /// An HMI and a phone with an assistant carrying one communication app.
    static func phoneWithAssistant(_ ctx: CheckContext, assistant: Bool = true) throws -> (phone: WireConnection, hmi: WireConnection) {
        let hmi = try ctx.hmi()
        let phone = try ctx.phone()
        let result = try ctx.announce(phone, [appInfo(appID, [Entitlement.communication])], assistant: assistant)
        try requireCode(result, .ok, "AnnounceApps{assistant: \(assistant)}")
        guard result.appDecisions.decisions.first?.accepted == true else {
            throw CheckSkipped("the endpoint's entitlement policy refused the communication entitlement")
        }
        return (phone, hmi)
    }

    static func event(_ phone: WireConnection, _ what: String) throws -> HUAssistantEvent {
        try phone.take(what) { envelope -> HUAssistantEvent? in
            if case .assistantEvent(let event) = envelope.body { return event }
            return nil
        }
    }

    static func update(_ phone: WireConnection, _ session: UInt64, _ state: HUAssistantState, end: Bool = false) throws -> HUResult {
        var update = HUAssistantUpdate()
        update.sessionID = session
        update.state = state
        update.end = end
        return try phone.request(.assistantUpdate(update), "AssistantUpdate \(state)\(end ? " end" : "")")
    }

    static func voiceButton(_ hmi: WireConnection) throws -> HUResult {
        var press = HUCarButtonPressed()
        press.button = .voice
        return try hmi.request(.carButton(press), "CarButtonPressed{VOICE}")
    }

    static func input(_ action: HUAssistantInput.OneOf_Action) -> HUEnvelope.OneOf_Body {
        var input = HUAssistantInput()
        input.action = action
        return .assistantInput(input)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "assistant.voice-button", .p("27"),
            "the voice button (CarButtonPressed{VOICE}) opens the phone's assistant: Result{assistant{session_id}}, AssistantEvent{started{VOICE_BUTTON}} to the phone; its LISTENING update brings MicrophoneStarted{app_id \"\", ASSISTANT}; the HMI's say reaches it as heard{text}; its end closes the microphone (ASSISTANT_NOT_LISTENING) and the home screen names the session ended BY_ASSISTANT",
            needsCarRole: true
        ) { ctx in
            let (phone, hmi) = try phoneWithAssistant(ctx)
            let opened = try voiceButton(hmi)
            try requireCode(opened, .ok, "CarButtonPressed{VOICE}")
            let session = opened.assistant.sessionID
            try require(session != 0, "Result{assistant{session_id}}", got: "\(opened.assistant)")
            let started = try event(phone, "AssistantEvent started")
            try require(started.sessionID == session && started.started.source == .voiceButton, "started{VOICE_BUTTON} for the session", got: "\(started)")
            try requireCode(try update(phone, session, .listening), .ok, "AssistantUpdate LISTENING")
            let microphone = try phone.take("MicrophoneStarted for the assistant") { envelope -> HUMicrophoneStarted? in
                if case .microphoneStarted(let started) = envelope.body { return started }
                return nil
            }
            try require(microphone.appID.isEmpty && microphone.purpose == .assistant, "MicrophoneStarted{app_id \"\", ASSISTANT}", got: "\(microphone)")
            var say = HUAssistantSay()
            say.text = "call Ada"
            let said = try hmi.request(input(.say(say)), "AssistantInput{say}")
            try requireCode(said, .ok, "AssistantInput{say}")
            let heard = try event(phone, "AssistantEvent heard")
            try require(heard.sessionID == session && heard.heard.text == "call Ada", "heard{\"call Ada\"}", got: "\(heard)")
            try requireCode(try update(phone, session, .speaking, end: true), .ok, "AssistantUpdate end")
            let closed = try phone.take("AudioStreamClosed for the microphone") { envelope -> HUAudioStreamClosed? in
                if case .audioStreamClosed(let closed) = envelope.body, closed.type == .microphone { return closed }
                return nil
            }
            try require(closed.reason == .assistantNotListening, "AudioStreamClosed{MICROPHONE, ASSISTANT_NOT_LISTENING}", got: "\(closed)")
            _ = try hmi.take("HomeScreen with the session ended BY_ASSISTANT") { envelope -> HUHomeScreen? in
                if case .homeScreen(let home) = envelope.body, !home.hasAssistant, home.lastAssistantEnded.sessionID == session,
                    home.lastAssistantEnded.reason == .byAssistant
                {
                    return home
                }
                return nil
            }
        },
        ConformanceCheck(
            "assistant.refusals", .p("27.6"),
            "the assistant's and notifications' refusals with their codes: the voice button for a phone without an assistant NO_ASSISTANT, a second session ASSISTANT_BUSY, an update for no open session UNKNOWN_SESSION, STARTING from the phone INVALID_ARGUMENT, AssistantUpdate from the HMI NOT_FOR_ROLE, a notification with a body NOTIFICATION_NOT_ALLOWED, selecting one the car does not hold UNKNOWN_NOTIFICATION",
            needsCarRole: true
        ) { ctx in
            let bare = try phoneWithAssistant(ctx, assistant: false)
            try requireCode(try voiceButton(bare.hmi), .noAssistant, "the voice button, no assistant")
            bare.phone.close()  // the next phone announces once this one is gone (announce waits for it)
            let (phone, hmi) = try phoneWithAssistant(ctx)
            try requireCode(try update(phone, 424_242, .listening), .unknownSession, "AssistantUpdate for no open session")
            let opened = try voiceButton(hmi)
            try requireCode(opened, .ok, "CarButtonPressed{VOICE}")
            try requireCode(try hmi.request(input(.start(HUAssistantStart())), "AssistantInput{start} while open"), .assistantBusy, "a second session")
            try requireCode(try update(phone, opened.assistant.sessionID, .starting), .invalidArgument, "STARTING from the phone")
            try requireCode(try hmi.request(.assistantUpdate(HUAssistantUpdate()), "AssistantUpdate from the HMI"), .notForRole, "AssistantUpdate from the HMI")
            var post = HUPostNotification()
            post.appID = appID
            post.notificationID = "n1"
            post.category = .message
            post.sender = "Ada"
            post.body = "the contents"
            try requireCode(try phone.request(.postNotification(post), "PostNotification with a body"), .notificationNotAllowed, "a notification with a body")
            var select = HUNotificationInput()
            var ref = HUNotificationRef()
            ref.appID = appID
            ref.notificationID = "none"
            select.select = ref
            try requireCode(try hmi.request(.notificationInput(select), "NotificationInput{select} of none"), .unknownNotification, "a notification the car does not hold")
            try requireCode(try hmi.request(input(.end(HUAssistantEnd())), "AssistantInput{end}"), .ok, "the back button ends it")
        },
    ]
}
