import HeadUnitWire

// OWNER: rules helper. Minimal first version; to be completed (DOMAIN.md §4).
public enum CategoryRules {
    /// Stack depth, root included.
    public static func maxStackDepth(for category: HUCategory) -> Int {
        switch category {
        case .fueling, .chargingAndFueling: return 3
        case .drivingTask, .quickOrdering: return 2
        default: return 5
        }
    }

    public static func allows(_ kind: TemplateKind, for category: HUCategory) -> Bool {
        true
    }

    public static func maxTabs(for category: HUCategory) -> Int {
        category == .audio ? 4 : 5
    }
}
