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
    public init(category: HUCategory, placement: TemplatePlacement, displayScale: UInt32) {
        self.category = category
        self.placement = placement
        self.displayScale = displayScale
    }
}
