import HeadUnitWire

/// An app the phone announced, with the car's decision about it.
public struct AppState: Sendable, Equatable {
    public var info: HUAppInfo
    /// The accepted category, or nil when the car refused the app's claims.
    public var category: HUCategory?
    public var refusal: RuleViolation?
    /// Automaker apps: the vehicle's protocols the app may use.
    public var matchedProtocols: [String] = []
    /// Connected scenes by kind (at most one of each).
    public var scenes: [HUSceneKind: SceneState] = [:]
    /// The one shared now-playing template of the app (DOMAIN.md §5).
    public var nowPlaying = HUNowPlayingTemplate()
    public var nowPlayingSet = false

    public var id: String { info.appID }

    /// Whether the app has an icon on the home screen and can be launched.
    public var isLaunchable: Bool {
        guard let category else { return false }
        switch category {
        // Legacy categories (playable content, Siri-only messaging and calling) are
        // accepted but have no template UI here: no icon, not launchable.
        case .legacyAudio, .legacyMessaging, .unspecified, .UNRECOGNIZED: return false
        case .audio, .communication, .navigation, .evCharging, .fueling, .chargingAndFueling, .parking,
            .quickOrdering, .drivingTask, .publicSafety, .automaker:
            return true
        }
    }
}

/// The id of the now-playing template the car shows on an app's behalf.
public let nowPlayingTemplateID = "now-playing"

/// What the home screen is built from (`Car.homeInputs()`, `Car.homeScreen()`):
/// the apps in announce order with what their icons show, the calls (their
/// apps' names come from the same infos), the now-playing app, the phone
/// link and the device's name.
struct HomeInputs: Equatable, Sendable {
    struct App: Equatable, Sendable {
        var id: String
        var info: HUAppInfo?
        var category: HUCategory?
        var running: Bool
    }

    var deviceName: String
    var nowPlayingAppID: String
    var phoneLink: HUPhoneLink
    var calls: CopyOnWrite<CallSession>
    var apps: [App]
}
