import HeadUnitWire

/// How an information template lays out its items (`CPInformationTemplateLayout`).
public enum CPInformationTemplateLayout: Sendable, Equatable {
    /// One column, aligned to the leading edge.
    case leading
    /// Two columns.
    case twoColumn
}

/// A title and detail line of an information template (`CPInformationItem`).
@MainActor
public final class CPInformationItem: CPTemplateElement {
    /// The title.
    public var title: String? { didSet { elementDidChange() } }
    /// The detail.
    public var detail: String? { didSet { elementDidChange() } }

    /// An item.
    public init(title: String?, detail: String?, identifier: String? = nil) {
        super.init(identifier: identifier, prefix: "info")
        self.title = title
        self.detail = detail
    }

    var wire: HUInformationItem {
        var item = HUInformationItem()
        item.id = identifier
        item.title = title ?? ""
        item.detail = detail ?? ""
        return item
    }
}

/// Items of text and up to three footer buttons (`CPInformationTemplate`).
@MainActor
public final class CPInformationTemplate: CPTemplate, CPBarButtonProviding {
    /// The title.
    public var title: String { didSet { setNeedsUpdate() } }
    /// The layout.
    public var layout: CPInformationTemplateLayout { didSet { setNeedsUpdate() } }
    /// The items (at most 10, 12 for quick-ordering apps).
    public var items: [CPInformationItem] { didSet { items.adopt(by: self); setNeedsUpdate() } }
    /// The footer buttons (at most 3).
    public var actions: [CPTextButton] { didSet { actions.adopt(by: self); setNeedsUpdate() } }
    /// Leading navigation-bar buttons (at most 2).
    public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing navigation-bar buttons (at most 2).
    public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }

    /// An information template.
    public init(title: String, layout: CPInformationTemplateLayout, items: [CPInformationItem], actions: [CPTextButton], identifier: String? = nil) {
        self.title = title
        self.layout = layout
        self.items = items
        self.actions = actions
        super.init(identifier: identifier, prefix: "information")
        items.adopt(by: self)
        actions.adopt(by: self)
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var info = HUInformationTemplate()
        info.title = title
        info.layout = layout == .leading ? .leading : .twoColumn
        info.items = items.map(\.wire)
        info.actions = actions.map(\.wire)
        info.leadingButtons = leadingNavigationBarButtons.map(\.wire)
        info.trailingButtons = trailingNavigationBarButtons.map(\.wire)
        return .information(info)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let action = actions.first(where: { $0.identifier == pressed.buttonID }) {
            action.handler?(action)
            return true
        }
        return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
    }
}
