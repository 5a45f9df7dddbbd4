import HeadUnitWire

// OWNER: rules helper. Minimal first version; to be completed (DOMAIN.md §3).
public enum Entitlements {
    /// Decides an app's category from its claims, or why it is refused.
    public static func category(for claims: [String], appID: String, policy: EntitlementPolicy) -> Result<HUCategory, RuleViolation> {
        let accepted = claims.filter { policy.allowed.contains($0) || policy.perApp[appID]?.contains($0) == true }
        switch Set(accepted) {
        case ["com.apple.developer.carplay-audio"]: return .success(.audio)
        case ["com.apple.developer.carplay-communication"]: return .success(.communication)
        case ["com.apple.developer.carplay-maps"]: return .success(.navigation)
        case ["com.apple.developer.carplay-parking"]: return .success(.parking)
        case ["com.apple.developer.carplay-quick-ordering"]: return .success(.quickOrdering)
        case ["com.apple.developer.carplay-driving-task"]: return .success(.drivingTask)
        default: return .failure(RuleViolation(.entitlementRefused, "no accepted entitlement"))
        }
    }
}
