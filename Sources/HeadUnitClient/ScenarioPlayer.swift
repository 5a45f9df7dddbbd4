import HeadUnitWire
import NIOCore
import SwiftProtobuf

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Plays a scenario file (Protocol/scenario.proto, JSON): a phone announces
/// its apps, then each step runs in order and prints one line:
///
///     step 4   push grid 'genres' (com.example.radio)   OK depth 2
///     step 9   push list 'deep' (com.example.radio)     expected ERROR_CODE_DEPTH_EXCEEDED
///     step 11  expect_event item_selected 'song-1'      FAILED: no such event within 3000 ms
///
/// Steps for the car's HMI run on a second connection (Unix socket only).
public final class ScenarioPlayer {
    public struct Options {
        /// Where the phone connects (Unix socket or TCP).
        public var endpoint: HeadUnitEndpoint
        /// Where the HMI connects; the phone's endpoint when it is a Unix socket,
        /// else the default Unix socket.
        public var hmiEndpoint: HeadUnitEndpoint?
        /// The car's TCP listener, where `pair` steps pair a new phone; the
        /// phone's endpoint when it is TCP.
        public var pairingEndpoint: HeadUnitEndpoint?
        /// false: open no HMI connection (a running HMI such as `headunitctl
        /// watch` stays the car's HMI); HMI steps are skipped and a launch step
        /// waits for the user to launch the app.
        public var openHMI = true
        public var stopOnFailure = true
        /// The least time held after every step, so a person can watch the
        /// car's screens follow (`headunitctl play --pace`); a step's
        /// `pause_ms` holds longer. Zero: as fast as the car answers.
        public var pace: TimeAmount = .zero
        public var log: (String) -> Void = { print($0) }

        public init(endpoint: HeadUnitEndpoint) {
            self.endpoint = endpoint
        }
    }

    public struct Report: Sendable {
        public var scenario: String
        public var steps = 0
        public var passed = 0
        public var skipped = 0
        public var failures: [String] = []
        public var succeeded: Bool { failures.isEmpty }
    }

    public let options: Options
    var phone: PhoneSession?
    var hmi: HMISession?
    /// A cluster subscribed to the metadata stream, for expect_metadata steps.
    var cluster: ScenarioCluster?
    /// The car feature serving protocols for `serve` steps (echoes every session).
    private var accessory: AccessoryPeer?
    /// Where car-side connections (HMI, accessory) go.
    private var carEndpoint: HeadUnitEndpoint?
    var timeout: TimeAmount = .seconds(3)
    /// The audio streams open_audio_stream opened, by app and type (audioKey).
    var audioStreams: [String: AudioStream] = [:]
    /// The HMI's video watch (watch_video), and the last frame number send_video sent per channel.
    var video: ScenarioVideo?
    var videoFrameNumbers: [UInt32: UInt32] = [:]
    /// The assistant session the scenario's phone plays (assistant_update), from the last start.
    var assistantSession: UInt64 = 0

    public init(options: Options) {
        self.options = options
    }

    // MARK: loading

    public static func parse(json: [UInt8]) throws -> HUScenario {
        try HUScenario(jsonUTF8Bytes: json)
    }

    public static func load(path: String) throws -> HUScenario {
        guard let file = fopen(path, "rb") else {
            throw HeadUnitError(code: .invalidArgument, message: "cannot open \(path)", origin: .usage)
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        do {
            return try parse(json: bytes)
        } catch {
            throw HeadUnitError(code: .invalidArgument, message: "\(path): not a valid scenario: \(error)", origin: .usage)
        }
    }

    // MARK: playing

    /// Plays every step; throws only when the phone cannot connect.
    public func play(_ scenario: HUScenario) async throws -> Report {
        var report = Report(scenario: scenario.name)
        timeout = .milliseconds(Int64(scenario.timeoutMs == 0 ? 3000 : scenario.timeoutMs))
        options.log("scenario \(scenario.name.isEmpty ? "(unnamed)" : scenario.name): \(scenario.steps.count) steps, phone on \(options.endpoint)")

        let deviceName = scenario.deviceName.isEmpty ? "headunitctl phone" : scenario.deviceName
        let phone = try await PhoneSession.connect(to: options.endpoint, deviceName: deviceName)
        self.phone = phone
        defer { self.phone = nil; self.hmi = nil; self.audioStreams = [:] }

        let needsHMI = scenario.steps.contains { Self.isHMIStep($0) }
        if needsHMI && options.openHMI {
            let endpoint: HeadUnitEndpoint
            if let hmiEndpoint = options.hmiEndpoint {
                endpoint = hmiEndpoint
            } else if case .unix = options.endpoint {
                endpoint = options.endpoint
            } else {
                endpoint = .default
            }
            carEndpoint = endpoint
            do {
                hmi = try await HMISession.connect(to: endpoint, name: "headunitctl play")
            } catch {
                await phone.close()
                throw error
            }
        }

        if scenario.steps.contains(where: Self.needsCluster) && options.openHMI {
            // The cluster role is Unix-socket only, like the HMI.
            let endpoint: HeadUnitEndpoint
            if let hmiEndpoint = options.hmiEndpoint { endpoint = hmiEndpoint } else if case .unix = options.endpoint { endpoint = options.endpoint } else { endpoint = .default }
            cluster = try? await ScenarioCluster.open(endpoint)
        }

        // Step 0: announce, always.
        let announceOutcome = await announce(scenario)
        record(0, "announce \(scenario.apps.count) apps as '\(deviceName)'", announceOutcome, into: &report)

        for (index, step) in scenario.steps.enumerated() {
            if options.stopOnFailure && !report.failures.isEmpty { break }
            var (what, outcome) = await run(step)
            if step.pauseMs > Self.maximumPauseMs {
                outcome = .failed("pause_ms \(step.pauseMs) is over \(Self.maximumPauseMs)")
            }
            let label = step.note.isEmpty ? what : "\(what) -- \(step.note)"
            record(index + 1, label, outcome, into: &report)
            let pause = step.pauseMs > Self.maximumPauseMs ? 0 : step.pauseMs  // refused above: no hold
            let hold = max(options.pace, .milliseconds(Int64(pause)))
            if hold > .zero { try? await Task.sleep(nanoseconds: UInt64(hold.nanoseconds)) }
        }

        await video?.stop()
        video = nil
        videoFrameNumbers = [:]
        await self.hmi?.close()
        await accessory?.close()
        accessory = nil
        await self.cluster?.close()
        self.cluster = nil
        await phone.close()
        let verdict = report.succeeded ? "PASSED" : "FAILED"
        options.log("scenario \(verdict): \(report.passed) passed, \(report.skipped) skipped, \(report.failures.count) failed")
        return report
    }

    /// The longest `pause_ms` a step may ask for (a scenario is watched, not left running).
    static let maximumPauseMs: UInt32 = 60_000

    enum Outcome {
        case ok(String)
        case expectedError(HUErrorCode)
        case skipped(String)
        case failed(String)
    }

    private func record(_ number: Int, _ what: String, _ outcome: Outcome, into report: inout Report) {
        report.steps += 1
        let text: String
        switch outcome {
        case .ok(let detail):
            report.passed += 1
            text = detail.isEmpty ? "OK" : "OK \(detail)"
        case .expectedError(let code):
            report.passed += 1
            text = "expected \(ErrorCodeNames.name(code))"
        case .skipped(let why):
            report.skipped += 1
            text = "skipped (\(why))"
        case .failed(let why):
            report.failures.append("step \(number) \(what): \(why)")
            text = "FAILED: \(why)"
        }
        let number = "step \(number)".padding(to: 8)
        options.log("\(number) \(what.padding(to: 48)) \(text)")
    }

    private func announce(_ scenario: HUScenario) async -> Outcome {
        guard let phone else { return .failed("no phone") }
        do {
            let decisions = try await phone.announce(scenario.apps, assistant: scenario.assistant)
            let refused = Set(decisions.filter { !$0.accepted }.map(\.appID))
            let expected = Set(scenario.expectRefusedApps)
            if refused != expected {
                let reasons = decisions.filter { !$0.accepted }.map { "\($0.appID): \(ErrorCodeNames.name($0.code)) \($0.reason)" }
                return .failed("refused \(refused.sorted()), expected refused \(expected.sorted()) \(reasons)")
            }
            return .ok(refused.isEmpty ? "" : "(refused as expected: \(refused.sorted().joined(separator: ", ")))")
        } catch {
            return .failed("\(error)")
        }
    }

    static func isHMIStep(_ step: HUScenarioStep) -> Bool {
        switch step.action {
        case .launch, .hmiInput, .setVehicleState, .expectScreen, .serve, .expectHome, .navigationInput,
             .remoteCommand, .callInput, .expectCall, .selectBanner, .pair, .watchVideo, .expectVideo, .requestKeyframe,
             .assistantInput, .expectAssistant: return true
        case .closeApp(let close): return !close.byPhone
        case .disconnect(let disconnect): return disconnect.hmi
        default: return false
        }
    }

    private func run(_ step: HUScenarioStep) async -> (String, Outcome) {
        switch step.action {
        case .launch(let launch):
            return ("launch \(launch.appID)", await self.launch(launch))
        case .request(let request):
            return (Self.describe(request), await self.request(request))
        case .hmiInput(let input):
            return (Self.describe(input), await self.hmiInput(input))
        case .expectEvent(let expect):
            return (Self.describe(expect), await self.expectEvent(expect))
        case .completeEvent(let complete):
            return ("complete_event \(complete.appID)", await self.completeEvent(complete))
        case .setVehicleState(let set):
            return ("set_vehicle_state \(Self.describe(set.state))", await self.setVehicleState(set))
        case .closeApp(let close):
            return ("close_app \(close.appID)\(close.byPhone ? " (by phone)" : "")", await self.closeApp(close))
        case .waitMs(let ms):
            try? await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000)
            return ("wait \(ms) ms", .ok(""))
        case .expectScreen(let expect):
            return (Self.describe(expect), await self.expectScreen(expect))
        case .navigate(let navigate):
            return (Self.describe(navigate.request), await self.navigate(navigate))
        case .navigationInput(let input):
            return (Self.describe(input.input), await self.navigationInput(input))
        case .expectNavigationEvent(let expect):
            return ("expect_navigation_event \(expect.kind)", await self.expectNavigationEvent(expect))
        case .expectMetadata(let expect):
            return (Self.describe(expect), await self.expectMetadata(expect))
        case .disconnect(let disconnect):
            return ("disconnect \(disconnect.hmi ? (disconnect.phone ? "phone and HMI" : "HMI") : "phone")", await self.disconnect(disconnect))
        case .serve(let serve):
            return ("serve \(serve.protocols.joined(separator: ", "))", await self.serve(serve))
        case .openSession(let open):
            return ("open_session \(open.protocol) (\(open.appID))", await self.openSession(open))
        case .expectHome(let expect):
            return ("expect_home [\(expect.appIds.joined(separator: ", "))]", await self.expectHome(expect))
        case .clusterInput(let input):
            return ("cluster_input \(Self.describe(input.input))", await self.clusterInput(input))
        case .pair(let pair):
            return ("pair a phone over TCP\(pair.wrongCode ? " (wrong code)" : "")", await self.pair(pair))
        case .selectBanner(let select):
            return ("select_banner\(select.stale ? " (stale id)" : "") (\(select.appID))", await self.selectBanner(select))
        case .remoteCommands(let declare):
            return ("remote_commands \(declare.commands.count) (\(declare.appID))", await self.remoteCommands(declare))
        case .remoteCommand(let command):
            return (Self.describe(command), await self.remoteCommand(command))
        case .reportCall(let report):
            return ("report_call \(report.kind) \(report.callUuid.suffix(12)) (\(report.appID))", await self.reportCall(report))
        case .callInput(let input):
            return ("call_input \(input.action.kind) \(input.action.callUuid.suffix(12))", await self.callInput(input))
        case .expectCall(let expect):
            return (Self.describe(expect), await self.expectCall(expect))
        case .openAudioStream(let open):
            return ("open_audio_stream \(open.type) (\(open.appID))", await self.openAudioStream(open))
        case .sendAudio(let send):
            return ("send_audio \(send.durationMs) ms \(send.toneHz == 0 ? "silence" : "\(send.toneHz) Hz") on \(send.type) (\(send.appID))", await self.sendAudio(send))
        case .closeAudioStream(let close):
            return ("close_audio_stream \(close.type) (\(close.appID))", await self.closeAudioStream(close))
        case .expectAudioStreamClosed(let expect):
            return ("expect_audio_stream_closed \(expect.type) \(expect.reason) (\(expect.appID))", await self.expectAudioStreamClosed(expect))
        case .watchVideo(let watch):
            return ("watch_video \(Self.screen(watch.screen)) (\(watch.appID.isEmpty ? "no stream" : watch.appID))", await self.watchVideo(watch))
        case .sendVideo(let send):
            return ("send_video \(send.frames) frames (\(send.appID))", await self.sendVideo(send))
        case .expectVideo(let expect):
            return ("expect_video \(expect.frames) frames on \(Self.screen(expect.screen)) (\(expect.appID))", await self.expectVideo(expect))
        case .requestKeyframe(let request):
            return ("request_keyframe on \(Self.screen(request.screen)) (\(request.appID))", await self.requestKeyframe(request))
        case .assistantInput(let input):
            return (Self.describe(input), await self.assistantInput(input))
        case .assistantUpdate(let update):
            return ("assistant_update \(update.state)\(update.end ? " end" : "")\(update.text.isEmpty ? "" : " \"\(update.text)\"")", await self.assistantUpdate(update))
        case .postNotification(let post):
            return ("post_notification \(post.notification.notificationID) (\(post.notification.appID))", await self.postNotification(post))
        case .expectAssistant(let expect):
            return ("expect_assistant", await self.expectAssistant(expect))
        case .none:
            return ("(empty step)", .failed("the step has no action"))
        }
    }

    /// Compares a Result with the expected code.
    func check(_ result: HUResult, expect: HUErrorCode, okDetail: String = "") -> Outcome {
        if result.code == expect {
            return expect == .ok ? .ok(okDetail) : .expectedError(expect)
        }
        let got = HeadUnitError(result: result)
        if expect == .ok { return .failed("\(got)") }
        return .failed("expected \(ErrorCodeNames.name(expect)), got \(got)")
    }

    /// Also checks Result.limit when `expectLimit` is set and the code is not OK.
    func check(_ result: HUResult, expect: HUErrorCode, expectLimit: String) -> Outcome {
        if !expectLimit.isEmpty && result.code != .ok && result.limit != expectLimit {
            return .failed("limit '\(result.limit)', expected '\(expectLimit)' (\(HeadUnitError(result: result)))")
        }
        return check(result, expect: expect)
    }

    func failure(_ error: Error) -> Outcome {
        .failed("\(error)")
    }

    // MARK: steps

    private func launch(_ launch: HUScenarioLaunch) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        if let hmi {
            var message = HULaunchApp()
            message.appID = launch.appID
            message.kind = launch.kind
            do {
                let result = try await hmi.connection.resultOf(.launchApp(message))
                guard result.code == .ok else { return check(result, expect: launch.expect) }
                if launch.expect != .ok { return check(result, expect: launch.expect) }
            } catch {
                return failure(error)
            }
            do {
                let controller = try await phone.waitForScene(appID: launch.appID, timeout: timeout)
                return .ok("scene \(controller.sceneID)")
            } catch {
                return failure(error)
            }
        }
        if !options.openHMI {
            options.log("         waiting up to 60 s for \(launch.appID) to be launched from the car's home screen...")
            do {
                let controller = try await phone.waitForScene(appID: launch.appID, timeout: .seconds(60))
                return .ok("scene \(controller.sceneID)")
            } catch {
                return failure(error)
            }
        }
        return .failed("no HMI connection")
    }

    private func request(_ step: HUScenarioRequest) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        var request = HUTemplateRequest()
        request.appID = step.appID
        request.animated = step.animated
        if step.sceneID != 0 {
            request.sceneID = step.sceneID
        } else if let controller = await phone.interfaceController(for: step.appID) {
            request.sceneID = controller.sceneID
        }
        // scene_id 0 when the app has no scene: the car answers NOT_CONNECTED, which a scenario may expect.
        request.op = Self.templateOp(step.op)
        do {
            let result = try await phone.connection.resultOf(.templateRequest(request))
            var detail = ""
            if case .templateShown(let shown)? = result.detail {
                detail = "depth \(shown.depth)"
                if shown.itemsTotal > 0 { detail += ", \(shown.itemsShown)/\(shown.itemsTotal) items shown" }
                if step.expectDepth != 0 && shown.depth != step.expectDepth {
                    return .failed("depth \(shown.depth), expected \(step.expectDepth)")
                }
            }
            if !step.expectLimit.isEmpty && result.code != .ok && result.limit != step.expectLimit {
                return .failed("limit '\(result.limit)', expected '\(step.expectLimit)' (\(HeadUnitError(result: result)))")
            }
            return check(result, expect: step.expect, okDetail: detail)
        } catch {
            return failure(error)
        }
    }

    private func hmiInput(_ step: HUScenarioHmiInput) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        var input = HUHmiInput()
        input.templateID = step.templateID
        input.kind = Self.hmiKind(step.kind)
        do {
            return check(try await hmi.connection.resultOf(.hmiInput(input)), expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    private func expectEvent(_ expect: HUScenarioExpectEvent) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        var wait = expect.timeoutMs == 0 ? timeout : .milliseconds(Int64(expect.timeoutMs))
        if hmi == nil && !options.openHMI && wait < .seconds(60) {
            // Someone at the car's screen produces the input: give them time.
            wait = .seconds(60)
            options.log("         waiting up to 60 s for the car's input (\(Self.describe(expect)))...")
        }
        let event = await phone.nextEvent(timeout: wait) { event in
            guard case .appEvent(let appEvent) = event else { return false }
            return Self.matches(appEvent, expect)
        }
        guard case .appEvent(let appEvent)? = event else {
            return .failed("no such event within \(wait.nanoseconds / 1_000_000) ms")
        }
        return .ok(appEvent.eventID != 0 ? "(event \(appEvent.eventID) waits for completion)" : "")
    }

    private func completeEvent(_ step: HUScenarioCompleteEvent) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        var eventID = step.eventID
        if eventID == 0 {
            guard let last = await phone.pendingEvents(of: step.appID).last else {
                return .failed("\(step.appID) has no event waiting for completion")
            }
            eventID = last
        }
        var complete = HUCompleteEvent()
        complete.appID = step.appID
        complete.eventID = eventID
        complete.searchResults = step.searchResults
        do {
            let result = try await phone.connection.resultOf(.completeEvent(complete))
            await phone.forgetPending(eventID, of: step.appID)
            return check(result, expect: step.expect, okDetail: "event \(eventID)")
        } catch {
            return failure(error)
        }
    }

    private func setVehicleState(_ step: HUScenarioSetVehicleState) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        var message = HUSetVehicleState()
        message.state = step.state
        do {
            return check(try await hmi.connection.resultOf(.setVehicleState(message)), expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    private func closeApp(_ step: HUScenarioCloseApp) async -> Outcome {
        do {
            if step.byPhone {
                guard let phone else { return .failed("phone disconnected") }
                var closed = HUAppClosed()
                closed.appID = step.appID
                return check(try await phone.connection.resultOf(.appClosed(closed)), expect: step.expect)
            }
            guard let hmi else { return .skipped("no HMI") }
            var close = HUCloseApp()
            close.appID = step.appID
            return check(try await hmi.connection.resultOf(.closeApp(close)), expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    private func expectScreen(_ expect: HUScenarioExpectScreen) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        let screen: HUScreen = expect.screen == .unspecified ? .main : expect.screen
        let wait = expect.timeoutMs == 0 ? timeout : .milliseconds(Int64(expect.timeoutMs))
        if await hmi.waitForScreen(screen, timeout: wait, where: { Self.matches($0, expect) }) != nil {
            return .ok("")
        }
        let current = await hmi.screen(screen)
        return .failed("screen is \(current.map(ScreenText.summary) ?? "not rendered yet")")
    }

    private func serve(_ step: HUScenarioServe) async -> Outcome {
        guard let endpoint = carEndpoint else { return .skipped("no car-side connection (--without-hmi)") }
        do {
            if accessory == nil {
                let peer = try await AccessoryPeer.connect(to: endpoint, name: "scenario accessory")
                accessory = peer
                Task {
                    for await stream in peer.sessions {
                        Task { for try await bytes in stream { try await stream.write(bytes) } }
                    }
                }
            }
            let result = try await accessory!.connection.resultOf(.serveProtocols(HUServeProtocols.with { $0.protocols = step.protocols }))
            return check(result, expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    private func openSession(_ step: HUScenarioOpenSession) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        let stream: AccessoryStream
        do {
            stream = try await phone.openAccessorySession(appID: step.appID, protocol: step.protocol)
        } catch let error as HeadUnitError where error.origin == .result {
            return error.code == step.expect && step.expect != .ok ? .expectedError(step.expect) : .failed("\(error)")
        } catch {
            return failure(error)
        }
        if step.expect != .ok { return .failed("expected \(ErrorCodeNames.name(step.expect)), the session opened") }
        guard !step.send.isEmpty else { return .ok("channel \(stream.channel)") }
        do {
            let sent = Array(step.send.utf8)
            try await stream.write(sent)
            var echoed: [UInt8] = []
            for try await bytes in stream {
                echoed += Array(bytes.readableBytesView)
                if echoed.count >= sent.count { break }
            }
            try await stream.close()
            return echoed == sent ? .ok("channel \(stream.channel), \(sent.count) bytes echoed") : .failed("sent \(sent), got back \(echoed)")
        } catch {
            return failure(error)
        }
    }

    private func expectHome(_ step: HUScenarioExpectHome) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        let deadline = NIODeadline.now() + wait
        while NIODeadline.now() < deadline {
            if let home = await hmi.homeScreen(), home.icons.map(\.appID) == step.appIds { return .ok("") }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        let shown = await hmi.homeScreen()?.icons.map(\.appID) ?? []
        return .failed("home screen shows [\(shown.joined(separator: ", "))]")
    }

    private func disconnect(_ step: HUScenarioDisconnect) async -> Outcome {
        if step.hmi {
            await video?.stop()
            video = nil  // the watch is the HMI's
            await hmi?.close()
            hmi = nil
        }
        if !step.hmi || step.phone {
            await phone?.close()
            phone = nil
        }
        return .ok("")
    }

    // MARK: matching

    static func matches(_ event: HUAppEvent, _ expect: HUScenarioExpectEvent) -> Bool {
        if !expect.appID.isEmpty && event.appID != expect.appID { return false }
        if !expect.templateID.isEmpty && event.templateID != expect.templateID { return false }
        if expect.hasNeedsCompletion && (event.eventID != 0) != expect.needsCompletion { return false }
        let (kind, itemID, buttonID, phase) = eventFields(event)
        if !expect.kind.isEmpty && normalize(expect.kind) != normalize(kind) { return false }
        if !expect.itemID.isEmpty && itemID != expect.itemID { return false }
        if !expect.buttonID.isEmpty && buttonID != expect.buttonID { return false }
        if expect.phase != .unspecified && phase != expect.phase { return false }
        return true
    }

    /// "item_selected", "itemSelected" and "ITEM_SELECTED" are the same kind.
    static func normalize(_ name: String) -> String {
        String(name.lowercased().filter { $0 != "_" })
    }

    /// (kind name, item-like id, button-like id, lifecycle phase).
    static func eventFields(_ event: HUAppEvent) -> (String, String, String, HULifecyclePhase) {
        switch event.kind {
        case .itemSelected(let e): return ("item_selected", e.itemID, "", .unspecified)
        case .buttonPressed(let e): return ("button_pressed", "", e.buttonID, .unspecified)
        case .tabSelected(let e): return ("tab_selected", "", e.tabID, .unspecified)
        case .searchTextChanged(let e): return ("search_text_changed", e.text, "", .unspecified)
        case .searchResultSelected(let e): return ("search_result_selected", e.itemID, "", .unspecified)
        case .poiSelected(let e): return ("poi_selected", e.poiID, "", .unspecified)
        case .poiRegionChanged: return ("poi_region_changed", "", "", .unspecified)
        case .nowPlayingButton(let e): return ("now_playing_button", "", e.buttonID, .unspecified)
        case .lifecycle(let e): return ("lifecycle", "", "", e.phase)
        case .timedOut: return ("timed_out", "", "", .unspecified)
        case .voiceFlowStarted(let e): return ("voice_flow_started", e.itemID, "", .unspecified)
        case .searchButtonPressed: return ("search_button_pressed", "", "", .unspecified)
        case .none: return ("", "", "", .unspecified)
        }
    }

    static func matches(_ screen: HURenderedScreen, _ expect: HUScenarioExpectScreen) -> Bool {
        if !expect.appID.isEmpty && screen.appID != expect.appID { return false }
        if !expect.templateID.isEmpty && screen.top.id != expect.templateID { return false }
        if !expect.presentedID.isEmpty && !(screen.hasPresented && screen.presented.id == expect.presentedID) { return false }
        if expect.hasItemsShown && screen.itemsShown != expect.itemsShown { return false }
        if expect.hasDepth && UInt32(screen.stack.count) != expect.depth { return false }
        if expect.hasPendingItemID {
            let pending = screen.hasPending && screen.pending.eventID != 0 ? screen.pending.itemID : ""
            if pending != expect.pendingItemID { return false }
        }
        return true
    }

    // MARK: mapping scenario messages to wire messages

    static func templateOp(_ op: HUScenarioRequest.OneOf_Op?) -> HUTemplateRequest.OneOf_Op? {
        switch op {
        case .setRoot(let t): return .setRoot(t)
        case .push(let t): return .push(t)
        case .pop(let p): return .pop(p)
        case .popToRoot(let p): return .popToRoot(p)
        case .popTo(let id): return .popTo(id)
        case .present(let t): return .present(t)
        case .dismiss(let p): return .dismiss(p)
        case .update(let t): return .update(t)
        case .updateItem(let u): return .updateItem(u)
        case .updateNowPlaying(let n): return .updateNowPlaying(n)
        case .showNowPlaying(let s): return .showNowPlaying(s)
        case .none: return nil
        }
    }

    static func hmiKind(_ kind: HUScenarioHmiInput.OneOf_Kind?) -> HUHmiInput.OneOf_Kind? {
        switch kind {
        case .selectItem(let k): return .selectItem(k)
        case .pressButton(let k): return .pressButton(k)
        case .selectTab(let k): return .selectTab(k)
        case .searchText(let k): return .searchText(k)
        case .selectSearchResult(let k): return .selectSearchResult(k)
        case .selectPoi(let k): return .selectPoi(k)
        case .poiRegion(let k): return .poiRegion(k)
        case .nowPlayingButton(let k): return .nowPlayingButton(k)
        case .goBack(let k): return .goBack(k)
        case .openNowPlaying(let k): return .openNowPlaying(k)
        case .goHome(let k): return .goHome(k)
        case .searchButton(let k): return .searchButton(k)
        case .none: return nil
        }
    }

    // MARK: descriptions

    static func describe(_ request: HUScenarioRequest) -> String {
        let what: String
        switch request.op {
        case .setRoot(let t): what = "set_root \(ScreenText.name(t))"
        case .push(let t): what = "push \(ScreenText.name(t))"
        case .pop: what = "pop"
        case .popToRoot: what = "pop_to_root"
        case .popTo(let id): what = "pop_to '\(id)'"
        case .present(let t): what = "present \(ScreenText.name(t))"
        case .dismiss: what = "dismiss"
        case .update(let t): what = "update \(ScreenText.name(t))"
        case .updateItem(let u): what = "update_item '\(u.item.id)' in '\(u.templateID)'"
        case .updateNowPlaying: what = "update_now_playing"
        case .showNowPlaying: what = "show_now_playing"
        case .none: what = "(no op)"
        }
        return "\(what) (\(request.appID))"
    }

    static func describe(_ input: HUScenarioHmiInput) -> String {
        let what: String
        switch input.kind {
        case .selectItem(let k): what = "select_item '\(k.itemID)'"
        case .pressButton(let k): what = "press_button '\(k.buttonID)'"
        case .selectTab(let k): what = "select_tab '\(k.tabID)'"
        case .searchText(let k): what = "search_text '\(k.text)'"
        case .selectSearchResult(let k): what = "select_search_result '\(k.itemID)'"
        case .selectPoi(let k): what = "select_poi '\(k.poiID)'"
        case .poiRegion: what = "poi_region"
        case .nowPlayingButton(let k): what = "now_playing_button '\(k.buttonID)'"
        case .goBack: what = "go_back"
        case .openNowPlaying: what = "open_now_playing"
        case .goHome: what = "go_home"
        case .searchButton: what = "search_button"
        case .none: what = "(no input)"
        }
        return "hmi \(what) on '\(input.templateID)'"
    }

    static func describe(_ expect: HUScenarioExpectEvent) -> String {
        var text = "expect_event \(expect.kind.isEmpty ? "any" : expect.kind)"
        if !expect.itemID.isEmpty { text += " '\(expect.itemID)'" }
        if !expect.buttonID.isEmpty { text += " '\(expect.buttonID)'" }
        if expect.phase != .unspecified { text += " \(expect.phase)" }
        if !expect.templateID.isEmpty { text += " on '\(expect.templateID)'" }
        return text
    }

    static func describe(_ expect: HUScenarioExpectScreen) -> String {
        var parts: [String] = []
        if !expect.appID.isEmpty { parts.append("app \(expect.appID)") }
        if !expect.templateID.isEmpty { parts.append("top '\(expect.templateID)'") }
        if !expect.presentedID.isEmpty { parts.append("presented '\(expect.presentedID)'") }
        if expect.hasItemsShown { parts.append("\(expect.itemsShown) items shown") }
        if expect.hasDepth { parts.append("depth \(expect.depth)") }
        if expect.hasPendingItemID { parts.append(expect.pendingItemID.isEmpty ? "no spinner" : "spinner on '\(expect.pendingItemID)'") }
        return "expect_screen " + parts.joined(separator: ", ")
    }

    static func describe(_ state: HUVehicleState) -> String {
        var parts: [String] = [state.driving ? "driving" : "parked"]
        if state.limitLists { parts.append("limit lists") }
        if state.limitKeyboard { parts.append("limit keyboard") }
        if state.contentStyle != .unspecified { parts.append("\(state.contentStyle)") }
        if state.nativeNavigationActive { parts.append("native navigation") }
        if !state.carAudioSource.isEmpty { parts.append("car audio '\(state.carAudioSource)'") }
        return parts.joined(separator: ", ")
    }
}

extension PhoneSession {
    func forgetPending(_ eventID: UInt64, of appID: String) async {
        guard let app = await app(appID) else { return }
        await connection.onLoopAsync { app.pendingEventIDs.removeAll { $0 == eventID } }
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
