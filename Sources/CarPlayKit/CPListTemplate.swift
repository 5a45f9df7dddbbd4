import HeadUnitWire

/// Where a playing indicator sits on a list item (`CPListItemPlayingIndicatorLocation`).
public enum CPListItemPlayingIndicatorLocation: Sendable, Equatable {
    /// Before the text.
    case leading
    /// After the text.
    case trailing
}

/// The accessory at the end of a list item (`CPListItemAccessoryType`).
public enum CPListItemAccessoryType: Sendable, Equatable {
    /// No accessory.
    case none
    /// A chevron: selecting shows more.
    case disclosureIndicator
    /// A cloud: the content is not on the device.
    case cloud

    var wire: HUAccessoryType {
        switch self {
        case .none: return .none
        case .disclosureIndicator: return .disclosureIndicator
        case .cloud: return .cloud
        }
    }
}

/// An element of a list section (`CPListTemplateItem`): ``CPListItem``,
/// ``CPListImageRowItem`` or ``CPMessageListItem``.
@MainActor
public protocol CPListTemplateItem: AnyObject {
    /// The item's id, unique within its template.
    var identifier: String { get }
    /// The item's main text.
    var text: String? { get }
    /// Anything you want to keep with the item.
    var userInfo: (any Sendable)? { get set }
    /// The item as sent to the car.
    var wireItem: HUListItem { get }
}

/// A list element the driver can select (`CPSelectableListItem`).
@MainActor
public protocol CPSelectableListItem: CPListTemplateItem {
    /// Called when the driver selects the item. The car shows a spinner on the
    /// item until you call the completion (after your work, e.g. a push).
    var handler: (@MainActor (any CPSelectableListItem, @escaping @Sendable () -> Void) -> Void)? { get set }
}

/// Base of the list items: knows its list, so a change is sent as an item update (ours: Apple's items share no base class but `NSObject`).
@MainActor
public class CPListElement {
    /// The item's id, unique within its template (made up when not given).
    public let identifier: String
    /// Anything you want to keep with the item.
    public var userInfo: (any Sendable)?
    var listRef = Weak<CPListTemplate>(nil)

    init(identifier: String?, prefix: String) {
        self.identifier = identifier ?? ElementID.make(prefix)
    }

    /// The item's message; overridden.
    var wireElement: HUListItem { HUListItem() }

    /// Sends `update_item` for this item when its list is on screen.
    func itemDidChange() {
        listRef.object?.itemDidChange(wireElement)
    }
}

/// A list item with text, detail text, images, an accessory, progress and a
/// playing indicator (`CPListItem`).
///
///     let item = CPListItem(text: "Jazz", detailText: "24 stations")
///     item.handler = { item, completion in
///         Task {
///             try await interfaceController.pushTemplate(stations, animated: true)
///             completion()
///         }
///     }
@MainActor
public final class CPListItem: CPListElement, CPSelectableListItem {
    /// The main text.
    public private(set) var text: String?
    /// The secondary text.
    public private(set) var detailText: String?
    /// The leading image.
    public private(set) var image: CPImage?
    /// The trailing accessory image.
    public private(set) var accessoryImage: CPImage?
    /// The trailing accessory.
    public var accessoryType: CPListItemAccessoryType = .none { didSet { itemDidChange() } }
    /// Playback progress, 0...1, drawn when ``showsProgress`` (ours: the car needs to know whether to draw it).
    public private(set) var playbackProgress: Double = 0
    /// Whether the progress bar is drawn.
    public var showsProgress: Bool = false { didSet { itemDidChange() } }
    /// Shows the playing indicator.
    public private(set) var isPlaying: Bool = false
    /// Where the playing indicator sits.
    public private(set) var playingIndicatorLocation: CPListItemPlayingIndicatorLocation = .leading
    /// Shows the explicit-content mark.
    public var isExplicitContent: Bool = false { didSet { itemDidChange() } }
    /// A disabled item is greyed out and cannot be selected.
    public var isEnabled: Bool = true { didSet { itemDidChange() } }
    /// Whether the item shows its read status (an unread dot while ``isRead`` is false).
    public var showsReadStatus: Bool = false { didSet { itemDidChange() } }
    /// The item was read.
    public var isRead: Bool = false { didSet { itemDidChange() } }
    /// Called when the driver selects the item; call the completion to stop the car's spinner.
    public var handler: (@MainActor (any CPSelectableListItem, @escaping @Sendable () -> Void) -> Void)?

    /// The largest image a list item shows, in points (`maximumImageSize`):
    /// the `listItem` size of TEMPLATES.md section 6 (64 x 64; the pixels
    /// are this times the car's scale, ``CPTraitCollection``).
    public static var maximumImageSize: CGSize { CGSize(width: 64, height: 64) }

    /// An item with text and optional detail text, images and accessory.
    public init(text: String?, detailText: String?, image: CPImage? = nil, accessoryImage: CPImage? = nil,
                accessoryType: CPListItemAccessoryType = .none, identifier: String? = nil) {
        super.init(identifier: identifier, prefix: "item")
        self.text = text
        self.detailText = detailText
        self.image = image
        self.accessoryImage = accessoryImage
        self.accessoryType = accessoryType
    }

    /// Changes the main text.
    public func setText(_ text: String) { self.text = text; itemDidChange() }
    /// Changes the secondary text.
    public func setDetailText(_ detailText: String?) { self.detailText = detailText; itemDidChange() }
    /// Changes the leading image.
    public func setImage(_ image: CPImage?) { self.image = image; itemDidChange() }
    /// Changes the accessory image.
    public func setAccessoryImage(_ accessoryImage: CPImage?) { self.accessoryImage = accessoryImage; itemDidChange() }
    /// Changes the progress (0...1) and shows the progress bar.
    public func setPlaybackProgress(_ playbackProgress: Double) {
        self.playbackProgress = playbackProgress
        showsProgress = true
    }
    /// Shows or hides the playing indicator.
    public func setPlaying(_ isPlaying: Bool) { self.isPlaying = isPlaying; itemDidChange() }
    /// Moves the playing indicator.
    public func setPlayingIndicatorLocation(_ location: CPListItemPlayingIndicatorLocation) {
        playingIndicatorLocation = location
        itemDidChange()
    }

    /// The item as sent to the car.
    public var wireItem: HUListItem { wireElement }

    override var wireElement: HUListItem {
        var general = HUGeneralItem()
        general.text = text ?? ""
        general.detailText = detailText ?? ""
        if let image { general.image = image.wire }
        general.accessory = accessoryType.wire
        if let accessoryImage { general.accessoryImage = accessoryImage.wire }
        general.showsProgress = showsProgress
        general.progress = Float(playbackProgress)
        general.playing = isPlaying
        general.playingIndicatorLocation = playingIndicatorLocation == .leading ? .leading : .trailing
        general.explicitContent = isExplicitContent
        general.disabled = !isEnabled
        general.read = isRead
        general.showReadStatus = showsReadStatus
        var item = HUListItem()
        item.id = identifier
        item.kind = .general(general)
        return item
    }
}

/// A row of images with a title (`CPListImageRowItem`).
@MainActor
public final class CPListImageRowItem: CPListElement, CPSelectableListItem {
    /// The row's title.
    public private(set) var text: String?
    /// The images, in order.
    public private(set) var gridImages: [CPImage]
    /// A title under each image (no more titles than images).
    public private(set) var imageTitles: [String]
    /// Called when the driver selects the row's title; call the completion to stop the spinner.
    public var handler: (@MainActor (any CPSelectableListItem, @escaping @Sendable () -> Void) -> Void)?
    /// Called when the driver selects one image (its index); call the completion to stop the spinner.
    public var listImageRowHandler: (@MainActor (CPListImageRowItem, Int, @escaping @Sendable () -> Void) -> Void)?

    /// The most images a row shows (the car's limit).
    public static let maximumImageCount = 8

    /// A row of images.
    public init(text: String, images: [CPImage], imageTitles: [String] = [], identifier: String? = nil) {
        self.text = text
        self.gridImages = images
        self.imageTitles = imageTitles
        super.init(identifier: identifier, prefix: "row")
    }

    /// Replaces the images.
    public func update(_ gridImages: [CPImage]) { self.gridImages = gridImages; itemDidChange() }
    /// Replaces the titles under the images.
    public func updateImageTitles(_ imageTitles: [String]) { self.imageTitles = imageTitles; itemDidChange() }
    /// Changes the row's title.
    public func setText(_ text: String) { self.text = text; itemDidChange() }

    /// The item as sent to the car.
    public var wireItem: HUListItem { wireElement }

    override var wireElement: HUListItem {
        var row = HUImageRowItem()
        row.text = text ?? ""
        row.images = gridImages.map(\.wire)
        row.imageTitles = imageTitles
        var item = HUListItem()
        item.id = identifier
        item.kind = .imageRow(row)
        return item
    }
}

/// What a message item shows before its text (`CPMessageListItemLeadingConfiguration`).
public struct CPMessageListItemLeadingConfiguration: Sendable {
    /// A leading mark (`CPMessageListItem.LeadingItem`).
    public enum LeadingItem: Sendable, Equatable {
        /// None.
        case none
        /// A pin.
        case pin
        /// A star.
        case star
    }
    /// The mark.
    public var leadingItem: LeadingItem
    /// The image (a contact photo).
    public var leadingImage: CPImage?
    /// The conversation has unread messages (an unread dot, over the mark).
    public var isUnread: Bool
    /// A leading configuration.
    public init(leadingItem: LeadingItem, leadingImage: CPImage?, unread: Bool) {
        self.leadingItem = leadingItem
        self.leadingImage = leadingImage
        self.isUnread = unread
    }
}

/// What a message item shows after its text (`CPMessageListItemTrailingConfiguration`).
public struct CPMessageListItemTrailingConfiguration: Sendable {
    /// A trailing mark (`CPMessageListItem.TrailingItem`).
    public enum TrailingItem: Sendable, Equatable {
        /// None.
        case none
        /// The conversation is muted.
        case mute
    }
    /// The mark.
    public var trailingItem: TrailingItem
    /// An image instead of the mark.
    public var trailingImage: CPImage?
    /// A trailing configuration.
    public init(trailingItem: TrailingItem, trailingImage: CPImage?) {
        self.trailingItem = trailingItem
        self.trailingImage = trailingImage
    }
}

/// A conversation or a contact in a communication app's list (`CPMessageListItem`).
///
/// Selecting it starts the car's voice flow (Siri), never a handler of yours;
/// ours adds ``voiceFlowHandler`` because the car tells the app it started.
@MainActor
public final class CPMessageListItem: CPListElement, CPListTemplateItem {
    /// The conversation's or contact's name.
    public var text: String? { didSet { itemDidChange() } }
    /// A second line.
    public var detailText: String? { didSet { itemDidChange() } }
    /// Text at the end (a time).
    public var trailingText: String? { didSet { itemDidChange() } }
    /// The conversation (for an existing conversation).
    public var conversationIdentifier: String? { didSet { itemDidChange() } }
    /// The phone number or e-mail address (for a new message to a contact).
    public var phoneOrEmailAddress: String? { didSet { itemDidChange() } }
    /// What shows before the text.
    public var leadingConfiguration: CPMessageListItemLeadingConfiguration { didSet { itemDidChange() } }
    /// What shows after the text.
    public var trailingConfiguration: CPMessageListItemTrailingConfiguration? { didSet { itemDidChange() } }
    /// Called when the driver selected the item and the car started its voice flow (ours).
    public var voiceFlowHandler: (@MainActor (CPMessageListItem) -> Void)?

    /// An item for an existing conversation.
    public init(conversationIdentifier: String, text: String, leadingConfiguration: CPMessageListItemLeadingConfiguration,
                trailingConfiguration: CPMessageListItemTrailingConfiguration?, detailText: String?, trailingText: String?,
                identifier: String? = nil) {
        self.conversationIdentifier = conversationIdentifier
        self.text = text
        self.leadingConfiguration = leadingConfiguration
        self.trailingConfiguration = trailingConfiguration
        self.detailText = detailText
        self.trailingText = trailingText
        super.init(identifier: identifier, prefix: "message")
    }

    /// An item for a contact (a new message to a phone number or address).
    public init(fullName: String, phoneOrEmailAddress: String, leadingConfiguration: CPMessageListItemLeadingConfiguration,
                trailingConfiguration: CPMessageListItemTrailingConfiguration?, detailText: String?, trailingText: String?,
                identifier: String? = nil) {
        self.phoneOrEmailAddress = phoneOrEmailAddress
        self.text = fullName
        self.leadingConfiguration = leadingConfiguration
        self.trailingConfiguration = trailingConfiguration
        self.detailText = detailText
        self.trailingText = trailingText
        super.init(identifier: identifier, prefix: "message")
    }

    /// The item as sent to the car.
    public var wireItem: HUListItem { wireElement }

    override var wireElement: HUListItem {
        var message = HUMessageItem()
        message.text = text ?? ""
        message.detailText = detailText ?? ""
        message.conversationID = conversationIdentifier ?? ""
        message.phoneOrEmail = phoneOrEmailAddress ?? ""
        if let image = leadingConfiguration.leadingImage { message.leadingImage = image.wire }
        if leadingConfiguration.isUnread {
            message.leadingIndicator = .unread
        } else {
            switch leadingConfiguration.leadingItem {
            case .none: message.leadingIndicator = .none
            case .pin: message.leadingIndicator = .pin
            case .star: message.leadingIndicator = .star
            }
        }
        if let trailing = trailingConfiguration, let image = trailing.trailingImage {
            message.trailingKind = .image
            message.trailingImage = image.wire
        } else if trailingConfiguration?.trailingItem == .mute {
            message.trailingKind = .mute
        } else if let trailingText, !trailingText.isEmpty {
            message.trailingKind = .text
        }
        message.trailingText = trailingText ?? ""
        var item = HUListItem()
        item.id = identifier
        item.kind = .message(message)
        return item
    }
}

/// A section of a list: a header and items (`CPListSection`).
@MainActor
public final class CPListSection {
    /// The section's id (made up when not given).
    public let identifier: String
    /// The header above the items.
    public let header: String?
    /// The index title (kept for source compatibility; the car has no index).
    public let sectionIndexTitle: String?
    /// The items, in order.
    public let items: [any CPListTemplateItem]

    /// A section with items and an optional header.
    public init(items: [any CPListTemplateItem], header: String? = nil, sectionIndexTitle: String? = nil, identifier: String? = nil) {
        self.items = items
        self.header = header
        self.sectionIndexTitle = sectionIndexTitle
        self.identifier = identifier ?? ElementID.make("section")
    }

    /// A section without a header.
    public convenience init(items: [any CPListTemplateItem]) {
        self.init(items: items, header: nil, sectionIndexTitle: nil)
    }

    /// The item at `index`.
    public func item(at index: Int) -> any CPListTemplateItem { items[index] }

    /// The index of `item` in this section.
    public func index(of item: any CPListTemplateItem) -> Int? {
        items.firstIndex { $0 === item }
    }

    var wire: HUListSection {
        var section = HUListSection()
        section.id = identifier
        section.header = header ?? ""
        section.items = items.map(\.wireItem)
        return section
    }
}

/// A position in a list: section and item (`IndexPath` in CarPlay; ours: no UIKit).
public struct CPIndexPath: Sendable, Equatable, Hashable {
    /// The section.
    public var section: Int
    /// The item in the section.
    public var item: Int
    /// An index path.
    public init(item: Int, section: Int) {
        self.item = item
        self.section = section
    }
}

/// A list of sections of items (`CPListTemplate`).
///
///     let list = CPListTemplate(title: "Radio", sections: [CPListSection(items: [jazz, news])])
///     try await interfaceController.setRootTemplate(list, animated: true)
///     jazz.setDetailText("Now: Miles Davis")        // an in-place item update
///     list.updateSections([CPListSection(items: [news])])  // the list replaced in place
@MainActor
public final class CPListTemplate: CPTemplate, CPBarButtonProviding {
    /// The title in the navigation bar.
    public private(set) var title: String?
    /// The sections, in order.
    public private(set) var sections: [CPListSection] = []
    /// Shown when the list is empty, longest first.
    public var emptyViewTitleVariants: [String] = [] { didSet { setNeedsUpdate() } }
    /// Shown under the empty-view title, longest first.
    public var emptyViewSubtitleVariants: [String] = [] { didSet { setNeedsUpdate() } }
    /// Leading navigation-bar buttons (at most 2).
    public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing navigation-bar buttons (at most 2).
    public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }

    /// The "Ask Siri" row: selected, the car opens the phone's assistant for the app.
    public private(set) var assistantCellConfiguration: CPAssistantCellConfiguration?

    /// A list with a title and sections.
    public init(title: String?, sections: [CPListSection], identifier: String? = nil) {
        super.init(identifier: identifier, prefix: "list")
        self.title = title
        self.sections = sections
        adoptItems()
    }

    /// A list with the "Ask Siri" row (audio apps: `.playMedia`, communication apps: `.startCall`).
    public convenience init(title: String?, sections: [CPListSection], assistantCellConfiguration: CPAssistantCellConfiguration?, identifier: String? = nil) {
        self.init(title: title, sections: sections, identifier: identifier)
        self.assistantCellConfiguration = assistantCellConfiguration
    }

    /// The most items the car shows in a list now (0: no cap), from the session configuration.
    public static var maximumItemCount: Int { CPSessionState.current.maximumItemCount }
    /// The most sections the car shows in a list now (0: no cap).
    public static var maximumSectionCount: Int { CPSessionState.current.maximumSectionCount }

    /// The number of sections.
    public var sectionCount: Int { sections.count }
    /// The number of items in all sections.
    public var itemCount: Int { sections.reduce(0) { $0 + $1.items.count } }

    /// Replaces the sections; on screen, the car redraws the list in place.
    public func updateSections(_ sections: [CPListSection]) {
        self.sections = sections
        adoptItems()
        setNeedsUpdate()
    }

    /// Changes the title.
    public func updateTitle(_ title: String?) {
        self.title = title
        setNeedsUpdate()
    }

    /// Where `item` is in the list.
    public func indexPath(for item: any CPListTemplateItem) -> CPIndexPath? {
        for (s, section) in sections.enumerated() {
            if let i = section.index(of: item) { return CPIndexPath(item: i, section: s) }
        }
        return nil
    }

    private func adoptItems() {
        for section in sections {
            for item in section.items { (item as? CPListElement)?.listRef = Weak(self) }
        }
    }

    func item(withID id: String) -> (any CPListTemplateItem)? {
        for section in sections {
            if let item = section.items.first(where: { $0.identifier == id }) { return item }
        }
        return nil
    }

    func itemDidChange(_ item: HUListItem) {
        guard let controller = interfaceController else { return }
        controller.postItemUpdate(item, in: self)
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var list = HUListTemplate()
        list.title = title ?? ""
        list.sections = sections.map(\.wire)
        list.leadingButtons = leadingNavigationBarButtons.map(\.wire)
        list.trailingButtons = trailingNavigationBarButtons.map(\.wire)
        list.emptyViewTitleVariants = emptyViewTitleVariants.longestFirst
        list.emptyViewSubtitleVariants = emptyViewSubtitleVariants.longestFirst
        if let cell = assistantCellConfiguration { list.assistantCell = cell.wire }
        return .list(list)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        switch event.kind {
        case .itemSelected(let selected):
            let completion = context.completion()
            guard let item = item(withID: selected.itemID) else { completion(); return true }
            if let row = item as? CPListImageRowItem, selected.imageSelected, let rowHandler = row.listImageRowHandler {
                rowHandler(row, Int(selected.imageIndex), { onMainActor { completion() } })
            } else if let selectable = item as? any CPSelectableListItem, let handler = selectable.handler {
                handler(selectable, { onMainActor { completion() } })
            } else {
                completion()  // no handler: nothing to wait for
            }
            return true
        case .voiceFlowStarted(let started):
            if let message = item(withID: started.itemID) as? CPMessageListItem { message.voiceFlowHandler?(message) }
            return true
        case .buttonPressed(let pressed):
            return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
        default:
            return false
        }
    }
}

/// Calls the handler of the bar button with this id; false when there is none.
@MainActor func pressBarButton(_ id: String, leading: [CPBarButton], trailing: [CPBarButton]) -> Bool {
    guard let button = (leading + trailing).first(where: { $0.identifier == id }) else { return false }
    button.handler?(button)
    return true
}

/// `CPAssistantCellPosition`.
public enum CPAssistantCellPosition: Sendable { case top, bottom }
/// `CPAssistantCellVisibility`.
public enum CPAssistantCellVisibility: Sendable { case off, whileLimitedUIActive, always }
/// `CPAssistantCellActionType`.
public enum CPAssistantCellActionType: Sendable { case playMedia, startCall }

/// The "Ask Siri" row of a list (`CPAssistantCellConfiguration`): the car
/// draws it and, selected, opens the phone's assistant for the app
/// (PROTOCOL.md section 27.2).
public struct CPAssistantCellConfiguration: Sendable {
    public let position: CPAssistantCellPosition
    public let visibility: CPAssistantCellVisibility
    public let assistantAction: CPAssistantCellActionType

    public init(position: CPAssistantCellPosition, visibility: CPAssistantCellVisibility, assistantAction: CPAssistantCellActionType) {
        self.position = position
        self.visibility = visibility
        self.assistantAction = assistantAction
    }

    var wire: HUAssistantCell {
        HUAssistantCell.with {
            $0.position = position == .top ? .top : .bottom
            switch visibility {
            case .off: $0.visibility = .off
            case .whileLimitedUIActive: $0.visibility = .whileLimitedUiActive
            case .always: $0.visibility = .always
            }
            $0.action = assistantAction == .playMedia ? .playMedia : .startCall
        }
    }
}
