import HeadUnitWire

/// A button with an image and title: the base of the contact actions (`CPButton`).
@MainActor
public class CPButton: CPTemplateElement {
    /// The image.
    public var image: CPImage? { didSet { elementDidChange() } }
    /// The title.
    public var title: String? { didSet { elementDidChange() } }
    /// A disabled button cannot be pressed (kept for source compatibility; the car's contact actions have no disabled state).
    public var isEnabled: Bool = true
    /// Called when the driver presses the button.
    public var handler: (@MainActor (CPButton) -> Void)?

    /// A custom contact action.
    public init(image: CPImage?, identifier: String? = nil, handler: (@MainActor (CPButton) -> Void)? = nil) {
        super.init(identifier: identifier, prefix: "contact-action")
        self.image = image
        self.handler = handler
    }

    var actionKind: HUContactActionKind { .custom }

    var wire: HUContactAction {
        var action = HUContactAction()
        action.id = identifier
        action.kind = actionKind
        action.title = title ?? ""
        if let image { action.image = image.wire }
        return action
    }
}

/// The call action of a contact (`CPContactCallButton`).
@MainActor
public final class CPContactCallButton: CPButton {
    /// A call action.
    public init(identifier: String? = nil, handler: (@MainActor (CPButton) -> Void)?) {
        super.init(image: nil, identifier: identifier, handler: handler)
    }
    override var actionKind: HUContactActionKind { .call }
}

/// The message action of a contact; the car starts its own voice flow (`CPContactMessageButton`).
@MainActor
public final class CPContactMessageButton: CPButton {
    /// The number or address to write to.
    public let phoneOrEmail: String
    /// A message action.
    public init(phoneOrEmail: String, identifier: String? = nil) {
        self.phoneOrEmail = phoneOrEmail
        super.init(image: nil, identifier: identifier, handler: nil)
    }
    override var actionKind: HUContactActionKind { .message }
}

/// The directions action of a contact (`CPContactDirectionsButton`).
@MainActor
public final class CPContactDirectionsButton: CPButton {
    /// A directions action.
    public init(identifier: String? = nil, handler: (@MainActor (CPButton) -> Void)?) {
        super.init(image: nil, identifier: identifier, handler: handler)
    }
    override var actionKind: HUContactActionKind { .directions }
}

/// A person shown by a contact template (`CPContact`).
@MainActor
public final class CPContact {
    /// The name (the template's title).
    public var name: String
    /// The photo.
    public var image: CPImage?
    /// A line under the name.
    public var subtitle: String?
    /// More text (up to 3 lines, split at newlines).
    public var informativeText: String?
    /// The actions (at most 4).
    public var actions: [CPButton] = []

    /// A contact.
    public init(name: String, image: CPImage?) {
        self.name = name
        self.image = image
    }
}

/// A contact with up to four actions (`CPContactTemplate`).
@MainActor
public final class CPContactTemplate: CPTemplate, CPBarButtonProviding {
    /// The contact; set a new one (or change it and set it again) to update the template.
    public var contact: CPContact { didSet { contact.actions.adopt(by: self); setNeedsUpdate() } }
    /// Leading navigation-bar buttons (at most 2).
    public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing navigation-bar buttons (at most 2).
    public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }

    /// A contact template.
    public init(contact: CPContact, identifier: String? = nil) {
        self.contact = contact
        super.init(identifier: identifier, prefix: "contact")
        contact.actions.adopt(by: self)
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var template = HUContactTemplate()
        template.title = contact.name
        template.subtitle = contact.subtitle ?? ""
        if let image = contact.image { template.image = image.wire }
        if let text = contact.informativeText {
            template.informativeTexts = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }
        template.actions = contact.actions.map(\.wire)
        template.leadingButtons = leadingNavigationBarButtons.map(\.wire)
        template.trailingButtons = trailingNavigationBarButtons.map(\.wire)
        return .contact(template)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let action = contact.actions.first(where: { $0.identifier == pressed.buttonID }) {
            action.handler?(action)
            return true
        }
        return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
    }
}
