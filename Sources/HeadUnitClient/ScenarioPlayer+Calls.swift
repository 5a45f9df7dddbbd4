import HeadUnitWire
import NIOCore

// Scenario steps for remote commands and car buttons (PROTOCOL.md section
// 23) and calls (section 26): the phone's side and the HMI's side of each
// exchange, checked end to end.
extension ScenarioPlayer {
    func remoteCommands(_ step: HUScenarioRemoteCommands) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        var message = HURemoteCommands()
        message.appID = step.appID
        message.commands = step.commands
        do {
            let result = try await phone.connection.resultOf(.remoteCommands(message))
            return check(result, expect: step.expect, expectLimit: step.expectLimit)
        } catch {
            return failure(error)
        }
    }

    func remoteCommand(_ step: HUScenarioRemoteCommand) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let phone else { return .failed("phone disconnected") }
        let body: HUEnvelope.OneOf_Body
        if step.button != .unspecified {
            body = .carButton(HUCarButtonPressed.with { $0.button = step.button })
        } else {
            body = .sendRemoteCommand(HUSendRemoteCommand.with { $0.appID = step.appID; $0.call = step.call })
        }
        let expectedCommand = step.expectCommand != .unspecified ? step.expectCommand : step.call.command
        let answer: HURemoteCommandStatus = step.answer == .unspecified ? .success : step.answer
        // The HMI's Result comes only after the app answered: ask without waiting.
        let connection = hmi.connection
        let pending = Task { try await connection.resultOf(body) }
        do {
            if step.expect != .ok {
                let result = try await pending.value
                // A refusal is decided before any event is sent (23.3): none may be waiting.
                if let event = await phone.nextEvent(timeout: .zero, where: Self.isRemoteCommandEvent) {
                    return .failed("refused, yet the app got \(event)")
                }
                return check(result, expect: step.expect, expectLimit: step.expectLimit)
            }
            let appID = step.appID
            guard case .other(let envelope)? = await phone.nextEvent(timeout: timeout, where: { event in
                guard case .other(let envelope) = event, case .remoteCommandEvent(let command)? = envelope.body else { return false }
                return appID.isEmpty || command.appID == appID
            }), case .remoteCommandEvent(let event)? = envelope.body else {
                pending.cancel()
                return .failed("the app got no RemoteCommandEvent within \(timeout.nanoseconds / 1_000_000) ms")
            }
            if event.call.command != expectedCommand {
                return .failed("the app got \(event.call.command), expected \(expectedCommand)")
            }
            if event.button != step.button {
                return .failed("the event names button \(event.button), expected \(step.button)")
            }
            try await phone.answerRemoteCommand(appID: event.appID, commandID: event.commandID, status: answer)
            let result = try await pending.value
            guard result.code == .ok else { return check(result, expect: .ok) }
            let outcome = result.remoteCommand
            if outcome.status != answer || outcome.appID != event.appID || outcome.call.command != expectedCommand {
                return .failed("the HMI got \(outcome.appID): \(outcome.call.command) -> \(outcome.status), expected \(event.appID): \(expectedCommand) -> \(answer)")
            }
            return .ok("\(event.appID): \(expectedCommand) -> \(answer)")
        } catch {
            pending.cancel()
            return failure(error)
        }
    }

    @Sendable static func isRemoteCommandEvent(_ event: PhoneEvent) -> Bool {
        guard case .other(let envelope) = event, case .remoteCommandEvent? = envelope.body else { return false }
        return true
    }

    func reportCall(_ step: HUScenarioReportCall) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        var report = HUCallReport()
        report.appID = step.appID
        report.callUuid = step.callUuid
        report.kind = step.kind
        if step.hasDescription_p { report.description_p = step.description_p }
        report.endedReason = step.endedReason
        do {
            return check(try await phone.connection.resultOf(.callReport(report)), expect: step.expect, expectLimit: step.expectLimit)
        } catch {
            return failure(error)
        }
    }

    func callInput(_ step: HUScenarioCallInput) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let phone else { return .failed("phone disconnected") }
        let body = HUEnvelope.OneOf_Body.callInput(HUCallInput.with { $0.action = step.action })
        // Every action but END is answered once the app fulfilled or failed it.
        let connection = hmi.connection
        let pending = Task { try await connection.resultOf(body) }
        do {
            if step.expect != .ok {
                let result = try await pending.value
                if let event = await phone.nextEvent(timeout: .zero, where: Self.isCallActionEvent) {
                    return .failed("refused, yet the app got \(event)")
                }
                return check(result, expect: step.expect, expectLimit: step.expectLimit)
            }
            let appID = step.appID
            guard case .other(let envelope)? = await phone.nextEvent(timeout: timeout, where: { event in
                guard case .other(let envelope) = event, case .callActionEvent(let action)? = envelope.body else { return false }
                return action.fromCar && (appID.isEmpty || action.appID == appID)
            }), case .callActionEvent(let event)? = envelope.body else {
                pending.cancel()
                return .failed("the app got no CallActionEvent within \(timeout.nanoseconds / 1_000_000) ms")
            }
            if event.action.kind != step.action.kind || event.action.callUuid.lowercased() != step.action.callUuid.lowercased() {
                return .failed("the app got \(event.action.kind) on \(event.action.callUuid), expected \(step.action.kind) on \(step.action.callUuid)")
            }
            // An END the car carried out already (26.6): the app ends its side; no answer changes anything.
            let carriedOut = event.endedByCar != .unspecified
            if !carriedOut {
                try await phone.answerCallAction(appID: event.appID, actionID: event.actionID, fulfilled: !step.fail)
            }
            let result = try await pending.value
            guard result.code == .ok else { return check(result, expect: .ok) }
            let fulfilled = carriedOut || !step.fail
            if result.callAction.fulfilled != fulfilled {
                return .failed("the HMI got fulfilled \(result.callAction.fulfilled), expected \(fulfilled)")
            }
            return .ok(carriedOut ? "ended by the car (\(event.endedByCar))" : (fulfilled ? "fulfilled" : "failed by the app"))
        } catch {
            pending.cancel()
            return failure(error)
        }
    }

    @Sendable static func isCallActionEvent(_ event: PhoneEvent) -> Bool {
        guard case .other(let envelope) = event, case .callActionEvent(let action)? = envelope.body else { return false }
        return action.fromCar
    }

    func expectCall(_ step: HUScenarioExpectCall) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        if await hmi.waitForHomeScreen(timeout: wait, where: { Self.matches($0.calls, step) }) != nil {
            return .ok("")
        }
        let calls = await hmi.homeScreen()?.calls ?? []
        return .failed("the calls are [\(calls.map(ScreenText.describe).joined(separator: "; "))]")
    }

    static func matches(_ calls: [HUCallInfo], _ step: HUScenarioExpectCall) -> Bool {
        let call = calls.first { $0.callUuid.lowercased() == step.callUuid.lowercased() }
        if step.gone { return call == nil }
        guard let call else { return false }
        if step.phase != .unspecified && call.phase != step.phase { return false }
        if step.hasOnHold && call.onHold != step.onHold { return false }
        if step.hasMuted && call.muted != step.muted { return false }
        return true
    }

    static func describe(_ step: HUScenarioRemoteCommand) -> String {
        let what = step.button != .unspecified ? "car_button \(step.button)" : "remote_command \(step.call.command)"
        return step.appID.isEmpty ? what : "\(what) (\(step.appID))"
    }

    static func describe(_ step: HUScenarioExpectCall) -> String {
        var text = "expect_call \(step.callUuid.suffix(12))"
        if step.gone { return text + " gone" }
        if step.phase != .unspecified { text += " \(step.phase)" }
        if step.hasOnHold { text += step.onHold ? " held" : " not held" }
        if step.hasMuted { text += step.muted ? " muted" : " not muted" }
        return text
    }
}
