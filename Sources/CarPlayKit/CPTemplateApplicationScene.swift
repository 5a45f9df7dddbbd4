import HeadUnitClient
import HeadUnitWire

/// Hears the app's main CarPlay scene connect and disconnect
/// (`CPTemplateApplicationSceneDelegate`). Set it on ``CPApplication/sceneDelegate``.
///
/// Navigation apps implement the `to window:` forms (their map is drawn in
/// the window); the others implement the plain ones. The default of each
/// `to window:` form calls the plain form.
@MainActor
public protocol CPTemplateApplicationSceneDelegate: AnyObject {
    /// The car connected the app: keep `interfaceController` and set a root template.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didConnect interfaceController: CPInterfaceController)
    /// The car disconnected the app (closed, the phone left, the car shut down).
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didDisconnectInterfaceController interfaceController: CPInterfaceController)
    /// The car connected a navigation app, with the window for its map.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didConnect interfaceController: CPInterfaceController, to window: CPWindow)
    /// The car disconnected a navigation app.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didDisconnect interfaceController: CPInterfaceController, from window: CPWindow)
    /// The car switched between light and dark content.
    func contentStyleDidChange(_ contentStyle: CPContentStyle)
    /// The driver tapped the banner of a navigation alert; the app's map is on the main screen now (PROTOCOL.md 19.9).
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect navigationAlert: CPNavigationAlert)
    /// The driver tapped the banner of a maneuver; the app's map is on the main screen now.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect maneuver: CPManeuver)
}

extension CPTemplateApplicationSceneDelegate {
    /// Does nothing (optional in CarPlay).
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didConnect interfaceController: CPInterfaceController) {}
    /// Does nothing (optional in CarPlay).
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didDisconnectInterfaceController interfaceController: CPInterfaceController) {}
    /// Calls `templateApplicationScene(_:didConnect:)`.
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didConnect interfaceController: CPInterfaceController, to window: CPWindow) {
        self.templateApplicationScene(templateApplicationScene, didConnect: interfaceController)
    }
    /// Calls `templateApplicationScene(_:didDisconnectInterfaceController:)`.
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didDisconnect interfaceController: CPInterfaceController, from window: CPWindow) {
        self.templateApplicationScene(templateApplicationScene, didDisconnectInterfaceController: interfaceController)
    }
    /// Does nothing (optional in CarPlay).
    public func contentStyleDidChange(_ contentStyle: CPContentStyle) {}
    /// Does nothing (optional in CarPlay).
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect navigationAlert: CPNavigationAlert) {}
    /// Does nothing (optional in CarPlay).
    public func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect maneuver: CPManeuver) {}
}

/// The app's main scene on the car's screen (`CPTemplateApplicationScene`).
@MainActor
public final class CPTemplateApplicationScene {
    /// The scene's interface controller.
    public let interfaceController: CPInterfaceController
    /// The window the car gives the scene (a navigation app's map).
    public let carWindow: CPWindow
    /// The app the scene belongs to.
    public unowned let application: CPApplication
    /// The car's content style now.
    public var contentStyle: CPContentStyle { interfaceController.style }

    init(interfaceController: CPInterfaceController, window: CPWindow, application: CPApplication) {
        self.interfaceController = interfaceController
        self.carWindow = window
        self.application = application
    }
}

/// Hears the dashboard scene of a navigation app (`CPTemplateApplicationDashboardSceneDelegate`).
@MainActor
public protocol CPTemplateApplicationDashboardSceneDelegate: AnyObject {
    /// The dashboard connected.
    func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene, didConnect dashboardController: CPDashboardController, to window: CPWindow)
    /// The dashboard disconnected.
    func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene, didDisconnect dashboardController: CPDashboardController, from window: CPWindow)
}

extension CPTemplateApplicationDashboardSceneDelegate {
    /// Does nothing (optional in CarPlay).
    public func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene, didDisconnect dashboardController: CPDashboardController, from window: CPWindow) {}
}

/// A navigation app's scene on the car's dashboard (`CPTemplateApplicationDashboardScene`).
@MainActor
public final class CPTemplateApplicationDashboardScene {
    /// The dashboard's controller: its shortcut buttons.
    public let dashboardController: CPDashboardController
    /// The dashboard's window.
    public let dashboardWindow: CPWindow
    init(controller: CPDashboardController, window: CPWindow) {
        dashboardController = controller
        dashboardWindow = window
    }
}

/// Hears the instrument-cluster scene of a navigation app (`CPTemplateApplicationInstrumentClusterSceneDelegate`).
@MainActor
public protocol CPTemplateApplicationInstrumentClusterSceneDelegate: AnyObject {
    /// The cluster connected.
    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene, didConnect instrumentClusterController: CPInstrumentClusterController)
    /// The cluster disconnected.
    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene, didDisconnectInstrumentClusterController instrumentClusterController: CPInstrumentClusterController)
    /// The cluster's content style changed (the car's `SessionConfiguration` for the cluster scene).
    func contentStyleDidChange(_ contentStyle: CPContentStyle)
}

extension CPTemplateApplicationInstrumentClusterSceneDelegate {
    /// Does nothing (optional in CarPlay).
    public func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene, didDisconnectInstrumentClusterController instrumentClusterController: CPInstrumentClusterController) {}
    /// Does nothing (optional in CarPlay).
    public func contentStyleDidChange(_ contentStyle: CPContentStyle) {}
}

/// A navigation app's scene on the instrument cluster (`CPTemplateApplicationInstrumentClusterScene`).
@MainActor
public final class CPTemplateApplicationInstrumentClusterScene {
    /// The cluster's controller.
    public let instrumentClusterController: CPInstrumentClusterController
    /// The cluster's content style (from its `SceneConnected`, then its `SessionConfiguration`).
    public internal(set) var contentStyle: CPContentStyle = .unspecified
    init(controller: CPInstrumentClusterController) { instrumentClusterController = controller }
}

/// One class may serve both the main and the cluster scene (as MapsApp does):
/// both protocols have `contentStyleDidChange`, so one default serves both
/// (an implementation of it hears both scenes' changes).
extension CPTemplateApplicationInstrumentClusterSceneDelegate where Self: CPTemplateApplicationSceneDelegate {
    /// Does nothing (optional in CarPlay).
    public func contentStyleDidChange(_ contentStyle: CPContentStyle) {}
}
