import HeadUnitWire

/// An app the phone announced, with the car's decision about it.
///
/// Its fields are kept behind one reference (`CopyOnWrite`): a request reads
/// apps out of the car's dictionary several times (render, the composed
/// bound, the home screen's inputs), and each read is a copy, one retain
/// instead of one per field and a copy of the whole struct.
public struct AppState: Sendable, Equatable {
    private struct Fields: Sendable, Equatable {
        /// Behind a reference of its own: the home screen's inputs keep it
        /// and compare it by identity until it changes (`HomeInputs`).
        var info: CopyOnWrite<HUAppInfo>
        var category: HUCategory?
        var refusal: RuleViolation?
        var matchedProtocols: [String] = []
        var scenes: SmallMap<HUSceneKind, SceneState> = [:]
        var nowPlaying = HUNowPlayingTemplate()
        var nowPlayingSet = false
        /// The encoded sizes the composed bound adds up after every request
        /// (`Car.phoneTemplateBytes`), kept as the values change.
        var infoBytes = 0
        var nowPlayingBytes = 0
    }

    @CopyOnWrite private var fields: Fields

    public init(info: HUAppInfo) {
        fields = Fields(info: CopyOnWrite(wrappedValue: info))
        fields.infoBytes = Self.encodedSize(info)
        fields.nowPlayingBytes = fields.nowPlaying.wireSize
    }

    public var info: HUAppInfo {
        _read { yield fields.info.wrappedValue }
        _modify {
            defer { fields.infoBytes = Self.encodedSize(fields.info.wrappedValue) }
            yield &fields.info.wrappedValue
        }
    }
    /// The info's encoded size without its icon (HMIs get each image once, section 12.6).
    var infoBytes: Int { fields.infoBytes }
    private static func encodedSize(_ info: HUAppInfo) -> Int { info.wireSize - info.icon.png.count }
    /// The info's reference, kept by `HomeInputs`.
    var sharedInfo: CopyOnWrite<HUAppInfo> { fields.info }
    /// The accepted category, or nil when the car refused the app's claims.
    public var category: HUCategory? {
        _read { yield fields.category }
        _modify { yield &fields.category }
    }
    public var refusal: RuleViolation? {
        _read { yield fields.refusal }
        _modify { yield &fields.refusal }
    }
    /// Automaker apps: the vehicle's protocols the app may use.
    public var matchedProtocols: [String] {
        _read { yield fields.matchedProtocols }
        _modify { yield &fields.matchedProtocols }
    }
    /// Connected scenes by kind (at most one of each).
    public var scenes: SmallMap<HUSceneKind, SceneState> {
        _read { yield fields.scenes }
        _modify { yield &fields.scenes }
    }
    /// The one shared now-playing template of the app (Protocol/TEMPLATES.md section 4, `now-playing`).
    public var nowPlaying: HUNowPlayingTemplate {
        _read { yield fields.nowPlaying }
        _modify {
            defer { fields.nowPlayingBytes = fields.nowPlaying.wireSize }
            yield &fields.nowPlaying
        }
    }
    /// The now-playing template's encoded size.
    var nowPlayingBytes: Int { fields.nowPlayingBytes }
    public var nowPlayingSet: Bool {
        _read { yield fields.nowPlayingSet }
        _modify { yield &fields.nowPlayingSet }
    }

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
/// apps' names come from the same infos), the assistant and the
/// notifications (by reference first: they change rarely, the home screen
/// is compared after every request), the now-playing app, the phone link and
/// the device's name.
struct HomeInputs: Equatable, Sendable {
    struct App: Equatable, Sendable {
        var id: String
        var info: CopyOnWrite<HUAppInfo>?
        var category: HUCategory?
        var running: Bool
    }

    var deviceName: String
    var nowPlayingAppID: String
    var phoneLink: HUPhoneLink
    var calls: CopyOnWrite<CallSession>
    var assistant: CopyOnWrite<AssistantSession>
    var apps: [App]
}
