import HeadUnitWire

/// PROTOCOL.md §26: a communication app's calls, the driver's actions on
/// them and the car's refusals (with the orders of §16.21).
enum CallChecks {
    static let first = "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"
    static let second = "0b7d1e52-3c4a-4f7b-8e21-9c0d5a6b7f22"

    static func report(_ app: LaunchedApp, _ kind: HUCallReportKind, _ uuid: String, reason: HUCallEndedReason = .unspecified) throws -> HUResult {
        var report = HUCallReport()
        report.appID = app.appID
        report.callUuid = uuid
        report.kind = kind
        report.description_p.remoteHandle.type = .phoneNumber
        report.description_p.remoteHandle.value = "+15550100"
        report.description_p.localizedCallerName = "Conformance"
        report.endedReason = reason
        return try app.phone.request(.callReport(report), "CallReport \(kind)")
    }

    static func action(_ kind: HUCallActionKind, _ uuid: String) -> HUCallAction {
        var action = HUCallAction()
        action.kind = kind
        action.callUuid = uuid
        return action
    }

    static func input(_ action: HUCallAction) -> HUEnvelope.OneOf_Body {
        var input = HUCallInput()
        input.action = action
        return .callInput(input)
    }

    static func event(_ app: LaunchedApp, _ what: String) throws -> HUCallActionEvent {
        try app.phone.take(what) { envelope -> HUCallActionEvent? in
            if case .callActionEvent(let event) = envelope.body { return event }
            return nil
        }
    }

    static func fulfil(_ app: LaunchedApp, _ event: HUCallActionEvent, _ fulfilled: Bool = true) throws -> HUResult {
        var answer = HUCallActionAnswer()
        answer.appID = app.appID
        answer.actionID = event.actionID
        answer.fulfilled = fulfilled
        return try app.phone.request(.callActionAnswer(answer), "CallActionAnswer")
    }

    static func home(_ app: LaunchedApp, _ what: String, _ match: @escaping (HUHomeScreen) -> Bool) throws -> HUHomeScreen {
        try app.hmi.take(what) { envelope -> HUHomeScreen? in
            if case .homeScreen(let home) = envelope.body, match(home) { return home }
            return nil
        }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "calls.answer-and-end", .p("26"),
            "an incoming call (CallReport NEW_INCOMING) rings on the HMI's home screen; the driver's answer (CallInput) reaches the app as CallActionEvent{from_car}, is answered once the app fulfils it and the call turns ACTIVE; the app's own end (CallRequest) is answered with its action id, sent back to perform, and the fulfilled end removes the call (last_call_ended ENDED_BY_ACTION)",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.communication], appID: "com.example.conformance.calls")
            try requireCode(try report(app, .newIncoming, first), .ok, "CallReport NEW_INCOMING")
            let ringing = try home(app, "HomeScreen with the call ringing") { $0.calls.contains { $0.callUuid == first && $0.phase == .ringing } }
            let call = ringing.calls.first { $0.callUuid == first }!
            try require(call.appID == app.appID && !call.outgoing, "the call of the app, incoming", got: "\(call)")

            let id = app.hmi.newRequestID()
            try app.hmi.send(input(action(.answer, first)), requestID: id)
            let answer = try event(app, "CallActionEvent for the driver's answer")
            try require(answer.fromCar && answer.action.kind == .answer && answer.action.callUuid == first, "CallActionEvent{from_car, ANSWER, the call}", got: "\(answer)")
            try requireCode(try fulfil(app, answer), .ok, "CallActionAnswer fulfilled")
            let outcome = try app.hmi.result(for: id, "CallInput ANSWER")
            try requireCode(outcome, .ok, "CallInput ANSWER once fulfilled")
            try require(outcome.callAction.fulfilled && outcome.callAction.appID == app.appID, "Result{call_action{fulfilled}}", got: "\(outcome.callAction)")
            _ = try home(app, "HomeScreen with the call ACTIVE") { $0.calls.contains { $0.callUuid == first && $0.phase == .active } }

            var request = HUCallRequest()
            request.appID = app.appID
            request.action = action(.end, first)
            let accepted = try app.phone.request(.callRequest(request), "CallRequest END")
            try requireCode(accepted, .ok, "CallRequest END")
            let end = try event(app, "CallActionEvent for the app's own end")
            try require(!end.fromCar && end.actionID == accepted.callAction.actionID && end.action.kind == .end, "CallActionEvent{END, the answered action id}", got: "\(end)")
            try requireCode(try fulfil(app, end), .ok, "CallActionAnswer fulfilled")
            // (An HMI's earlier home screens may name an older call that ended: wait for this one.)
            _ = try home(app, "HomeScreen without the call, last_call_ended{the call, ENDED_BY_ACTION}") {
                !$0.calls.contains { $0.callUuid == first } && $0.lastCallEnded.callUuid == first && $0.lastCallEnded.reason == .endedByAction
            }
        },
        ConformanceCheck(
            "calls.refusals", .p("26.7"),
            "calls refused with their codes: a UUID that is none INVALID_ARGUMENT, a report on an unknown call UNKNOWN_CALL, a second call with the UUID DUPLICATE_CALL, an incoming call reported connected WRONG_CALL_STATE, the car's own end reason INVALID_ARGUMENT, the driver's START INVALID_ARGUMENT and action on no call UNKNOWN_CALL, mute on a ringing call WRONG_CALL_STATE, an answer to an action never sent UNKNOWN_EVENT, a calls message from the HMI NOT_FOR_ROLE",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.communication], appID: "com.example.conformance.calls")
            try requireCode(try report(app, .newIncoming, "not-a-uuid"), .invalidArgument, "a call_uuid that is no UUID")
            try requireCode(try report(app, .outgoingConnected, second), .unknownCall, "a report on an unknown call")
            try requireCode(try report(app, .newIncoming, first), .ok, "CallReport NEW_INCOMING")
            try requireCode(try report(app, .newIncoming, first.uppercased()), .duplicateCall, "a second call with the UUID (in capitals)")
            try requireCode(try report(app, .outgoingConnected, first), .wrongCallState, "an incoming call reported connected")
            try requireCode(try report(app, .ended, first, reason: .phoneGone), .invalidArgument, "the car's own end reason")
            var start = action(.start, second)
            start.handle.value = "+15550199"
            try requireCode(try app.hmi.request(input(start), "CallInput START"), .invalidArgument, "the driver's START")
            try requireCode(try app.hmi.request(input(action(.end, second)), "CallInput END on no call"), .unknownCall, "an action on no call")
            var mute = action(.setMuted, first)
            mute.muted = true
            try requireCode(try app.hmi.request(input(mute), "CallInput SET_MUTED on a ringing call"), .wrongCallState, "mute on a ringing call")
            var never = HUCallActionEvent()
            never.actionID = 987_654_321
            try requireCode(try fulfil(app, never), .unknownEvent, "an answer to an action never sent")
            var report = HUCallReport()
            report.appID = app.appID
            try requireCode(try app.hmi.request(.callReport(report), "CallReport from the HMI"), .notForRole, "CallReport from the HMI")
            try requireCode(try CallChecks.report(app, .ended, first, reason: .remoteEnded), .ok, "CallReport ENDED")
        },
    ]
}
