import HeadUnitWire

/// The category an app's claims give it (Protocol/TEMPLATES.md section 1; the keys are `EntitlementKey`).
public enum Entitlements {
    /// Every key the car knows, each with the category it gives on its own.
    public static let singleKeyCategories: [String: HUCategory] = [
        EntitlementKey.audio: .audio,
        EntitlementKey.playableContent: .legacyAudio,
        EntitlementKey.communication: .communication,
        EntitlementKey.messaging: .legacyMessaging,
        EntitlementKey.calling: .legacyMessaging,
        EntitlementKey.maps: .navigation,
        EntitlementKey.charging: .evCharging,
        EntitlementKey.fueling: .fueling,
        EntitlementKey.parking: .parking,
        EntitlementKey.quickOrdering: .quickOrdering,
        EntitlementKey.drivingTask: .drivingTask,
        EntitlementKey.protocols: .automaker,
        EntitlementKey.publicSafety: .publicSafety,
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
        if keys.contains(EntitlementKey.maps) {
            let conflicting = keys.intersection([EntitlementKey.audio, EntitlementKey.playableContent, EntitlementKey.communication, EntitlementKey.messaging, EntitlementKey.calling])
            if !conflicting.isEmpty {
                return .failure(refused("navigation (\(EntitlementKey.maps)) cannot be combined with audio, messaging or calling (\(list(conflicting))) in \(appID)"))
            }
        }
        if keys == [EntitlementKey.charging, EntitlementKey.fueling] {
            return .success(.chargingAndFueling)
        }
        if keys == [EntitlementKey.audio, EntitlementKey.playableContent] {
            // The CarPlay framework wins over the deprecated Media Player tree.
            return .success(.audio)
        }
        if keys.contains(EntitlementKey.communication), keys.isSubset(of: [EntitlementKey.communication, EntitlementKey.messaging, EntitlementKey.calling]) {
            return .success(.communication)
        }
        if keys == [EntitlementKey.messaging, EntitlementKey.calling] {
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
