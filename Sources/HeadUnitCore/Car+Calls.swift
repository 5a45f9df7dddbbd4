import HeadUnitWire

// Calls (PROTOCOL.md section 26): the car checks who asks and routes, the
// `CallSession` value decides. The driver's action is answered when the app
// fulfils or fails it (or times out), not at once; the driver's end is the
// car's own, carried out and answered at once.
extension Car {
    /// The communication app a phone's call message names (26.2): NO_PHONE,
    /// UNKNOWN_APP, ENTITLEMENT_REFUSED, NOT_ALLOWED_FOR_CATEGORY.
    func callingApp(_ appID: String, from peer: PeerID) -> RuleViolation? {
        let app: AppState
        switch announcedApp(appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return violation
        }
        guard let category = app.category else {
            return RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused")
        }
        guard category == .communication else {
            return RuleViolation(.notAllowedForCategory, "calls are for communication apps (com.apple.developer.carplay-communication); '\(appID)' is not one")
        }
        return nil
    }

    /// `CallReport` from the phone (26.3).
    mutating func callReported(_ report: HUCallReport, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if let violation = callingApp(report.appID, from: peer) { return .failure(violation) }
        var outputs: [CallSession.Output] = []
        let violation = calls.report(report, outputs: &outputs)
        performCalls(outputs)
        return violation.map { .failure($0) } ?? .ok
    }

    /// `CallRequest` from the phone (26.4): answered with the action's id,
    /// then the app is sent the action to perform.
    mutating func callRequested(_ request: HUCallRequest, requestID: UInt32, from peer: PeerID) {
        if let violation = callingApp(request.appID, from: peer) { return answer(peer, requestID, .failure(violation)) }
        var outputs: [CallSession.Output] = []
        switch calls.request(appID: request.appID, request.action, asker: nil, outputs: &outputs) {
        case .success(let id):
            var result = HUResult()
            result.callAction = HUCallActionOutcome.with {
                $0.appID = request.appID
                $0.actionID = id
                $0.action = request.action
            }
            answer(peer, requestID, .success(result))
            performCalls(outputs)
        case .failure(let violation):
            answer(peer, requestID, .failure(violation))
        }
    }

    /// `CallInput` from an HMI (26.5): the driver's action, to the call's app.
    mutating func callInput(_ input: HUCallInput, requestID: UInt32, from peer: PeerID) {
        // The action's own fields first, then the call, then the phone's link.
        if let problem = CallSession.argumentProblem(input.action, fromCar: true) {
            return answer(peer, requestID, .failure(problem))
        }
        guard let call = calls.call(input.action.callUuid) else {
            return answer(peer, requestID, .failure(RuleViolation(.unknownCall, "no call \(input.action.callUuid.lowercased())")))
        }
        if input.action.kind == .end {
            // The driver can always end a call: gone from the car now, whatever
            // the app answers, even while its phone reconnects (it hears on resuming).
            var outputs: [CallSession.Output] = []
            guard let id = calls.endByCar(call.uuid, reason: .endedByAction, outputs: &outputs) else {
                return answer(peer, requestID, .failure(RuleViolation(.unknownCall, "no call \(call.uuid)")))
            }
            var result = HUResult()
            result.callAction = HUCallActionOutcome.with {
                $0.appID = call.appID
                $0.actionID = id
                $0.action = HUCallAction.with { $0.kind = .end; $0.callUuid = call.uuid }
                $0.fulfilled = true
            }
            answer(peer, requestID, .success(result))
            performCalls(outputs)
            return
        }
        guard phonePeer != nil else {
            return answer(peer, requestID, .failure(RuleViolation(.notConnected, "the phone carrying '\(call.appID)' is reconnecting")))
        }
        var outputs: [CallSession.Output] = []
        switch calls.request(appID: nil, input.action, asker: .init(peer: peer, requestID: requestID), outputs: &outputs) {
        case .success: performCalls(outputs)
        case .failure(let violation): answer(peer, requestID, .failure(violation))
        }
    }

    /// `CallActionAnswer` from the phone (26.6).
    mutating func callActionAnswered(_ answer: HUCallActionAnswer, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if case .failure(let violation) = announcedApp(answer.appID, from: peer) { return .failure(violation) }
        var outputs: [CallSession.Output] = []
        if let violation = calls.answered(answer, outputs: &outputs) { return .failure(violation) }
        performCalls(outputs)
        return .ok
    }

    mutating func callActionTimedOut(actionID: UInt64) {
        var outputs: [CallSession.Output] = []
        calls.timerFired(actionID: actionID, outputs: &outputs)
        performCalls(outputs)
    }

    /// A call rang `call_ring_timeout_ms` unanswered: the car ends it (RANG_OUT).
    mutating func callRangOut(_ uuid: String) {
        var outputs: [CallSession.Output] = []
        calls.ringTimerFired(uuid, outputs: &outputs)
        performCalls(outputs)
    }

    /// The driver closed the app (CloseApp): its calls end on the car, and it is told (CLOSED_BY_CAR).
    mutating func endCallsByCar(of appID: String) {
        var outputs: [CallSession.Output] = []
        calls.endByCar(appID: appID, reason: .closedByCar, outputs: &outputs)
        performCalls(outputs)
    }

    /// The app closed, or its phone left for good: its calls end.
    mutating func endCalls(of appIDs: [String], reason: HUCallEndedReason) {
        var outputs: [CallSession.Output] = []
        for appID in appIDs { calls.appGone(appID, reason: reason, outputs: &outputs) }
        performCalls(outputs)
    }

    /// The phone's link was lost (it may resume), or the daemon hands over
    /// (section 22): the calls go on, actions waiting end, their askers told NOT_CONNECTED.
    mutating func callsLostLink(why: String = "lost its phone's connection") {
        var outputs: [CallSession.Output] = []
        calls.linkLost(why: why, outputs: &outputs)
        performCalls(outputs)
    }

    mutating func performCalls(_ outputs: [CallSession.Output]) {
        for output in outputs {
            switch output {
            case .perform(let event):
                sendToPhone(.callActionEvent(event))
                effects.append(.startTimer(.callAction(actionID: event.actionID), milliseconds: calls.limits.actionTimeoutMilliseconds))
            case .timedOut(let message):
                sendToPhone(.callActionTimedOut(message))
            case .ringing(let uuid):
                effects.append(.startTimer(.callRinging(uuid: uuid), milliseconds: calls.limits.ringTimeoutMilliseconds))
            case .stoppedRinging(let uuid):
                effects.append(.cancelTimer(.callRinging(uuid: uuid)))
            case .settled(let id, let pending, let outcome):
                effects.append(.cancelTimer(.callAction(actionID: id)))
                guard let asker = pending.asker else { continue }
                switch outcome {
                case .success(let fulfilled):
                    var result = HUResult()
                    result.callAction = HUCallActionOutcome.with {
                        $0.appID = pending.appID
                        $0.actionID = id
                        $0.action = pending.action
                        $0.fulfilled = fulfilled
                    }
                    answer(asker.peer, asker.requestID, .success(result))
                case .failure(let violation):
                    answer(asker.peer, asker.requestID, .failure(violation))
                }
            }
        }
    }

    /// The audio focus follows the calls (a call pauses the main audio and
    /// may take the microphone, section 24); navigation apps hear the prompt style.
    mutating func settleCalls() {
        // No call before or now (most messages): nothing to compare.
        if calls.calls.isEmpty, audio.appCalls.isEmpty { return }
        let inCalls = calls.appsInCalls
        guard inCalls != audio.appCalls else { return }
        audio.callsChanged(appsInCalls: inCalls)
        announcePromptStyle()
    }
}
