import HeadUnitWire

/// Which templates each category may use, and its stack and tab limits (Protocol/TEMPLATES.md section 2).
public enum CategoryRules {
    /// The guide's four columns, plus the categories that may use no template.
    enum Column {
        case audio, communication, navigation
        /// Charging, fueling, parking, quick ordering, driving task; public
        /// safety (API) and automaker apps are put here too.
        case drivingTasks
        /// Legacy and unspecified categories: no custom UI at all.
        case noTemplates
    }

    static func column(for category: HUCategory) -> Column {
        switch category {
        case .audio: return .audio
        case .communication: return .communication
        case .navigation: return .navigation
        case .evCharging, .fueling, .chargingAndFueling, .parking, .quickOrdering, .drivingTask, .publicSafety:
            return .drivingTasks
        // Automaker apps show their features with general-purpose templates;
        // like the last column they get no media, contact or map templates.
        case .automaker: return .drivingTasks
        case .legacyAudio, .legacyMessaging, .unspecified, .UNRECOGNIZED: return .noTemplates
        }
    }

    /// Stack depth, root included; 0 for categories that may show no template.
    public static func maxStackDepth(for category: HUCategory) -> Int {
        switch category {
        case .fueling, .chargingAndFueling: return 3  // charging+fueling gets the smaller
        case .drivingTask, .quickOrdering: return 2
        case .audio, .communication, .navigation, .evCharging, .parking, .publicSafety, .automaker: return 5
        case .legacyAudio, .legacyMessaging, .unspecified, .UNRECOGNIZED: return 0
        }
    }

    /// The guide's template table.
    public static func allows(_ kind: TemplateKind, for category: HUCategory) -> Bool {
        let column = column(for: category)
        switch kind {
        case .alert, .grid, .list, .tabBar:
            return column != .noTemplates
        case .actionSheet, .information:
            return column == .communication || column == .navigation || column == .drivingTasks
        case .pointOfInterest:
            return column == .drivingTasks
        case .nowPlaying:
            return column == .audio
        case .contact:
            return column == .communication || column == .navigation
        case .map, .search, .voiceControl:
            return column == .navigation
        }
    }

    /// The most tabs a tab bar may hold: 4 for audio apps, 5 for the others.
    public static func maxTabs(for category: HUCategory) -> Int {
        category == .audio ? 4 : 5
    }

    /// Templates a tab may hold as its root (the API's restriction, plus contact,
    /// which the protocol allows in a tab). The category table applies as well.
    public static func allowedInTab(_ kind: TemplateKind) -> Bool {
        switch kind {
        case .list, .grid, .information, .pointOfInterest, .contact: return true
        case .tabBar, .nowPlaying, .alert, .actionSheet, .map, .search, .voiceControl: return false
        }
    }

    /// List items in a list template, if the category caps them (quick ordering: 12).
    public static func maxListItems(for category: HUCategory) -> Int? {
        category == .quickOrdering ? TemplateLimits.quickOrderingListItems : nil
    }

    /// Items in an information template: 10, quick ordering 12.
    public static func maxInformationItems(for category: HUCategory) -> Int {
        category == .quickOrdering ? TemplateLimits.quickOrderingInformationItems : TemplateLimits.informationItems
    }
}
