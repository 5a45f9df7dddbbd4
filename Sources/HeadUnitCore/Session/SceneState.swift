import HeadUnitWire

/// One connected scene of an app: its template stack and modal template.
/// The stack rules (what may go where, how deep) are checked here so every
/// interface-controller operation is one pure function of (scene, request).
public struct SceneState: Sendable, Equatable {
    /// Behind one reference (`CopyOnWrite`), as `AppState`'s are: a request
    /// reads its scene out of the car several times (the request itself,
    /// render, the composed bound, the image walk), and each read is a copy,
    /// one retain instead of one per array, dictionary and string inside.
    private struct Fields: Sendable, Equatable {
        let appID: String
        var stack: [HUTemplate] = []
        var presented: HUTemplate?
        var selectedTabs: [String: String] = [:]
        var searchResults: [HUListItem] = []
        var stackHeld: [Held] = []
        var presentedHeld: Held?
        var searchResultsBytes = 0
        var lastUpdateMilliseconds: [String: UInt64] = [:]
    }

    public let id: UInt32
    public let kind: HUSceneKind
    @CopyOnWrite private var fields: Fields

    public var appID: String { fields.appID }
    /// Root first. Empty until the app sets a root template.
    public private(set) var stack: [HUTemplate] {
        _read { yield fields.stack }
        _modify { yield &fields.stack }
    }
    public private(set) var presented: HUTemplate? {
        _read { yield fields.presented }
        _modify { yield &fields.presented }
    }
    /// The tab the car shows, per tab bar template id (the car owns tab selection).
    public var selectedTabs: [String: String] {
        _read { yield fields.selectedTabs }
        _modify { yield &fields.selectedTabs }
    }
    /// Results of the last search, shown under the search template.
    public var searchResults: [HUListItem] {
        _read { yield fields.searchResults }
        _modify {
            defer { fields.searchResultsBytes = fields.searchResults.reduce(0) { $0 + $1.wireSize } }
            yield &fields.searchResults
        }
    }
    /// The encoded size of each stack entry, of the modal and of the search
    /// results, kept as they change so the phone's template bytes are a sum,
    /// not a walk (PROTOCOL.md section 10.4, `max_phone_template_bytes`).
    public private(set) var stackHeld: [Held] {
        _read { yield fields.stackHeld }
        _modify { yield &fields.stackHeld }
    }
    public private(set) var presentedHeld: Held? {
        _read { yield fields.presentedHeld }
        _modify { yield &fields.presentedHeld }
    }
    public var heldBytes: Int { stackHeld.reduce(0) { $0 + $1.bytes } + (presentedHeld?.bytes ?? 0) + fields.searchResultsBytes }

    /// What the composed bound needs of a template the scene holds, taken
    /// once when it is stored, so measuring a screen does not walk it again.
    public struct Held: Sendable, Equatable {
        /// Its encoded size.
        public var bytes: Int
        /// Whether it holds an inline PNG (HMIs get those by ref: as sent, its size differs).
        public var hasInlineImages: Bool
        /// Whether it holds any image, inline or by ref (publishing a screen looks for both).
        public var hasImages: Bool
        /// Its kind, and for a list the items in each section: read once here.
        public let kind: TemplateKind?
        public let listSectionItems: [Int]

        /// The kind is the one the validator found, not found again.
        init(_ validated: ValidatedTemplate) {
            self.init(validated.template, kind: validated.kind)
        }

        /// A template restored from a snapshot (validated when the app set it).
        init(_ template: HUTemplate) {
            self.init(template, kind: TemplateKind(template))
        }

        private init(_ template: HUTemplate, kind: TemplateKind?) {
            bytes = template.wireSize
            let images = ImageWalk.scan(template)
            hasInlineImages = images.hasInline
            hasImages = images.hasInline || !images.refs.isEmpty
            self.kind = kind
            if case .list(let list)? = template.kind {
                listSectionItems = list.sections.map { $0.items.count }
            } else {
                listSectionItems = []
            }
        }
    }

    /// Last in-place update per template id, for the category's refresh limits.
    var lastUpdateMilliseconds: [String: UInt64] {
        _read { yield fields.lastUpdateMilliseconds }
        _modify { yield &fields.lastUpdateMilliseconds }
    }

    public init(id: UInt32, appID: String, kind: HUSceneKind) {
        self.id = id
        self.kind = kind
        fields = Fields(appID: appID)
    }

    /// A scene as a daemon restart handed it over (CarSnapshot): the stack and
    /// modal were validated when the app set them, so they are taken as they are.
    init(restoring id: UInt32, appID: String, kind: HUSceneKind, stack: [HUTemplate], presented: HUTemplate?) {
        self.init(id: id, appID: appID, kind: kind)
        self.stack = stack
        self.presented = presented
        self.stackHeld = stack.map { Held($0) }
        self.presentedHeld = presented.map { Held($0) }
    }

    public var top: HUTemplate? { stack.last }

    /// What a change to the stack did, so the car can send lifecycle events.
    /// As in UIKit, only what was visible disappears and only what becomes
    /// visible appears: templates covered by a push got their disappear events
    /// when they were covered, so removing them later sends nothing.
    public struct Transition: Sendable, Equatable {
        public var disappeared: [String] = []
        public var appeared: [String] = []
    }

    /// What the driver sees of this scene, front to back: the presented modal
    /// (it covers part of the screen), then the stack's top.
    public var visibleIDs: [String] { [presented?.id, stack.last?.id].compactMap { $0 } }

    /// Every operation but `set_root` (and the app-wide now-playing content) needs a root first.
    func requireRoot(_ operation: String) -> RuleViolation? {
        stack.isEmpty ? RuleViolation(.noRootTemplate, "set a root template before \(operation)") : nil
    }

    func context(_ placement: TemplatePlacement, category: HUCategory, scale: UInt32) -> TemplateContext {
        TemplateContext(category: category, placement: placement, displayScale: scale)
    }

    public mutating func setRoot(_ template: HUTemplate, category: HUCategory, scale: UInt32) -> Result<Transition, RuleViolation> {
        let validated: ValidatedTemplate
        switch TemplateValidator.validated(template, context: context(.root, category: category, scale: scale)) {
        case .success(let valid): validated = valid
        case .failure(let violation): return .failure(violation)
        }
        let old = visibleIDs
        stack = [validated.template]
        stackHeld = [Held(validated)]
        presented = nil
        presentedHeld = nil
        searchResults = []
        return .success(Transition(disappeared: old, appeared: [template.id]))
    }

    public mutating func push(_ template: HUTemplate, category: HUCategory, scale: UInt32) -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("pushing") { return .failure(violation) }
        let top = stack.last!
        guard let topKind = stackHeld.last!.kind else {
            return .failure(RuleViolation(.invalidTemplate, "the template on top has no kind"))
        }
        let validated: ValidatedTemplate
        switch TemplateValidator.validated(template, context: context(.push(onTopOf: topKind), category: category, scale: scale)) {
        case .success(let valid): validated = valid
        case .failure(let violation): return .failure(violation)
        }
        let maximum = CategoryRules.maxStackDepth(for: category)
        if stack.count + 1 > maximum {
            return .failure(RuleViolation(
                .depthExceeded, "stack depth \(stack.count + 1) exceeds \(maximum) for \(category)",
                limit: "stack.depth", limitValue: UInt32(maximum)))
        }
        if stack.contains(where: { $0.id == template.id }) {
            return .failure(RuleViolation(.invalidTemplate, "template id '\(template.id)' is already on the stack"))
        }
        stack.append(validated.template)
        stackHeld.append(Held(validated))
        return .success(Transition(disappeared: [top.id], appeared: [template.id]))
    }

    /// The car shows the app's now-playing template on its behalf (home screen or
    /// navigation bar button). The car is not bound by the app's placement rules:
    /// with no root yet, now playing stands alone until the app sets its root.
    public mutating func showNowPlaying(_ template: HUTemplate) -> Transition {
        if let top = stack.last {
            if top.id == template.id { return Transition() }
            stack.append(template)
            stackHeld.append(Held(template))
            return Transition(disappeared: [top.id], appeared: [template.id])
        }
        stack = [template]
        stackHeld = [Held(template)]
        return Transition(appeared: [template.id])
    }

    public mutating func pop() -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("popping") { return .failure(violation) }
        guard stack.count > 1 else {
            return .failure(RuleViolation(.invalidPosition, "the root template cannot be popped"))
        }
        let gone = stack.removeLast()
        stackHeld.removeLast()
        return .success(Transition(disappeared: [gone.id], appeared: [stack.last!.id]))
    }

    public mutating func popToRoot() -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("popping") { return .failure(violation) }
        return popTo(stack[0].id)
    }

    /// Pops down to `templateID`; at the top already, nothing changes (OK, no events).
    public mutating func popTo(_ templateID: String) -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("popping") { return .failure(violation) }
        guard let index = stack.firstIndex(where: { $0.id == templateID }) else {
            return .failure(RuleViolation(.unknownTemplate, "template '\(templateID)' is not on the stack"))
        }
        guard index < stack.count - 1 else { return .success(Transition()) }
        let top = stack.last!.id
        stack.removeSubrange((index + 1)...)
        stackHeld.removeSubrange((index + 1)...)
        return .success(Transition(disappeared: [top], appeared: [templateID]))
    }

    public mutating func present(_ template: HUTemplate, category: HUCategory, scale: UInt32) -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("presenting") { return .failure(violation) }
        if let presented {
            return .failure(RuleViolation(.alreadyPresented, "'\(presented.id)' is already presented; dismiss it first"))
        }
        let validated: ValidatedTemplate
        switch TemplateValidator.validated(template, context: context(.present, category: category, scale: scale)) {
        case .success(let valid): validated = valid
        case .failure(let violation): return .failure(violation)
        }
        presented = validated.template
        presentedHeld = Held(validated)
        return .success(Transition(appeared: [template.id]))
    }

    public mutating func dismiss() -> Result<Transition, RuleViolation> {
        if let violation = requireRoot("dismissing") { return .failure(violation) }
        guard let gone = presented else {
            return .failure(RuleViolation(.nothingPresented, "no template is presented"))
        }
        presented = nil
        presentedHeld = nil
        return .success(Transition(disappeared: [gone.id]))
    }

    /// Replaces the template with the same id (on the stack, presented, or a
    /// tab's content) in place, after validating it where it stands.
    public mutating func update(
        _ template: HUTemplate, category: HUCategory, scale: UInt32, nowMilliseconds: UInt64
    ) -> Result<Void, RuleViolation> {
        if let violation = requireRoot("updating") { return .failure(violation) }
        guard let location = locate(template.id) else {
            return .failure(RuleViolation(.unknownTemplate, "template '\(template.id)' is not on screen or on the stack"))
        }
        let current = self[location]
        guard TemplateKind(current) == TemplateKind(template) else {
            return .failure(RuleViolation(.invalidTemplate, "an update cannot change the kind of template '\(template.id)'"))
        }
        let validated: ValidatedTemplate
        switch TemplateValidator.validated(template, context: context(placement(of: location), category: category, scale: scale)) {
        case .success(let valid): validated = valid
        case .failure(let violation): return .failure(violation)
        }
        let kind = validated.kind
        if let interval = RefreshRules.minimumUpdateInterval(kind, category: category),
            let last = lastUpdateMilliseconds[template.id], nowMilliseconds &- last < interval
        {
            return .failure(RuleViolation(
                .rateLimited, "\(kind) of \(category) may be updated once every \(interval / 1000) s",
                limit: "refresh.interval_ms", limitValue: UInt32(clamping: interval)))
        }
        lastUpdateMilliseconds[template.id] = nowMilliseconds
        store(validated, at: location)
        return .success(())
    }

    /// Replaces one list item (matched by id) inside the list with `templateID`.
    public mutating func updateItem(_ item: HUListItem, inTemplate templateID: String, category: HUCategory, scale: UInt32, nowMilliseconds: UInt64) -> Result<Void, RuleViolation> {
        if let violation = requireRoot("updating") { return .failure(violation) }
        guard let location = locate(templateID) else {
            return .failure(RuleViolation(.unknownTemplate, "template '\(templateID)' is not on the stack"))
        }
        var template = self[location]
        guard case .list(var list) = template.kind else {
            return .failure(RuleViolation(.invalidTemplate, "template '\(templateID)' is not a list"))
        }
        var found = false
        for s in list.sections.indices {
            if let i = list.sections[s].items.firstIndex(where: { $0.id == item.id }) {
                list.sections[s].items[i] = item
                found = true
                break
            }
        }
        guard found else {
            return .failure(RuleViolation(.unknownItem, "no item '\(item.id)' in list '\(templateID)'"))
        }
        template.kind = .list(list)
        return update(template, category: category, scale: scale, nowMilliseconds: nowMilliseconds)
    }

    /// Where a template with this id lives in the scene.
    enum Location: Equatable {
        case stack(Int)
        case presented
        case tab(stackIndex: Int, tabIndex: Int)
    }

    func locate(_ templateID: String) -> Location? {
        if presented?.id == templateID { return .presented }
        for (index, template) in stack.enumerated().reversed() {
            if template.id == templateID { return .stack(index) }
            if case .tabBar(let bar) = template.kind,
                let tab = bar.tabs.firstIndex(where: { $0.template.id == templateID })
            {
                return .tab(stackIndex: index, tabIndex: tab)
            }
        }
        return nil
    }

    func placement(of location: Location) -> TemplatePlacement {
        switch location {
        case .presented: return .present
        case .tab: return .tab
        case .stack(0): return .root
        case .stack(let index): return stackHeld[index - 1].kind.map { .push(onTopOf: $0) } ?? .root
        }
    }

    subscript(location: Location) -> HUTemplate {
        switch location {
        case .presented: return presented!
        case .stack(let index): return stack[index]
        case .tab(let index, let tab):
            guard case .tabBar(let bar) = stack[index].kind else { preconditionFailure("not a tab bar") }
            return bar.tabs[tab].template
        }
    }

    /// Puts a validated template at `location`, its `Held` measured again.
    mutating func store(_ validated: ValidatedTemplate, at location: Location) {
        let template = validated.template
        switch location {
        case .presented:
            presented = template
            presentedHeld = Held(validated)
        case .stack(let index):
            stack[index] = template
            stackHeld[index] = Held(validated)
        case .tab(let index, let tab):
            guard case .tabBar(var bar) = stack[index].kind else { preconditionFailure("not a tab bar") }
            bar.tabs[tab].template = template
            stack[index].kind = .tabBar(bar)
            stackHeld[index] = Held(stack[index])
        }
    }

    /// The template the car shows on top: the presented one, else the stack's top.
    public var visibleTemplateID: String? { presented?.id ?? stack.last?.id }
}
