import HeadUnitWire

/// A template that passed every rule of `TemplateValidator` in the context it
/// is shown in: the only thing a scene stores (`SceneState`). Made only by
/// `TemplateValidator.validated`, so "validated" is this type, not a flag.
public struct ValidatedTemplate: Sendable, Equatable {
    public let template: HUTemplate
    public let kind: TemplateKind

    /// The template keeps its encoding (`HUTemplate.keepWireEncoding`): it
    /// is encoded once here, and every frame that shows it later (screens,
    /// diffs' full fallbacks, sizes for the bounds) uses those bytes.
    fileprivate init(_ template: HUTemplate, kind: TemplateKind) {
        var template = template
        template.keepWireEncoding()
        self.template = template
        self.kind = kind
    }
}

/// The car's template rules (Protocol/TEMPLATES.md sections 2-6).
public enum TemplateValidator {
    /// `template` as validated in `context`, or the first rule it breaks.
    public static func validated(_ template: HUTemplate, context: TemplateContext) -> Result<ValidatedTemplate, RuleViolation> {
        if let violation = validate(template, context: context) { return .failure(violation) }
        // `validate` refuses a template without a kind.
        return .success(ValidatedTemplate(template, kind: TemplateKind(template)!))
    }

    /// The first rule `template` breaks in `context`, or nil when it may be shown.
    ///
    /// Checks run in this order, so a client sees the most basic problem first:
    /// template id and kind, category table, placement, element ids, then the
    /// template's own counts, fields and images.
    public static func validate(_ template: HUTemplate, context: TemplateContext) -> RuleViolation? {
        if template.id.isEmpty {
            return RuleViolation(.invalidTemplate, "template id is empty")
        }
        guard let kind = TemplateKind(template) else {
            return RuleViolation(.invalidTemplate, "template \(template.id) has no kind")
        }
        // The shared now-playing template has one id, so HMI input and lifecycle events can name it.
        if (kind == .nowPlaying) != (template.id == nowPlayingTemplateID) {
            return RuleViolation(.invalidTemplate, kind == .nowPlaying
                ? "a now-playing template has the id '\(nowPlayingTemplateID)' (it is the app's one shared instance), not '\(template.id)'"
                : "the id '\(nowPlayingTemplateID)' is reserved for the now-playing template")
        }
        if !CategoryRules.allows(kind, for: context.category) {
            return RuleViolation(.notAllowedForCategory, "\(kind.rawValue) template \(template.id) is not allowed for the \(context.category) category")
        }
        if let violation = checkPlacement(kind, template.id, context.placement) {
            return violation
        }
        if let violation = checkElementIDs(template) {
            return violation
        }
        return TemplateContentRules(context: context).check(template)
    }

    /// Validates the items an app returns for a search (CompleteEvent.search_results)
    /// as items of a list in the search template.
    public static func validateSearchResults(_ items: [HUListItem], context: TemplateContext) -> RuleViolation? {
        var seen = Set<String>()
        for item in items {
            if item.id.isEmpty {
                return RuleViolation(.invalidTemplate, "search result id is empty")
            }
            if !seen.insert(item.id).inserted {
                return RuleViolation(.invalidTemplate, "search result id \(item.id) is used twice")
            }
        }
        let rules = TemplateContentRules(context: context)
        for item in items {
            if let violation = rules.check(item) { return violation }
        }
        return nil
    }

    // MARK: placement

    /// Where each template may go. Modal templates only through presentTemplate;
    /// tab bar and map only as the root; now playing never as the root (it sits
    /// on top of the app's hierarchy: the car shows it from its Now Playing
    /// buttons); only a list on top of now playing; tabs hold only
    /// list, grid, information, point of interest or contact.
    static func checkPlacement(_ kind: TemplateKind, _ id: String, _ placement: TemplatePlacement) -> RuleViolation? {
        if placement == .present {
            return kind.isModal ? nil : position("\(kind.rawValue) template \(id) cannot be presented; only alert, action sheet and voice control are presented")
        }
        if kind.isModal {
            return position("\(kind.rawValue) template \(id) is modal: use presentTemplate")
        }
        switch placement {
        case .present:
            return nil  // handled above
        case .root:
            if kind == .nowPlaying {
                return position("now playing template \(id) cannot be the root template; push it on the app's hierarchy")
            }
            return nil
        case .push(let below):
            if kind == .tabBar || kind == .map {
                return position("\(kind.rawValue) template \(id) can only be the root template")
            }
            if below == .nowPlaying && kind != .list {
                return position("only a list may be pushed on top of now playing, not \(kind.rawValue) template \(id)")
            }
            return nil
        case .tab:
            if kind == .tabBar {
                return position("tab bar template \(id) cannot be nested in a tab")
            }
            if !CategoryRules.allowedInTab(kind) {
                return position("\(kind.rawValue) template \(id) cannot be the content of a tab (list, grid, information, point of interest or contact only)")
            }
            return nil
        }
    }

    private static func position(_ message: String) -> RuleViolation {
        RuleViolation(.invalidPosition, message)
    }

    // MARK: element ids

    /// Every element of one template (sections, items, buttons, tabs, points,
    /// states, actions) has a non-empty id, unique within the template: events
    /// name an element by template id and element id only.
    /// A tab bar's scope holds its tabs and the ids of the templates in them;
    /// those templates are checked on their own when validated as tab content.
    static func checkElementIDs(_ template: HUTemplate) -> RuleViolation? {
        var scope = IDScope(template.id)
        switch template.kind {
        case nil:
            break
        case .list(let list):
            // Most of any large template: its sections and items.
            scope.expect(list.sections.reduce(list.sections.count) { $0 + $1.items.count })
            // By index: no copy of each (large) list item for its id.
            for section in list.sections.indices {
                scope.add(list.sections[section].id, "section")
                list.sections[section].items.withUnsafeBufferPointer { items in
                    for index in items.indices { scope.add(items[index].id, "list item") }
                }
            }
            scope.add(list.leadingButtons, list.trailingButtons)
        case .grid(let grid):
            for button in grid.buttons { scope.add(button.id, "grid button") }
            scope.add(grid.leadingButtons, grid.trailingButtons)
        case .tabBar(let tabBar):
            for tab in tabBar.tabs {
                scope.add(tab.id, "tab")
                if tab.hasTemplate { scope.add(tab.template.id, "template of a tab") }
            }
        case .nowPlaying(let nowPlaying):
            for button in nowPlaying.buttons { scope.add(button.id, "now playing button") }
        case .alert(let alert):
            for action in alert.actions { scope.add(action.id, "alert action") }
        case .actionSheet(let sheet):
            for action in sheet.actions { scope.add(action.id, "action sheet action") }
        case .information(let information):
            for item in information.items { scope.add(item.id, "information item") }
            for action in information.actions { scope.add(action.id, "information action") }
            scope.add(information.leadingButtons, information.trailingButtons)
        case .pointOfInterest(let poi):
            for point in poi.points {
                scope.add(point.id, "point of interest")
                if point.hasPrimaryButton { scope.add(point.primaryButton.id, "primary button of a point") }
                if point.hasSecondaryButton { scope.add(point.secondaryButton.id, "secondary button of a point") }
            }
        case .contact(let contact):
            for action in contact.actions { scope.add(action.id, "contact action") }
            scope.add(contact.leadingButtons, contact.trailingButtons)
        case .map(let map):
            scope.add(map.leadingButtons, map.trailingButtons)
            for button in map.mapButtons { scope.add(button.id, "map button") }
        case .search:
            break
        case .voiceControl(let voice):
            for state in voice.states { scope.add(state.id, "voice control state") }
        }
        return scope.violation
    }
}

/// The ids seen so far in one template; keeps the first violation.
struct IDScope {
    let templateID: String
    /// The ids seen, compared one by one while there are few: hashing a
    /// string (Swift's seeded hasher, which a phone cannot flood) costs
    /// hundreds of instructions, comparing two short ones tens, so a
    /// linear scan is the cheaper up to a few dozen ids (`fewest`, an
    /// estimate; BENCHMARKS.md, issue 49, fifth session). Past it they are
    /// hashed, so a 1,000-item list is not compared pair by pair.
    private var few: [String]
    private var many: Set<String>?
    private(set) var violation: RuleViolation?
    static let fewest = 32

    init(_ templateID: String) {
        self.templateID = templateID
        // One allocation: a literal `[templateID]` and then a reserve made two.
        few = []
        few.reserveCapacity(Self.fewest + 1)
        few.append(templateID)
    }

    /// About `count` more ids are coming (a list's sections and items):
    /// past `fewest` they are hashed from now on, in a set made once at
    /// that size (grown a doubling at a time, it rehashed every id each
    /// time). A wrong guess costs time, never a verdict.
    mutating func expect(_ count: Int) {
        guard many == nil, few.count + count > Self.fewest else { return }
        var set = Set<String>(minimumCapacity: few.count + count)
        for seen in few { set.insert(seen) }
        many = set
        few = []
    }

    mutating func add(_ id: String, _ what: StaticString) {
        guard violation == nil else { return }
        if id.isEmpty {
            violation = RuleViolation(.invalidTemplate, "\(what) in template \(templateID) has an empty id")
        } else if !insert(id) {
            violation = RuleViolation(.invalidTemplate, "id \(id) (\(what)) is used twice in template \(templateID)")
        }
    }

    /// False when `id` was seen already.
    private mutating func insert(_ id: String) -> Bool {
        if many != nil { return many!.insert(id).inserted }
        if few.contains(id) { return false }
        few.append(id)
        if few.count > Self.fewest { expect(few.count) }  // as many again: room to grow
        return true
    }

    mutating func add(_ leading: [HUBarButton], _ trailing: [HUBarButton]) {
        for button in leading { add(button.id, "bar button") }
        for button in trailing { add(button.id, "bar button") }
    }
}
