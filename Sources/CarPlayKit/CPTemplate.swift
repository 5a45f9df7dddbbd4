import HeadUnitWire

/// The system items a tab can show instead of a title and image (`UITabBarItem.SystemItem`).
public enum CPTabSystemItem: Sendable, Equatable {
    /// No system item: the template's `tabTitle` and `tabImage`.
    case none, favorites, recents, search, more, contacts, featured, mostRecent, mostViewed, topRated, history, downloads, bookmarks

    var wire: HUSystemTabItem {
        switch self {
        case .none: return .none
        case .favorites: return .favorites
        case .recents: return .recents
        case .search: return .search
        case .more: return .more
        case .contacts: return .contacts
        case .featured: return .featured
        case .mostRecent: return .mostRecent
        case .mostViewed: return .mostViewed
        case .topRated: return .topRated
        case .history: return .history
        case .downloads: return .downloads
        case .bookmarks: return .bookmarks
        }
    }
}

/// The base class of every template, as `CPTemplate` is in CarPlay.
///
/// Each template has an ``identifier`` (ours: the car names templates by id in
/// its events and in-place updates). One is made up for you when you do not
/// give one; give your own when you want to find the template in
/// `headunitctl watch` or in tests.
///
/// Templates live on the main actor, as CarPlay's do: you create and change
/// them there (in a scene delegate, a handler, a `@MainActor` task).
/// A change to a template on screen is sent to the car as an in-place update.
@MainActor
public class CPTemplate {
    /// The template's id, unique within its scene.
    public let identifier: String
    /// Anything you want to keep with the template.
    public var userInfo: (any Sendable)?
    /// The title of this template's tab, when it is a tab of a ``CPTabBarTemplate``.
    public var tabTitle: String? { didSet { containerNeedsUpdate() } }
    /// The image of this template's tab.
    public var tabImage: CPImage? { didSet { containerNeedsUpdate() } }
    /// A system tab item (favorites, recents...) instead of title and image.
    public var tabSystemItem: CPTabSystemItem = .none { didSet { containerNeedsUpdate() } }
    /// Shows a dot on this template's tab.
    public var showsTabBadge: Bool = false { didSet { containerNeedsUpdate() } }

    // ---- attachment: where the template is shown, so changes reach the car
    var containerRef = Weak<CPTemplate>(nil)
    var controllerRef = Weak<CPInterfaceController>(nil)

    init(identifier: String?, prefix: String) {
        self.identifier = identifier ?? ElementID.make(prefix)
    }

    /// The template's content as the car's message (without the id).
    func wireKind() -> HUTemplate.OneOf_Kind? { nil }

    /// The template as sent to the car.
    var wire: HUTemplate {
        var template = HUTemplate()
        template.id = identifier
        template.kind = wireKind()
        return template
    }

    /// The templates inside this one (a tab bar's tabs), for event routing.
    var children: [CPTemplate] { [] }

    /// Delivers an event for this template; false when it is not one this template handles.
    func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool { false }

    /// The interface controller showing this template (or the tab bar holding it).
    var interfaceController: CPInterfaceController? {
        controllerRef.object ?? containerRef.object?.controllerRef.object
    }

    /// The template the car knows at the top level: this one, or the tab bar holding it.
    var topLevel: CPTemplate { containerRef.object ?? self }

    /// Sends the whole template again (the car works out what changed and sends the HMI a diff).
    func setNeedsUpdate() {
        guard let controller = interfaceController else { return }
        controller.postUpdate(of: self)
    }

    private func containerNeedsUpdate() {
        containerRef.object?.setNeedsUpdate()
    }
}

// MARK: - buttons shared by several templates

/// The text style of a ``CPTextButton``.
public enum CPTextButtonStyle: Sendable, Equatable {
    /// A plain button.
    case normal
    /// A cancel button.
    case cancel
    /// A confirming (highlighted) button.
    case confirm

    var wire: HUButtonStyle {
        switch self {
        case .normal: return .default
        case .cancel: return .cancel
        case .confirm: return .confirm
        }
    }
}

/// An element that belongs to one template and tells it when it changes (ours: no Apple counterpart; the car updates whole templates and single items).
@MainActor
public class CPTemplateElement {
    /// The element's id, unique within its template (made up when not given).
    public let identifier: String
    /// Anything you want to keep with the element.
    public var userInfo: (any Sendable)?
    var ownerRef = Weak<CPTemplate>(nil)

    init(identifier: String?, prefix: String) {
        self.identifier = identifier ?? ElementID.make(prefix)
    }

    /// Tells the owning template (when it is on screen) that this element changed.
    func elementDidChange() { ownerRef.object?.setNeedsUpdate() }
}

@MainActor
extension Sequence where Element: CPTemplateElement {
    func adopt(by owner: CPTemplate) {
        for element in self { element.ownerRef = Weak(owner) }
    }
}

/// A navigation-bar button (leading or trailing), as `CPBarButton`.
@MainActor
public final class CPBarButton: CPTemplateElement {
    /// The button's title (text buttons).
    public var title: String? { didSet { elementDidChange() } }
    /// The button's image (image buttons).
    public var image: CPImage? { didSet { elementDidChange() } }
    /// A disabled button is greyed out and cannot be pressed.
    public var isEnabled: Bool = true { didSet { elementDidChange() } }
    /// Called when the driver presses the button.
    public var handler: (@MainActor (CPBarButton) -> Void)?

    /// A text button.
    public init(title: String, identifier: String? = nil, handler: (@MainActor (CPBarButton) -> Void)? = nil) {
        super.init(identifier: identifier, prefix: "bar")
        self.title = title
        self.handler = handler
    }

    /// An image button.
    public init(image: CPImage, identifier: String? = nil, handler: (@MainActor (CPBarButton) -> Void)? = nil) {
        super.init(identifier: identifier, prefix: "bar")
        self.image = image
        self.handler = handler
    }

    var wire: HUBarButton {
        var button = HUBarButton()
        button.id = identifier
        button.title = title ?? ""
        if let image { button.image = image.wire }
        button.disabled = !isEnabled
        return button
    }
}

/// The navigation-bar buttons of list, grid, information, contact and map templates (`CPBarButtonProviding`).
@MainActor
public protocol CPBarButtonProviding: AnyObject {
    /// Buttons on the leading side (at most 2).
    var leadingNavigationBarButtons: [CPBarButton] { get set }
    /// Buttons on the trailing side (at most 2).
    var trailingNavigationBarButtons: [CPBarButton] { get set }
}

/// A text button: information footer actions and point-of-interest card buttons (`CPTextButton`).
@MainActor
public final class CPTextButton: CPTemplateElement {
    /// The button's title.
    public var title: String { didSet { elementDidChange() } }
    /// How it looks.
    public var textStyle: CPTextButtonStyle { didSet { elementDidChange() } }
    /// Called when the driver presses the button.
    public var handler: (@MainActor (CPTextButton) -> Void)?

    /// A text button.
    public init(title: String, textStyle: CPTextButtonStyle, identifier: String? = nil, handler: (@MainActor (CPTextButton) -> Void)? = nil) {
        self.title = title
        self.textStyle = textStyle
        self.handler = handler
        super.init(identifier: identifier, prefix: "text")
    }

    var wire: HUTextButton {
        var button = HUTextButton()
        button.id = identifier
        button.title = title
        button.style = textStyle.wire
        return button
    }
}

/// The context of one event from the car: how to complete it.
struct EventContext: Sendable {
    let eventID: UInt64
    let application: CPApplication
    let interfaceController: CPInterfaceController

    /// The completion handed to a handler: stops the car's spinner, once.
    @MainActor func completion(searchResults: @escaping @Sendable () -> [HUListItem] = { [] }) -> CompletionOnce {
        CompletionOnce(eventID: eventID, application: application, searchResults: searchResults)
    }

    /// For events the car does not wait for.
    var noCompletion: Bool { eventID == 0 }
}

/// Sends CompleteEvent the first time it is called; later calls do nothing
/// (a handler that calls its completion twice is not an error on the car).
@MainActor
final class CompletionOnce {
    private let eventID: UInt64
    private let application: CPApplication
    private let searchResults: @Sendable () -> [HUListItem]
    private var done = false

    init(eventID: UInt64, application: CPApplication, searchResults: @escaping @Sendable () -> [HUListItem]) {
        self.eventID = eventID
        self.application = application
        self.searchResults = searchResults
    }

    func callAsFunction() { complete(with: searchResults()) }

    func complete(with results: [HUListItem]) {
        guard eventID != 0 else { return }
        guard !done else { return }
        done = true
        application.complete(eventID: eventID, searchResults: results)
    }
}
