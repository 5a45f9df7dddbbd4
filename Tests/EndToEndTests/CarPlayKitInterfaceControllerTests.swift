@testable import CarPlayKit
import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// CarPlayKit's interface controller in-process against the real daemon:
/// every stack operation in both forms, the car's error codes as `CPError`,
/// refused in-place updates, the car's back button, lifecycle and disconnect.
@Suite("CarPlayKit interface controller against the daemon", .serialized)
@MainActor
struct CarPlayKitInterfaceControllerTests {
    final class Delegate: CPTemplateApplicationSceneDelegate, CPInterfaceControllerDelegate, @unchecked Sendable {
        let connected = AsyncStream<CPInterfaceController>.makeStream()
        private let lock = NSLock()
        nonisolated(unsafe) private var appearedIDs: [String] = []
        nonisolated(unsafe) private var isDisconnected = false

        nonisolated var appeared: [String] { lock.withLock { appearedIDs } }
        nonisolated var disconnected: Bool { lock.withLock { isDisconnected } }

        func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                      didConnect interfaceController: CPInterfaceController) {
            interfaceController.delegate = self
            connected.continuation.yield(interfaceController)
        }

        func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                      didDisconnectInterfaceController interfaceController: CPInterfaceController) {
            lock.withLock { isDisconnected = true }
        }

        func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool) {
            lock.withLock { appearedIDs.append(aTemplate.identifier) }
        }
    }

    static func list(_ id: String) -> CPListTemplate {
        CPListTemplate(title: id, sections: [CPListSection(items: [CPListItem(text: "\(id) item", detailText: nil, identifier: "\(id)-item")])],
                       identifier: id)
    }

    /// Calls a completion-handler form and answers what it handed over.
    static func callback(_ body: (@escaping @Sendable (Bool, (any Error)?) -> Void) -> Void) async -> (Bool, CPError?) {
        await withCheckedContinuation { continuation in
            body { success, error in continuation.resume(returning: (success, error.map { CPError($0) })) }
        }
    }

    static func eventually(_ timeout: Double = 30, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return condition()
    }

    static func expectCode(_ code: CPError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(code), the car accepted", sourceLocation: sourceLocation)
        } catch let error as CPError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a CPError: \(error)", sourceLocation: sourceLocation)
        }
    }

    /// The car sends a request's lifecycle events before its Result, but the
    /// event task and the request queue resume separately on the main actor.
    /// A CI run on a busy machine had the answers to set_root and two pushes
    /// applied first; the old root's late WILL_APPEAR then read as the car's
    /// back button and the mirrored stack lost a template (["root",
    /// "third"]). Holding the main actor while set_root's events and answer
    /// come back leaves both waiting for it, to run in whatever order the
    /// executor picks; answers wait for the events before them, so the
    /// mirror stays right either way.
    @Test func lateLifecycleEventsNeverReadAsTheCarsBackButton() async throws {
        let daemon = try await onOwnThread(gated: false) { @Sendable in try TestDaemon.launch() }
        defer { _ = try? daemon.terminate() }
        let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
        let app = CPApplication(bundleIdentifier: "com.test.audio", displayName: "Audio", entitlements: [.audio])
        let delegate = Delegate()
        app.sceneDelegate = delegate
        try await app.connect(to: endpoint, deviceName: "Test iPhone")
        let hmi = try await HMISession.connect(to: endpoint)
        defer { Task { await hmi.close() } }
        try await hmi.launch("com.test.audio")
        var connections = delegate.connected.stream.makeAsyncIterator()
        let controller = try #require(await connections.next())

        let root = Self.list("root"), second = Self.list("second")
        // Both queued now: set_root goes out first (the push waits for its answer);
        // the busy task, queued after them, holds the main actor meanwhile.
        controller.setRootTemplate(root, animated: false, completion: nil)
        controller.pushTemplate(second, animated: true, completion: nil)
        let busy = Task { @MainActor in _ = usleep(500_000) }
        await busy.value
        try await controller.waitForPendingUpdates()
        #expect(controller.templates.map(\.identifier) == ["root", "second"])
        #expect(controller.topTemplate === second)
        #expect(await Self.eventually { delegate.appeared == ["root", "second"] })
        // The car's own back button still pops the mirror.
        try await hmi.goBack(on: "second")
        #expect(await Self.eventually { controller.templates.map(\.identifier) == ["root"] })
        await app.disconnect()
    }

    @Test("stack operations in both forms, the car's codes, refused updates, back button, lifecycle, disconnect")
    func interfaceController() async throws {
        let daemon = try await onOwnThread(gated: false) { @Sendable in try TestDaemon.launch() }
        defer { _ = try? daemon.terminate() }
        let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
        let app = CPApplication(bundleIdentifier: "com.test.audio", displayName: "Audio", entitlements: [.audio])
        let delegate = Delegate()
        app.sceneDelegate = delegate
        try await app.connect(to: endpoint, deviceName: "Test iPhone")
        let hmi = try await HMISession.connect(to: endpoint)
        defer { Task { await hmi.close() } }
        try await hmi.launch("com.test.audio")
        var connections = delegate.connected.stream.makeAsyncIterator()
        let controller = try #require(await connections.next())

        await Self.expectCode(.noRootTemplate) { try await controller.pushTemplate(Self.list("early"), animated: true) }

        let root = Self.list("root")
        #expect(try await controller.setRootTemplate(root, animated: false))
        let second = Self.list("second")
        let pushed = await Self.callback { controller.pushTemplate(second, animated: true, completion: $0) }
        #expect(pushed.0 && pushed.1 == nil)
        try await controller.pushTemplate(Self.list("third"), animated: true)
        #expect(controller.templates.map(\.identifier) == ["root", "second", "third"])

        let popped = await Self.callback { controller.popTemplate(animated: true, completion: $0) }
        #expect(popped.0 && controller.topTemplate === second)
        try await controller.pushTemplate(Self.list("fourth"), animated: true)
        try await controller.pop(to: second, animated: true)
        #expect(controller.topTemplate === second)
        try await controller.pushTemplate(Self.list("fifth"), animated: true)
        let poppedToSecond = await Self.callback { controller.pop(to: second, animated: true, completion: $0) }
        #expect(poppedToSecond.0 && controller.topTemplate === second)
        let poppedToRoot = await Self.callback { controller.popToRootTemplate(animated: true, completion: $0) }
        #expect(poppedToRoot.0 && controller.topTemplate === root)
        try await controller.pushTemplate(Self.list("sixth"), animated: true)
        try await controller.popToRootTemplate(animated: true)
        #expect(controller.templates.count == 1)
        await Self.expectCode(.invalidPosition) { try await controller.popTemplate(animated: true) }  // pop at the root
        #expect(controller.topTemplate === root)

        // The category's depth, as the car counts it.
        #expect(controller.maximumStackDepth > 1)
        for index in 1..<controller.maximumStackDepth {
            try await controller.pushTemplate(Self.list("deep-\(index)"), animated: false)
        }
        await Self.expectCode(.depthExceeded) { try await controller.pushTemplate(Self.list("too-deep"), animated: false) }
        let depthRefused = await Self.callback { controller.pushTemplate(Self.list("too-deep-2"), animated: false, completion: $0) }
        #expect(!depthRefused.0 && depthRefused.1?.code == .depthExceeded && depthRefused.1?.limitValue == UInt32(controller.maximumStackDepth))
        try await controller.popToRootTemplate(animated: false)

        // Modal templates.
        let alert = CPAlertTemplate(titleVariants: ["Sure?"], actions: [CPAlertAction(title: "OK", style: .default) { _ in }], identifier: "alert")
        await Self.expectCode(.invalidPosition) { try await controller.pushTemplate(alert, animated: true) }
        let presented = await Self.callback { controller.presentTemplate(alert, animated: true, completion: $0) }
        #expect(presented.0 && controller.presentedTemplate === alert)
        await Self.expectCode(.alreadyPresented) { try await controller.presentTemplate(Self.list("modal-list"), animated: true) }
        try await controller.dismissTemplate(animated: true)
        #expect(controller.presentedTemplate == nil)
        let dismissed = await Self.callback { controller.dismissTemplate(animated: true, completion: $0) }
        #expect(!dismissed.0 && dismissed.1?.code == .nothingPresented)

        // An in-place update the car refuses surfaces from waitForPendingUpdates with its code.
        root.updateSections([CPListSection(items: [CPListItem(text: "a", detailText: nil, identifier: "dup"),
                                                   CPListItem(text: "b", detailText: nil, identifier: "dup")])])
        await Self.expectCode(.invalidTemplate) { try await controller.waitForPendingUpdates() }
        root.updateSections([CPListSection(items: [CPListItem(text: "plain", detailText: nil, identifier: "plain")])])
        try await controller.waitForPendingUpdates()
        #expect(await hmi.waitForScreen { $0.top.id == "root" && CarPlayKitExampleTests.list($0)?.sections.first?.items.first?.id == "plain" } != nil)

        // An item without a handler: CarPlayKit completes for the app, the spinner stops.
        try await hmi.selectItem("plain", on: "root")
        #expect(await hmi.waitForScreen(timeout: .seconds(1)) { !$0.hasPending } != nil)

        // The car's back button pops without a request: the controller follows.
        try await controller.pushTemplate(Self.list("back-me"), animated: true)
        try await hmi.goBack(on: "back-me")
        #expect(await Self.eventually { controller.topTemplate === root })
        #expect(delegate.appeared.contains("root") && delegate.appeared.contains("back-me"))

        try await hmi.closeApp("com.test.audio")
        #expect(await Self.eventually { delegate.disconnected })
        #expect(app.interfaceController == nil)
        await app.disconnect()
    }

    /// Runs `onDidAppear` in `templateDidAppear` (on CarPlayKit's event task, as an app would).
    final class RaceDelegate: CPTemplateApplicationSceneDelegate, CPInterfaceControllerDelegate, @unchecked Sendable {
        let connected = AsyncStream<CPInterfaceController>.makeStream()
        private let lock = NSLock()
        nonisolated(unsafe) private var changedIDs: Set<String> = []
        nonisolated(unsafe) private var selectedIDs: Set<String> = []
        let onDidAppear: @MainActor (CPTemplate) -> Bool

        init(onDidAppear: @escaping @MainActor (CPTemplate) -> Bool) { self.onDidAppear = onDidAppear }

        nonisolated func changed(_ id: String) -> Bool { lock.withLock { changedIDs.contains(id) } }
        nonisolated func selected(_ id: String) -> Bool { lock.withLock { selectedIDs.contains(id) } }
        nonisolated func select(_ id: String) { _ = lock.withLock { selectedIDs.insert(id) } }

        func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                      didConnect interfaceController: CPInterfaceController) {
            interfaceController.delegate = self
            connected.continuation.yield(interfaceController)
        }

        func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool) {
            if onDidAppear(aTemplate) { _ = lock.withLock { changedIDs.insert(aTemplate.identifier) } }
        }
    }

    /// Issue 29's lost update, provoked deterministically: the car sends a
    /// template's appear events before its answer; the hook holds the answer
    /// until the app's templateDidAppear has changed the template, so the
    /// change is always made before CarPlayKit learns the request succeeded.
    /// Before the fix the change was dropped (the car kept the old items, and a
    /// tap on them completed without a handler).
    @Test("a change made in templateDidAppear before the car's answer reaches the car (set_root, push, item update)")
    func changeBeforeAnswerIsNotLost() async throws {
        let daemon = try await onOwnThread(gated: false) { @Sendable in try TestDaemon.launch() }
        defer { _ = try? daemon.terminate() }
        let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
        let app = CPApplication(bundleIdentifier: "com.test.race", displayName: "Race", entitlements: [.audio])
        let root = Self.list("race-root")
        let pushed = Self.list("race-pushed")
        let delegate = RaceDelegate { template in
            // Only the first time: root appears again after the car's back
            // button, and a second new item would lose the handler set below.
            if template === root, (root.sections.first?.items.first as? CPListItem)?.identifier != "race-fresh" {
                let fresh = CPListItem(text: "fresh", detailText: nil, identifier: "race-fresh")
                root.updateSections([CPListSection(items: [fresh])])
                return true
            }
            if template === pushed, let item = pushed.sections.first?.items.first as? CPListItem {
                item.setText("renamed in didAppear")
                return true
            }
            return false
        }
        app.sceneDelegate = delegate
        try await app.connect(to: endpoint, deviceName: "Test iPhone")
        let hmi = try await HMISession.connect(to: endpoint)
        defer { Task { await hmi.close() } }
        try await hmi.launch("com.test.race")
        var connections = delegate.connected.stream.makeAsyncIterator()
        let controller = try #require(await connections.next())

        // Hold each answer until the app changed the template it shows.
        let heldFor = NSLock()
        nonisolated(unsafe) var expected = "race-root"
        nonisolated(unsafe) var changedBeforeAnswer: [String] = []
        controller.answerWillApply = {
            let id = heldFor.withLock { expected }
            let changed = await Self.eventually(5) { delegate.changed(id) }
            heldFor.withLock { if changed && controller.templates.allSatisfy({ $0.identifier != id }) { changedBeforeAnswer.append(id) } }
        }

        try await controller.setRootTemplate(root, animated: false)
        try await controller.waitForPendingUpdates()
        #expect(await hmi.waitForScreen { $0.top.id == "race-root" && CarPlayKitExampleTests.list($0)?.sections.first?.items.first?.id == "race-fresh" } != nil)
        heldFor.withLock { expected = "race-pushed" }
        try await controller.pushTemplate(pushed, animated: true)
        controller.answerWillApply = nil
        #expect(heldFor.withLock { changedBeforeAnswer } == ["race-root", "race-pushed"])
        try await controller.waitForPendingUpdates()

        #expect(await hmi.waitForScreen { $0.top.id == "race-pushed" && CarPlayKitExampleTests.list($0)?.sections.first?.items.first?.general.text == "renamed in didAppear" } != nil)
        try await hmi.goBack(on: "race-pushed")
        #expect(await hmi.waitForScreen { $0.top.id == "race-root" && CarPlayKitExampleTests.list($0)?.sections.first?.items.first?.id == "race-fresh" } != nil)
        // The car's item is the app's: a tap reaches its handler.
        (root.sections.first?.items.first as? CPListItem)?.handler = { item, completion in
            delegate.select(item.identifier)
            completion()
        }
        try await hmi.selectItem("race-fresh", on: "race-root")
        #expect(await Self.eventually { delegate.selected("race-fresh") })
        await app.disconnect()
    }

    @Test("a refused app: connect throws the car's code")
    func refusedApp() async throws {
        let daemon = try await onOwnThread(gated: false) { @Sendable in try TestDaemon.launch() }
        defer { _ = try? daemon.terminate() }
        let app = CPApplication(bundleIdentifier: "com.test.nothing", displayName: "Nothing",
                                entitlements: [CPEntitlement(rawValue: "com.apple.developer.carplay-teleport")])
        await Self.expectCode(.entitlementRefused) { try await app.connect(to: .unix(path: daemon.unixSocketPath)) }
    }
}
