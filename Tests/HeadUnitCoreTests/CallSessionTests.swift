import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Calls (PROTOCOL.md section 26), through the Car as the server drives it,
/// and the `CallSession` rules on their own.
@Suite struct CallSessionTests {
    static let chat = "com.example.chat"
    static let voip = "com.example.voip"
    static let radio = "com.example.radio"
    static let first = "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"
    static let second = "0B7D1E52-3C4A-4F7B-8E21-9C0D5A6B7F22"
    static let third = "a1b2c3d4-e5f6-4789-abcd-ef0123456789"

    /// A phone with two communication apps and an audio app; an HMI watching.
    static func harness(calls: CallSession.Limits = .init()) -> CarHarness {
        var h = CarHarness()
        var configuration = h.car.configuration
        configuration.calls = calls
        h.car = Car(configuration: configuration)
        // With a resumption token, as the server gives every phone: a lost link may resume (section 21).
        h.apply(h.car.peerJoined(h.phone, info: PeerInfo(role: .phone, name: "phone", transport: .unix, resumptionToken: "token")))
        h.join(h.hmi, .hmi)
        #expect(h.announce([(chat, [EntitlementKey.communication]), (voip, [EntitlementKey.communication]), (radio, [EntitlementKey.audio])]).code == .ok)
        _ = h.drain(h.phone)
        _ = h.drain(h.hmi)
        return h
    }

    static func description(_ handle: String, name: String = "", holding: Bool = true, dtmf: Bool = true) -> HUCallDescription {
        HUCallDescription.with {
            $0.remoteHandle = HUCallHandle.with { $0.type = .phoneNumber; $0.value = handle }
            $0.localizedCallerName = name
            $0.supportsHolding = holding
            $0.supportsDtmf = dtmf
        }
    }

    static func report(
        _ h: inout CarHarness, _ kind: HUCallReportKind, _ uuid: String, app: String = chat,
        description: HUCallDescription = description("+15550100"), reason: HUCallEndedReason = .unspecified
    ) -> HUResult {
        h.request(h.phone, .callReport(HUCallReport.with {
            $0.appID = app
            $0.callUuid = uuid
            $0.kind = kind
            $0.description_p = description
            $0.endedReason = reason
        }))
    }

    static func action(_ kind: HUCallActionKind, _ uuid: String, onHold: Bool = false, muted: Bool = false, digits: String = "", handle: String = "") -> HUCallAction {
        HUCallAction.with {
            $0.kind = kind
            $0.callUuid = uuid
            $0.onHold = onHold
            $0.muted = muted
            $0.digits = digits
            if !handle.isEmpty { $0.handle = HUCallHandle.with { $0.type = .phoneNumber; $0.value = handle } }
        }
    }

    /// The HMI presses; returns its request id, the event the app got, and an immediate answer (nil: it waits).
    static func press(_ h: inout CarHarness, _ action: HUCallAction) -> (requestID: UInt32, event: HUCallActionEvent?, answer: HUResult?) {
        let result = h.request(h.hmi, .callInput(HUCallInput.with { $0.action = action }))
        let requestID = h.nextRequest - 1
        let event = events(&h).first
        return (requestID, event, result.code == .UNRECOGNIZED(-1) ? nil : result)
    }

    static func events(_ h: inout CarHarness) -> [HUCallActionEvent] {
        h.drain(h.phone).compactMap { envelope -> HUCallActionEvent? in
            if case .callActionEvent(let event) = envelope.body { return event }
            return nil
        }
    }

    static func fulfil(_ h: inout CarHarness, _ event: HUCallActionEvent, _ fulfilled: Bool = true) -> HUResult {
        h.request(h.phone, .callActionAnswer(HUCallActionAnswer.with {
            $0.appID = event.appID
            $0.actionID = event.actionID
            $0.fulfilled = fulfilled
        }))
    }

    static func answerOf(_ h: inout CarHarness, _ requestID: UInt32) -> HUResult? {
        h.drain(h.hmi).first { $0.requestID == requestID }?.result
    }

    /// The calls the HMI's latest home screen shows.
    static func shown(_ h: CarHarness) -> [HUCallInfo] {
        (h.car.templates.lastHomeScreen ?? HUHomeScreen()).calls
    }

    @Test func anIncomingCallRingsTheDriverAnswersAndTheAppFulfils() {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first, description: Self.description("+15550100", name: "Ada")).code == .ok)
        let ringing = try! #require(Self.shown(h).first)
        #expect(ringing.phase == .ringing && ringing.callUuid == Self.first && ringing.appDisplayName == Self.chat)
        #expect(ringing.description_p.localizedCallerName == "Ada" && !ringing.outgoing)
        #expect(ringing.availableActions == [.answer, .end], "a ringing call is answered or declined")
        #expect(h.car.audio.callActive, "a ringing call takes the audio focus (the ringtone is the app's voice)")

        let answer = Self.press(&h, Self.action(.answer, Self.first))
        #expect(answer.answer == nil, "the HMI waits for the app")
        let event = try! #require(answer.event)
        #expect(event.fromCar && event.action.kind == .answer && event.appID == Self.chat)
        #expect(h.timers.contains(.callAction(actionID: event.actionID)))
        #expect(Self.shown(h).first?.phase == .ringing, "nothing changes before the app fulfils")
        #expect(Self.fulfil(&h, event).code == .ok)
        let outcome = try! #require(Self.answerOf(&h, answer.requestID))
        #expect(outcome.code == .ok && outcome.callAction.fulfilled && outcome.callAction.action.kind == .answer)
        #expect(!h.timers.contains(.callAction(actionID: event.actionID)))
        let active = try! #require(Self.shown(h).first)
        #expect(active.phase == .active)
        #expect(active.availableActions == [.end, .setHeld, .setMuted, .playDtmf])
    }

    @Test func anOutgoingCallStartedByTheAppConnectsAndTheDriverEndsIt() {
        var h = Self.harness()
        let started = h.request(h.phone, .callRequest(HUCallRequest.with {
            $0.appID = Self.chat
            $0.action = Self.action(.start, Self.second, handle: "+15550199")
        }))
        #expect(started.code == .ok && started.callAction.actionID > 0)
        let start = try! #require(Self.events(&h).first)
        #expect(!start.fromCar && start.action.kind == .start && start.action.callUuid == Self.second.lowercased())
        #expect(Self.shown(h).first?.phase == .dialing && Self.shown(h).first?.outgoing == true)
        #expect(Self.fulfil(&h, start).code == .ok)
        #expect(Self.shown(h).first?.phase == .connecting)
        #expect(Self.report(&h, .outgoingConnected, Self.second).code == .ok)
        #expect(Self.shown(h).first?.phase == .active)

        let end = Self.press(&h, Self.action(.end, Self.second))
        let event = try! #require(end.event)
        #expect(end.answer?.callAction.fulfilled == true, "the driver's end is the car's: answered at once")
        #expect(event.fromCar && event.endedByCar == .endedByAction)
        #expect(Self.shown(h).isEmpty, "gone before the app answers")
        #expect(Self.fulfil(&h, event).code == .ok)
        #expect(h.car.templates.lastHomeScreen?.lastCallEnded.reason == .endedByAction)
        #expect(!h.car.audio.callActive)
    }

    @Test func aCallPausesTheMainAudioAndCombinesWithTheCarsOwnCall() {
        var h = Self.harness()
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state.callActive = true }))
        #expect(h.car.audio.callActive && h.car.audio.promptStyle == .short)
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state.callActive = false }))
        #expect(h.car.audio.callActive, "the app's call still holds the focus after the car's own call ended")
        #expect(h.car.audio.mayStreamVoice(Self.chat) && !h.car.audio.mayStreamVoice(Self.radio))
        #expect(h.car.audioStreams.mix.pauseMain, "a call pauses the main audio")
        #expect(Self.report(&h, .ended, Self.first, reason: .remoteEnded).code == .ok)
        #expect(!h.car.audio.callActive && !h.car.audioStreams.mix.pauseMain)
        #expect(h.car.templates.lastHomeScreen?.lastCallEnded.reason == .remoteEnded)
    }

    @Test func reportsAreCheckedInOrder() {
        var h = Self.harness(calls: .init(maxCalls: 2))
        #expect(Self.report(&h, .newIncoming, Self.first, app: Self.radio).code == .notAllowedForCategory)
        #expect(Self.report(&h, .newIncoming, Self.first, app: "com.example.nobody").code == .unknownApp)
        #expect(Self.report(&h, .unspecified, Self.first).code == .invalidArgument)
        #expect(Self.report(&h, .newIncoming, "not-a-uuid").code == .invalidArgument)
        let long = Self.report(&h, .newIncoming, Self.first, description: Self.description("+1", name: String(repeating: "n", count: 129)))
        #expect(long.code == .invalidArgument && long.limit == "calls.nameBytes" && long.limitValue == 128)
        let video = Self.report(&h, .newIncoming, Self.first, description: HUCallDescription.with { $0.hasVideo_p = true })
        #expect(video.code == .invalidArgument)
        #expect(Self.report(&h, .outgoingConnected, Self.first).code == .unknownCall)
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        #expect(Self.report(&h, .newIncoming, Self.first.uppercased()).code == .duplicateCall, "UUIDs compare case-insensitively")
        #expect(Self.report(&h, .outgoingConnected, Self.first).code == .wrongCallState, "an incoming call does not connect as outgoing")
        #expect(Self.report(&h, .ended, Self.first, reason: .rangOut).code == .invalidArgument, "the car's own reasons are not the app's")
        let twice = Self.report(&h, .newIncoming, Self.second)
        #expect(twice.code == .tooManyCalls && twice.limit == "calls.ringingPerApp" && twice.limitValue == 1, "an app rings one call at a time")
        #expect(Self.report(&h, .newIncoming, Self.second, app: Self.voip).code == .ok, "another app's call finds its slot")
        #expect(Self.report(&h, .updated, Self.second, description: Self.description("+15550111", name: "Bo")).code == .unknownCall, "not chat's call")
        #expect(Self.report(&h, .updated, Self.second, app: Self.voip, description: Self.description("+15550111", name: "Bo")).code == .ok)
        #expect(Self.shown(h).map(\.description_p.localizedCallerName) == ["", "Bo"])
    }

    @Test func actionsAreCheckedInOrder() {
        var h = Self.harness(calls: .init(maxCalls: 2, maxActionsPerApp: 2))
        #expect(Self.report(&h, .newIncoming, Self.first, description: Self.description("+1", holding: false, dtmf: false)).code == .ok)
        #expect(Self.press(&h, Self.action(.start, Self.third, handle: "+1")).answer?.code == .invalidArgument, "the car does not place calls")
        #expect(Self.press(&h, Self.action(.playDtmf, Self.first, digits: "12x")).answer?.code == .invalidArgument)
        #expect(Self.press(&h, Self.action(.answer, Self.third)).answer?.code == .unknownCall)
        #expect(Self.press(&h, Self.action(.setHeld, Self.first, onHold: true)).answer?.code == .commandNotSupported)
        #expect(Self.press(&h, Self.action(.setMuted, Self.first, muted: true)).answer?.code == .wrongCallState, "a ringing call is not muted")
        // The app's own request for another app's call: unknown to it.
        let foreign = h.request(h.phone, .callRequest(HUCallRequest.with { $0.appID = Self.radio; $0.action = Self.action(.end, Self.first) }))
        #expect(foreign.code == .notAllowedForCategory)

        let a = Self.press(&h, Self.action(.answer, Self.first))
        let b = Self.press(&h, Self.action(.answer, Self.first))
        #expect(a.answer == nil && b.answer == nil)
        let capped = Self.press(&h, Self.action(.answer, Self.first)).answer
        #expect(capped?.code == .limitExceeded && capped?.limit == "calls.actions" && capped?.limitValue == 2)
        #expect(Self.fulfil(&h, a.event!).code == .ok)
        #expect(Self.fulfil(&h, a.event!).code == .unknownEvent, "answered once")

        // A second call while the first holds the line: answering it is refused until the first is held.
        #expect(Self.report(&h, .newIncoming, Self.second, app: Self.voip).code == .ok)
        #expect(Self.press(&h, Self.action(.answer, Self.second)).answer?.code == .wrongCallState)
        let start = h.request(h.phone, .callRequest(HUCallRequest.with { $0.appID = Self.chat; $0.action = Self.action(.start, Self.third, handle: "+2") }))
        #expect(start.code == .tooManyCalls && start.limit == "calls.perApp", "chat holds its share (max_calls 2: one)")
    }

    @Test func anActionTheAppNeverAnswersTimesOutAndAFailedStartEndsTheCall() {
        var h = Self.harness()
        #expect(h.request(h.phone, .callRequest(HUCallRequest.with {
            $0.appID = Self.chat; $0.action = Self.action(.start, Self.first, handle: "+15550100")
        })).code == .ok)
        let start = try! #require(Self.events(&h).first)
        h.apply(h.car.timerFired(.callAction(actionID: start.actionID), nowMilliseconds: h.now))
        let told = h.drain(h.phone).contains { envelope in
            if case .callActionTimedOut(let out) = envelope.body { return out.actionID == start.actionID }
            return false
        }
        #expect(told, "the app hears provider(_:timedOutPerforming:)")
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .startFailed)
        #expect(Self.fulfil(&h, start).code == .completionTimeout)

        #expect(Self.report(&h, .newIncoming, Self.second).code == .ok)
        let answer = Self.press(&h, Self.action(.answer, Self.second))
        h.apply(h.car.timerFired(.callAction(actionID: answer.event!.actionID), nowMilliseconds: h.now))
        #expect(Self.answerOf(&h, answer.requestID)?.code == .commandTimedOut)
        #expect(Self.shown(h).first?.phase == .ringing, "a timed-out action is a failed one")

        let decline = Self.press(&h, Self.action(.end, Self.second))
        #expect(decline.answer?.code == .ok && decline.answer?.callAction.fulfilled == true, "the driver's end is answered at once")
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .endedByAction)
        #expect(Self.fulfil(&h, decline.event!, false).code == .ok)
        #expect(Self.shown(h).isEmpty, "the app failing the end changes nothing: the car ended the call")
    }

    @Test func holdAndMuteFollowTheAppsFulfilment() {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.first)).event!)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.setMuted, Self.first, muted: true)).event!)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.setHeld, Self.first, onHold: true)).event!)
        let held = try! #require(Self.shown(h).first)
        #expect(held.onHold && held.muted)
        #expect(h.car.calls.lineHolder == nil, "a held call does not hold the line")
        // Now a second call may be answered; resuming the first then is refused.
        #expect(Self.report(&h, .newIncoming, Self.second).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.second)).event!)
        #expect(Self.press(&h, Self.action(.setHeld, Self.first, onHold: false)).answer?.code == .wrongCallState)
        #expect(h.car.calls.lineHolder == Self.chat)
    }

    @Test func anAppThatClosesEndsItsCallsAndAPhoneThatDropsKeepsThem() {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        let pending = Self.press(&h, Self.action(.answer, Self.first))
        // The link drops: the call goes on, the driver's action is answered NOT_CONNECTED.
        h.apply(h.car.peerLeft(h.phone, departure: .lost))
        #expect(Self.answerOf(&h, pending.requestID)?.code == .notConnected)
        #expect(Self.shown(h).count == 1 && h.car.audio.callActive)
        #expect(Self.press(&h, Self.action(.answer, Self.first)).answer?.code == .notConnected, "only the driver's end works while the phone is away")
        // The grace runs out: the phone is gone for good, its calls end.
        let serial = h.timers.compactMap { timer -> UInt64? in
            if case .resumeGrace(let serial) = timer { return serial }
            return nil
        }.first!
        h.apply(h.car.timerFired(.resumeGrace(serial: serial), nowMilliseconds: h.now))
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .phoneGone)
        #expect(!h.car.audio.callActive)

        var g = Self.harness()
        #expect(Self.report(&g, .newIncoming, Self.first).code == .ok)
        #expect(g.request(g.phone, .appClosed(HUAppClosed.with { $0.appID = Self.chat })).code == .ok)
        #expect(Self.shown(g).isEmpty && g.car.templates.lastHomeScreen?.lastCallEnded.reason == .appClosed)
    }

    @Test func aRestartKeepsTheCalls() throws {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first, description: Self.description("+1", name: "Ada")).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.first)).event!)
        let waiting = Self.press(&h, Self.action(.setMuted, Self.first, muted: true))
        let bytes: [UInt8] = try h.car.snapshot().serializedBytes()
        let restored = try Car.restoring(try HUCarSnapshot(serializedBytes: bytes), configuration: h.car.configuration).car
        #expect(restored.calls.calls == h.car.calls.calls)
        #expect(restored.calls.pending.isEmpty, "actions waiting are not carried")
        #expect(restored.calls.nextActionID == h.car.calls.nextActionID)
        #expect(restored.audio.callActive && restored.audio.appCalls == [Self.chat])
        _ = waiting
    }

    /// An action waiting for the app at a restart is not carried, so its HMI
    /// is answered before the handover (NOT_CONNECTED), as a lost link does,
    /// rather than never (26.8); the call is kept and the app's late answer
    /// to the next process is UNKNOWN_EVENT.
    @Test func anActionWaitingAtARestartIsAnsweredBeforeTheHandover() throws {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.first)).event!)
        let waiting = Self.press(&h, Self.action(.setMuted, Self.first, muted: true))
        #expect(waiting.answer == nil, "waiting for the app")
        let event = try #require(waiting.event)
        h.apply(h.car.prepareForHandover())
        let answer = Self.answerOf(&h, waiting.requestID)
        #expect(answer?.code == .notConnected && answer?.message.contains("restart") == true, "\(String(describing: answer))")
        #expect(h.car.calls.pending.isEmpty)
        #expect(!h.timers.contains(.callAction(actionID: event.actionID)))
        var restored = h
        let bytes: [UInt8] = try h.car.snapshot().serializedBytes()
        restored.car = try Car.restoring(try HUCarSnapshot(serializedBytes: bytes), configuration: h.car.configuration).car
        #expect(restored.car.calls.calls == h.car.calls.calls, "the call is kept")
        #expect(Self.fulfil(&restored, event).code == .unknownEvent)
    }

    // MARK: - no app holds the call slots or silences the car (issue 47)

    static let fourth = "d4c3b2a1-0f9e-4d8c-b7a6-5e4d3c2b1a09"

    static func start(_ h: inout CarHarness, _ uuid: String, app: String = chat) -> HUResult {
        h.request(h.phone, .callRequest(HUCallRequest.with { $0.appID = app; $0.action = Self.action(.start, uuid, handle: "+15550123") }))
    }

    /// The car-ended END actions the app was sent (its `ended_by_car` set).
    static func endsByCar(_ h: inout CarHarness) -> [HUCallActionEvent] {
        events(&h).filter { $0.fromCar && $0.action.kind == .end && $0.endedByCar != .unspecified }
    }

    @Test func oneAppHoldsOneCallFewerThanTheCarAndRingsOneAtATime() {
        var h = Self.harness()  // max_calls 3: an app holds at most 2
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.first)).event!)
        #expect(Self.report(&h, .newIncoming, Self.second).code == .ok, "call waiting: one app, one answered call and one ringing")
        let ringing = Self.report(&h, .newIncoming, Self.third)
        #expect(ringing.code == .tooManyCalls && ringing.limit == "calls.ringingPerApp" && ringing.limitValue == 1)
        let share = Self.start(&h, Self.third)
        #expect(share.code == .tooManyCalls && share.limit == "calls.perApp" && share.limitValue == 2)
        // Another app's real incoming call is not refused: the slot is kept for it.
        #expect(Self.report(&h, .newIncoming, Self.third, app: Self.voip).code == .ok)
        #expect(Self.shown(h).count == 3)
        let full = Self.start(&h, Self.fourth, app: Self.voip)
        #expect(full.code == .tooManyCalls && full.limit == "calls.max" && full.limitValue == 3, "the car-wide cap stays")
        #expect(CallSession.Limits(maxCalls: 2).maxCallsPerApp == 1)
    }

    @Test func aRingingCallRingsOutAndTheAppAndTheHMIAreTold() {
        var h = Self.harness(calls: .init(ringTimeoutMilliseconds: 45_000))
        let effects = h.car.receive(HUEnvelope.with {
            $0.requestID = 77
            $0.body = .callReport(HUCallReport.with {
                $0.appID = Self.chat; $0.callUuid = Self.first; $0.kind = .newIncoming; $0.description_p = Self.description("+1")
            })
        }, from: h.phone, nowMilliseconds: h.now)
        let armed = effects.compactMap { effect -> UInt64? in
            if case .startTimer(.callRinging(let uuid), let milliseconds) = effect, uuid == Self.first { return milliseconds }
            return nil
        }
        #expect(armed == [45_000], "the ring-out is timed by the car's clock, call_ring_timeout_ms")
        h.apply(effects)
        _ = h.drain(h.phone)
        #expect(h.car.audio.callActive && h.car.audioStreams.mix.pauseMain, "ringing: the main audio pauses")

        // The app never answers the driver's answer: it rings on, then out.
        let answer = Self.press(&h, Self.action(.answer, Self.first))
        h.apply(h.car.timerFired(.callAction(actionID: answer.event!.actionID), nowMilliseconds: h.now + 5_000))
        #expect(Self.shown(h).first?.phase == .ringing)
        h.now += 45_000
        h.apply(h.car.timerFired(.callRinging(uuid: Self.first), nowMilliseconds: h.now))
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .rangOut)
        #expect(!h.car.audio.callActive && !h.car.audioStreams.mix.pauseMain, "the focus the ringing call held is released")
        let told = Self.endsByCar(&h)
        #expect(told.map(\.endedByCar) == [.rangOut] && told.first?.action.callUuid == Self.first && told.first?.appID == Self.chat)
        #expect(!h.timers.contains(.callRinging(uuid: Self.first)))
        #expect(Self.fulfil(&h, told[0]).code == .ok, "the app ends its side; the answer changes nothing")

        // An answered call does not ring out, even if a stale timer fires.
        #expect(Self.report(&h, .newIncoming, Self.second).code == .ok)
        #expect(h.timers.contains(.callRinging(uuid: Self.second.lowercased())))
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.second)).event!)
        #expect(!h.timers.contains(.callRinging(uuid: Self.second.lowercased())), "answered: the ring-out timer is cancelled")
        h.apply(h.car.timerFired(.callRinging(uuid: Self.second.lowercased()), nowMilliseconds: h.now + 60_000))
        #expect(Self.shown(h).first?.phase == .active)
        // A call the app reports ended stops its timer too.
        #expect(Self.report(&h, .newIncoming, Self.third, app: Self.voip).code == .ok)
        #expect(Self.report(&h, .ended, Self.third, app: Self.voip, reason: .remoteEnded).code == .ok)
        #expect(!h.timers.contains(.callRinging(uuid: Self.third)))
    }

    @Test func theDriverEndsACallWhateverTheAppAnswersOrWhenItIsAway() {
        var h = Self.harness(calls: .init(maxActionsPerApp: 1))
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        let answer = Self.press(&h, Self.action(.answer, Self.first))
        #expect(answer.answer == nil, "the app's cap of actions is now reached")
        #expect(Self.press(&h, Self.action(.answer, Self.first)).answer?.code == .limitExceeded)
        let end = Self.press(&h, Self.action(.end, Self.first))
        #expect(end.answer?.code == .ok && end.answer?.callAction.fulfilled == true, "the driver's end is never capped, and answered at once")
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .endedByAction)
        #expect(!h.car.audio.callActive && !h.car.audioStreams.mix.pauseMain)
        let event = try! #require(end.event)
        #expect(event.fromCar && event.action.kind == .end && event.endedByCar == .endedByAction)
        // The app fulfils the old answer: the call stays gone; the end it never answers times out and changes nothing.
        #expect(Self.fulfil(&h, answer.event!).code == .ok)
        #expect(Self.shown(h).isEmpty, "a late answer does not bring the call back")
        h.apply(h.car.timerFired(.callAction(actionID: event.actionID), nowMilliseconds: h.now + 5_000))
        #expect(h.drain(h.phone).contains { if case .callActionTimedOut(let out) = $0.body { return out.actionID == event.actionID }; return false })
        #expect(Self.shown(h).isEmpty)

        // While the phone reconnects the driver still ends a call; the app hears on resuming.
        #expect(Self.report(&h, .newIncoming, Self.second).code == .ok)
        h.apply(h.car.peerLeft(h.phone, departure: .lost))
        #expect(Self.press(&h, Self.action(.answer, Self.second)).answer?.code == .notConnected)
        let away = Self.press(&h, Self.action(.end, Self.second))
        #expect(away.answer?.code == .ok && Self.shown(h).isEmpty && !h.car.audio.callActive)
    }

    @Test func closingTheAppEndsItsCalls() {
        var h = Self.harness()
        // No scene, a ringing call: CloseApp still ends it.
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        #expect(h.request(h.hmi, .closeApp(HUCloseApp.with { $0.appID = Self.chat })).code == .ok)
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .closedByCar)
        #expect(Self.endsByCar(&h).map(\.endedByCar) == [.closedByCar])
        #expect(!h.car.audio.callActive)
        // Launched, with an answered call: the scenes and the call end.
        _ = h.launch(Self.voip)
        #expect(Self.report(&h, .newIncoming, Self.second, app: Self.voip).code == .ok)
        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.second)).event!)
        #expect(h.request(h.hmi, .closeApp(HUCloseApp.with { $0.appID = Self.voip })).code == .ok)
        #expect(Self.shown(h).isEmpty && h.car.templates.lastHomeScreen?.lastCallEnded.reason == .closedByCar)
        #expect(h.car.calls.lineHolder == nil)
        // Nothing to close: no scene, no call.
        #expect(h.request(h.hmi, .closeApp(HUCloseApp.with { $0.appID = Self.radio })).code == .notConnected)
    }

    @Test func aRestartTimesARingingCallAgain() throws {
        var h = Self.harness()
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        let bytes: [UInt8] = try h.car.snapshot().serializedBytes()
        let restored = try Car.restoring(try HUCarSnapshot(serializedBytes: bytes), configuration: h.car.configuration)
        let armed = restored.effects.contains { effect in
            if case .startTimer(.callRinging(let uuid), let milliseconds) = effect { return uuid == Self.first && milliseconds == 60_000 }
            return false
        }
        #expect(armed, "a ringing call carried over a restart still rings out")
    }

    @Test func uuidsAreCanonical() {
        #expect(CallSession.isUUID(Self.first) && CallSession.isUUID(Self.second))
        #expect(!CallSession.isUUID("6f1c3c2e8a554b1e9a0f2d4c6b8e0a11"))
        #expect(!CallSession.isUUID("6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a1g"))
        #expect(!CallSession.isUUID(""))
    }

    /// Voice control and calls take the microphone (PROTOCOL.md sections 24.6 and 26.1).
    @Test func callsTakeTheMicrophone() {
        var h = Self.harness()
        let pcm = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
        func openVoice(_ app: String) -> HUResult {
            h.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = app; $0.type = .voice; $0.format = pcm }))
        }
        func microphone() -> [HUEnvelope.OneOf_Body] {
            h.drain(h.phone).compactMap(\.body).filter {
                switch $0 {
                case .microphoneStarted: return true
                case .audioStreamClosed(let closed): return closed.type == .microphone
                default: return false
                }
            }
        }
        #expect(openVoice(Self.chat).code == .noAudioFocus, "no call yet")
        #expect(Self.report(&h, .newIncoming, Self.first).code == .ok)
        #expect(openVoice(Self.chat).code == .ok, "the ringtone plays as the app's voice")
        #expect(openVoice(Self.radio).code == .noAudioFocus, "another app's call is not this app's")
        #expect(microphone().isEmpty, "a ringing call does not take the microphone")

        _ = Self.fulfil(&h, Self.press(&h, Self.action(.answer, Self.first)).event!)
        guard case .microphoneStarted(let started)? = microphone().first else { Issue.record("no microphone for the answered call"); return }
        #expect(started.appID == Self.chat && started.purpose == .call)

        _ = Self.fulfil(&h, Self.press(&h, Self.action(.setHeld, Self.first, onHold: true)).event!)
        guard case .audioStreamClosed(let closed)? = microphone().first else { Issue.record("the held call kept the microphone"); return }
        #expect(closed.reason == .callEnded)
    }
}
