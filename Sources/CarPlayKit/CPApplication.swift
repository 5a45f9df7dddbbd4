/// Apple's framework brings Foundation (`NSObject`, `Date`, `Measurement`, `DispatchQueue`) with `import CarPlay`.
@_exported import Foundation
/// Apps name the car by endpoint (`.unix(path:)`, `.default`) without importing HeadUnitClient.
@_exported import enum HeadUnitClient.HeadUnitEndpoint
import HeadUnitClient
import HeadUnitWire
import NIOConcurrencyHelpers

/// A CarPlay entitlement the app claims (the `com.apple.developer.carplay-*`
/// keys of an app's entitlements file). The car decides the app's category from them.
public struct CPEntitlement: RawRepresentable, Hashable, Sendable {
    /// The entitlement key as the car reads it.
    public var rawValue: String
    /// Wraps a key.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Audio apps (lists, tab bar, now playing).
    public static let audio = CPEntitlement(rawValue: "com.apple.developer.carplay-audio")
    /// Communication apps (messages and calls).
    public static let communication = CPEntitlement(rawValue: "com.apple.developer.carplay-communication")
    /// Navigation apps (map template, trips, dashboard and cluster).
    public static let maps = CPEntitlement(rawValue: "com.apple.developer.carplay-maps")
    /// EV charging apps.
    public static let charging = CPEntitlement(rawValue: "com.apple.developer.carplay-charging")
    /// Parking apps.
    public static let parking = CPEntitlement(rawValue: "com.apple.developer.carplay-parking")
    /// Quick food ordering apps.
    public static let quickOrdering = CPEntitlement(rawValue: "com.apple.developer.carplay-quick-ordering")
    /// Fueling apps.
    public static let fueling = CPEntitlement(rawValue: "com.apple.developer.carplay-fueling")
    /// Driving task apps.
    public static let drivingTask = CPEntitlement(rawValue: "com.apple.developer.carplay-driving-task")
    /// Public safety apps.
    public static let publicSafety = CPEntitlement(rawValue: "com.apple.developer.carplay-public-safety")
    /// Automaker apps: talk to the vehicle's own accessory protocols.
    public static let protocols = CPEntitlement(rawValue: "com.apple.developer.carplay-protocols")
}

/// One CarPlay app connected to the car: stands in for the app process, its
/// `Info.plist` scene manifest and entitlements (ours: CarPlay gets these
/// from the app bundle; a headunitd app says them when it connects).
///
///     let app = CPApplication(bundleIdentifier: "com.example.radio", displayName: "Radio", entitlements: [.audio])
///     app.sceneDelegate = sceneDelegate
///     try await app.connect(deviceName: "Alice's iPhone")
///     await app.run()   // until the car or you disconnect
///
/// Every scene delegate call and every handler runs on the main actor, in
/// the order the car sent them, as CarPlay runs them on the main thread
/// (`DispatchQueue.main` work runs in step with them).
@MainActor
public final class CPApplication {
    /// The app's id (bundle identifier), unique on the phone.
    public let bundleIdentifier: String
    /// The name under the app's icon.
    public let displayName: String
    /// The entitlements the app claims.
    public let entitlements: [CPEntitlement]
    /// Automaker apps: the accessory protocols the app speaks.
    public let accessoryProtocols: [String]
    /// The app icon (60 x 60 points at most).
    public let icon: CPImage?

    private var sceneDelegateRef = Weak<AnyObject>(nil)
    private var dashboardDelegateRef = Weak<AnyObject>(nil)
    private var clusterDelegateRef = Weak<AnyObject>(nil)
    /// Under a lock, not the main actor: External Accessory sessions open from any thread, as on iOS.
    private let phoneBox = NIOLockedValueBox<PhoneSession?>(nil)
    private var phoneSession: PhoneSession? {
        get { phoneBox.withLockedValue { $0 } }
        set { phoneBox.withLockedValue { $0 = newValue } }
    }
    private var carDecision: HUAppDecision?
    private var mainScene: CPTemplateApplicationScene?
    private var dashboardScene: CPTemplateApplicationDashboardScene?
    private var clusterScene: CPTemplateApplicationInstrumentClusterScene?
    private var eventTask: Task<Void, Never>?
    /// This connection's events as the app handled them, for answers applied in the car's order.
    var eventOrder = EventOrder()
    /// A RemoteCommands request is queued and not sent yet: later changes ride on it.
    private var remoteCommandsQueued = false
    /// The car requests of this app, in order.
    let queue = RequestQueue()
    /// Automaker apps: the vehicle protocols served now, as External Accessory accessories
    /// (`EAAccessoryManager.shared()` is this of the last automaker app connected).
    public let accessoryManager = EAAccessoryManager()

    /// Describes the app; nothing is sent until ``connect(to:deviceName:assistant:)``.
    public init(bundleIdentifier: String, displayName: String, entitlements: [CPEntitlement],
                accessoryProtocols: [String] = [], icon: CPImage? = nil) {
        self.bundleIdentifier = bundleIdentifier
        self.displayName = displayName
        self.entitlements = entitlements
        self.accessoryProtocols = accessoryProtocols
        self.icon = icon
    }

    /// Hears the main scene connect and disconnect (held weakly; the `UISceneConfiguration` delegate class).
    public var sceneDelegate: (any CPTemplateApplicationSceneDelegate)? {
        get { sceneDelegateRef.object as? any CPTemplateApplicationSceneDelegate }
        set { sceneDelegateRef = Weak(newValue) }
    }

    /// Hears a navigation app's dashboard scene (held weakly).
    public var dashboardSceneDelegate: (any CPTemplateApplicationDashboardSceneDelegate)? {
        get { dashboardDelegateRef.object as? any CPTemplateApplicationDashboardSceneDelegate }
        set { dashboardDelegateRef = Weak(newValue) }
    }

    /// Hears a navigation app's instrument-cluster scene (held weakly).
    public var instrumentClusterSceneDelegate: (any CPTemplateApplicationInstrumentClusterSceneDelegate)? {
        get { clusterDelegateRef.object as? any CPTemplateApplicationInstrumentClusterSceneDelegate }
        set { clusterDelegateRef = Weak(newValue) }
    }

    /// The connection to the car (for accessory sessions and anything CarPlayKit does not cover).
    public nonisolated var phone: PhoneSession? { phoneBox.withLockedValue { $0 } }
    /// The car's decision on the app (category, matched accessory protocols), after ``connect(to:deviceName:assistant:)``.
    public var decision: HUAppDecision? { carDecision }
    /// The app's SiriKit handlers, as its Intents extension gives them
    /// (`INExtension.handler(for:)`): the phone's assistant runs the driver's
    /// requests with them (``CPAssistant``).
    public var intentsExtension: INExtension?
    /// The phone's assistant, when ``connect(to:deviceName:assistant:)`` was asked for one.
    public private(set) var assistant: CPAssistant?
    /// The main scene while connected.
    public var templateApplicationScene: CPTemplateApplicationScene? { mainScene }
    /// The main scene's interface controller while connected.
    public var interfaceController: CPInterfaceController? { mainScene?.interfaceController }
    /// The dashboard scene while connected.
    public var templateApplicationDashboardScene: CPTemplateApplicationDashboardScene? { dashboardScene }
    /// The instrument-cluster scene while connected.
    public var templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene? { clusterScene }

    var isNavigationApp: Bool { entitlements.contains(.maps) }

    /// Connects to the car as a phone carrying this one app and announces it.
    /// Throws a ``CPError`` (`entitlementRefused`...) when the car refuses the app.
    /// The car connects the main scene when the driver launches the app.
    /// `assistant`: the phone has an assistant (Siri's stand-in, ``CPAssistant``)
    /// that the car's voice button opens and that runs ``intentsExtension``'s handlers.
    public func connect(to endpoint: HeadUnitEndpoint = .default, deviceName: String = "CarPlayKit", assistant: Bool = false) async throws {
        let phone: PhoneSession
        do {
            phone = try await PhoneSession.connect(to: endpoint, deviceName: deviceName)
        } catch {
            throw CPError(error)
        }
        var info = HUAppInfo()
        info.appID = bundleIdentifier
        info.displayName = displayName
        info.entitlements = entitlements.map(\.rawValue)
        info.accessoryProtocols = accessoryProtocols
        if let icon { info.icon = icon.wire }
        let decisions: [HUAppDecision]
        do {
            decisions = try await phone.announce([info], assistant: assistant)
        } catch {
            await phone.close()
            throw CPError(error)
        }
        let decision = decisions.first { $0.appID == bundleIdentifier } ?? HUAppDecision()
        guard decision.accepted else {
            await phone.close()
            throw CPError.usage(Code(rawValue: decision.code.rawValue), "\(bundleIdentifier) refused: \(decision.reason)")
        }
        phoneSession = phone
        carDecision = decision
        if assistant { self.assistant = CPAssistant(application: self) }
        if entitlements.contains(.protocols) { EAAccessoryManager.makeShared(accessoryManager) }
        let order = EventOrder()
        eventOrder = order
        eventTask = Task { @MainActor [weak self] in
            for await event in phone.events {
                guard let self else { return }
                self.handle(event)
                order.handledOne()
            }
            order.finish()
            self?.connectionEnded()
        }
        // Audio apps offer the car the commands of MPRemoteCommandCenter (PROTOCOL.md section 23).
        if entitlements.contains(.audio) { MPRemoteCommandCenter.shared().attach(self) }
        // Communication apps report and perform calls through CallKit's provider (section 26).
        if entitlements.contains(.communication) { CallKitHub.shared.attach(self) }
    }

    private typealias Code = CPError.Code

    /// Waits until the connection to the car ends (the car said goodbye or ``disconnect()`` was called).
    public func run() async {
        await eventTask?.value
    }

    /// Tells the car the app went away and closes the connection; the scenes disconnect first.
    public func disconnect() async {
        guard let phone = phoneSession else { return }
        try? await queue.drain()
        if let app = await phone.app(bundleIdentifier) { try? await app.close() }
        await phone.close()
        await eventTask?.value
    }

    /// Completes an event the car waits for (its spinner stops), after every request made before.
    func complete(eventID: UInt64, searchResults: [HUListItem]) {
        guard let phone = phoneSession else { return }
        let appID = bundleIdentifier
        queue.post {
            do {
                try await phone.completeEvent(appID: appID, eventID: eventID, searchResults: searchResults)
            } catch let error as HeadUnitError where error.code == .unknownEvent || error.code == .completionTimeout {
                // The car stopped waiting (timed out, or a newer selection replaced this one):
                // nothing for the app to fix, so not an error of waitForPendingUpdates.
            }
        }
    }

    /// Declares `MPRemoteCommandCenter`'s commands after every request made
    /// before; changes made before it is sent go with it (one request, the
    /// latest set).
    func declareRemoteCommands() {
        guard let phone = phoneSession else { return }
        let appID = bundleIdentifier
        if remoteCommandsQueued { return }
        remoteCommandsQueued = true
        queue.post { [weak self] in
            self?.remoteCommandsQueued = false
            try await phone.setRemoteCommands(appID: appID, MPRemoteCommandCenter.shared().declared)
        }
    }

    /// Answers a remote command with the handlers' status, after every request
    /// made before (a now-playing update the handler made reaches the car first).
    func answerRemoteCommand(_ event: HURemoteCommandEvent, _ status: MPRemoteCommandHandlerStatus) {
        guard let phone = phoneSession else { return }
        queue.post {
            do {
                try await phone.answerRemoteCommand(appID: event.appID, commandID: event.commandID, status: status.wire)
            } catch let error as HeadUnitError where error.code == .completionTimeout || error.code == .unknownEvent {
                // The car stopped waiting (it told its HMI): nothing for the app to fix.
            }
        }
    }

    /// Fulfils or fails a call action the car sent (PROTOCOL.md 26.6), after
    /// every request made before (a report the delegate made reaches the car first).
    func answerCallAction(actionID: UInt64, fulfilled: Bool) {
        guard let phone = phoneSession else { return }
        let appID = bundleIdentifier
        queue.post {
            do {
                try await phone.answerCallAction(appID: appID, actionID: actionID, fulfilled: fulfilled)
            } catch let error as HeadUnitError where error.code == .completionTimeout || error.code == .unknownEvent {
                // The car stopped waiting (timed out; the delegate heard it): nothing for the app to fix.
            }
        }
    }

    /// Sends a navigation request after every request made before.
    func postNavigation(_ op: HUNavigationRequest.OneOf_Op, accepted: (@MainActor @Sendable () -> Void)? = nil) {
        guard let phone = phoneSession else { return }
        var request = HUNavigationRequest()
        request.appID = bundleIdentifier
        request.op = op
        let message = request
        queue.post {
            _ = try await phone.connection.request(.navigationRequest(message))
            accepted?()
        }
    }

    /// Sends a navigation request built when its turn comes (after every
    /// request made before), for requests that ask a delegate first.
    func postNavigation(building op: @escaping @MainActor @Sendable () -> HUNavigationRequest.OneOf_Op, accepted: (@MainActor @Sendable () -> Void)? = nil) {
        guard let phone = phoneSession else { return }
        let appID = bundleIdentifier
        queue.post {
            var request = HUNavigationRequest()
            request.appID = appID
            request.op = op()
            _ = try await phone.connection.request(.navigationRequest(request))
            accepted?()
        }
    }

    // MARK: events (the event task)

    private func handle(_ event: PhoneEvent) {
        switch event {
        case .sceneConnected(let client):
            guard client.appID == bundleIdentifier else { return }
            sceneConnected(client)
        case .sceneDisconnected(let message):
            guard message.appID == bundleIdentifier else { return }
            sceneDisconnected(message.sceneID)
        case .appEvent(let appEvent):
            guard appEvent.appID == bundleIdentifier else { return }
            if let controller = mainScene?.interfaceController, controller.sceneID == appEvent.sceneID {
                controller.handle(appEvent)
            } else if appEvent.eventID != 0 {
                complete(eventID: appEvent.eventID, searchResults: [])  // never leave a spinner running
            }
        case .sessionConfiguration(let configuration):
            guard configuration.appID == bundleIdentifier else { return }
            let oldStyle = CPSessionState.current.contentStyle
            CPSessionState.configurationChanged(configuration)
            let newStyle = CPContentStyle(configuration.contentStyle)
            if configuration.sceneID == 0 {
                for window in [mainScene?.carWindow, dashboardScene?.dashboardWindow, clusterScene?.instrumentClusterController.instrumentClusterWindow] {
                    configure(window, configuration)
                }
            } else {
                configure(window(sceneID: configuration.sceneID), configuration)
            }
            if let scene = mainScene, scene.interfaceController.sceneID == configuration.sceneID || configuration.sceneID == 0 {
                scene.interfaceController.style = newStyle
                if oldStyle != newStyle { sceneDelegate?.contentStyleDidChange(newStyle) }
            }
            // The cluster's own style (the car sends it with the cluster's scene id).
            if let scene = clusterScene, scene.instrumentClusterController.sceneID == configuration.sceneID {
                let clusterStyle = CPContentStyle(configuration.contentStyle)
                if scene.contentStyle != clusterStyle {
                    scene.contentStyle = clusterStyle
                    instrumentClusterSceneDelegate?.contentStyleDidChange(clusterStyle)
                }
            }
        case .other(let envelope):
            switch envelope.body {
            case .navigationEvent(let navigation)? where navigation.appID == bundleIdentifier:
                handleNavigation(navigation)
            case .accessoryAvailability(let availability)? where availability.appID == bundleIdentifier:
                accessoryManager.update(availability, application: self)
            case .remoteCommandEvent(let command)? where command.appID == bundleIdentifier:
                answerRemoteCommand(command, MPRemoteCommandCenter.shared().handle(command))
            case .callActionEvent(let action)? where action.appID == bundleIdentifier:
                let performed = CallKitHub.shared.provider?.perform(action, application: self, timeoutMilliseconds: callActionTimeoutMilliseconds) ?? false
                // No provider with a delegate: failed at once, so the car does not wait.
                if !performed { answerCallAction(actionID: action.actionID, fulfilled: false) }
            case .assistantEvent(let event)?:
                assistant?.handle(event)
            case .callActionTimedOut(let timedOut)? where timedOut.appID == bundleIdentifier:
                CallKitHub.shared.provider?.timedOut(actionID: timedOut.actionID)
            case .requestKeyframe(let request)?:
                window(sceneID: request.channel)?.keyframeRequested()
            default:
                break
            }
        case .notice, .goodbye:
            break
        }
    }

    private func sceneConnected(_ client: InterfaceController) {
        // A navigation scene's window streams what the app draws in it (PROTOCOL.md section 25);
        // the main window at 30 frames a second, the smaller ones at 15.
        let video = isNavigationApp && client.scene.hasVideo ? client.scene.video : HUVideoStreamParams()
        let window = CPWindow(client.scene.window, video: video, style: CPContentStyle(client.scene.contentStyle),
                              phone: phoneSession, framesPerSecond: client.kind == .main ? 30 : 15)
        window.start()
        switch client.kind {
        case .dashboard:
            let scene = CPTemplateApplicationDashboardScene(controller: CPDashboardController(application: self, sceneID: client.sceneID), window: window)
            dashboardScene = scene
            dashboardSceneDelegate?.templateApplicationDashboardScene(scene, didConnect: scene.dashboardController, to: window)
        case .instrumentCluster:
            let controller = CPInstrumentClusterController(application: self, sceneID: client.sceneID)
            controller.instrumentClusterWindow = window
            let scene = CPTemplateApplicationInstrumentClusterScene(controller: controller)
            scene.contentStyle = CPContentStyle(client.scene.contentStyle)
            clusterScene = scene
            instrumentClusterSceneDelegate?.templateApplicationInstrumentClusterScene(scene, didConnect: scene.instrumentClusterController)
            controller.delegate?.instrumentClusterControllerDidConnect(window)
        default:
            CPSessionState.sceneConnected(client.scene)
            let controller = CPInterfaceController(client: client, application: self)
            let scene = CPTemplateApplicationScene(interfaceController: controller, window: window, application: self)
            mainScene = scene
            if entitlements.contains(.audio) { CPNowPlayingTemplate.shared.attach(controller) }
            if isNavigationApp {
                sceneDelegate?.templateApplicationScene(scene, didConnect: controller, to: window)
            } else {
                sceneDelegate?.templateApplicationScene(scene, didConnect: controller)
            }
        }
    }

    private func sceneDisconnected(_ sceneID: UInt32) {
        window(sceneID: sceneID)?.stop()
        if let scene = mainScene, scene.interfaceController.sceneID == sceneID {
            mainScene = nil
            CPNowPlayingTemplate.shared.detach(scene.interfaceController)
            if isNavigationApp {
                sceneDelegate?.templateApplicationScene(scene, didDisconnect: scene.interfaceController, from: scene.carWindow)
            } else {
                sceneDelegate?.templateApplicationScene(scene, didDisconnectInterfaceController: scene.interfaceController)
            }
        } else if let scene = dashboardScene, scene.dashboardController.sceneID == sceneID {
            dashboardScene = nil
            dashboardSceneDelegate?.templateApplicationDashboardScene(scene, didDisconnect: scene.dashboardController, from: scene.dashboardWindow)
        } else if let scene = clusterScene, scene.instrumentClusterController.sceneID == sceneID {
            clusterScene = nil
            let controller = scene.instrumentClusterController
            if let window = controller.instrumentClusterWindow {
                controller.instrumentClusterWindow = nil
                controller.delegate?.instrumentClusterControllerDidDisconnectWindow(window)
            }
            instrumentClusterSceneDelegate?.templateApplicationInstrumentClusterScene(scene, didDisconnectInstrumentClusterController: controller)
        }
    }

    /// The window of a connected scene (its id is its video channel too).
    private func window(sceneID: UInt32) -> CPWindow? {
        if let scene = mainScene, scene.interfaceController.sceneID == sceneID { return scene.carWindow }
        if let scene = dashboardScene, scene.dashboardController.sceneID == sceneID { return scene.dashboardWindow }
        if let scene = clusterScene, scene.instrumentClusterController.sceneID == sceneID {
            return scene.instrumentClusterController.instrumentClusterWindow
        }
        return nil
    }

    /// A scene's configuration changed: its window's style and safe area (a change redraws it).
    private func configure(_ window: CPWindow?, _ configuration: HUSessionConfiguration) {
        guard let window else { return }
        window.contentStyle = CPContentStyle(configuration.contentStyle)
        if configuration.hasSafeArea {
            let inset = configuration.safeArea
            window.safeAreaInsets = (inset.top, inset.left, inset.bottom, inset.right)
        }
    }

    private func handleNavigation(_ event: HUNavigationEvent) {
        switch event.kind {
        case .dashboardButtonPressed(let id):
            dashboardScene?.dashboardController.press(id)
        case .clusterInput(let input):
            clusterScene?.instrumentClusterController.handle(input)
            // The delegate changed its zoom or compass: the cluster's map is drawn again.
            clusterScene?.instrumentClusterController.instrumentClusterWindow?.setNeedsDisplay()
        case .bannerSelected(let selected):
            // The car brought the map to the main screen; the scene delegate hears what was tapped.
            guard let scene = mainScene, let map = interfaceController?.rootTemplate as? CPMapTemplate else { return }
            switch map.bannerSubject(selected) {
            case (let maneuver?, _): sceneDelegate?.templateApplicationScene(scene, didSelect: maneuver)
            case (_, let alert?): sceneDelegate?.templateApplicationScene(scene, didSelect: alert)
            default: break
            }
        case .panning(let pan):
            (interfaceController?.rootTemplate as? CPMapTemplate)?.handle(event)
            // The delegate moved its map: the window is drawn again.
            if case .direction? = pan.kind { mainScene?.carWindow.setNeedsDisplay() }
        default:
            (interfaceController?.rootTemplate as? CPMapTemplate)?.handle(event)
        }
    }

    private func connectionEnded() {
        if let scene = mainScene { sceneDisconnected(scene.interfaceController.sceneID) }
        if let scene = dashboardScene { sceneDisconnected(scene.dashboardController.sceneID) }
        if let scene = clusterScene { sceneDisconnected(scene.instrumentClusterController.sceneID) }
        accessoryManager.removeAll()
        phoneSession = nil
        MPRemoteCommandCenter.shared().detach(self)
        CallKitHub.shared.detach(self)
    }

    /// How long the car waits for a call action (`call_action_timeout_ms`,
    /// for `CXAction.timeoutDate`): the car's default; it announces no value to apps.
    var callActionTimeoutMilliseconds: UInt64 { 5_000 }
}

/// Answers applied in the car's order. The car sends a request's lifecycle
/// events before its Result; the events reach the app on the main actor,
/// the answer on the request queue. An answer that changes the app's mirror
/// of the car (the template stack) waits here until the events that came
/// before it are handled, so a late `WILL_APPEAR` of the template a request
/// replaced never reads as the car's own back button.
@MainActor
final class EventOrder {
    private var handled: UInt64 = 0
    private var finished = false
    private var waiting: [(after: UInt64, run: @MainActor () -> Void)] = []

    /// Runs `apply` once `position` events are handled; returns when it ran.
    func apply(after position: UInt64, _ apply: @escaping @MainActor () -> Void) async {
        if finished || handled >= position { return apply() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiting.append((position, {
                apply()
                continuation.resume()
            }))
        }
    }

    /// One more event handled: runs the answers that waited for it, before the next event.
    func handledOne() {
        handled += 1
        let handled = handled
        let due = waiting.filter { $0.after <= handled }.map(\.run)
        waiting.removeAll { $0.after <= handled }
        for run in due { run() }
    }

    /// No more events: whatever waits runs now.
    func finish() {
        finished = true
        let due = waiting.map(\.run)
        waiting.removeAll()
        for run in due { run() }
    }
}
