import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// The rules PROTOCOL.md and TEMPLATES.md state since the independent-client
/// review (PROTOCOL.md sections 16 and 17), each provoked over a real
/// socket with raw frames, as a client written from the spec alone would.
@Suite("Spec decisions over real sockets")
struct SpecDecisionTests {
    static let audio = "com.apple.developer.carplay-audio"

    /// A daemon, a phone with announced apps, an HMI, and (when launched) the app's main scene.
    struct Car {
        let daemon: TestDaemon
        let phone: RawSocketClient
        let hmi: RawSocketClient
        var sceneID: UInt32 = 0
        var nextID: UInt32 = 10

        init(limits: [String: UInt64] = [:], apps: [HUAppInfo] = [RequestErrorTests.app("com.example.app")], launch: Bool = true) throws {
            daemon = try TestDaemon.launch(limits: limits)
            phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            _ = try RequestErrorTests.announce(phone, apps)
            if launch {
                #expect(try RequestErrorTests.launch(hmi, apps[0].appID).1.code == .ok)
                sceneID = try Self.sceneConnected(phone).sceneID
            }
        }

        static func sceneConnected(_ phone: RawSocketClient) throws -> HUSceneConnected {
            while true {
                if case .sceneConnected(let scene) = try phone.readEnvelope().body { return scene }
            }
        }

        /// Sends a request and returns its Result with every envelope that came before it.
        mutating func request(_ client: RawSocketClient, _ body: HUEnvelope.OneOf_Body) throws -> (result: HUResult, before: [HUEnvelope]) {
            nextID += 1
            try client.send(body, requestID: nextID)
            var before: [HUEnvelope] = []
            while true {
                let envelope = try client.readEnvelope()
                if case .result(let result) = envelope.body, envelope.requestID == nextID { return (result, before) }
                before.append(envelope)
            }
        }

        mutating func template(_ op: HUTemplateRequest.OneOf_Op, app: String = "com.example.app") throws -> (result: HUResult, lifecycle: [String]) {
            let request = HUTemplateRequest.with { $0.appID = app; $0.sceneID = sceneID; $0.op = op }
            let (result, before) = try self.request(phone, .templateRequest(request))
            return (result, before.compactMap(Self.lifecycle))
        }

        mutating func input(_ input: HUHmiInput) throws -> HUResult {
            try request(hmi, .hmiInput(input)).result
        }

        /// "WILL_APPEAR root" for a lifecycle event, nil for anything else.
        static func lifecycle(_ envelope: HUEnvelope) -> String? {
            guard case .appEvent(let event) = envelope.body, case .lifecycle(let lifecycle) = event.kind else { return nil }
            let phase: String
            switch lifecycle.phase {
            case .willAppear: phase = "WILL_APPEAR"
            case .didAppear: phase = "DID_APPEAR"
            case .willDisappear: phase = "WILL_DISAPPEAR"
            case .didDisappear: phase = "DID_DISAPPEAR"
            default: phase = "\(lifecycle.phase)"
            }
            return "\(phase) \(event.templateID)"
        }
    }

    static func list(_ id: String, items: Int = 2) -> HUTemplate {
        TemplateSessionErrorTests.list(id, items: items)
    }

    // Item 2: request_id 0 is still a request and is answered.
    @Test func requestWithIDZeroIsAnsweredWithIDZero() async throws {
        try await onOwnThread {
            let car = try Car()
            try car.phone.send(.appClosed(HUAppClosed.with { $0.appID = "com.example.app" }), requestID: 0)
            let (requestID, result) = try car.phone.readResult()
            #expect(requestID == 0)
            #expect(result.code == .ok)
        }
    }

    // Item 3: a completion after the time-out is COMPLETION_TIMEOUT; a repeated one UNKNOWN_EVENT.
    @Test func lateCompletionIsCompletionTimeoutAndRepeatedIsUnknownEvent() async throws {
        try await onOwnThread {
            var car = try Car(limits: ["completionTimeoutMs": 150])
            #expect(try car.template(.setRoot(Self.list("root"))).result.code == .ok)
            #expect(try car.input(HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = "root-0" } }).code == .ok)
            var eventID: UInt64 = 0
            var timedOut = false
            while !timedOut {
                guard case .appEvent(let event) = try car.phone.readEnvelope().body else { continue }
                if case .itemSelected = event.kind { eventID = event.eventID }
                if case .timedOut(let t) = event.kind { timedOut = t.timedOutEventID == eventID }
            }
            let complete = HUEnvelope.OneOf_Body.completeEvent(HUCompleteEvent.with { $0.appID = "com.example.app"; $0.eventID = eventID })
            #expect(try car.request(car.phone, complete).result.code == .completionTimeout)
            // A selection completed in time, then completed again: UNKNOWN_EVENT.
            #expect(try car.input(HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = "root-1" } }).code == .ok)
            var second: UInt64 = 0
            while second == 0 {
                if case .appEvent(let event) = try car.phone.readEnvelope().body, case .itemSelected = event.kind { second = event.eventID }
            }
            let again = HUEnvelope.OneOf_Body.completeEvent(HUCompleteEvent.with { $0.appID = "com.example.app"; $0.eventID = second })
            #expect(try car.request(car.phone, again).result.code == .ok)
            #expect(try car.request(car.phone, again).result.code == .unknownEvent)
        }
    }

    // Item 5: popping several levels tells only the template that was visible, UIKit's order.
    @Test func multiLevelPopSendsEventsOnlyForTheVisibleTemplates() async throws {
        try await onOwnThread {
            var car = try Car()
            #expect(try car.template(.setRoot(Self.list("a"))).lifecycle == ["WILL_APPEAR a", "DID_APPEAR a"])
            #expect(try car.template(.push(Self.list("b"))).lifecycle == ["WILL_DISAPPEAR a", "WILL_APPEAR b", "DID_DISAPPEAR a", "DID_APPEAR b"])
            _ = try car.template(.push(Self.list("c")))
            _ = try car.template(.push(Self.list("d")))
            let popped = try car.template(.popToRoot(HUPopTemplate()))
            #expect(popped.result.templateShown.templateID == "a")
            #expect(popped.lifecycle == ["WILL_DISAPPEAR d", "WILL_APPEAR a", "DID_DISAPPEAR d", "DID_APPEAR a"])
            _ = try car.template(.push(Self.list("b")))
            _ = try car.template(.push(Self.list("c")))
            #expect(try car.template(.popTo("a")).lifecycle == ["WILL_DISAPPEAR c", "WILL_APPEAR a", "DID_DISAPPEAR c", "DID_APPEAR a"])
            // set_root under a presented alert: the alert and the old top disappear, front to back.
            _ = try car.template(.push(Self.list("b")))
            _ = try car.template(.present(TemplateSessionErrorTests.alert("alert")))
            #expect(try car.template(.setRoot(Self.list("z"))).lifecycle
                == ["WILL_DISAPPEAR alert", "WILL_DISAPPEAR b", "WILL_APPEAR z", "DID_DISAPPEAR alert", "DID_DISAPPEAR b", "DID_APPEAR z"])
        }
    }

    // Item 6: pops and dismiss at the edges of the stack.
    @Test func popAndDismissAtTheEdges() async throws {
        try await onOwnThread {
            var car = try Car()
            #expect(try car.template(.pop(HUPopTemplate())).result.code == .noRootTemplate)
            #expect(try car.template(.popToRoot(HUPopTemplate())).result.code == .noRootTemplate)
            #expect(try car.template(.dismiss(HUPopTemplate())).result.code == .noRootTemplate)
            _ = try car.template(.setRoot(Self.list("root")))
            #expect(try car.template(.pop(HUPopTemplate())).result.code == .invalidPosition)
            let atRoot = try car.template(.popToRoot(HUPopTemplate()))
            #expect(atRoot.result.code == .ok && atRoot.lifecycle.isEmpty)
            #expect(atRoot.result.templateShown.templateID == "root" && atRoot.result.templateShown.depth == 1)
            _ = try car.template(.push(Self.list("next")))
            let toTop = try car.template(.popTo("next"))
            #expect(toTop.result.code == .ok && toTop.lifecycle.isEmpty && toTop.result.templateShown.depth == 2)
            #expect(try car.template(.dismiss(HUPopTemplate())).result.code == .nothingPresented)
        }
    }

    // Item 7: the shared now-playing template's id and its operations.
    @Test func nowPlayingHasOneIdAndNeedsNoRootForItsContent() async throws {
        try await onOwnThread {
            var car = try Car()
            #expect(try car.template(.updateNowPlaying(HUNowPlayingTemplate.with { $0.title = "Song" })).result.code == .ok)
            #expect(try car.template(.showNowPlaying(HUShowNowPlaying())).result.code == .noRootTemplate)
            _ = try car.template(.setRoot(Self.list("root")))
            let wrongID = HUTemplate.with { $0.id = "np"; $0.nowPlaying = HUNowPlayingTemplate() }
            #expect(try car.template(.push(wrongID)).result.code == .invalidTemplate)
            let listNamedNowPlaying = Self.list("now-playing")
            #expect(try car.template(.push(listNamedNowPlaying)).result.code == .invalidTemplate)
            let shown = try car.template(.showNowPlaying(HUShowNowPlaying()))
            #expect(shown.result.templateShown.templateID == "now-playing")
            #expect(shown.lifecycle.contains("DID_APPEAR now-playing"))
            // Already on top: nothing changes.
            let again = try car.template(.showNowPlaying(HUShowNowPlaying()))
            #expect(again.result.code == .ok && again.lifecycle.isEmpty)
        }
    }

    @Test func showNowPlayingWithNothingSetShowsAnEmptyTemplate() async throws {
        try await onOwnThread {
            var car = try Car()
            _ = try car.template(.setRoot(Self.list("root")))
            #expect(try car.template(.showNowPlaying(HUShowNowPlaying())).result.code == .ok)
            var top: HUTemplate?
            while top?.id != "now-playing" {
                if case .screenUpdate(let update) = try car.hmi.readEnvelope().body, case .full(let screen) = update.change { top = screen.top }
            }
            #expect(top?.nowPlaying == HUNowPlayingTemplate())
        }
    }

    // Item 8: an update that changes nothing sends no ScreenUpdate; the sequence does not move.
    @Test func unchangedUpdateSendsNoScreenUpdate() async throws {
        try await onOwnThread {
            var car = try Car()
            _ = try car.template(.setRoot(Self.list("root")))
            var sequence: UInt64 = 0
            while sequence == 0 {
                if case .screenUpdate(let update) = try car.hmi.readEnvelope().body, case .full(let screen) = update.change, screen.top.id == "root" {
                    sequence = update.sequence
                }
            }
            #expect(try car.template(.update(Self.list("root"))).result.code == .ok)
            var changed = Self.list("root")
            changed.list.title = "Changed"
            #expect(try car.template(.update(changed)).result.code == .ok)
            guard case .screenUpdate(let next) = try car.hmi.readEnvelope().body else { Issue.record("expected a ScreenUpdate"); return }
            #expect(next.sequence == sequence + 1)
            guard case .diff(let diff) = next.change else { Issue.record("expected a diff"); return }
            #expect(diff.changes.map(\.title) == ["Changed"])
        }
    }

    // Item 9: legacy-only categories are accepted but have no icon and cannot be launched.
    @Test func legacyCategoriesAreAcceptedWithoutAnIcon() async throws {
        try await onOwnThread {
            let apps = [
                RequestErrorTests.app("com.example.media", entitlements: ["com.apple.developer.playable-content"]),
                RequestErrorTests.app("com.example.chat", entitlements: ["com.apple.developer.carplay-messaging"]),
            ]
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let decisions = try RequestErrorTests.announce(phone, apps).1.appDecisions.decisions
            #expect(decisions.map(\.accepted) == [true, true])
            #expect(decisions.map(\.category) == [.legacyAudio, .legacyMessaging])
            var home: HUHomeScreen?
            while home?.deviceName.isEmpty ?? true {
                if case .homeScreen(let screen) = try hmi.readEnvelope().body { home = screen }
            }
            #expect(home?.icons.isEmpty == true)
            #expect(try RequestErrorTests.launch(hmi, "com.example.media").1.code == .appNotLaunchable)
            #expect(try RequestErrorTests.launch(hmi, "com.example.chat", requestID: 3).1.code == .appNotLaunchable)
        }
    }

    // Item 10: which error wins when several apply.
    @Test func checkOrderOfPhoneRequests() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let complete = HUEnvelope.OneOf_Body.completeEvent(HUCompleteEvent.with { $0.appID = "com.example.app"; $0.eventID = 1 })
            try phone.send(complete, requestID: 1)
            #expect(try phone.readResult().result.code == .noPhone)
            _ = try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.app")], requestID: 2)
            let unknown = HUEnvelope.OneOf_Body.completeEvent(HUCompleteEvent.with { $0.appID = "com.example.other"; $0.eventID = 1 })
            try phone.send(unknown, requestID: 3)
            #expect(try phone.readResult().result.code == .unknownApp)
            try phone.send(.appClosed(HUAppClosed.with { $0.appID = "com.example.other" }), requestID: 4)
            #expect(try phone.readResult().result.code == .unknownApp)
            // Announced, never launched: its scene does not exist.
            let request = HUTemplateRequest.with { $0.appID = "com.example.app"; $0.sceneID = 0; $0.setRoot = Self.list("root") }
            try phone.send(.templateRequest(request), requestID: 5)
            #expect(try phone.readResult().result.code == .notConnected)
            // A second phone speaking for the first phone's app: UNKNOWN_APP (its apps are not known).
            let second = try daemon.connectTCP()
            try second.handshake(role: .phone)
            try second.send(.templateRequest(request), requestID: 1)
            #expect(try second.readResult().result.code == .unknownApp)
        }
    }

    @Test func checkOrderOfLaunchApp() async throws {
        try await onOwnThread {
            let apps = [RequestErrorTests.app("com.example.app"), RequestErrorTests.app("com.example.legacy", entitlements: ["com.apple.developer.playable-content"])]
            var car = try Car(apps: apps, launch: false)
            func launch(_ appID: String, _ kind: HUSceneKind) throws -> HUErrorCode {
                try car.request(car.hmi, .launchApp(HULaunchApp.with { $0.appID = appID; $0.kind = kind })).result.code
            }
            // An unknown enum value is found before any rule looks at the request (sections 9, 10.3, 16.5).
            #expect(try launch("com.example.nope", .UNRECOGNIZED(77)) == .invalidArgument)
            #expect(try launch("com.example.nope", .main) == .unknownApp)
            #expect(try launch("com.example.legacy", .UNRECOGNIZED(77)) == .invalidArgument)
            #expect(try launch("com.example.legacy", .dashboard) == .appNotLaunchable)
            #expect(try launch("com.example.app", .dashboard) == .notAllowedForCategory)
            #expect(try launch("com.example.app", .unspecified) == .ok)
        }
    }

    @Test func goBackUnderAModalIsInvalidPositionAndInputUnderItUnknownTemplate() async throws {
        try await onOwnThread {
            var car = try Car()
            _ = try car.template(.setRoot(Self.list("root")))
            _ = try car.template(.push(Self.list("next")))
            _ = try car.template(.present(TemplateSessionErrorTests.alert("alert")))
            #expect(try car.input(HUHmiInput.with { $0.goBack = HUGoBack() }).code == .invalidPosition)
            #expect(try car.input(HUHmiInput.with { $0.templateID = "next"; $0.selectItem = HUItemSelected.with { $0.itemID = "next-0" } }).code == .unknownTemplate)
            #expect(try car.input(HUHmiInput.with { $0.templateID = "alert"; $0.pressButton = HUButtonPressed.with { $0.buttonID = "alert-ok" } }).code == .ok)
        }
    }

    // Item 11: the refresh clock starts at the first update; set_root does not count; update_item does.
    @Test func refreshLimitStartsAtTheFirstUpdateAndCountsItemUpdates() async throws {
        try await onOwnThread {
            var car = try Car(apps: [RequestErrorTests.app("com.example.drive", entitlements: ["com.apple.developer.carplay-driving-task"])])
            #expect(try car.template(.setRoot(Self.list("root")), app: "com.example.drive").result.code == .ok)
            #expect(try car.template(.update(Self.list("root")), app: "com.example.drive").result.code == .ok)
            let second = try car.template(.update(Self.list("root")), app: "com.example.drive").result
            #expect(second.code == .rateLimited && second.limit == "refresh.interval_ms" && second.limitValue == 10_000)
            let item = HUItemUpdate.with { $0.templateID = "root"; $0.item = HUListItem.with { $0.id = "root-0"; $0.general = HUGeneralItem.with { $0.text = "x" } } }
            #expect(try car.template(.updateItem(item), app: "com.example.drive").result.code == .rateLimited)
        }
    }

    // Item 12: refusals with their codes.
    @Test func appIconTooLargeRefusesTheApp() async throws {
        try await onOwnThread {
            var app = RequestErrorTests.app("com.example.big")
            app.icon = HUImage.with { $0.asset = "big-icon"; $0.widthPx = 500; $0.heightPx = 500 }
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let decisions = try RequestErrorTests.announce(phone, [app, RequestErrorTests.app("com.example.app")]).1.appDecisions.decisions
            #expect(decisions[0].accepted == false && decisions[0].code == .imageTooLarge)
            #expect(decisions[1].accepted == true)
            #expect(try RequestErrorTests.launch(hmi, "com.example.big").1.code == .appNotLaunchable)
        }
    }

    @Test func refusalsOfTemplatesAndInput() async throws {
        try await onOwnThread {
            var car = try Car()
            // A tab whose content the category may not use (information in an audio app).
            var info = HUTemplate.with { $0.id = "info"; $0.information = HUInformationTemplate.with { $0.title = "Info" } }
            info.information.items = [HUInformationItem.with { $0.title = "a"; $0.detail = "b" }]
            let tabs = HUTemplate.with { template in
                template.id = "tabs"
                template.tabBar = HUTabBarTemplate.with { $0.tabs = [HUTab.with { $0.id = "t1"; $0.title = "T"; $0.template = info }] }
            }
            #expect(try car.template(.setRoot(tabs)).result.code == .notAllowedForCategory)
            // A disabled item cannot be selected.
            var root = Self.list("root")
            root.list.sections[0].items[0].general.disabled = true
            _ = try car.template(.setRoot(root))
            #expect(try car.input(HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = "root-0" } }).code == .invalidArgument)
            // A template id already on the stack.
            _ = try car.template(.push(Self.list("next")))
            #expect(try car.template(.push(Self.list("root"))).result.code == .invalidTemplate)
        }
    }

    // Item 14 and 16: the daemon's PING carries its monotonic clock, and none comes before Welcome.
    @Test func noPingBeforeWelcomeAndPingPayloadIsMillisecondsBigEndian() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["heartbeatIntervalMs": 100, "heartbeatTimeoutMs": 5000])
            let client = try daemon.connectUnix()
            #expect(throws: RawClientError.self) { _ = try client.readFrame(timeout: 0.4) }
            try client.handshake(role: .phone)
            var stamps: [UInt64] = []
            while stamps.count < 3 {
                guard let frame = try client.readFrame(), frame.kind == FrameKind.ping.rawValue else { continue }
                #expect(frame.payload.count == 8)
                stamps.append(frame.payload.reduce(0) { $0 << 8 | UInt64($1) })
                try client.sendFrame(.pong, payload: frame.payload)
            }
            // Milliseconds: about the 100 ms interval apart (generous bounds for a busy machine).
            #expect(stamps[1] > stamps[0] && stamps[2] > stamps[1])
            #expect(stamps[2] - stamps[0] >= 150 && stamps[2] - stamps[0] < 5000)
        }
    }

    // Item 15: the section cap in force is told to the app.
    @Test func sectionCapIsToldInSceneConnectedAndSessionConfiguration() async throws {
        try await onOwnThread {
            var car = try Car()
            let state = HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = true } }
            #expect(try car.request(car.hmi, .setVehicleState(state)).result.code == .ok)
            var configuration: HUSessionConfiguration?
            while configuration == nil {
                if case .sessionConfiguration(let c) = try car.phone.readEnvelope().body { configuration = c }
            }
            #expect(configuration?.maxListItems == 12 && configuration?.maxListSections == 12)
            // A scene connected while driving is told at once.
            #expect(try RequestErrorTests.launch(car.hmi, "com.example.app", requestID: 99).1.code == .ok)
            #expect(try car.request(car.phone, .appClosed(HUAppClosed.with { $0.appID = "com.example.app" })).result.code == .ok)
            #expect(try RequestErrorTests.launch(car.hmi, "com.example.app", requestID: 100).1.code == .ok)
            let scene = try Car.sceneConnected(car.phone)
            #expect(scene.maxListItems == 12 && scene.maxListSections == 12)
        }
    }
}

extension SpecDecisionTests {
    // SetVehicleState is checked whole before any app is told.
    @Test func vehicleStateWithUnknownStyleOrImpossibleSafeAreaIsRefused() async throws {
        try await onOwnThread {
            var car = try Car()
            let style = HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.contentStyle = .UNRECOGNIZED(42) } }
            #expect(try car.request(car.hmi, .setVehicleState(style)).result.code == .invalidArgument)
            let insets = HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.safeArea = HUInsets.with { $0.left = 4_294_967_295 } } }
            #expect(try car.request(car.hmi, .setVehicleState(insets)).result.code == .invalidArgument)
            let fine = HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.safeArea = HUInsets.with { $0.left = 80 } } }
            #expect(try car.request(car.hmi, .setVehicleState(fine)).result.code == .ok)
            // Only the accepted change reached the app.
            var configuration: HUSessionConfiguration?
            while configuration == nil {
                if case .sessionConfiguration(let c) = try car.phone.readEnvelope().body { configuration = c }
            }
            #expect(configuration?.safeArea.left == 80)
        }
    }
}
