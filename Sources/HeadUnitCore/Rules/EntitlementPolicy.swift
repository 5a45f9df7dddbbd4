import HeadUnitWire

/// Which entitlements the car accepts (in real cars Apple signs them; here a
/// paired device's allow-list stands in).
public struct EntitlementPolicy: Sendable, Equatable {
    /// Entitlement keys the car accepts from any app.
    public var allowed: Set<String>
    /// Per-app overrides: app id -> the keys accepted for that app only.
    public var perApp: [String: Set<String>]

    public init(allowed: Set<String>, perApp: [String: Set<String>] = [:]) {
        self.allowed = allowed
        self.perApp = perApp
    }
}
