import HeadUnitWire

/// The car's navigation state across apps: each navigation app's session,
/// which app owns guidance, the trip previews, the navigation alert, panning,
/// dashboard buttons and cluster texts. The Car composes it and routes
/// navigation requests and inputs here.
public struct NavigationCenter: Sendable, Equatable {
    /// Per app: its navigation session (kept after it ended, so the app is told why updates fail).
    public internal(set) var sessions: [String: NavigationSession] = [:]
    /// The app that guides (or guided last): the cluster's guidance owner.
    public internal(set) var guidanceAppID = ""
    /// +1 per session started.
    public internal(set) var sessionCount: UInt64 = 0
    public internal(set) var nativeNavigationActive = false

    public struct Previews: Sendable, Equatable {
        public var appID: String
        public var previews: HUTripPreviews
        public var previewedTripID: String
        public var previewedRouteChoiceID: String
    }
    public internal(set) var previews: Previews?

    public struct Alert: Sendable, Equatable {
        public var appID: String
        public var alert: HUNavigationAlert
        /// Identifies this showing, so a stale auto-dismiss timer does nothing.
        public var serial: UInt64
    }
    public internal(set) var alert: Alert?
    var alertSerial: UInt64 = 0

    /// The banner over the main screen (PROTOCOL.md 19.9).
    public internal(set) var banner = NavigationBanner()

    /// The app whose map is in panning mode.
    public internal(set) var panningAppID = ""
    public internal(set) var dashboardButtons: [String: [HUDashboardButton]] = [:]
    public internal(set) var clusterDescriptions: [String: [String]] = [:]
    /// The prompt style navigation apps were last told (NORMAL until told otherwise).
    var announcedPromptStyle: HUPromptStyle = .normal

    public init() {}

    /// The guidance owner's session.
    public var guidance: NavigationSession? { sessions[guidanceAppID] }

    /// Forgets everything of an app (its scenes are gone); its session must be ended first.
    mutating func forget(_ appID: String) {
        if previews?.appID == appID { previews = nil }
        if panningAppID == appID { panningAppID = "" }
        dashboardButtons[appID] = nil
        clusterDescriptions[appID] = nil
    }
}

/// The window each scene of a navigation app draws in (PROTOCOL.md section 19.1): the
/// main scene gets the main display with the car's current safe area, the
/// dashboard scene the dashboard's map area, the cluster scene the cluster display.
public enum SceneWindows {
    public static func window(for kind: HUSceneKind, vehicle: HUVehicleProfile, safeArea: HUInsets) -> HUDisplay {
        switch kind {
        case .dashboard:
            // A profile without a dashboard area falls back to the main display's size.
            return vehicle.hasDashboardDisplay ? vehicle.dashboardDisplay : vehicle.mainDisplay
        case .instrumentCluster:
            return vehicle.clusterDisplay
        case .main, .unspecified, .UNRECOGNIZED:
            var window = vehicle.mainDisplay
            window.safeArea = safeArea
            return window
        }
    }
}
