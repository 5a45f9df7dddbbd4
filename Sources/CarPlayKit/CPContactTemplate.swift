import HeadUnitWire

/// A button with an image and title: the base of the contact actions (`CPButton`).
public class CPButton: CPTemplateElement, @unchecked Sendable {
    /// The image.
    @CPLocked public var image: CPImage? { didSet { elementDidChange() } }
    /// The title.
    @CPLocked public var title: String? { didSet { elementDidChange() } }
    /// A disabled button cannot be pressed (kept for source compatibility; the car's contact actions have no disabled state).
    @CPLocked public var isEnabled: Bool = true
    /// Called when the driver presses the button.
    @CPLocked public var handler: (@MainActor (CPButton) -> Void)?

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
public final class CPContactCallButton: CPButton, @unchecked Sendable {
    /// A call action.
    public init(identifier: String? = nil, handler: (@MainActor (CPButton) -> Void)?) {
        super.init(image: nil, identifier: identifier, handler: handler)
    }
    override var actionKind: HUContactActionKind { .call }
}

/// The message action of a contact; the car starts its own voice flow (`CPContactMessageButton`).
public final class CPContactMessageButton: CPButton, @unchecked Sendable {
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
public final class CPContactDirectionsButton: CPButton, @unchecked Sendable {
    /// A directions action.
    public init(identifier: String? = nil, handler: (@MainActor (CPButton) -> Void)?) {
        super.init(image: nil, identifier: identifier, handler: handler)
    }
    override var actionKind: HUContactActionKind { .directions }
}

/// A person shown by a contact template (`CPContact`).
public final class CPContact: @unchecked Sendable {
    /// The name (the template's title).
    @CPLocked public var name: String
    /// The photo.
    @CPLocked public var image: CPImage?
    /// A line under the name.
    @CPLocked public var subtitle: String?
    /// More text (up to 3 lines, split at newlines).
    @CPLocked public var informativeText: String?
    /// The actions (at most 4).
    @CPLocked public var actions: [CPButton] = []

    /// A contact.
    public init(name: String, image: CPImage?) {
        self.name = name
        self.image = image
    }
}

/// A contact with up to four actions (`CPContactTemplate`).
public final class CPContactTemplate: CPTemplate, CPBarButtonProviding, @unchecked Sendable {
    /// The contact; set a new one (or change it and set it again) to update the template.
    @CPLocked public var contact: CPContact { didSet { contact.actions.adopt(by: self); setNeedsUpdate() } }
    /// Leading navigation-bar buttons (at most 2).
    @CPLocked public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing navigation-bar buttons (at most 2).
    @CPLocked public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }

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

    @MainActor override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let action = contact.actions.first(where: { $0.identifier == pressed.buttonID }) {
            action.handler?(action)
            return true
        }
        return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
    }
}
