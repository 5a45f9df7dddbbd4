import HeadUnitWire

// The phone's assistant (PROTOCOL.md section 27): the car checks who asks
// and what outranks it, `AssistantSession` keeps the one session, the audio
// focus and the microphone follow it (`settleAudio`), the home screen shows it.
extension Car {
    /// `CarButtonPressed{VOICE}` (27.2): the voice button opens the
    /// assistant, or ends the session that is open (the button again).
    mutating func voiceButtonPressed(requestID: UInt32, from peer: PeerID) {
        if assistant.open != nil {
            answer(peer, requestID, endAssistantByDriver())
        } else {
            answer(peer, requestID, startAssistant(source: .voiceButton, appID: ""))
        }
    }

    /// `AssistantInput` from an HMI (27.3).
    mutating func assistantInput(_ input: HUAssistantInput) -> Result<HUResult, RuleViolation> {
        switch input.action {
        case .start(let start):
            return startAssistant(source: .hmi, appID: start.appID, cellAction: start.cellAction)
        case .say(let say):
            if let violation = AssistantSession.textProblem(say.text, required: true) { return .failure(violation) }
            var outcome: Result<HUResult, RuleViolation> = .success(assistantOutcome(assistant.open?.id ?? 0, ended: false))
            if assistant.open == nil {
                outcome = startAssistant(source: .say, appID: "")
                guard case .success = outcome else { return outcome }
            }
            if let event = assistant.heard(say.text) { sendToPhone(.assistantEvent(event)) }
            restartAssistantTimer()
            return outcome
        case .end:
            return endAssistantByDriver()
        case nil:
            return .failure(RuleViolation(.invalidArgument, "AssistantInput names no action (start, say or end)"))
        }
    }

    /// Opens a session. Checks, in order: NO_ASSISTANT (no phone carries
    /// apps, or it has no assistant), NOT_CONNECTED (it is reconnecting),
    /// UNKNOWN_APP (an app named and not announced), ASSISTANT_BUSY (a
    /// session open, or a call).
    mutating func startAssistant(
        source: HUAssistantSource, appID: String, notification: HUNotificationInfo? = nil, cellAction: HUAssistantCellAction = .unspecified
    ) -> Result<HUResult, RuleViolation> {
        guard phonePeer != nil || phoneLink.isReconnecting else {
            return .failure(RuleViolation(.noAssistant, "no phone is connected"))
        }
        guard assistant.available else {
            return .failure(RuleViolation(.noAssistant, "the phone has no assistant (AnnounceApps.assistant)"))
        }
        guard phonePeer != nil else {
            return .failure(RuleViolation(.notConnected, "the phone is reconnecting"))
        }
        if !appID.isEmpty, templates.apps[appID] == nil {
            return .failure(RuleViolation(.unknownApp, "no app '\(appID)' is announced"))
        }
        if let violation = assistant.mayStart(callActive: audio.callActive) { return .failure(violation) }
        let sessionID = openSession(HUAssistantStarted.with {
            $0.source = source
            $0.appID = appID
            if let notification { $0.notification = notification }
            $0.cellAction = cellAction
        })
        return .success(assistantOutcome(sessionID, ended: false))
    }

    /// Opens a session the checks allowed: the phone is told, the timer runs, the focus follows.
    private mutating func openSession(_ started: HUAssistantStarted) -> UInt64 {
        let event = assistant.start(started)
        sendToPhone(.assistantEvent(event))
        restartAssistantTimer()
        assistantChanged()
        return event.sessionID
    }

    /// A message list item selected (16.8): the assistant opens for its
    /// conversation when the phone has one, no session is open and no call
    /// outranks it; else the app's `VoiceFlowStarted` alone, as before.
    mutating func openAssistantForMessage(appID: String, conversationID: String, contact: String) {
        guard phonePeer != nil, assistant.available, assistant.mayStart(callActive: audio.callActive) == nil else { return }
        _ = openSession(HUAssistantStarted.with {
            $0.source = .messageItem
            $0.appID = appID
            $0.conversationID = conversationID
            $0.contact = contact
        })
    }

    /// The back button, or the voice button during a session: UNKNOWN_SESSION when none is open.
    mutating func endAssistantByDriver() -> Result<HUResult, RuleViolation> {
        guard let open = assistant.open else {
            return .failure(RuleViolation(.unknownSession, "no assistant session is open"))
        }
        endAssistant(.byDriver)
        return .success(assistantOutcome(open.id, ended: true))
    }

    /// `AssistantUpdate` from the phone (27.4): NO_PHONE, NO_ASSISTANT, then the session's own checks.
    mutating func assistantUpdated(_ update: HUAssistantUpdate, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        guard let phonePeer, phonePeer == peer else {
            return .failure(RuleViolation(.noPhone, "announce apps before speaking as the phone's assistant"))
        }
        guard assistant.available else {
            return .failure(RuleViolation(.noAssistant, "this phone did not say it has an assistant (AnnounceApps.assistant)"))
        }
        if let violation = assistant.updateProblem(update) { return .failure(violation) }
        if assistant.apply(update) {
            effects.append(.cancelTimer(.assistant))
        } else {
            restartAssistantTimer()
        }
        assistantChanged()
        return .ok
    }

    /// The car ends the open session; the phone is told why (to its backlog while it reconnects).
    mutating func endAssistant(_ reason: HUAssistantEndReason) {
        guard assistant.open != nil else { return }
        if let event = assistant.end(reason) { sendToPhone(.assistantEvent(event)) }
        effects.append(.cancelTimer(.assistant))
        assistantChanged()
    }

    /// The phone sent nothing for `assistant_timeout_ms`.
    mutating func assistantTimedOut() {
        endAssistant(.timedOut)
        publishScreens()
    }

    /// After every input: a call outranks the assistant (27.5).
    mutating func settleAssistant() {
        if assistant.open != nil, audio.callActive { endAssistant(.call) }
    }

    private mutating func restartAssistantTimer() {
        effects.append(.startTimer(.assistant, milliseconds: assistant.limits.timeoutMilliseconds))
    }

    /// The audio focus follows the session (the microphone follows in `settleAudio`).
    private mutating func assistantChanged() {
        audio.assistantChanged(active: assistant.open != nil)
    }

    private func assistantOutcome(_ sessionID: UInt64, ended: Bool) -> HUResult {
        var result = HUResult()
        result.assistant = HUAssistantOutcome.with {
            $0.sessionID = sessionID
            $0.ended = ended
        }
        return result
    }

    // MARK: - Notifications (27.7)

    /// `PostNotification` from the phone: NO_PHONE, UNKNOWN_APP,
    /// ENTITLEMENT_REFUSED, NOT_ALLOWED_FOR_CATEGORY (a messaging or calling
    /// app only), then the notification's own checks (`CarNotifications.problem`).
    mutating func postNotification(_ post: HUPostNotification, from peer: PeerID, now: UInt64) -> Result<HUResult, RuleViolation> {
        let app: AppState
        switch announcedApp(post.appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return .failure(violation)
        }
        guard let category = app.category else {
            return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
        }
        guard category == .communication || category == .legacyMessaging else {
            return .failure(RuleViolation(.notAllowedForCategory, "notifications in the car are a messaging or calling app's: '\(post.appID)' is not one"))
        }
        if let violation = assistant.notifications.problem(post, now: now) { return .failure(violation) }
        assistant.notifications.post(post, appName: app.info.displayName, now: now)
        return .ok
    }

    /// `NotificationInput` from an HMI: select (the assistant reads it), dismiss, or the app's setting.
    mutating func notificationInput(_ input: HUNotificationInput) -> Result<HUResult, RuleViolation> {
        switch input.action {
        case .select(let ref):
            let notification: HUNotificationInfo
            switch assistant.notifications.find(ref) {
            case .success(let found): notification = found
            case .failure(let violation): return .failure(violation)
            }
            let opened = startAssistant(source: .notification, appID: ref.appID, notification: notification)
            if case .success = opened { assistant.notifications.remove(ref) }
            return opened
        case .dismiss(let ref):
            if case .failure(let violation) = assistant.notifications.find(ref) { return .failure(violation) }
            assistant.notifications.remove(ref)
            return .ok
        case .allow(let allowed):
            guard templates.apps[allowed.appID] != nil else {
                return .failure(RuleViolation(.unknownApp, "no app '\(allowed.appID)' is announced"))
            }
            assistant.notifications.allow(allowed.appID, allowed.allowed)
            return .ok
        case nil:
            return .failure(RuleViolation(.invalidArgument, "NotificationInput names no action (select, dismiss or allow)"))
        }
    }
}
