import HeadUnitWire

/// How an alert action looks (`CPAlertAction.Style`).
public enum CPAlertActionStyle: Sendable, Equatable {
    /// A plain action.
    case `default`
    /// Cancels.
    case cancel
    /// Destroys something (drawn in red).
    case destructive

    var wire: HUButtonStyle {
        switch self {
        case .default: return .default
        case .cancel: return .cancel
        case .destructive: return .destructive
        }
    }
}

/// An action of an alert, action sheet or navigation alert (`CPAlertAction`).
@MainActor
public final class CPAlertAction: CPTemplateElement {
    /// The action's title.
    public let title: String
    /// How it looks.
    public let style: CPAlertActionStyle
    /// Called when the driver chooses the action. The car does not dismiss
    /// the alert itself: call `dismissTemplate` here.
    public let handler: @MainActor (CPAlertAction) -> Void

    /// An action.
    public init(title: String, style: CPAlertActionStyle, identifier: String? = nil, handler: @escaping @MainActor (CPAlertAction) -> Void) {
        self.title = title
        self.style = style
        self.handler = handler
        super.init(identifier: identifier, prefix: "action")
    }

    var wire: HUTextButton {
        var button = HUTextButton()
        button.id = identifier
        button.title = title
        button.style = style.wire
        return button
    }
}

/// A modal alert with a title and actions (`CPAlertTemplate`); only presented.
@MainActor
public final class CPAlertTemplate: CPTemplate {
    /// Titles, the car shows the longest that fits.
    public let titleVariants: [String]
    /// The actions (at least one).
    public let actions: [CPAlertAction]

    /// An alert.
    public init(titleVariants: [String], actions: [CPAlertAction], identifier: String? = nil) {
        self.titleVariants = titleVariants
        self.actions = actions
        super.init(identifier: identifier, prefix: "alert")
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var alert = HUAlertTemplate()
        alert.titleVariants = titleVariants.longestFirst
        alert.actions = actions.map(\.wire)
        return .alert(alert)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let action = actions.first(where: { $0.identifier == pressed.buttonID }) { action.handler(action) }
        return true
    }
}

/// A modal sheet of actions with a title and message (`CPActionSheetTemplate`); only presented.
@MainActor
public final class CPActionSheetTemplate: CPTemplate {
    /// The title.
    public let title: String?
    /// The message.
    public let message: String?
    /// The actions (at least two).
    public let actions: [CPAlertAction]

    /// An action sheet.
    public init(title: String?, message: String?, actions: [CPAlertAction], identifier: String? = nil) {
        self.title = title
        self.message = message
        self.actions = actions
        super.init(identifier: identifier, prefix: "sheet")
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var sheet = HUActionSheetTemplate()
        sheet.title = title ?? ""
        sheet.message = message ?? ""
        sheet.actions = actions.map(\.wire)
        return .actionSheet(sheet)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let action = actions.first(where: { $0.identifier == pressed.buttonID }) { action.handler(action) }
        return true
    }
}
