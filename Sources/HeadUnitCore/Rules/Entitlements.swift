import HeadUnitWire

/// The entitlement keys of DOMAIN.md §3 and the category an app's claims give it.
public enum Entitlements {
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

    /// Every key the car knows, each with the category it gives on its own.
    public static let singleKeyCategories: [String: HUCategory] = [
        audio: .audio,
        playableContent: .legacyAudio,
        communication: .communication,
        messaging: .legacyMessaging,
        calling: .legacyMessaging,
        maps: .navigation,
        charging: .evCharging,
        fueling: .fueling,
        parking: .parking,
        quickOrdering: .quickOrdering,
        drivingTask: .drivingTask,
        protocols: .automaker,
        publicSafety: .publicSafety,
    ]

    /// Decides an app's category from its claims, or why it is refused.
    ///
    /// Order of checks (the first failing one is reported): no claims, unknown
    /// keys, keys the policy does not accept for this app, then the combination.
    public static func category(for claims: [String], appID: String, policy: EntitlementPolicy) -> Result<HUCategory, RuleViolation> {
        let keys = Set(claims)
        if keys.isEmpty {
            return .failure(refused("app \(appID) claims no CarPlay entitlement"))
        }
        let unknown = keys.filter { singleKeyCategories[$0] == nil }
        if !unknown.isEmpty {
            return .failure(refused("unknown entitlement \(list(unknown)) claimed by \(appID)"))
        }
        let perApp = policy.perApp[appID] ?? []
        let notAccepted = keys.filter { !policy.allowed.contains($0) && !perApp.contains($0) }
        if !notAccepted.isEmpty {
            return .failure(refused("entitlement \(list(notAccepted)) not accepted for \(appID) by this car"))
        }
        return combination(keys, appID: appID)
    }

    /// The category of a set of known, accepted keys: one key, or one of the
    /// three combinations the guide allows.
    static func combination(_ keys: Set<String>, appID: String) -> Result<HUCategory, RuleViolation> {
        if keys.count == 1, let key = keys.first, let category = singleKeyCategories[key] {
            return .success(category)
        }
        // Navigation apps "cannot combine other CarPlay features such as audio,
        // messaging, or VoIP calling into a single app" (guide): say so explicitly.
        if keys.contains(maps) {
            let conflicting = keys.intersection([audio, playableContent, communication, messaging, calling])
            if !conflicting.isEmpty {
                return .failure(refused("navigation (\(maps)) cannot be combined with audio, messaging or calling (\(list(conflicting))) in \(appID)"))
            }
        }
        if keys == [charging, fueling] {
            return .success(.chargingAndFueling)
        }
        if keys == [audio, playableContent] {
            // The CarPlay framework wins over the deprecated Media Player tree.
            return .success(.audio)
        }
        if keys.contains(communication), keys.isSubset(of: [communication, messaging, calling]) {
            return .success(.communication)
        }
        if keys == [messaging, calling] {
            // Both deprecated Siri-only keys: still a Siri-only app.
            return .success(.legacyMessaging)
        }
        return .failure(refused("entitlements \(list(keys)) of \(appID) cannot be combined; an app has one category (only charging+fueling, audio+playable-content and communication+messaging/calling combine)"))
    }

    private static func refused(_ message: String) -> RuleViolation {
        RuleViolation(.entitlementRefused, message)
    }

    /// Sorted so the message is stable.
    private static func list(_ keys: Set<String>) -> String {
        keys.sorted().joined(separator: ", ")
    }
}
