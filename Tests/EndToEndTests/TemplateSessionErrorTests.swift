import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// The interface controller's typed errors, provoked through the SDK against
/// the real daemon over its Unix socket. Each test starts from a launched
/// app whose main scene is connected.
@Suite("Template session errors over a real socket", .serialized)
struct TemplateSessionErrorTests {
    struct Session {
        let daemon: TestDaemon
        let phone: PhoneSession
        let hmi: HMISession
        let controller: InterfaceController
    }

    static func list(_ id: String, items: Int = 2) -> HUTemplate {
        HUTemplate.with { template in
            template.id = id
            template.list = HUListTemplate.with {
                $0.title = id
                $0.sections = [HUListSection.with { section in
                    section.id = "s"
                    section.items = (0..<items).map { index in
                        HUListItem.with { $0.id = "\(id)-\(index)"; $0.general = HUGeneralItem.with { $0.text = "Item \(index)" } }
                    }
                }]
            }
        }
    }

    static func alert(_ id: String) -> HUTemplate {
        HUTemplate.with {
            $0.id = id
            $0.alert = HUAlertTemplate.with {
                $0.titleVariants = ["Alert"]
                $0.actions = [HUTextButton.with { $0.id = "\(id)-ok"; $0.title = "OK" }]
            }
        }
    }

    static func start(entitlement: String = "com.apple.developer.carplay-audio", limits: [String: UInt64] = [:]) async throws -> Session {
        // Launching blocks (it waits for the daemon's "ready" line): on a thread
        // of its own, not Swift Testing's cooperative pool (RELIABILITY.md).
        let daemon = try await onOwnThread(gated: false) { try TestDaemon.launch(limits: limits) }
        let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
        let hmi = try await HMISession.connect(to: endpoint, name: "test-hmi")
        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "test-phone")
        let app = HUAppInfo.with { $0.appID = "com.example.app"; $0.displayName = "App"; $0.entitlements = [entitlement] }
        let decisions = try await phone.announce([app])
        #expect(decisions.first?.accepted == true)
        try await hmi.launch(app.appID)
        let controller = try await phone.waitForScene(appID: app.appID)
        return Session(daemon: daemon, phone: phone, hmi: hmi, controller: controller)
    }

    /// Runs `body`, expecting it to throw the car's typed error with `code`.
    func expectError(_ code: HUErrorCode, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            try await body()
            Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
        } catch let error as HeadUnitError {
            #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func noRootTemplateAndUnknownTemplateAndInvalidPosition() async throws {
        let s = try await Self.start()
        await expectError(.noRootTemplate) { _ = try await s.controller.pushTemplate(Self.list("early")) }
        _ = try await s.controller.setRootTemplate(Self.list("root"))
        await expectError(.unknownTemplate) { _ = try await s.controller.popToTemplate("nowhere") }
        await expectError(.invalidPosition) { _ = try await s.controller.popTemplate() }
        // An alert is presented, never pushed.
        await expectError(.invalidPosition) { _ = try await s.controller.pushTemplate(Self.alert("pushed-alert")) }
    }

    @Test func alreadyPresentedAndNothingPresented() async throws {
        let s = try await Self.start()
        _ = try await s.controller.setRootTemplate(Self.list("root"))
        await expectError(.nothingPresented) { _ = try await s.controller.dismissTemplate() }
        _ = try await s.controller.presentTemplate(Self.alert("first"))
        await expectError(.alreadyPresented) { _ = try await s.controller.presentTemplate(Self.alert("second")) }
        _ = try await s.controller.dismissTemplate()
    }

    @Test func unknownItemAndInvalidArgumentFromTheHMI() async throws {
        let s = try await Self.start()
        _ = try await s.controller.setRootTemplate(Self.list("root"))
        await expectError(.unknownItem) { try await s.hmi.selectItem("no-such-item", on: "root") }
        await expectError(.unknownTemplate) { try await s.hmi.selectItem("root-0", on: "stale") }
        await expectError(.invalidArgument) { try await s.hmi.input(HUHmiInput()) }
    }

    @Test func invalidArgumentForAProgressOutOfRange() async throws {
        let s = try await Self.start()
        var template = Self.list("root")
        template.list.sections[0].items[0].general.showsProgress = true
        template.list.sections[0].items[0].general.progress = 1.5
        await expectError(.invalidArgument) { _ = try await s.controller.setRootTemplate(template) }
    }

    /// A list's item images are checked, every one, whatever else the list
    /// holds (the rules always run, issue 49). An image with no source is still one.
    @Test func aListsItemImagesAreChecked() async throws {
        let s = try await Self.start()
        var huge = Self.list("root")
        huge.list.sections[0].items[1].general.image = HUImage.with { $0.asset = "huge"; $0.widthPx = 4000; $0.heightPx = 4000 }
        await expectError(.imageTooLarge) { _ = try await s.controller.setRootTemplate(huge) }
        var sourceless = Self.list("root")
        sourceless.list.sections[0].items[0].general.accessoryImage = HUImage()
        await expectError(.invalidArgument) { _ = try await s.controller.setRootTemplate(sourceless) }
        _ = try await s.controller.setRootTemplate(Self.list("root"))
    }

    @Test func imageTooLarge() async throws {
        let s = try await Self.start()
        var template = HUTemplate()
        template.id = "grid"
        template.grid = HUGridTemplate.with {
            $0.title = "Grid"
            $0.buttons = [HUGridButton.with {
                $0.id = "huge"
                $0.titleVariants = ["Huge"]
                $0.image = HUImage.with { $0.asset = "huge"; $0.widthPx = 4000; $0.heightPx = 4000 }
            }]
        }
        await expectError(.imageTooLarge) { _ = try await s.controller.setRootTemplate(template) }
    }

    @Test func rateLimitedForDrivingTaskUpdates() async throws {
        let s = try await Self.start(entitlement: "com.apple.developer.carplay-driving-task")
        _ = try await s.controller.setRootTemplate(Self.list("tasks"))
        var updated = Self.list("tasks")
        updated.list.title = "Tasks (1)"
        _ = try await s.controller.updateTemplate(updated)
        updated.list.title = "Tasks (2)"
        await expectError(.rateLimited) { _ = try await s.controller.updateTemplate(updated) }
    }

    @Test func completionTimeoutAndUnknownEvent() async throws {
        let s = try await Self.start(limits: ["completionTimeoutMs": 200])
        _ = try await s.controller.setRootTemplate(Self.list("root"))
        try await s.hmi.selectItem("root-0", on: "root")
        let selected = await s.phone.nextEvent(timeout: .seconds(3)) {
            if case .appEvent(let event) = $0, case .itemSelected = event.kind { return true }
            return false
        }
        guard case .appEvent(let event)? = selected else {
            Issue.record("no item_selected event")
            return
        }
        // The app never answers in time: it is told, then its late answer is refused.
        let timedOut = await s.phone.nextEvent(timeout: .seconds(3)) {
            if case .appEvent(let event) = $0, case .timedOut = event.kind { return true }
            return false
        }
        #expect(timedOut != nil)
        await expectError(.completionTimeout) { try await s.phone.completeEvent(appID: "com.example.app", eventID: event.eventID) }
        await expectError(.unknownEvent) { try await s.phone.completeEvent(appID: "com.example.app", eventID: 987_654) }
    }

    @Test func notConnectedAfterTheCarClosesTheApp() async throws {
        let s = try await Self.start()
        _ = try await s.controller.setRootTemplate(Self.list("root"))
        try await s.hmi.closeApp("com.example.app")
        _ = await s.phone.nextEvent(timeout: .seconds(3)) {
            if case .sceneDisconnected = $0 { return true }
            return false
        }
        await expectError(.notConnected) { _ = try await s.controller.pushTemplate(Self.list("late")) }
    }
}

/// Every category, played from its scenario file over a real socket: each
/// reaches the templates it may use and gets the typed error for each one it
/// may not, for the depth limit and for every count limit.
@Suite("Category scenarios over a real socket", .serialized)
struct CategoryScenarioTests {
    @Test(arguments: ["audio", "communication", "navigation", "parking", "quick-ordering", "driving-task"])
    func category(_ name: String) async throws {
        let report = try await Self.play(name)
        #expect(report.steps > 20)
    }

    /// Seed 003's three automaker apps, their home screen and their sessions.
    @Test func automakerAppsOfSeed003() async throws {
        let report = try await Self.play("automaker")
        #expect(report.steps == 9)
    }

    /// Plays scenarios/NAME.json against a fresh daemon; every step must pass.
    static func play(_ name: String) async throws -> ScenarioPlayer.Report {
        let daemon = try await TestDaemon.start()
        defer { daemon.stop() }
        var options = ScenarioPlayer.Options(endpoint: daemon.unixEndpoint)
        options.hmiEndpoint = daemon.unixEndpoint
        var lines: [String] = []
        options.log = { lines.append($0) }
        let report = try await ScenarioPlayer(options: options).play(try ScenarioPlayer.load(path: scenarioPath("\(name).json")))
        #expect(report.succeeded, "\(lines.joined(separator: "\n"))")
        #expect(report.passed == report.steps)
        return report
    }
}

/// Every error code in errors.proto is provoked by some test in this target.
@Suite struct ErrorCodeCoverageTests {
    @Test func everyErrorCodeHasAnEndToEndTest() async throws {
        try await onOwnThread {
            let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            let root = here.deletingLastPathComponent().deletingLastPathComponent()
            let proto = try String(contentsOf: root.appendingPathComponent("Protocol/errors.proto"), encoding: .utf8)
            let names = proto.split(separator: "\n").compactMap { line -> String? in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.hasPrefix("ERROR_CODE_"), !trimmed.hasPrefix("ERROR_CODE_OK") else { return nil }
                return String(trimmed.prefix { $0 != " " && $0 != "=" })
            }
            #expect(names.count > 30)
            var sources = ""
            for file in try FileManager.default.contentsOfDirectory(atPath: here.path) where file.hasSuffix(".swift") {
                sources += try String(contentsOf: here.appendingPathComponent(file), encoding: .utf8)
            }
            // Scenario files run by CategoryScenarioTests count too.
            for file in try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("scenarios").path) where file.hasSuffix(".json") {
                sources += try String(contentsOf: root.appendingPathComponent("scenarios/\(file)"), encoding: .utf8)
            }
            let missing = names.filter { name in
                // ERROR_CODE_DEPTH_EXCEEDED -> .depthExceeded, as the tests spell it.
                let words = name.dropFirst("ERROR_CODE_".count).lowercased().split(separator: "_")
                let swiftName = "." + words.first! + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
                // A test named after the code counts (slowConsumerIsCutOff: its Goodbye is best effort).
                return !sources.contains(name) && !sources.contains("func " + swiftName.dropFirst()) && !sources.contains(swiftName + ")") && !sources.contains(swiftName + ",")
                    && !sources.contains(swiftName + " ") && !sources.contains(swiftName + "]")
            }
            #expect(missing.isEmpty, "error codes with no end-to-end test: \(missing)")
        }
    }
}
