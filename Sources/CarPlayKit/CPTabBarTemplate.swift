import HeadUnitWire

/// Tells you which tab the driver chose (`CPTabBarTemplateDelegate`).
@MainActor
public protocol CPTabBarTemplateDelegate: AnyObject {
    /// The driver selected the tab showing `selectedTemplate`.
    func tabBarTemplate(_ tabBarTemplate: CPTabBarTemplate, didSelect selectedTemplate: CPTemplate)
}

/// Tabs, each showing a template (`CPTabBarTemplate`); only at the root.
///
/// Each tab's title, image and badge come from its template's `tabTitle`,
/// `tabImage`, `tabSystemItem` and `showsTabBadge`.
@MainActor
public final class CPTabBarTemplate: CPTemplate {
    /// The tabs' templates, in order.
    public private(set) var templates: [CPTemplate]
    private var selectedID: String?
    private var delegateRef = Weak<AnyObject>(nil)

    /// Tells you which tab the driver chose (held weakly).
    public var delegate: (any CPTabBarTemplateDelegate)? {
        get { delegateRef.object as? any CPTabBarTemplateDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// The most tabs the car shows for this app (4 for audio apps, 5 otherwise), from the scene.
    public static var maximumTabCount: Int { CPSessionState.current.maximumTabCount }

    /// A tab bar.
    public init(templates: [CPTemplate], identifier: String? = nil) {
        self.templates = templates
        super.init(identifier: identifier, prefix: "tabs")
        adopt()
    }

    /// The template of the selected tab.
    public var selectedTemplate: CPTemplate? {
        templates.first { $0.identifier == selectedID } ?? templates.first
    }

    /// Replaces the tabs.
    public func updateTemplates(_ newTemplates: [CPTemplate]) {
        templates = newTemplates
        adopt()
        setNeedsUpdate()
    }

    /// Selects the tab showing `template`.
    public func selectTemplate(_ template: CPTemplate) {
        selectedID = template.identifier
        setNeedsUpdate()
    }

    /// Selects the tab at `index`.
    public func selectTemplate(at index: Int) {
        guard templates.indices.contains(index) else { return }
        selectTemplate(templates[index])
    }

    private func adopt() {
        for template in templates { template.containerRef = Weak(self) }
    }

    static func tabID(_ template: CPTemplate) -> String { "tab-" + template.identifier }

    override var children: [CPTemplate] { templates }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var bar = HUTabBarTemplate()
        bar.tabs = templates.map { template in
            var tab = HUTab()
            tab.id = Self.tabID(template)
            tab.title = template.tabTitle ?? ""
            if let image = template.tabImage { tab.image = image.wire }
            tab.systemItem = template.tabSystemItem.wire
            tab.showUnreadDot = template.showsTabBadge
            tab.template = template.wire
            return tab
        }
        if let selectedID { bar.selectedTabID = "tab-" + selectedID }
        return .tabBar(bar)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .tabSelected(let selected) = event.kind else { return false }
        guard let template = templates.first(where: { Self.tabID($0) == selected.tabID }) else { return true }
        selectedID = template.identifier
        delegate?.tabBarTemplate(self, didSelect: template)
        return true
    }
}
