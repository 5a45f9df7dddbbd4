import HeadUnitWire

/// The phone's calls as the car shows and drives them (PROTOCOL.md section
/// 26), CallKit's model: a communication app reports its calls (`CXProvider`),
/// asks for actions (`CXCallController.request`), and performs every action,
/// its own and the driver's, when the car sends it (`provider(_:perform:)`),
/// answering fulfilled or failed. Pure: the car checks who is asking, routes
/// the outputs, times the actions and answers the askers.
public struct CallSession: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        /// Calls at once in the car, ringing ones included (TOO_MANY_CALLS, limit `calls.max`).
        public var maxCalls: Int
        /// Actions one app has unanswered (LIMIT_EXCEEDED, limit `calls.actions`).
        public var maxActionsPerApp: Int
        /// How long the car waits for the app to fulfil or fail an action (COMMAND_TIMED_OUT).
        public var actionTimeoutMilliseconds: UInt64
        /// How long an incoming call rings unanswered before the car ends it (RANG_OUT).
        public var ringTimeoutMilliseconds: UInt64

        /// The ranges the daemon accepts at start (PROTOCOL.md sections 20.6, 26.7):
        /// `max_calls` below 2 would leave no slot for another app's call.
        public static let maxCallsRange = 2...16
        public static let ringTimeoutRange: ClosedRange<UInt64> = 5_000...600_000
        public static let maxActionsPerAppRange = 1...64
        public static let actionTimeoutRange: ClosedRange<UInt64> = 100...60_000

        public init(maxCalls: Int = 3, maxActionsPerApp: Int = 4, actionTimeoutMilliseconds: UInt64 = 5_000, ringTimeoutMilliseconds: UInt64 = 60_000) {
            self.maxCalls = maxCalls
            self.maxActionsPerApp = maxActionsPerApp
            self.actionTimeoutMilliseconds = actionTimeoutMilliseconds
            self.ringTimeoutMilliseconds = ringTimeoutMilliseconds
        }

        /// Calls one app may hold (limit `calls.perApp`): one fewer than the
        /// car's, so one app never takes the slot another app's call needs.
        public var maxCallsPerApp: Int { max(maxCalls - 1, 1) }
    }

    /// Calls of one app ringing at once (TOO_MANY_CALLS, limit `calls.ringingPerApp`).
    public static let maxRingingPerApp = 1

    /// A handle's value and a caller name, in UTF-8 bytes; DTMF digits per action.
    public static let maxHandleBytes = 256
    public static let maxNameBytes = 128
    public static let maxDigits = 32
    /// Timed-out actions remembered, so a late answer is told COMPLETION_TIMEOUT.
    static let timedOutMemory = 64

    public enum Phase: Sendable, Equatable {
        /// Incoming, not answered.
        case ringing
        /// Outgoing, the app's start action not fulfilled yet.
        case dialing
        /// Outgoing, started (start fulfilled, or reported connecting).
        case connecting
        /// Answered or connected.
        case active

        var wire: HUCallPhase {
            switch self {
            case .ringing: return .ringing
            case .dialing: return .dialing
            case .connecting: return .connecting
            case .active: return .active
            }
        }

        init?(wire: HUCallPhase) {
            switch wire {
            case .ringing: self = .ringing
            case .dialing: self = .dialing
            case .connecting: self = .connecting
            case .active: self = .active
            case .unspecified, .UNRECOGNIZED: return nil
            }
        }
    }

    public struct Call: Sendable, Equatable {
        public var appID: String
        /// Lowercase canonical UUID.
        public var uuid: String
        public var outgoing: Bool
        public var phase: Phase
        public var onHold = false
        public var muted = false
        public var description: HUCallDescription

        /// Holds the line: answered or being placed, and not on hold.
        var holdsTheLine: Bool {
            switch phase {
            case .ringing: return false
            case .dialing, .connecting: return true
            case .active: return !onHold
            }
        }
    }

    /// An action sent to the app, waiting for its answer.
    public struct PendingAction: Sendable, Equatable {
        public var appID: String
        public var action: HUCallAction
        /// The driver's (an HMI's CallInput); false: the app's own request.
        public var fromCar: Bool
        /// The HMI that asked and its request id; nil for the app's own, or once that HMI left.
        public var asker: Asker?
    }

    public struct Asker: Sendable, Equatable {
        public var peer: PeerID
        public var requestID: UInt32
        public init(peer: PeerID, requestID: UInt32) {
            self.peer = peer
            self.requestID = requestID
        }
    }

    /// What the car must do after a change.
    public enum Output: Sendable, Equatable {
        /// Send the app this action to perform, and time it.
        case perform(HUCallActionEvent)
        /// The action is settled: cancel its timer; its asker (if any) gets
        /// the outcome (fulfilled or failed) or the violation.
        case settled(actionID: UInt64, PendingAction, Result<Bool, RuleViolation>)
        /// Tell the app it took too long (`provider(_:timedOutPerforming:)`).
        case timedOut(HUCallActionTimedOut)
        /// A call began ringing: time its ring-out (`ringTimeoutMilliseconds`).
        case ringing(uuid: String)
        /// A ringing call was answered or ended: its ring-out timer goes.
        case stoppedRinging(uuid: String)
    }

    public var limits: Limits
    /// In the order they began.
    public private(set) var calls: [Call] = []
    public private(set) var pending: [UInt64: PendingAction] = [:]
    public private(set) var lastEnded: HUCallEnded?
    var timedOut: [(id: UInt64, appID: String)] = []
    public internal(set) var nextActionID: UInt64 = 1

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    public static func == (lhs: CallSession, rhs: CallSession) -> Bool {
        lhs.limits == rhs.limits && lhs.calls == rhs.calls && lhs.pending == rhs.pending && lhs.lastEnded == rhs.lastEnded
            && lhs.timedOut.map(\.id) == rhs.timedOut.map(\.id) && lhs.nextActionID == rhs.nextActionID
    }

    // MARK: - queries

    /// Apps with a call in progress (ringing included: the ringtone plays as their voice).
    public var appsInCalls: [String] {
        var seen: [String] = []
        for call in calls where !seen.contains(call.appID) { seen.append(call.appID) }
        return seen
    }

    /// The app whose call holds the line (answered or placed, not held): the microphone's.
    public var lineHolder: String? { calls.first(where: \.holdsTheLine)?.appID }

    public func call(_ uuid: String) -> Call? {
        let key = uuid.lowercased()
        return calls.first { $0.uuid == key }
    }

    func index(_ uuid: String) -> Int? {
        let key = uuid.lowercased()
        return calls.firstIndex { $0.uuid == key }
    }

    /// The calls as the HMI draws them, with the actions the driver may press.
    public func infos(displayName: (String) -> String) -> [HUCallInfo] {
        calls.map { call in
            HUCallInfo.with {
                $0.appID = call.appID
                $0.appDisplayName = displayName(call.appID)
                $0.callUuid = call.uuid
                $0.outgoing = call.outgoing
                $0.phase = call.phase.wire
                $0.onHold = call.onHold
                $0.muted = call.muted
                $0.description_p = call.description
                $0.availableActions = [HUCallActionKind.answer, .end, .setHeld, .setMuted, .playDtmf].filter { kind in
                    var action = HUCallAction()
                    action.kind = kind
                    action.onHold = !call.onHold
                    action.muted = !call.muted
                    return Self.actionProblem(action, on: call, among: calls) == nil
                }
            }
        }
    }

    // MARK: - checks

    /// A canonical UUID: 8-4-4-4-12 hexadecimal digits.
    public static func isUUID(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return false }
        for (i, byte) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let hex = (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 70) || (byte >= 97 && byte <= 102)
                guard hex else { return false }
            }
        }
        return true
    }

    static func uuidProblem(_ uuid: String) -> RuleViolation? {
        isUUID(uuid) ? nil : RuleViolation(.invalidArgument, "call_uuid '\(uuid.prefix(40))' is not a UUID (8-4-4-4-12 hexadecimal digits)")
    }

    static func handleProblem(_ handle: HUCallHandle, required: Bool) -> RuleViolation? {
        if case .UNRECOGNIZED(let raw) = handle.type {
            return RuleViolation(.invalidArgument, "unknown handle type \(raw)")
        }
        if required, handle.value.isEmpty {
            return RuleViolation(.invalidArgument, "a start action needs a handle to call")
        }
        if handle.value.utf8.count > maxHandleBytes {
            return RuleViolation(.invalidArgument, "a handle is at most \(maxHandleBytes) bytes, not \(handle.value.utf8.count)", limit: "calls.handleBytes", limitValue: UInt32(maxHandleBytes))
        }
        return nil
    }

    static func descriptionProblem(_ description: HUCallDescription) -> RuleViolation? {
        if let problem = handleProblem(description.remoteHandle, required: false) { return problem }
        if description.localizedCallerName.utf8.count > maxNameBytes {
            return RuleViolation(.invalidArgument, "a caller name is at most \(maxNameBytes) bytes, not \(description.localizedCallerName.utf8.count)", limit: "calls.nameBytes", limitValue: UInt32(maxNameBytes))
        }
        if description.hasVideo_p {
            return RuleViolation(.invalidArgument, "the car carries audio calls only (has_video must be false)")
        }
        return nil
    }

    /// The action's own fields (26.4's step 2): kind, UUID, handle, digits.
    static func argumentProblem(_ action: HUCallAction, fromCar: Bool) -> RuleViolation? {
        switch action.kind {
        case .unspecified, .UNRECOGNIZED:
            return RuleViolation(.invalidArgument, "a call action must name its kind (CALL_ACTION_KIND_UNSPECIFIED)")
        case .start:
            if fromCar { return RuleViolation(.invalidArgument, "the car does not place an app's calls: START is the app's own request") }
            if let problem = uuidProblem(action.callUuid) ?? handleProblem(action.handle, required: true) { return problem }
        case .playDtmf:
            if let problem = uuidProblem(action.callUuid) { return problem }
            let allowed = Set("0123456789*#,")
            guard !action.digits.isEmpty, action.digits.count <= maxDigits, action.digits.allSatisfy(allowed.contains) else {
                return RuleViolation(.invalidArgument, "DTMF digits are 1 to \(maxDigits) of 0-9 * # , not '\(action.digits.prefix(40))'", limit: "calls.dtmfDigits", limitValue: UInt32(maxDigits))
            }
        case .answer, .end, .setHeld, .setMuted:
            if let problem = uuidProblem(action.callUuid) { return problem }
        }
        return nil
    }

    /// Whether the call allows the action now (26.4's steps 4-5):
    /// COMMAND_NOT_SUPPORTED for hold or keys the app did not offer,
    /// WRONG_CALL_STATE for a phase that does not allow it.
    static func actionProblem(_ action: HUCallAction, on call: Call, among calls: [Call]) -> RuleViolation? {
        let other = calls.first { $0.uuid != call.uuid && $0.holdsTheLine }
        switch action.kind {
        case .answer:
            guard call.phase == .ringing else {
                return RuleViolation(.wrongCallState, "call \(call.uuid) is not ringing: only a ringing call is answered")
            }
            if let other {
                return RuleViolation(.wrongCallState, "call \(other.uuid) holds the line: hold or end it before answering \(call.uuid)")
            }
        case .end:
            break
        case .setHeld:
            guard call.description.supportsHolding else {
                return RuleViolation(.commandNotSupported, "the app does not support holding call \(call.uuid) (supports_holding)")
            }
            guard call.phase == .active else {
                return RuleViolation(.wrongCallState, "only an answered or connected call is held or resumed; \(call.uuid) is \(Self.name(call.phase))")
            }
            if !action.onHold, let other {
                return RuleViolation(.wrongCallState, "call \(other.uuid) holds the line: hold or end it before resuming \(call.uuid)")
            }
        case .setMuted:
            guard call.phase != .ringing else {
                return RuleViolation(.wrongCallState, "a ringing call is not muted; answer it first")
            }
        case .playDtmf:
            guard call.description.supportsDtmf else {
                return RuleViolation(.commandNotSupported, "the app does not take keys on call \(call.uuid) (supports_dtmf)")
            }
            guard call.phase == .active, !call.onHold else {
                return RuleViolation(.wrongCallState, "keys go to an answered call not on hold; \(call.uuid) is \(call.onHold ? "on hold" : Self.name(call.phase))")
            }
        case .start, .unspecified, .UNRECOGNIZED:
            return RuleViolation(.invalidArgument, "not an action on an existing call")
        }
        return nil
    }

    static func name(_ phase: Phase) -> String {
        switch phase {
        case .ringing: return "ringing"
        case .dialing: return "dialing"
        case .connecting: return "connecting"
        case .active: return "active"
        }
    }

    // MARK: - the app reports (CXProvider)

    /// A `CallReport` (26.3) after the car checked the app: the report's
    /// own checks, then the call's; the change, or why not.
    public mutating func report(_ report: HUCallReport, outputs: inout [Output]) -> RuleViolation? {
        switch report.kind {
        case .unspecified, .UNRECOGNIZED:
            return RuleViolation(.invalidArgument, "a call report must name its kind (CALL_REPORT_KIND_UNSPECIFIED)")
        case .newIncoming, .outgoingConnecting, .outgoingConnected, .updated, .ended:
            break
        }
        if let problem = Self.uuidProblem(report.callUuid) { return problem }
        switch report.kind {
        case .newIncoming, .updated:
            if let problem = Self.descriptionProblem(report.description_p) { return problem }
        case .ended:
            switch report.endedReason {
            case .failed, .remoteEnded, .unanswered, .answeredElsewhere, .declinedElsewhere: break
            case .unspecified, .endedByAction, .startFailed, .appClosed, .phoneGone, .rangOut, .closedByCar, .UNRECOGNIZED:
                return RuleViolation(.invalidArgument, "an ended call's reason is one of CXCallEndedReason's (1-5)")
            }
        case .outgoingConnecting, .outgoingConnected, .unspecified, .UNRECOGNIZED:
            break
        }
        if report.kind == .newIncoming {
            if let problem = newCallProblem(report.callUuid, appID: report.appID, ringing: true) { return problem }
            let uuid = report.callUuid.lowercased()
            calls.append(Call(appID: report.appID, uuid: uuid, outgoing: false, phase: .ringing, description: report.description_p))
            outputs.append(.ringing(uuid: uuid))
            return nil
        }
        guard let i = index(report.callUuid), calls[i].appID == report.appID else {
            return RuleViolation(.unknownCall, "'\(report.appID)' has no call \(report.callUuid.lowercased())")
        }
        switch report.kind {
        case .outgoingConnecting:
            guard calls[i].outgoing, calls[i].phase != .active else {
                return RuleViolation(.wrongCallState, "call \(calls[i].uuid) is \(calls[i].outgoing ? "connected already" : "incoming"): only an outgoing call not yet connected starts connecting")
            }
            calls[i].phase = .connecting
        case .outgoingConnected:
            guard calls[i].outgoing, calls[i].phase != .active else {
                return RuleViolation(.wrongCallState, "call \(calls[i].uuid) is \(calls[i].outgoing ? "connected already" : "incoming"): only an outgoing call not yet connected connects")
            }
            calls[i].phase = .active
        case .updated:
            calls[i].description = report.description_p
        case .ended:
            end(at: i, reason: report.endedReason, outputs: &outputs)
        case .newIncoming, .unspecified, .UNRECOGNIZED:
            break
        }
        return nil
    }

    /// A new call of `appID` with this UUID, in order: DUPLICATE_CALL; then
    /// TOO_MANY_CALLS for the app's own share (a call of it ringing already,
    /// for a ringing one; `maxCallsPerApp` calls), then for the car's.
    func newCallProblem(_ uuid: String, appID: String, ringing: Bool) -> RuleViolation? {
        if let existing = call(uuid) {
            return RuleViolation(.duplicateCall, "call \(existing.uuid) exists already (of '\(existing.appID)')")
        }
        let own = calls.filter { $0.appID == appID }
        if ringing, own.count(where: { $0.phase == .ringing }) >= Self.maxRingingPerApp {
            return RuleViolation(
                .tooManyCalls, "'\(appID)' has a call ringing already: an app rings one call at a time",
                limit: "calls.ringingPerApp", limitValue: UInt32(Self.maxRingingPerApp))
        }
        if own.count >= limits.maxCallsPerApp {
            return RuleViolation(
                .tooManyCalls, "'\(appID)' holds \(own.count) calls, at most \(limits.maxCallsPerApp) (one fewer than the car's \(limits.maxCalls), so another app's call finds a slot)",
                limit: "calls.perApp", limitValue: UInt32(limits.maxCallsPerApp))
        }
        if calls.count >= limits.maxCalls {
            return RuleViolation(.tooManyCalls, "the car holds \(calls.count) calls, at most \(limits.maxCalls)", limit: "calls.max", limitValue: UInt32(limits.maxCalls))
        }
        return nil
    }

    mutating func end(at index: Int, reason: HUCallEndedReason, outputs: inout [Output]) {
        let call = calls.remove(at: index)
        if call.phase == .ringing { outputs.append(.stoppedRinging(uuid: call.uuid)) }
        lastEnded = HUCallEnded.with {
            $0.appID = call.appID
            $0.callUuid = call.uuid
            $0.reason = reason
            $0.description_p = call.description
        }
    }

    // MARK: - actions (the app's CXCallController, the driver's buttons)

    /// An action to send the app: its own request (`asker` nil, `fromCar`
    /// false) or the driver's (26.4, 26.5). The car checked who asks
    /// first; here, in order: the action's fields, the call (START: new,
    /// within the cap; else it exists and, for the app, is its own),
    /// COMMAND_NOT_SUPPORTED, WRONG_CALL_STATE, the actions cap. The action
    /// id, with a `.perform` output.
    public mutating func request(
        appID requester: String?, _ action: HUCallAction, asker: Asker?, outputs: inout [Output]
    ) -> Result<UInt64, RuleViolation> {
        let fromCar = requester == nil
        if let problem = Self.argumentProblem(action, fromCar: fromCar) { return .failure(problem) }
        let appID: String
        var action = action
        action.callUuid = action.callUuid.lowercased()
        if action.kind == .start {
            if let problem = newCallProblem(action.callUuid, appID: requester!, ringing: false) { return .failure(problem) }
            if let other = calls.first(where: \.holdsTheLine) {
                return .failure(RuleViolation(.wrongCallState, "call \(other.uuid) holds the line: hold or end it before starting another"))
            }
            appID = requester!
        } else {
            guard let call = call(action.callUuid), requester == nil || call.appID == requester else {
                return .failure(RuleViolation(.unknownCall, requester.map { "'\($0)' has no call \(action.callUuid)" } ?? "no call \(action.callUuid)"))
            }
            if let problem = Self.actionProblem(action, on: call, among: calls) { return .failure(problem) }
            appID = call.appID
        }
        let waiting = pending.values.reduce(0) { $0 + ($1.appID == appID ? 1 : 0) }
        guard waiting < limits.maxActionsPerApp else {
            return .failure(.limitExceeded("calls.actions", count: waiting + 1, maximum: limits.maxActionsPerApp))
        }
        if action.kind == .start {
            var description = HUCallDescription()
            description.remoteHandle = action.handle
            calls.append(Call(appID: appID, uuid: action.callUuid, outgoing: true, phase: .dialing, description: description))
        }
        let id = nextActionID
        nextActionID &+= 1
        pending[id] = PendingAction(appID: appID, action: action, fromCar: fromCar, asker: asker)
        outputs.append(.perform(HUCallActionEvent.with {
            $0.appID = appID
            $0.actionID = id
            $0.action = action
            $0.fromCar = fromCar
        }))
        return .success(id)
    }

    /// The app fulfilled or failed an action (26.6): COMPLETION_TIMEOUT when
    /// it timed out, UNKNOWN_EVENT when it is not waiting; else the call
    /// changes (a fulfilled answer connects, an end ends, a failed start ends).
    public mutating func answered(_ answer: HUCallActionAnswer, outputs: inout [Output]) -> RuleViolation? {
        guard let found = pending[answer.actionID], found.appID == answer.appID else {
            if timedOut.contains(where: { $0.id == answer.actionID && $0.appID == answer.appID }) {
                return RuleViolation(.completionTimeout, "action \(answer.actionID) timed out before its answer; the car treated it as failed")
            }
            return RuleViolation(.unknownEvent, "'\(answer.appID)' has no call action \(answer.actionID) waiting for an answer")
        }
        pending[answer.actionID] = nil
        apply(found.action, fulfilled: answer.fulfilled, outputs: &outputs)
        outputs.append(.settled(actionID: answer.actionID, found, .success(answer.fulfilled)))
        return nil
    }

    /// What a settled action does to its call (gone meanwhile, as after
    /// the car's own end: nothing).
    mutating func apply(_ action: HUCallAction, fulfilled: Bool, outputs: inout [Output]) {
        guard let i = index(action.callUuid) else { return }
        switch action.kind {
        case .start:
            if !fulfilled {
                end(at: i, reason: .startFailed, outputs: &outputs)
            } else if calls[i].phase == .dialing {
                calls[i].phase = .connecting
            }
        case .answer:
            if fulfilled, calls[i].phase == .ringing {
                calls[i].phase = .active
                outputs.append(.stoppedRinging(uuid: calls[i].uuid))
            }
        case .end:
            if fulfilled { end(at: i, reason: .endedByAction, outputs: &outputs) }
        case .setHeld:
            if fulfilled, calls[i].phase == .active { calls[i].onHold = action.onHold }
        case .setMuted:
            if fulfilled { calls[i].muted = action.muted }
        case .playDtmf, .unspecified, .UNRECOGNIZED:
            break
        }
    }

    /// The app did not answer in time: failed; the app and the asker are told.
    public mutating func timerFired(actionID: UInt64, outputs: inout [Output]) {
        guard let found = pending.removeValue(forKey: actionID) else { return }
        timedOut.append((actionID, found.appID))
        if timedOut.count > Self.timedOutMemory { timedOut.removeFirst() }
        apply(found.action, fulfilled: false, outputs: &outputs)
        outputs.append(.timedOut(HUCallActionTimedOut.with {
            $0.appID = found.appID
            $0.actionID = actionID
        }))
        let seconds = Double(limits.actionTimeoutMilliseconds) / 1000
        outputs.append(.settled(actionID: actionID, found, .failure(RuleViolation(
            .commandTimedOut, "'\(found.appID)' did not fulfil or fail the \(Self.name(found.action.kind)) action within \(seconds) s (call_action_timeout_ms)"))))
    }

    // MARK: - departures

    /// The phone's link is lost and it may resume (section 21): the calls go
    /// on (they are the phone's network's); actions waiting end, their askers
    /// told NOT_CONNECTED; a late answer is UNKNOWN_EVENT.
    public mutating func linkLost(why: String = "lost its phone's connection", outputs: inout [Output]) {
        for id in pending.keys.sorted() {
            let found = pending.removeValue(forKey: id)!
            outputs.append(.settled(actionID: id, found, .failure(RuleViolation(.notConnected, "'\(found.appID)' \(why) before it answered"))))
        }
    }

    /// The app closed or its phone left for good: its calls end with `reason`,
    /// its actions' askers are told NOT_CONNECTED.
    public mutating func appGone(_ appID: String, reason: HUCallEndedReason, outputs: inout [Output]) {
        for id in pending.keys.sorted() where pending[id]!.appID == appID {
            let found = pending.removeValue(forKey: id)!
            outputs.append(.settled(actionID: id, found, .failure(RuleViolation(.notConnected, "'\(appID)' went away before it answered"))))
        }
        while let i = calls.firstIndex(where: { $0.appID == appID }) {
            end(at: i, reason: reason, outputs: &outputs)
        }
    }

    // MARK: - the car's own end

    /// The car ends a call itself (26.6): the driver's end, a ring-out, the
    /// driver closing the app. The call is gone at once, whatever the app
    /// answers or fails to; the app is sent the end to perform
    /// (`ended_by_car` says why), timed like any action, and never refused
    /// by the actions cap: the driver can always end a call. Its id; nil
    /// when there is no such call.
    public mutating func endByCar(_ uuid: String, reason: HUCallEndedReason, outputs: inout [Output]) -> UInt64? {
        guard let i = index(uuid) else { return nil }
        let call = calls[i]
        end(at: i, reason: reason, outputs: &outputs)
        var action = HUCallAction()
        action.kind = .end
        action.callUuid = call.uuid
        let id = nextActionID
        nextActionID &+= 1
        pending[id] = PendingAction(appID: call.appID, action: action, fromCar: true, asker: nil)
        outputs.append(.perform(HUCallActionEvent.with {
            $0.appID = call.appID
            $0.actionID = id
            $0.action = action
            $0.fromCar = true
            $0.endedByCar = reason
        }))
        return id
    }

    /// A call's ring-out timer fired: still ringing, the car ends it (RANG_OUT).
    public mutating func ringTimerFired(_ uuid: String, outputs: inout [Output]) {
        guard call(uuid)?.phase == .ringing else { return }
        _ = endByCar(uuid, reason: .rangOut, outputs: &outputs)
    }

    /// The driver closed the app (CloseApp): the car ends its calls (CLOSED_BY_CAR).
    public mutating func endByCar(appID: String, reason: HUCallEndedReason, outputs: inout [Output]) {
        for uuid in calls.filter({ $0.appID == appID }).map(\.uuid) {
            _ = endByCar(uuid, reason: reason, outputs: &outputs)
        }
    }

    /// An HMI left: its actions still reach the app, no one is answered.
    public mutating func askerLeft(_ peer: PeerID) {
        for (id, entry) in pending where entry.asker?.peer == peer {
            pending[id]!.asker = nil
        }
    }

    // MARK: - restart (section 22)

    public var snapshot: [HUCallSnapshot] {
        calls.map { call in
            HUCallSnapshot.with {
                $0.appID = call.appID
                $0.callUuid = call.uuid
                $0.outgoing = call.outgoing
                $0.phase = call.phase.wire
                $0.onHold = call.onHold
                $0.muted = call.muted
                $0.description_p = call.description
            }
        }
    }

    /// The calls a restart hands over (no actions waiting: their askers'
    /// requests go unanswered, the app's late answers are UNKNOWN_EVENT).
    public mutating func restore(_ entries: [HUCallSnapshot], nextActionID: UInt64, lastEnded: HUCallEnded?) -> String? {
        calls = []
        for entry in entries {
            guard Self.isUUID(entry.callUuid), let phase = Phase(wire: entry.phase), call(entry.callUuid) == nil else {
                return "call '\(entry.callUuid)' is not a valid call"
            }
            calls.append(Call(appID: entry.appID, uuid: entry.callUuid.lowercased(), outgoing: entry.outgoing, phase: phase, onHold: entry.onHold, muted: entry.muted, description: entry.description_p))
        }
        self.nextActionID = max(nextActionID, 1)
        self.lastEnded = lastEnded
        return nil
    }

    /// "answer" for messages.
    public static func name(_ kind: HUCallActionKind) -> String {
        switch kind {
        case .unspecified: return "unspecified"
        case .start: return "start"
        case .answer: return "answer"
        case .end: return "end"
        case .setHeld: return "hold"
        case .setMuted: return "mute"
        case .playDtmf: return "DTMF"
        case .UNRECOGNIZED(let raw): return "action \(raw)"
        }
    }
}
