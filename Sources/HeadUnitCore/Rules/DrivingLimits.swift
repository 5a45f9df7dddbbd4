import HeadUnitWire

/// Lists shrink while driving: the car shows at most its maximum item count
/// ("some cars dynamically limit lists to 12 items"); extra items are not shown.
public enum DrivingLimits {
    /// The template as the car shows it while lists are limited: at most
    /// `maxItems` items in all and at most `maxSections` sections, counted in
    /// order; sections left without room are dropped. A limit of 0 means no cap
    /// (as in SessionConfiguration.max_list_items).
    ///
    /// `shown` and `total` count list items; for a tab bar, each tab's list is
    /// truncated on its own and the counts are summed over the tabs. Templates
    /// without lists come back unchanged with (0, 0).
    public static func truncate(_ template: HUTemplate, maxItems: Int, maxSections: Int) -> (template: HUTemplate, shown: Int, total: Int) {
        switch template.kind {
        case .list(let list):
            let (truncated, shown, total) = truncate(list, maxItems: maxItems, maxSections: maxSections)
            // Nothing cut: the template itself, not a copy.
            if shown == total && truncated.sections.count == list.sections.count { return (template, shown, total) }
            var result = template
            result.kind = .list(truncated)
            return (result, shown, total)
        case .tabBar(var tabBar):
            var shown = 0
            var total = 0
            for index in tabBar.tabs.indices where tabBar.tabs[index].hasTemplate {
                let tab = truncate(tabBar.tabs[index].template, maxItems: maxItems, maxSections: maxSections)
                tabBar.tabs[index].template = tab.template
                shown += tab.shown
                total += tab.total
            }
            var result = template
            result.kind = .tabBar(tabBar)
            return (result, shown, total)
        case nil, .grid, .nowPlaying, .alert, .actionSheet, .information, .pointOfInterest, .contact, .map, .search, .voiceControl:
            return (template, 0, 0)
        }
    }

    /// What `truncate` would show of a list whose sections hold these many
    /// items, counted without building the cut list.
    public static func counts(sectionItems: [Int], maxItems: Int, maxSections: Int) -> (shown: Int, total: Int) {
        let total = sectionItems.reduce(0, +)
        var remaining = maxItems > 0 ? maxItems : Int.max
        var shown = 0
        for items in sectionItems.prefix(maxSections > 0 ? maxSections : Int.max) {
            if remaining == 0 { break }
            let taken = min(items, remaining)
            shown += taken
            remaining -= taken
        }
        return (shown, total)
    }

    static func truncate(_ list: HUListTemplate, maxItems: Int, maxSections: Int) -> (HUListTemplate, shown: Int, total: Int) {
        let total = list.sections.reduce(0) { $0 + $1.items.count }
        let itemCap = maxItems > 0 ? maxItems : Int.max
        let sectionCap = maxSections > 0 ? maxSections : Int.max
        if total <= itemCap && list.sections.count <= sectionCap {
            return (list, total, total)
        }
        var remaining = itemCap
        var sections: [HUListSection] = []
        for var section in list.sections.prefix(sectionCap) {
            if remaining == 0 { break }
            section.items = Array(section.items.prefix(remaining))
            remaining -= section.items.count
            sections.append(section)
        }
        var truncated = list
        truncated.sections = sections
        let shown = sections.reduce(0) { $0 + $1.items.count }
        return (truncated, shown, total)
    }
}

/// How often a category may refresh a template (Protocol/TEMPLATES.md section 8).
public enum RefreshRules {
    /// Points of interest of driving-task apps: at most once every 60 s.
    public static let drivingTaskPointsOfInterestMilliseconds: UInt64 = 60_000
    /// Data items (list and information updates) of driving-task apps: at most once every 10 s.
    public static let drivingTaskDataItemsMilliseconds: UInt64 = 10_000

    /// Minimum milliseconds between updates of a template of this kind for this
    /// category, or nil when the car does not limit them.
    public static func minimumUpdateInterval(_ kind: TemplateKind, category: HUCategory) -> UInt64? {
        guard category == .drivingTask else { return nil }
        switch kind {
        case .pointOfInterest: return drivingTaskPointsOfInterestMilliseconds
        case .list, .information: return drivingTaskDataItemsMilliseconds
        case .grid, .tabBar, .nowPlaying, .alert, .actionSheet, .contact, .map, .search, .voiceControl: return nil
        }
    }
}
