import HeadUnitWire

/// A button of a grid: an image and a title (`CPGridButton`).
@MainActor
public final class CPGridButton: CPTemplateElement {
    /// Titles, the car shows the longest that fits.
    public private(set) var titleVariants: [String]
    /// The image.
    public private(set) var image: CPImage
    /// A disabled button is greyed out and cannot be pressed.
    public var isEnabled: Bool = true { didSet { elementDidChange() } }
    /// Called when the driver presses the button.
    public var handler: (@MainActor (CPGridButton) -> Void)?

    /// A grid button.
    public init(titleVariants: [String], image: CPImage, identifier: String? = nil, handler: (@MainActor (CPGridButton) -> Void)? = nil) {
        self.titleVariants = titleVariants
        self.image = image
        self.handler = handler
        super.init(identifier: identifier, prefix: "grid-button")
    }

    /// Changes the titles.
    public func updateTitleVariants(_ titleVariants: [String]) { self.titleVariants = titleVariants; elementDidChange() }
    /// Changes the image.
    public func updateImage(_ image: CPImage) { self.image = image; elementDidChange() }

    var wire: HUGridButton {
        var button = HUGridButton()
        button.id = identifier
        button.titleVariants = titleVariants.longestFirst
        button.image = image.wire
        button.disabled = !isEnabled
        return button
    }
}

/// A grid of up to 8 buttons (`CPGridTemplate`).
@MainActor
public final class CPGridTemplate: CPTemplate, CPBarButtonProviding {
    /// The title.
    public private(set) var title: String?
    /// The buttons, in order.
    public private(set) var gridButtons: [CPGridButton]
    /// Leading navigation-bar buttons (at most 2).
    public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing navigation-bar buttons (at most 2).
    public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }

    /// The most buttons a grid has (the car's limit).
    public static let maximumGridButtonCount = 8

    /// A grid.
    public init(title: String?, gridButtons: [CPGridButton], identifier: String? = nil) {
        self.title = title
        self.gridButtons = gridButtons
        super.init(identifier: identifier, prefix: "grid")
        gridButtons.adopt(by: self)
    }

    /// Replaces the buttons.
    public func updateGridButtons(_ gridButtons: [CPGridButton]) {
        self.gridButtons = gridButtons
        gridButtons.adopt(by: self)
        setNeedsUpdate()
    }

    /// Changes the title.
    public func updateTitle(_ title: String) { self.title = title; setNeedsUpdate() }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var grid = HUGridTemplate()
        grid.title = title ?? ""
        grid.buttons = gridButtons.map(\.wire)
        grid.leadingButtons = leadingNavigationBarButtons.map(\.wire)
        grid.trailingButtons = trailingNavigationBarButtons.map(\.wire)
        return .grid(grid)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let button = gridButtons.first(where: { $0.identifier == pressed.buttonID }) {
            button.handler?(button)
            return true
        }
        return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
    }
}
