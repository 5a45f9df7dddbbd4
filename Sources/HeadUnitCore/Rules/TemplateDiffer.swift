import HeadUnitWire

// OWNER: rules helper. Minimal first version; to be completed (element-level diffs).
public enum TemplateDiffer {
    /// The element changes that turn `old` into `new` (same template id), or nil
    /// when the structure changed and the whole template must be re-sent.
    public static func diff(from old: HUTemplate, to new: HUTemplate) -> [HUElementChange]? {
        old == new ? [] : nil
    }
}

// OWNER: rules helper.
public enum DrivingLimits {
    /// The template as the car shows it while lists are limited: at most
    /// `maxItems` items in all (extra items are not shown).
    public static func truncate(_ template: HUTemplate, maxItems: Int, maxSections: Int) -> (template: HUTemplate, shown: Int, total: Int) {
        guard case .list(var list) = template.kind else { return (template, 0, 0) }
        let total = list.sections.reduce(0) { $0 + $1.items.count }
        var remaining = maxItems
        var sections: [HUListSection] = []
        for var section in list.sections.prefix(maxSections) where remaining > 0 {
            section.items = Array(section.items.prefix(remaining))
            remaining -= section.items.count
            sections.append(section)
        }
        list.sections = sections
        var shownTemplate = template
        shownTemplate.kind = .list(list)
        return (shownTemplate, maxItems - remaining, total)
    }
}

// OWNER: rules helper.
public enum RefreshRules {
    /// Minimum milliseconds between updates of a template of this kind for this category, if any.
    public static func minimumUpdateInterval(_ kind: TemplateKind, category: HUCategory) -> UInt64? {
        nil
    }
}
