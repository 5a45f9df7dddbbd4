import HeadUnitWire
import NIOCore

// Scenario steps for the phone's assistant and notifications (PROTOCOL.md
// section 27): the HMI's voice button, say box and notification list, and
// the scenario's phone playing the assistant.
extension ScenarioPlayer {
    func assistantInput(_ step: HUScenarioAssistantInput) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let phone else { return .failed("phone disconnected") }
        let body: HUEnvelope.OneOf_Body
        if step.voiceButton {
            body = .carButton(HUCarButtonPressed.with { $0.button = .voice })
        } else if step.hasNotification {
            body = .notificationInput(step.notification)
        } else {
            body = .assistantInput(step.input)
        }
        do {
            let result = try await hmi.connection.resultOf(body)
            if step.expect != .ok || result.code != .ok { return check(result, expect: step.expect, expectLimit: step.expectLimit) }
            guard result.assistant.sessionID != 0 else { return .ok("") }  // a dismiss or a setting
            if result.assistant.ended { return .ok("session \(result.assistant.sessionID) ended") }
            // What the phone hears: a start, a say, or both.
            let saying: String? = if case .say(let say)? = step.input.action { say.text } else { nil }
            let opened = result.assistant.sessionID != assistantSession
            assistantSession = result.assistant.sessionID
            if opened {
                guard let started = await assistantEvent(phone, { if case .started(let started) = $0 { started } else { nil } }) else { return .failed("the phone got no AssistantEvent started") }
                if step.expectSource != .unspecified && started.source != step.expectSource {
                    return .failed("started with source \(started.source), expected \(step.expectSource)")
                }
            }
            if let saying {
                guard let heard = await assistantEvent(phone, { if case .heard(let heard) = $0 { heard } else { nil } }) else { return .failed("the phone never heard \"\(saying)\"") }
                if heard.text != saying { return .failed("the phone heard \"\(heard.text)\", expected \"\(saying)\"") }
            }
            return .ok("session \(assistantSession)")
        } catch {
            return failure(error)
        }
    }

    /// The next AssistantEvent of the kept session carrying `part`.
    private func assistantEvent<Part: Sendable>(_ phone: PhoneSession, _ part: @escaping @Sendable (HUAssistantEvent.OneOf_Kind) -> Part?) async -> Part? {
        let session = assistantSession
        let event = await phone.nextEvent(timeout: timeout) { event in
            guard case .other(let envelope) = event, case .assistantEvent(let assistant)? = envelope.body,
                assistant.sessionID == session, let kind = assistant.kind
            else { return false }
            return part(kind) != nil
        }
        guard case .other(let envelope)? = event, case .assistantEvent(let assistant)? = envelope.body, let kind = assistant.kind else { return nil }
        return part(kind)
    }

    func assistantUpdate(_ step: HUScenarioAssistantUpdate) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        do {
            let session = step.sessionID != 0 ? step.sessionID : assistantSession
            let result = try await phone.connection.resultOf(.assistantUpdate(HUAssistantUpdate.with {
                $0.sessionID = session
                $0.state = step.state
                $0.text = step.text
                $0.end = step.end
            }))
            return check(result, expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    func postNotification(_ step: HUScenarioPostNotification) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        do {
            return check(try await phone.connection.resultOf(.postNotification(step.notification)), expect: step.expect, expectLimit: step.expectLimit)
        } catch {
            return failure(error)
        }
    }

    func expectAssistant(_ step: HUScenarioExpectAssistant) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        if await hmi.waitForHomeScreen(timeout: wait, where: { Self.matches($0, step) }) != nil { return .ok("") }
        let home = await hmi.homeScreen() ?? HUHomeScreen()
        return .failed("the assistant is \(home.assistant.state) \(home.assistant.turns.map(\.text)), last ended \(home.lastAssistantEnded.reason), \(home.notifications.count) notifications")
    }

    static func matches(_ home: HUHomeScreen, _ step: HUScenarioExpectAssistant) -> Bool {
        if step.state != .unspecified && (!home.hasAssistant || home.assistant.state != step.state) { return false }
        if !step.lastTurn.isEmpty && home.assistant.turns.last?.text != step.lastTurn { return false }
        if step.ended != .unspecified && (home.hasAssistant || home.lastAssistantEnded.reason != step.ended) { return false }
        if step.hasNotifications && home.notifications.count != Int(step.notifications) { return false }
        return true
    }

    static func describe(_ step: HUScenarioAssistantInput) -> String {
        if step.voiceButton { return "voice_button" }
        if step.hasNotification {
            switch step.notification.action {
            case .select(let ref)?: return "select_notification \(ref.notificationID)"
            case .dismiss(let ref)?: return "dismiss_notification \(ref.notificationID)"
            case .allow(let allow)?: return "notifications \(allow.allowed ? "on" : "off") (\(allow.appID))"
            case nil: return "notification_input (no action)"
            }
        }
        switch step.input.action {
        case .say(let say)?: return "say \"\(say.text)\""
        case .start(let start)?: return "assistant_start\(start.appID.isEmpty ? "" : " (\(start.appID))")"
        case .end?: return "assistant_end"
        case nil: return "assistant_input (no action)"
        }
    }
}
