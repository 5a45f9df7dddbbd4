import HeadUnitWire

/// Element-level changes between two versions of one template, so the HMI
/// re-renders only what changed (Protocol/TEMPLATES.md, "Diffs").
public enum TemplateDiffer {
    /// The element changes that turn `old` into `new` (same template id), or nil
    /// when the structure changed and the whole template must be re-sent.
    ///
    /// Structure means: the template id and kind, the ids and order of every
    /// element list (sections, items, buttons, tabs, points), section headers,
    /// and every field that no ElementChange can carry (e.g. alert actions, map
    /// buttons, a tab bar's selected tab). `[]` means nothing changed.
    public static func diff(from old: HUTemplate, to new: HUTemplate) -> [HUElementChange]? {
        guard old.id == new.id else { return nil }
        // Each branch finds "nothing changed" itself: no separate whole-template compare.
        switch old.kind {
        case nil:
            return old == new ? [] : nil
        case .list(let a):
            guard case .list(let b) = new.kind else { return nil }
            return diffList(a, b)
        case .grid(let a):
            guard case .grid(let b) = new.kind else { return nil }
            return diffGrid(a, b)
        case .tabBar(let a):
            guard case .tabBar(let b) = new.kind else { return nil }
            return diffTabBar(a, b)
        case .nowPlaying:
            // The HMI replaces the whole now-playing state: it is small and shared.
            guard case .nowPlaying(let b) = new.kind else { return nil }
            return old == new ? [] : [change(.nowPlaying(b))]
        case .information(let a):
            guard case .information(let b) = new.kind else { return nil }
            return diffInformation(a, b)
        case .pointOfInterest(let a):
            guard case .pointOfInterest(let b) = new.kind else { return nil }
            return diffPointOfInterest(a, b)
        case .contact(let a):
            guard case .contact(let b) = new.kind else { return nil }
            return diffContact(a, b)
        case .map(let a):
            guard case .map(let b) = new.kind else { return nil }
            return diffMap(a, b)
        // Modal templates and search have no element an ElementChange carries.
        case .alert, .actionSheet, .search, .voiceControl:
            return old == new ? [] : nil
        }
    }

    // MARK: per template
    //
    // Each diff collects the changes it can express, then checks that applying
    // them to `a` gives `b`; anything else that changed makes it a structural change.

    static func diffList(_ a: HUListTemplate, _ b: HUListTemplate) -> [HUElementChange]? {
        guard a.sections.count == b.sections.count else { return nil }
        var changes = title(a.title, b.title)
        for (sa, sb) in zip(a.sections, b.sections) {
            guard sa.id == sb.id, sa.header == sb.header, sa.unknownFields == sb.unknownFields,
                  let items = elements(sa.items, sb.items, id: \.id, { .listItem($0) }) else { return nil }
            changes += items
        }
        guard let bar = barButtons(a.leadingButtons, a.trailingButtons, b.leadingButtons, b.trailingButtons) else { return nil }
        var patched = a
        patched.title = b.title
        patched.sections = b.sections
        patched.leadingButtons = b.leadingButtons
        patched.trailingButtons = b.trailingButtons
        return patched == b ? changes + bar : nil
    }

    static func diffGrid(_ a: HUGridTemplate, _ b: HUGridTemplate) -> [HUElementChange]? {
        guard let buttons = elements(a.buttons, b.buttons, id: \.id, { .gridButton($0) }),
              let bar = barButtons(a.leadingButtons, a.trailingButtons, b.leadingButtons, b.trailingButtons) else { return nil }
        var patched = a
        patched.title = b.title
        patched.buttons = b.buttons
        patched.leadingButtons = b.leadingButtons
        patched.trailingButtons = b.trailingButtons
        return patched == b ? title(a.title, b.title) + buttons + bar : nil
    }

    /// A changed tab (title, image, badge, unread dot, or its template) is sent whole.
    static func diffTabBar(_ a: HUTabBarTemplate, _ b: HUTabBarTemplate) -> [HUElementChange]? {
        guard let tabs = elements(a.tabs, b.tabs, id: \.id, { .tab($0) }) else { return nil }
        var patched = a
        patched.tabs = b.tabs
        return patched == b ? tabs : nil
    }

    static func diffInformation(_ a: HUInformationTemplate, _ b: HUInformationTemplate) -> [HUElementChange]? {
        guard let items = elements(a.items, b.items, id: \.id, { .informationItem($0) }),
              let bar = barButtons(a.leadingButtons, a.trailingButtons, b.leadingButtons, b.trailingButtons) else { return nil }
        var patched = a
        patched.title = b.title
        patched.items = b.items
        patched.leadingButtons = b.leadingButtons
        patched.trailingButtons = b.trailingButtons
        return patched == b ? title(a.title, b.title) + items + bar : nil
    }

    static func diffPointOfInterest(_ a: HUPointOfInterestTemplate, _ b: HUPointOfInterestTemplate) -> [HUElementChange]? {
        guard let points = elements(a.points, b.points, id: \.id, { .point($0) }) else { return nil }
        var patched = a
        patched.title = b.title
        patched.points = b.points
        patched.selectedIndex = b.selectedIndex
        guard patched == b else { return nil }
        let selection = a.selectedIndex == b.selectedIndex ? [] : [change(.selectedPointIndex(b.selectedIndex))]
        return title(a.title, b.title) + points + selection
    }

    static func diffContact(_ a: HUContactTemplate, _ b: HUContactTemplate) -> [HUElementChange]? {
        guard let bar = barButtons(a.leadingButtons, a.trailingButtons, b.leadingButtons, b.trailingButtons) else { return nil }
        var patched = a
        patched.title = b.title
        patched.leadingButtons = b.leadingButtons
        patched.trailingButtons = b.trailingButtons
        return patched == b ? title(a.title, b.title) + bar : nil
    }

    static func diffMap(_ a: HUMapTemplate, _ b: HUMapTemplate) -> [HUElementChange]? {
        guard let bar = barButtons(a.leadingButtons, a.trailingButtons, b.leadingButtons, b.trailingButtons) else { return nil }
        var patched = a
        patched.leadingButtons = b.leadingButtons
        patched.trailingButtons = b.trailingButtons
        return patched == b ? bar : nil
    }

    // MARK: helpers

    static func change(_ element: HUElementChange.OneOf_Element) -> HUElementChange {
        var change = HUElementChange()
        change.element = element
        return change
    }

    static func title(_ old: String, _ new: String) -> [HUElementChange] {
        old == new ? [] : [change(.title(new))]
    }

    /// The changed elements of a list whose ids and order stayed the same, or
    /// nil when elements were added, removed or reordered.
    static func elements<Element: Equatable>(
        _ old: [Element], _ new: [Element], id: (Element) -> String,
        _ element: (Element) -> HUElementChange.OneOf_Element
    ) -> [HUElementChange]? {
        guard old.count == new.count else { return nil }
        var changes: [HUElementChange] = []
        for (a, b) in zip(old, new) {
            guard id(a) == id(b) else { return nil }
            if a != b { changes.append(change(element(b))) }
        }
        return changes
    }

    static func barButtons(_ oldLeading: [HUBarButton], _ oldTrailing: [HUBarButton], _ newLeading: [HUBarButton], _ newTrailing: [HUBarButton]) -> [HUElementChange]? {
        guard let leading = elements(oldLeading, newLeading, id: \.id, { .barButton($0) }),
              let trailing = elements(oldTrailing, newTrailing, id: \.id, { .barButton($0) }) else { return nil }
        return leading + trailing
    }
}
