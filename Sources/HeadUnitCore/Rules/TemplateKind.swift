import HeadUnitWire

/// The twelve templates, as the rules talk about them.
public enum TemplateKind: String, CaseIterable, Sendable {
    case list, grid, tabBar, nowPlaying, alert, actionSheet, information
    case pointOfInterest, contact, map, search, voiceControl

    public init?(_ template: HUTemplate) {
        self.init(template.kind)
    }

    public init?(_ kind: HUTemplate.OneOf_Kind?) {
        switch kind {
        case .list: self = .list
        case .grid: self = .grid
        case .tabBar: self = .tabBar
        case .nowPlaying: self = .nowPlaying
        case .alert: self = .alert
        case .actionSheet: self = .actionSheet
        case .information: self = .information
        case .pointOfInterest: self = .pointOfInterest
        case .contact: self = .contact
        case .map: self = .map
        case .search: self = .search
        case .voiceControl: self = .voiceControl
        case nil: return nil
        }
    }

    /// Templates shown modally with presentTemplate rather than pushed.
    public var isModal: Bool {
        switch self {
        case .alert, .actionSheet, .voiceControl: return true
        case .list, .grid, .tabBar, .nowPlaying, .information, .pointOfInterest, .contact, .map, .search: return false
        }
    }
}

/// Where a template is being put; some templates are only allowed in some places.
public enum TemplatePlacement: Equatable, Sendable {
    /// setRootTemplate.
    case root
    /// pushTemplate on top of a template of this kind.
    case push(onTopOf: TemplateKind)
    /// presentTemplate (modal).
    case present
    /// Inside a tab of a tab bar.
    case tab
}

/// What the validator needs to know besides the template itself.
public struct TemplateContext: Sendable {
    public var category: HUCategory
    public var placement: TemplatePlacement
    /// The main display's scale (2 or 3): image maxima are points times scale.
    public var displayScale: UInt32
    /// False when the template's bytes are known to hold no image field
    /// (`WireTemplate.Measured.hasImageFields`): the image rules are skipped,
    /// since reading an item's absent image still copies it out of storage.
    public var mayHoldImages: Bool
    /// False when every list item is known to be a general item with its
    /// progress within 0...1 (`WireTemplate.Measured.plainListItems`): with
    /// no image either, the per-item rules are skipped.
    public var mayHoldUnplainListItems: Bool
    /// False when every element's id is known to be there and unique
    /// (`WireTemplate.Measured.uniqueElementIDs`): the element-id rule is skipped.
    public var mayRepeatElementIDs: Bool

    public init(
        category: HUCategory, placement: TemplatePlacement, displayScale: UInt32, mayHoldImages: Bool = true, mayHoldUnplainListItems: Bool = true,
        mayRepeatElementIDs: Bool = true
    ) {
        self.category = category
        self.placement = placement
        self.displayScale = displayScale
        self.mayHoldImages = mayHoldImages
        self.mayHoldUnplainListItems = mayHoldUnplainListItems
        self.mayRepeatElementIDs = mayRepeatElementIDs
    }
}
