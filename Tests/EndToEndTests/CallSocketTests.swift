import Foundation
import HeadUnitWire
import TestSupport
import Testing

/// Calls over real sockets (PROTOCOL.md section 26): a communication app's
/// incoming call rings on the HMI's home screen, the driver's answer reaches
/// the app as an action it fulfils, the app's own start becomes an action
/// too, and every refusal (section 26.7's codes and the others it uses) has
/// its code.
@Suite("Calls over real sockets", .serialized)
struct CallSocketTests {
    static let chat = "com.example.chat"
    static let voip = "com.example.voip"
    static let talk = "com.example.talk"
    static let radio = "com.example.radio"
    static let first = "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"
    static let second = "0b7d1e52-3c4a-4f7b-8e21-9c0d5a6b7f22"
    static let third = "a1b2c3d4-e5f6-4789-abcd-ef0123456789"
    static let fourth = "d4c3b2a1-0f9e-4d8c-b7a6-5e4d3c2b1a09"

    /// A daemon, an HMI, and a phone with three communication apps, an audio app and a refused app.
    struct Rig {
        let daemon: TestDaemon
        let hmi: RecordingPeer
        var phone: RecordingPeer
        var nextID: UInt32 = 5_000

        static func start(limits: [String: UInt64] = [:]) throws -> Rig {
            let daemon = try TestDaemon.launch(limits: limits)
            let hmi = RecordingPeer(try daemon.connectUnix())
            try hmi.client.handshake(role: .hmi, name: "hmi")
            let phone = RecordingPeer(try daemon.connectUnix())
            try phone.client.handshake(role: .phone, name: "phone")
            let apps = [
                HUAppInfo.with { $0.appID = chat; $0.displayName = "Chat"; $0.entitlements = ["com.apple.developer.carplay-communication"] },
                HUAppInfo.with { $0.appID = voip; $0.displayName = "Voip"; $0.entitlements = ["com.apple.developer.carplay-communication"] },
                HUAppInfo.with { $0.appID = talk; $0.displayName = "Talk"; $0.entitlements = ["com.apple.developer.carplay-communication"] },
                HUAppInfo.with { $0.appID = radio; $0.displayName = "Radio"; $0.entitlements = ["com.apple.developer.carplay-audio"] },
                // Navigation cannot be combined with calling: refused.
                HUAppInfo.with {
                    $0.appID = "com.example.both"; $0.displayName = "Both"
                    $0.entitlements = ["com.apple.developer.carplay-maps", "com.apple.developer.carplay-calling"]
                },
            ]
            let announced = try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = apps }))
            #expect(announced.code == .ok, "\(announced.message)")
            return Rig(daemon: daemon, hmi: hmi, phone: phone)
        }

        /// The HMI presses without waiting; the id to find its answer by.
        mutating func press(_ action: HUCallAction) throws -> UInt32 {
            nextID += 1
            try hmi.client.send(.callInput(HUCallInput.with { $0.action = action }), requestID: nextID)
            return nextID
        }

        func answer(_ id: UInt32, timeout: Double = 30) throws -> HUResult {
            try hmi.waitFor(timeout: timeout) { envelope -> HUResult? in
                if envelope.requestID == id, case .result(let result) = envelope.body { return result }
                return nil
            }
        }

        func event() throws -> HUCallActionEvent {
            try phone.waitFor { envelope -> HUCallActionEvent? in
                if case .callActionEvent(let event) = envelope.body { return event }
                return nil
            }
        }

        func fulfil(_ event: HUCallActionEvent, _ fulfilled: Bool = true) throws -> HUResult {
            try phone.request(.callActionAnswer(HUCallActionAnswer.with {
                $0.appID = event.appID; $0.actionID = event.actionID; $0.fulfilled = fulfilled
            }))
        }

        func report(_ kind: HUCallReportKind, _ uuid: String, app: String = chat, name: String = "", holding: Bool = true, reason: HUCallEndedReason = .unspecified) throws -> HUResult {
            try phone.request(.callReport(HUCallReport.with {
                $0.appID = app
                $0.callUuid = uuid
                $0.kind = kind
                $0.description_p = HUCallDescription.with {
                    $0.remoteHandle = HUCallHandle.with { $0.type = .phoneNumber; $0.value = "+15550100" }
                    $0.localizedCallerName = name
                    $0.supportsHolding = holding
                }
                $0.endedReason = reason
            }))
        }

        func request(_ action: HUCallAction, app: String = chat) throws -> HUResult {
            try phone.request(.callRequest(HUCallRequest.with { $0.appID = app; $0.action = action }))
        }

        /// The home screen the HMI sees once `match` holds.
        func home(_ match: @escaping (HUHomeScreen) -> Bool) throws -> HUHomeScreen {
            try hmi.waitFor { envelope -> HUHomeScreen? in
                if case .homeScreen(let home) = envelope.body, match(home) { return home }
                return nil
            }
        }

        func stop() {
            hmi.close()
            phone.close()
            _ = try? daemon.terminate()
        }
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

    @Test func anIncomingCallRingsOnTheHMIAndTheDriversAnswerReachesTheApp() async throws {
        try await onOwnThread {
            var rig = try Rig.start()
            defer { rig.stop() }
            #expect(try rig.report(.newIncoming, Self.first, name: "Ada").code == .ok)
            let ringing = try rig.home { $0.calls.first?.phase == .ringing }
            #expect(ringing.calls.first?.description_p.localizedCallerName == "Ada" && ringing.calls.first?.appDisplayName == "Chat")
            #expect(ringing.calls.first?.availableActions == [.answer, .end])

            let answer = try rig.press(Self.action(.answer, Self.first))
            let event = try rig.event()
            #expect(event.fromCar && event.action.kind == .answer && event.action.callUuid == Self.first)
            #expect(try rig.fulfil(event).code == .ok)
            let outcome = try rig.answer(answer)
            #expect(outcome.code == .ok && outcome.callAction.fulfilled && outcome.callAction.appID == Self.chat)
            _ = try rig.home { $0.calls.first?.phase == .active }

            // The app's own end request becomes an action to perform; fulfilled, the call is gone.
            let end = try rig.request(Self.action(.end, Self.first))
            #expect(end.code == .ok && end.callAction.actionID != 0)
            let endEvent = try rig.event()
            #expect(!endEvent.fromCar && endEvent.actionID == end.callAction.actionID)
            #expect(try rig.fulfil(endEvent).code == .ok)
            let ended = try rig.home { $0.calls.isEmpty && $0.hasLastCallEnded }
            #expect(ended.lastCallEnded.reason == .endedByAction && ended.lastCallEnded.callUuid == Self.first)
        }
    }

    @Test func everyRefusalOfACallMessageHasItsCode() async throws {
        try await onOwnThread {
            // Many refusals in a second: the error budget (section 10) is raised so the test is not cut off for them.
            var rig = try Rig.start(limits: ["maxCalls": 2, "maxCallActions": 1, "callActionTimeoutMs": 300, "maxErrorsPerSecond": 1_000])
            defer { rig.stop() }
            // Who may: the category, the entitlement, the app, the role.
            #expect(try rig.report(.newIncoming, Self.first, app: Self.radio).code == .notAllowedForCategory)
            #expect(try rig.report(.newIncoming, Self.first, app: "com.example.both").code == .entitlementRefused)
            #expect(try rig.report(.newIncoming, Self.first, app: "com.example.nobody").code == .unknownApp)
            #expect(try rig.hmi.request(.callReport(HUCallReport.with { $0.appID = Self.chat })).code == .notForRole)
            #expect(try rig.phone.request(.callInput(HUCallInput.with { $0.action = Self.action(.end, Self.first) })).code == .notForRole)
            // INVALID_ARGUMENT: the kind, the UUID, a car-only reason, the car placing a call.
            #expect(try rig.report(.unspecified, Self.first).code == .invalidArgument)
            #expect(try rig.report(.newIncoming, "not-a-uuid").code == .invalidArgument)
            #expect(try rig.report(.ended, Self.first, reason: .phoneGone).code == .invalidArgument)
            #expect(try rig.answer(try rig.press(Self.action(.start, Self.third, handle: "+1"))).code == .invalidArgument)
            // UNKNOWN_CALL from the app and from the HMI.
            #expect(try rig.report(.outgoingConnected, Self.first).code == .unknownCall)
            #expect(try rig.answer(try rig.press(Self.action(.answer, Self.first))).code == .unknownCall)

            #expect(try rig.report(.newIncoming, Self.first, holding: false).code == .ok)
            // DUPLICATE_CALL, WRONG_CALL_STATE, COMMAND_NOT_SUPPORTED.
            #expect(try rig.report(.newIncoming, Self.first.uppercased()).code == .duplicateCall)
            #expect(try rig.report(.outgoingConnecting, Self.first).code == .wrongCallState)
            #expect(try rig.answer(try rig.press(Self.action(.setMuted, Self.first, muted: true))).code == .wrongCallState)
            #expect(try rig.answer(try rig.press(Self.action(.setHeld, Self.first, onHold: true))).code == .commandNotSupported)
            // TOO_MANY_CALLS (max_calls 2, so one app holds one): the app's ringing call, its share, the car's.
            let ringing = try rig.report(.newIncoming, Self.second)
            #expect(ringing.code == .tooManyCalls && ringing.limit == "calls.ringingPerApp" && ringing.limitValue == 1)
            let start = try rig.request(Self.action(.start, Self.third, handle: "+15550199"))
            #expect(start.code == .tooManyCalls && start.limit == "calls.perApp" && start.limitValue == 1)
            #expect(try rig.report(.newIncoming, Self.second, app: Self.voip).code == .ok, "another app's call finds its slot")
            let third = try rig.report(.newIncoming, Self.third, app: Self.talk)
            #expect(third.code == .tooManyCalls && third.limit == "calls.max" && third.limitValue == 2)

            // COMMAND_TIMED_OUT: the app never answers; the app is told, its late answer is COMPLETION_TIMEOUT.
            let answer = try rig.press(Self.action(.answer, Self.first))
            let event = try rig.event()
            // LIMIT_EXCEEDED while one waits (max_call_actions 1).
            let capped = try rig.answer(try rig.press(Self.action(.answer, Self.first)))
            #expect(capped.code == .limitExceeded && capped.limit == "calls.actions")
            #expect(try rig.answer(answer).code == .commandTimedOut)
            let told = try rig.phone.waitFor { envelope -> HUCallActionTimedOut? in
                if case .callActionTimedOut(let out) = envelope.body { return out }
                return nil
            }
            #expect(told.actionID == event.actionID)
            #expect(try rig.fulfil(event).code == .completionTimeout)
            // UNKNOWN_EVENT: an action the car never sent.
            #expect(try rig.fulfil(HUCallActionEvent.with { $0.appID = Self.chat; $0.actionID = 999_999 }).code == .unknownEvent)

            // NOT_CONNECTED: the phone's link drops (no Goodbye: it may resume); the calls stay.
            let waiting = try rig.press(Self.action(.answer, Self.second))
            _ = try rig.event()
            rig.phone.close()
            #expect(try rig.answer(waiting).code == .notConnected)
            let away = try rig.home { $0.phoneLink == .reconnecting }
            #expect(away.calls.count == 2)
            #expect(try rig.answer(try rig.press(Self.action(.answer, Self.second))).code == .notConnected)
            // The driver's end is the car's own: it works while the phone is away.
            let ended = try rig.answer(try rig.press(Self.action(.end, Self.second)))
            #expect(ended.code == .ok && ended.callAction.fulfilled)
            _ = try rig.home { $0.calls.count == 1 && $0.lastCallEnded.callUuid == Self.second }
            // NO_PHONE: a phone that carries no apps.
            let other = RecordingPeer(try rig.daemon.connectUnix())
            try other.client.handshake(role: .phone, name: "other")
            #expect(try other.request(.callReport(HUCallReport.with { $0.appID = Self.chat; $0.callUuid = Self.first; $0.kind = .updated })).code == .noPhone)
            other.close()
        }
    }

    /// Issue 47's attack: a communication app fills its calls and never
    /// answers the driver's actions (or fails them). The driver still ends its
    /// call, its ringing call rings out, another app's real call is accepted
    /// meanwhile, closing the app ends its calls, and the music plays again.
    @Test func anAppThatNeverAnswersCannotHoldTheCallsOrSilenceTheCar() async throws {
        try await onOwnThread {
            // Long enough for the few requests that need the first call still ringing.
            // The phone is not read while the call rings out, so it does not
            // answer the car's PINGs: the heartbeat (15 s, not what this tests)
            // outlasts the ring-out (a loaded run cut the phone off at 15,006 ms).
            var rig = try Rig.start(limits: ["callRingTimeoutMs": 15_000, "heartbeatTimeoutMs": 60_000])
            defer { rig.stop() }
            // Music: the radio plays and the car takes its audio (its credit comes back).
            #expect(try rig.hmi.request(.launchApp(HULaunchApp.with { $0.appID = Self.radio })).code == .ok)
            let scene = try rig.phone.waitFor { envelope -> UInt32? in
                if case .sceneConnected(let connected) = envelope.body, connected.appID == Self.radio { return connected.sceneID }
                return nil
            }
            let playing = try rig.phone.request(.templateRequest(HUTemplateRequest.with {
                $0.appID = Self.radio; $0.sceneID = scene
                $0.updateNowPlaying = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 1 }
            }))
            #expect(playing.code == .ok, "\(playing.message)")
            let opened = try rig.phone.request(.openAudioStream(HUOpenAudioStream.with {
                $0.appID = Self.radio; $0.type = .main
                $0.format = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
            }))
            #expect(opened.code == .ok, "\(opened.message)")
            let stream = opened.audioStream.streamID
            /// Sends 20 ms of a tone and waits until the car played it (its 960 frames of credit are back).
            func playPacket(_ index: UInt64) throws {
                var payload = withUnsafeBytes(of: (index * 960).bigEndian) { Array($0) }
                for frame in 0..<960 {
                    let sample = Int16(8_000 * sin(2 * Double.pi * 440 * Double(frame) / 48_000))
                    let bytes = withUnsafeBytes(of: sample.littleEndian) { Array($0) }
                    payload += bytes + bytes
                }
                try rig.phone.client.sendFrame(.media, channel: stream, payload: payload)
                var returned = 0
                while returned < 960 {
                    returned += try rig.phone.waitFor { envelope -> Int? in
                        if case .audioCredit(let credit) = envelope.body, credit.streamID == stream { return Int(credit.frames) }
                        return nil
                    }
                }
            }
            try playPacket(0)

            // The attacker rings, then places and connects a call: its share of max_calls (3) is full.
            #expect(try rig.report(.newIncoming, Self.first).code == .ok)
            let ringing = try rig.report(.newIncoming, Self.third)
            #expect(ringing.code == .tooManyCalls && ringing.limit == "calls.ringingPerApp")
            let start = try rig.request(Self.action(.start, Self.second, handle: "+15550199"))
            #expect(start.code == .ok, "\(start.message)")
            #expect(try rig.fulfil(try rig.event()).code == .ok)
            #expect(try rig.report(.outgoingConnected, Self.second).code == .ok)
            let share = try rig.request(Self.action(.start, Self.third, handle: "+15550198"))
            #expect(share.code == .tooManyCalls && share.limit == "calls.perApp" && share.limitValue == 2)
            // Another app's real incoming call is accepted.
            #expect(try rig.report(.newIncoming, Self.third, app: Self.voip, name: "Mum").code == .ok)

            // The driver hangs up the attacker's call: gone at once, though the app fails the end.
            let hangUp = try rig.answer(try rig.press(Self.action(.end, Self.second)))
            #expect(hangUp.code == .ok && hangUp.callAction.fulfilled)
            let end = try rig.event()
            #expect(end.fromCar && end.action.kind == .end && end.action.callUuid == Self.second && end.endedByCar == .endedByAction)
            #expect(try rig.fulfil(end, false).code == .ok)
            _ = try rig.home { home in !home.calls.contains { $0.callUuid == Self.second } && home.lastCallEnded.reason == .endedByAction }
            // The driver's answer to the attacker's ringing call is never answered; the real caller hangs up.
            _ = try rig.press(Self.action(.answer, Self.first))
            #expect(try rig.report(.ended, Self.third, app: Self.voip, reason: .remoteEnded).code == .ok)
            // The attacker's ringing call rings out (call_ring_timeout_ms); the app is told why.
            let rangOut = try rig.home { $0.calls.isEmpty && $0.lastCallEnded.callUuid == Self.first }
            #expect(rangOut.lastCallEnded.reason == .rangOut)
            let told = try rig.phone.waitFor { envelope -> HUCallActionEvent? in
                if case .callActionEvent(let event) = envelope.body, event.endedByCar == .rangOut { return event }
                return nil
            }
            #expect(told.action.callUuid == Self.first && told.appID == Self.chat)

            // Closing the app ends a call it rings again.
            #expect(try rig.report(.newIncoming, Self.fourth).code == .ok)
            _ = try rig.home { $0.calls.count == 1 }
            #expect(try rig.hmi.request(.closeApp(HUCloseApp.with { $0.appID = Self.chat })).code == .ok)
            let closed = try rig.home { $0.calls.isEmpty && $0.lastCallEnded.callUuid == Self.fourth }
            #expect(closed.lastCallEnded.reason == .closedByCar)
            let closedEvent = try rig.phone.waitFor { envelope -> HUCallActionEvent? in
                if case .callActionEvent(let event) = envelope.body, event.endedByCar == .closedByCar { return event }
                return nil
            }
            #expect(closedEvent.action.callUuid == Self.fourth)

            // No call holds the focus: the music plays again.
            try playPacket(1)
        }
    }

    /// `max_calls` below 2 would leave no slot for another app; a ring-out
    /// out of its range would ring for ever or cut calls short: the daemon
    /// refuses to start, saying which (PROTOCOL.md 26.7).
    @Test func callLimitsOutOfRangeStopTheDaemonAtStart() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            for (field, value, named) in [("maxCalls", 1, "max_calls"), ("callRingTimeoutMs", 4_999, "call_ring_timeout_ms"), ("callRingTimeoutMs", 600_001, "call_ring_timeout_ms")] {
                let path = directory + "/config.json"
                try "{\"limits\": {\"\(field)\": \(value)}}".write(toFile: path, atomically: true, encoding: .utf8)
                let result = try TestDaemon.run(["--config", path, "--unix-socket", directory + "/x.sock", "--no-tcp"])
                #expect(result.status != 0 && result.stderr.contains(named), "\(field) \(value): \(result.stderr)")
            }
        }
    }

    /// `headunitctl call` lists the calls; `headunitctl call end` (no UUID: the only call) is the driver's end.
    @Test func headunitctlListsAndEndsACall() async throws {
        try await onOwnThread {
            let rig = try Rig.start()
            defer { rig.stop() }
            #expect(try rig.report(.newIncoming, Self.first, name: "Ada").code == .ok)
            let ctl = URL(fileURLWithPath: try TestDaemon.binaryPath()).deletingLastPathComponent().appendingPathComponent("headunitctl").path
            func run(_ arguments: [String]) throws -> (Process, Pipe) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: ctl)
                process.arguments = arguments + ["--unix-socket", rig.daemon.unixSocketPath]
                let out = Pipe()
                process.standardOutput = out
                process.standardError = out
                try process.run()
                return (process, out)
            }
            let (list, listOut) = try run(["call"])
            let listed = String(decoding: listOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            list.waitUntilExit()
            #expect(list.terminationStatus == 0 && listed.contains(Self.first) && listed.contains("Ada") && listed.contains("ringing"), "\(listed)")

            let (end, endOut) = try run(["call", "end"])
            let event = try rig.event()
            #expect(event.action.kind == .end && event.action.callUuid == Self.first && event.fromCar)
            #expect(try rig.fulfil(event).code == .ok)
            let ended = String(decoding: endOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            end.waitUntilExit()
            #expect(end.terminationStatus == 0 && ended.contains("\(Self.chat): done"), "\(ended)")
        }
    }
}
