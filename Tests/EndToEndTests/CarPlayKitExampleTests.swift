import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// One CarPlayKit example (Examples/) running as its own process against the
/// daemon; its stdout lines say which handler ran.
final class ExampleProcess: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var text = ""

    /// Starts `.build/<config>/<name>` (next to headunitd; built when missing) with the daemon's socket.
    init(_ name: String, socket: String) throws {
        let daemonBinary = try TestDaemon.binaryPath()
        let directory = (daemonBinary as NSString).deletingLastPathComponent
        let binary = directory + "/" + name
        if !FileManager.default.isExecutableFile(atPath: binary) {
            let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
            let build = try TestDaemon.run(["swift", "build", "--package-path", packageRoot, "--product", name], timeout: 600)
            guard build.status == 0 else { throw TestDaemon.LaunchError(message: "building \(name) failed: \(build.stderr)") }
        }
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [socket]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.lock()
            self.text += String(decoding: data, as: UTF8.self)
            self.lock.unlock()
        }
        try process.run()
    }

    var output: String {
        lock.lock()
        defer { lock.unlock() }
        return text
    }

    /// Waits until the example printed a line equal to `line`, at least `times`
    /// times (a step the example repeats, such as a second trip's alert); fails
    /// the test after `timeout` (generous: a condition, so a passing run never
    /// waits it out).
    func expect(_ line: String, times: Int = 1, timeout: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if output.split(separator: "\n").count(where: { $0 == line }) >= times { return }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        Issue.record("example never printed \"\(line)\"\(times > 1 ? " \(times) times" : ""); it printed:\n\(output)", sourceLocation: sourceLocation)
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// The CarPlayKit examples against the real daemon, driven from the HMI side
/// like a driver would: every handler and completion of each example runs.
@Suite("CarPlayKit examples against the daemon", .serialized)
struct CarPlayKitExampleTests {
    struct Rig {
        let daemon: TestDaemon
        let example: ExampleProcess
        let hmi: HMISession
        var endpoint: HeadUnitEndpoint { .unix(path: daemon.unixSocketPath) }

        static func start(_ name: String) async throws -> Rig {
            let daemon = try await onOwnThread(gated: false) { try TestDaemon.launch() }
            let example = try ExampleProcess(name, socket: daemon.unixSocketPath)
            // A readiness wait, not a speed check: a debug example process
            // starting and connecting while the whole suite runs in parallel
            // on 2 cores once took just over 20 s.
            await example.expect("connected", timeout: 60)
            let hmi = try await HMISession.connect(to: .unix(path: daemon.unixSocketPath))
            return Rig(daemon: daemon, example: example, hmi: hmi)
        }

        func top(_ templateID: String) async -> HURenderedScreen? {
            await hmi.waitForScreen { $0.top.id == templateID && !$0.hasPending }
        }

        /// Synchronous, so a `defer` ends both processes before the test returns (the HMI connection dies with the daemon).
        func stop() {
            example.stop()
            _ = try? daemon.terminate()
        }
    }

    static func list(_ screen: HURenderedScreen?) -> HUListTemplate? {
        if case .list(let list)? = screen?.top.kind { return list }
        return nil
    }

    static func generalItem(_ screen: HURenderedScreen?, _ id: String) -> HUGeneralItem? {
        for section in list(screen)?.sections ?? [] {
            for item in section.items where item.id == id {
                if case .general(let general)? = item.kind { return general }
            }
        }
        return nil
    }

    @Test("RadioApp: selection with push and completion, in-place item and section updates, now playing buttons, session configuration")
    func radio() async throws {
        let rig = try await Rig.start("RadioApp")
        defer { rig.stop() }
        try await rig.hmi.launch("com.example.radio")
        await rig.example.expect("root set: true ")
        #expect(await rig.top("stations") != nil)

        // The handler pushes Now Playing, then completes: the spinner stops with now-playing on top.
        try await rig.hmi.selectItem("jazz", on: "stations")
        await rig.example.expect("playing Jazz FM")
        let playing = await rig.hmi.waitForScreen { $0.stack == ["stations", "now-playing"] && !$0.hasPending }
        #expect(playing != nil)
        var shuffle = HUHmiInput()
        shuffle.templateID = "now-playing"
        shuffle.kind = .nowPlayingButton(HUNowPlayingButtonPressed.with { $0.buttonID = "shuffle" })
        try await rig.hmi.input(shuffle)
        await rig.example.expect("shuffle")
        var upNext = shuffle
        upNext.kind = .nowPlayingButton(HUNowPlayingButtonPressed.with { $0.buttonID = "up-next" })
        try await rig.hmi.input(upNext)
        await rig.example.expect("up next")

        // item.setDetailText / setPlaying reached the car as item updates.
        try await rig.hmi.goBack(on: "now-playing")
        let back = await rig.hmi.waitForScreen { Self.generalItem($0, "jazz")?.detailText == "On air" && $0.top.id == "stations" }
        #expect(Self.generalItem(back, "jazz")?.playing == true)

        // updateSections from a bar button: the list is redrawn in place, its new item works.
        try await rig.hmi.pressButton("more", on: "stations")
        await rig.example.expect("added Podcasts")
        #expect(await rig.hmi.waitForScreen { Self.list($0)?.sections.count == 2 } != nil)
        try await rig.hmi.selectItem("podcasts", on: "stations")
        await rig.example.expect("selected Podcasts")
        #expect(await rig.top("stations") != nil)

        // CPSessionConfiguration hears limited lists and the content style.
        try await rig.hmi.setVehicleState(HUVehicleState.with { $0.driving = true; $0.limitLists = true; $0.limitKeyboard = true })
        await rig.example.expect("limited lists: true")
        // Light first: the callback fires only on a change, whatever the car's style was.
        try await rig.hmi.setVehicleState(HUVehicleState.with { $0.contentStyle = .light })
        try await rig.hmi.setVehicleState(HUVehicleState.with { $0.contentStyle = .dark })
        await rig.example.expect("content style: dark")

        try await rig.hmi.closeApp("com.example.radio")
        await rig.example.expect("disconnected")
    }

    @Test("RadioApp: MPRemoteCommandCenter's handlers run for the HMI's transport controls and car buttons; MPNowPlayingInfoCenter updates the screen")
    func radioRemoteCommands() async throws {
        let rig = try await Rig.start("RadioApp")
        defer { rig.stop() }
        try await rig.hmi.launch("com.example.radio")
        await rig.example.expect("root set: true ")
        try await rig.hmi.selectItem("jazz", on: "stations")
        await rig.example.expect("playing Jazz FM")
        // The station on air streams its tone through the car's mixer (the car accepted the main stream).
        await rig.example.expect("streaming 440 Hz")
        // The Now Playing screen carries the commands the app offers: skip is offered but disabled.
        let screen = await rig.hmi.waitForScreen { $0.top.id == "now-playing" && $0.remoteCommands.commands.count >= 7 }
        let commands = screen?.remoteCommands.commands ?? []
        #expect(commands.first { $0.command == .skipForward }?.enabled == false)
        #expect(commands.first { $0.command == .skipForward }?.preferredIntervals == [15, 30])
        #expect(commands.first { $0.command == .pause }?.enabled == true)
        #expect(commands.first { $0.command == .like }?.title == "Like this station")

        // A touch on pause: the handler runs, the app's now-playing rate reaches the screen before the answer.
        let pause = try await rig.hmi.sendRemoteCommand(HURemoteCommandCall.with { $0.command = .pause }, to: "com.example.radio")
        #expect(pause.status == .success)
        await rig.example.expect("pause")
        #expect(await rig.hmi.waitForScreen { $0.top.nowPlaying.playbackRate == 0 && $0.top.nowPlaying.title == "Jazz FM" } != nil)
        await rig.example.expect("stream stopped")

        // The steering wheel's NEXT: to the app that owns the main audio, as its next-track handler.
        let next = try await rig.hmi.pressCarButton(.next)
        #expect(next.appID == "com.example.radio" && next.call.command == .nextTrack && next.status == .success)
        await rig.example.expect("tuned to News 24")
        await rig.example.expect("streaming 660 Hz")
        let tuned = await rig.hmi.waitForScreen { $0.top.nowPlaying.title == "News 24" && $0.top.nowPlaying.playbackRate == 1 }
        #expect(tuned?.top.nowPlaying.artwork.asset == "station-news")

        // PLAY_PAUSE while playing: the toggle; skip is disabled, so refused with its code.
        #expect(try await rig.hmi.pressCarButton(.playPause).call.command == .togglePlayPause)
        #expect(await rig.hmi.waitForScreen { $0.top.nowPlaying.title == "News 24" && $0.top.nowPlaying.playbackRate == 0 } != nil)
        await #expect(throws: HeadUnitError.self) {
            _ = try await rig.hmi.sendRemoteCommand(HURemoteCommandCall.with { $0.command = .skipForward })
        }
        do {
            _ = try await rig.hmi.sendRemoteCommand(HURemoteCommandCall.with { $0.command = .skipForward })
        } catch let error as HeadUnitError {
            #expect(error.code == .commandDisabled)
        }
        let like = try await rig.hmi.sendRemoteCommand(HURemoteCommandCall.with { $0.command = .like })
        #expect(like.status == .success)
        await rig.example.expect("like News 24")
    }

    @Test("MessagesApp: voice flow, push a contact card, its call button places a call the car shows and ends, a presented alert and both actions")
    func messages() async throws {
        let rig = try await Rig.start("MessagesApp")
        defer { rig.stop() }
        try await rig.hmi.launch("com.example.messages")
        await rig.example.expect("root set")
        #expect(await rig.top("conversations") != nil)

        try await rig.hmi.selectItem("alice", on: "conversations")
        await rig.example.expect("voice flow for Alice")

        try await rig.hmi.selectItem("bob", on: "conversations")
        await rig.example.expect("showed Bob")
        #expect(await rig.top("bob-card") != nil)
        try await rig.hmi.pressButton("call", on: "bob-card")
        await rig.example.expect("calling Bob")
        // The call button placed the call with CallKit: the car shows it connected; the driver ends it on the car.
        await rig.example.expect("call connected")
        let call = try #require(await rig.hmi.waitForHomeScreen { $0.calls.first?.phase == .active }?.calls.first)
        #expect(call.appID == "com.example.messages" && call.outgoing && call.description_p.localizedCallerName == "Bob")
        #expect(try await rig.hmi.callAction(HUCallAction.with { $0.kind = .end; $0.callUuid = call.callUuid }).fulfilled)
        await rig.example.expect("ended")
        #expect(await rig.hmi.waitForHomeScreen { $0.calls.isEmpty } != nil)
        try await rig.hmi.goBack(on: "bob-card")
        #expect(await rig.top("conversations") != nil)

        try await rig.hmi.pressButton("clear", on: "conversations")
        #expect(await rig.hmi.waitForScreen { $0.presented.id == "confirm-clear" } != nil)
        try await rig.hmi.pressButton("clear-all", on: "confirm-clear")
        await rig.example.expect("cleared")
        #expect(await rig.hmi.waitForScreen { $0.presented.id.isEmpty } != nil)

        try await rig.hmi.pressButton("clear", on: "conversations")
        #expect(await rig.hmi.waitForScreen { $0.presented.id == "confirm-clear" } != nil)
        try await rig.hmi.pressButton("cancel", on: "confirm-clear")
        #expect(await rig.hmi.waitForScreen { $0.presented.id.isEmpty } != nil)
    }

    /// The first home screen, in the order the HMI received them (none skipped: every
    /// update is in `updates`), that `match` accepts; nil after `timeout` (a failure bound).
    static func homeSeen(_ hmi: HMISession, timeout: Double = 60, _ match: @escaping @Sendable (HUHomeScreen) -> Bool) async -> HUHomeScreen? {
        await withTaskGroup(of: HUHomeScreen?.self) { group in
            group.addTask {
                for await update in hmi.updates {
                    if case .homeScreen(let home) = update, match(home) { return home }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1_000_000_000))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test("MessagesApp and the phone's assistant: a notification selected is read and marked read; the voice button opens it, a typed request reaches the send handler with its values, the car shows and speaks the answer; missing words are asked for; a message item replies in its conversation")
    func messagesThroughTheAssistant() async throws {
        let rig = try await Rig.start("MessagesApp")
        defer { rig.stop() }
        // The app's notification: sender only on the car; selected, the assistant reads that conversation.
        await rig.example.expect("notification posted")
        let posted = await Self.homeSeen(rig.hmi) { !$0.notifications.isEmpty }
        #expect(posted?.notifications.first?.sender == "Alice" && posted?.notifications.first?.conversationID == "conv-alice")
        let reading = try await rig.hmi.notification(.select(HUNotificationRef.with { $0.appID = "com.example.messages"; $0.notificationID = "m1" }))
        await rig.example.expect("messages found: 1")
        await rig.example.expect("marked read: m1")
        #expect(await Self.homeSeen(rig.hmi) { $0.assistant.turns.contains { $0.text == "Alice said: See you at 6" } && $0.notifications.isEmpty } != nil)
        #expect(await Self.homeSeen(rig.hmi) { !$0.hasAssistant && $0.lastAssistantEnded.sessionID == reading.sessionID } != nil)

        // The voice button: the assistant listens (the car's microphone is its).
        let opened = try await rig.hmi.pressVoiceButton()
        #expect(await Self.homeSeen(rig.hmi) { $0.assistant.sessionID == opened.sessionID && $0.assistant.state == .listening } != nil)
        try await rig.hmi.say("send a message to Jane saying on my way")
        await rig.example.expect("message sent to Jane: on my way")
        let answered = await Self.homeSeen(rig.hmi) { $0.assistant.turns.contains { $0.text == "Sent to Jane: on my way" } }
        #expect(answered?.assistant.turns.map(\.text) == ["What can I help you with?", "send a message to Jane saying on my way", "Sent to Jane: on my way"])
        // Spoken (espeak-ng's voice, when installed), then the assistant ends the session.
        let ended = await Self.homeSeen(rig.hmi) { !$0.hasAssistant && $0.lastAssistantEnded.sessionID == opened.sessionID }
        #expect(ended?.lastAssistantEnded.reason == .byAssistant)

        // Typed with no session open: one opens; the missing words are asked for, then sent.
        let second = try await rig.hmi.say("send a message to Bob")
        #expect(await Self.homeSeen(rig.hmi) { $0.assistant.state == .listening && $0.assistant.turns.last?.text == "What do you want to say to Bob?" } != nil)
        #expect(try await rig.hmi.say("running late").sessionID == second.sessionID)
        await rig.example.expect("message sent to Bob: running late")
        #expect(await Self.homeSeen(rig.hmi) { !$0.hasAssistant && $0.lastAssistantEnded.sessionID == second.sessionID } != nil)

        // Read: the search handler runs; Alice's message was read already.
        try await rig.hmi.say("read my messages")
        await rig.example.expect("messages found: 0")
        let nothing = await Self.homeSeen(rig.hmi) { $0.assistant.turns.contains { $0.text == "You have no new messages." } }
        #expect(await Self.homeSeen(rig.hmi) { !$0.hasAssistant && $0.lastAssistantEnded.sessionID == nothing?.assistant.sessionID } != nil)

        // A message item: nothing new in Alice's conversation, so the assistant offers a reply in it.
        try await rig.hmi.launch("com.example.messages")
        #expect(await rig.top("conversations") != nil)
        try await rig.hmi.selectItem("alice", on: "conversations")
        await rig.example.expect("voice flow for Alice")
        #expect(await Self.homeSeen(rig.hmi) { $0.assistant.state == .listening && $0.assistant.turns.last?.text == "What do you want to say to Alice?" } != nil)
        try await rig.hmi.say("be there soon")
        await rig.example.expect("message sent to Alice: be there soon (conv-alice)")

        // Missed calls: the call history's handler answers, the car shows who called.
        #expect(await Self.homeSeen(rig.hmi) { !$0.hasAssistant && $0.lastAssistantEnded.reason == .byAssistant } != nil)
        try await rig.hmi.say("missed calls")
        #expect(await Self.homeSeen(rig.hmi) { $0.assistant.turns.last?.text == "Missed calls from Bob." } != nil)
    }

    static func navigationInput(_ kind: HUNavigationInput.OneOf_Kind) -> HUEnvelope.OneOf_Body {
        .navigationInput(HUNavigationInput.with { $0.appID = "com.example.maps"; $0.kind = kind })
    }

    @Test("MapsApp: map button, trip previews, start, maneuvers, navigation alert, finish; dashboard button; cluster zoom; cancelled by the car")
    func maps() async throws {
        let rig = try await Rig.start("MapsApp")
        defer { rig.stop() }
        try await rig.hmi.launch("com.example.maps")
        await rig.example.expect("root set: true")
        #expect(await rig.top("map") != nil)

        try await rig.hmi.pressButton("routes", on: "map")
        await rig.example.expect("previews shown")
        let chosen = HUTripChosen.with { $0.tripID = "home"; $0.routeChoiceID = "a1" }
        try await rig.hmi.connection.request(Self.navigationInput(.previewTrip(chosen)))
        await rig.example.expect("previewing home via a1")
        try await rig.hmi.connection.request(Self.navigationInput(.startTrip(chosen)))
        await rig.example.expect("guiding home")
        // The maneuver is spoken through a voicePrompt session: espeak-ng's voice when installed, else a chime.
        let espeak = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/espeak-ng") }
        await rig.example.expect("prompt spoken (\(espeak ? "espeak-ng" : "chime")): Turn right onto Main Street")

        // The cluster sees the guidance the session sent (maneuvers, lanes, road, maneuver state).
        let cluster = try await ClusterSession.connect(to: rig.endpoint)
        try await cluster.subscribe()
        let guided = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var model = MetadataModel()
                for await update in cluster.updates {
                    model.apply(update)
                    let section = model.state.maneuvers
                    // With the lanes the app added, linked and made current, and its road.
                    if model.state.guidance.state == .active, section.maneuvers.first?.id == "turn-1",
                        section.maneuvers.first?.maneuverType == .rightTurn, section.currentLaneGuidanceID == "main-street-lanes",
                        section.laneGuidances.first?.lanes.map(\.status) == [.notGood, .notGood, .preferred],
                        section.currentRoadNameVariants.first == "Station Road", section.maneuverState == .initial
                    {
                        return true
                    }
                }
                return false
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: 5_000_000_000)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(guided)

        // The alert's action handler, then the delegate with the dismissal context. The
        // alert request is queued after the start: retry until the car has it.
        await rig.example.expect("alert will show")
        await rig.example.expect("alert shown")  // after the car accepted show_alert
        try await Self.retrying { try await rig.hmi.connection.request(Self.navigationInput(.alertAction("ok"))) }
        await rig.example.expect("alert ok")
        await rig.example.expect("alert will dismiss: userDismissed")
        await rig.example.expect("alert dismissed: userDismissed")

        try await rig.hmi.pressButton("end", on: "map")
        await rig.example.expect("trip finished")

        // Dashboard: the scene connects, its shortcut button starts guidance again.
        try await rig.hmi.launch("com.example.maps", kind: .dashboard)
        await rig.example.expect("dashboard connected")
        try await Self.retrying { try await rig.hmi.connection.request(Self.navigationInput(.dashboardButton("go-home"))) }
        await rig.example.expect("dashboard: home")

        // Cluster scene: its delegate hears the zoom.
        try await rig.hmi.launch("com.example.maps", kind: .instrumentCluster)
        await rig.example.expect("cluster connected")
        try await cluster.send(HUClusterInput.with { $0.kind = .zoomIn(true) })
        await rig.example.expect("cluster zoom in")
        await cluster.close()

        // The driver starts the car's own navigation: the app hears its guidance was cancelled.
        // Only once the car holds the second trip's guidance: the app sends its start, then
        // its alert, and the car answers them in order, so the second alert shown means the
        // start reached the car (sent after the car's own navigation, the start is refused
        // with NATIVE_NAVIGATION_ACTIVE and there is nothing to cancel).
        await rig.example.expect("alert shown", times: 2)
        try await rig.hmi.setVehicleState(HUVehicleState.with { $0.nativeNavigationActive = true })
        await rig.example.expect("navigation cancelled by the car")

        try await rig.hmi.closeApp("com.example.maps")
        await rig.example.expect("disconnected")
    }

    /// An HMI input the car refuses until the app's request (sent just before) reached it.
    static func retrying(_ body: () async throws -> Void) async throws {
        var lastError: (any Error)?
        for _ in 0..<100 {
            do { return try await body() } catch { lastError = error }
            try await Task.sleep(nanoseconds: 30_000_000)
        }
        throw lastError!
    }

    @Test("ComfortApp: grid button pushes an information template, its action opens an accessory session")
    func comfort() async throws {
        let rig = try await Rig.start("ComfortApp")
        defer { rig.stop() }
        let climate = try await AccessoryPeer.connect(to: rig.endpoint, name: "climate ECU")
        try await climate.serve(["com.openmotors.climate"])
        let echo = Task {
            for await stream in climate.sessions {
                if let bytes = try? await stream.read() { try? await stream.write(bytes) }
            }
        }
        defer { echo.cancel() }

        try await rig.hmi.launch("com.example.comfort")
        await rig.example.expect("root set: true")
        #expect(await rig.top("functions") != nil)
        try await rig.hmi.pressButton("climate", on: "functions")
        await rig.example.expect("showed climate")
        let info = await rig.top("climate-info")
        if case .information(let template)? = info?.top.kind {
            #expect(template.items.first?.detail == "com.openmotors.climate")
        } else {
            Issue.record("climate-info is not an information template: \(String(describing: info))")
        }
        try await rig.hmi.pressButton("warmer", on: "climate-info")
        await rig.example.expect("climate replied 1 bytes")
        await climate.close()
    }
}
