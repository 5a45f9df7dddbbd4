import HeadUnitWire

/// Every entitlement key the car knows (Protocol/TEMPLATES.md section 1).
public enum EntitlementKey {
    public static let audio = "com.apple.developer.carplay-audio"
    public static let playableContent = "com.apple.developer.playable-content"
    public static let communication = "com.apple.developer.carplay-communication"
    public static let messaging = "com.apple.developer.carplay-messaging"
    public static let calling = "com.apple.developer.carplay-calling"
    public static let maps = "com.apple.developer.carplay-maps"
    public static let charging = "com.apple.developer.carplay-charging"
    public static let fueling = "com.apple.developer.carplay-fueling"
    public static let parking = "com.apple.developer.carplay-parking"
    public static let quickOrdering = "com.apple.developer.carplay-quick-ordering"
    public static let drivingTask = "com.apple.developer.carplay-driving-task"
    public static let protocols = "com.apple.developer.carplay-protocols"
    public static let publicSafety = "com.apple.developer.carplay-public-safety"

    public static let all: Set<String> = [
        audio, playableContent, communication, messaging, calling, maps, charging,
        fueling, parking, quickOrdering, drivingTask, protocols, publicSafety,
    ]
}

extension EntitlementPolicy {
    /// Accept every known entitlement from every app: the default for a test bench.
    public static let acceptAll = EntitlementPolicy(allowed: EntitlementKey.all)
}

/// The display profiles of the CarPlay developer guide (main display sizes and scales).
public enum DisplayProfile: String, CaseIterable, Sendable {
    case minimum      // 748x456 @2x
    case standard     // 800x480 @2x
    case high         // 1920x720 @3x
    case portrait     // 900x1200 @3x

    public var display: HUDisplay {
        var display = HUDisplay()
        switch self {
        case .minimum: (display.widthPt, display.heightPt, display.scale) = (748, 456, 2)
        case .standard: (display.widthPt, display.heightPt, display.scale) = (800, 480, 2)
        case .high: (display.widthPt, display.heightPt, display.scale) = (1920, 720, 3)
        case .portrait: (display.widthPt, display.heightPt, display.scale) = (900, 1200, 3)
        }
        return display
    }
}

extension HUVehicleProfile {
    /// The embedded default, so the daemon runs with no configuration file.
    public static var standard: HUVehicleProfile {
        var profile = HUVehicleProfile()
        profile.manufacturer = "Open Motors"
        profile.model = "Reference Head Unit"
        profile.mainDisplay = DisplayProfile.standard.display
        profile.dashboardPresent = true
        profile.instrumentClusterPresent = true
        var cluster = HUDisplay()
        (cluster.widthPt, cluster.heightPt, cluster.scale) = (480, 240, 2)
        profile.clusterDisplay = cluster
        // The dashboard's map card beside the two stacked cards on an 800 pt wide screen.
        var dashboard = HUDisplay()
        (dashboard.widthPt, dashboard.heightPt, dashboard.scale) = (520, 480, 2)
        profile.dashboardDisplay = dashboard
        profile.rightHandDrive = false
        profile.inputs = [.touchHighLatency, .rotaryKnob]
        profile.initialContentStyle = .dark
        profile.accessoryProtocols = ["com.openmotors.performance", "com.openmotors.climate"]
        profile.maxListItemsWhileDriving = 12
        profile.maxListSectionsWhileDriving = 12
        return profile
    }
}
