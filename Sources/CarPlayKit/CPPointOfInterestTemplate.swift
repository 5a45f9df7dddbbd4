import HeadUnitWire

/// A place on a point-of-interest map with its card (`CPPointOfInterest`).
@MainActor
public final class CPPointOfInterest: CPTemplateElement {
    /// Where it is.
    public var location: MKMapItem { didSet { elementDidChange() } }
    /// The title.
    public var title: String { didSet { elementDidChange() } }
    /// The subtitle.
    public var subtitle: String? { didSet { elementDidChange() } }
    /// The summary line.
    public var summary: String? { didSet { elementDidChange() } }
    /// The card's title.
    public var detailTitle: String? { didSet { elementDidChange() } }
    /// The card's subtitle.
    public var detailSubtitle: String? { didSet { elementDidChange() } }
    /// The card's summary.
    public var detailSummary: String? { didSet { elementDidChange() } }
    /// The pin.
    public var pinImage: CPImage? { didSet { elementDidChange() } }
    /// The larger pin of the selected point.
    public var selectedPinImage: CPImage? { didSet { elementDidChange() } }
    /// The card's first button.
    public var primaryButton: CPTextButton? { didSet { adoptButtons(); elementDidChange() } }
    /// The card's second button.
    public var secondaryButton: CPTextButton? { didSet { adoptButtons(); elementDidChange() } }

    /// A point of interest.
    public init(location: MKMapItem, title: String, subtitle: String?, summary: String?, detailTitle: String?,
                detailSubtitle: String?, detailSummary: String?, pinImage: CPImage?, identifier: String? = nil) {
        self.location = location
        self.title = title
        self.subtitle = subtitle
        self.summary = summary
        self.detailTitle = detailTitle
        self.detailSubtitle = detailSubtitle
        self.detailSummary = detailSummary
        self.pinImage = pinImage
        super.init(identifier: identifier, prefix: "poi")
    }

    private func adoptButtons() {
        if let owner = ownerRef.object { [primaryButton, secondaryButton].compactMap { $0 }.adopt(by: owner) }
    }

    func adopt(by owner: CPTemplate) {
        ownerRef = Weak(owner)
        adoptButtons()
    }

    var wire: HUPointOfInterest {
        var point = HUPointOfInterest()
        point.id = identifier
        var location = HULocation()
        location.latitude = self.location.placemark.coordinate.latitude
        location.longitude = self.location.placemark.coordinate.longitude
        point.location = location
        point.title = title
        point.subtitle = subtitle ?? ""
        point.summary = summary ?? ""
        point.detailTitle = detailTitle ?? ""
        point.detailSubtitle = detailSubtitle ?? ""
        point.detailSummary = detailSummary ?? ""
        if let pinImage { point.pinImage = pinImage.wire }
        if let selectedPinImage { point.selectedPinImage = selectedPinImage.wire }
        if let primaryButton { point.primaryButton = primaryButton.wire }
        if let secondaryButton { point.secondaryButton = secondaryButton.wire }
        return point
    }
}

/// Tells you what the driver does on a point-of-interest map (`CPPointOfInterestTemplateDelegate`).
@MainActor
public protocol CPPointOfInterestTemplateDelegate: AnyObject {
    /// The driver moved the map: send the points for the new region.
    func pointOfInterestTemplate(_ pointOfInterestTemplate: CPPointOfInterestTemplate, didChangeMapRegion region: MKCoordinateRegion)
    /// The driver selected a point.
    func pointOfInterestTemplate(_ pointOfInterestTemplate: CPPointOfInterestTemplate, didSelectPointOfInterest pointOfInterest: CPPointOfInterest)
}

extension CPPointOfInterestTemplateDelegate {
    /// Does nothing (optional in CarPlay).
    public func pointOfInterestTemplate(_ pointOfInterestTemplate: CPPointOfInterestTemplate, didSelectPointOfInterest pointOfInterest: CPPointOfInterest) {}
}

/// A map with up to 12 points of interest (`CPPointOfInterestTemplate`).
@MainActor
public final class CPPointOfInterestTemplate: CPTemplate {
    /// The title.
    public var title: String { didSet { setNeedsUpdate() } }
    /// The points.
    public private(set) var pointsOfInterest: [CPPointOfInterest]
    /// The selected point's index (`NSNotFound`-like: -1 for none).
    public var selectedIndex: Int { didSet { setNeedsUpdate() } }
    private var delegateRef = Weak<AnyObject>(nil)

    /// Tells you what the driver does (held weakly).
    public var pointOfInterestDelegate: (any CPPointOfInterestTemplateDelegate)? {
        get { delegateRef.object as? any CPPointOfInterestTemplateDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// A point-of-interest template.
    public init(title: String, pointsOfInterest: [CPPointOfInterest], selectedIndex: Int, identifier: String? = nil) {
        self.title = title
        self.pointsOfInterest = pointsOfInterest
        self.selectedIndex = selectedIndex
        super.init(identifier: identifier, prefix: "poi-map")
        for point in pointsOfInterest { point.adopt(by: self) }
    }

    /// Replaces the points and the selection.
    public func setPointsOfInterest(_ pointsOfInterest: [CPPointOfInterest], selectedIndex: Int) {
        self.pointsOfInterest = pointsOfInterest
        for point in pointsOfInterest { point.adopt(by: self) }
        self.selectedIndex = selectedIndex
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var poi = HUPointOfInterestTemplate()
        poi.title = title
        poi.points = pointsOfInterest.map(\.wire)
        poi.selectedIndex = Int32(clamping: selectedIndex)
        return .pointOfInterest(poi)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        switch event.kind {
        case .poiSelected(let selected):
            if let point = pointsOfInterest.first(where: { $0.identifier == selected.poiID }) {
                pointOfInterestDelegate?.pointOfInterestTemplate(self, didSelectPointOfInterest: point)
            }
            return true
        case .poiRegionChanged(let changed):
            pointOfInterestDelegate?.pointOfInterestTemplate(self, didChangeMapRegion: MKCoordinateRegion(changed.region))
            return true
        case .buttonPressed(let pressed):
            for point in pointsOfInterest {
                for button in [point.primaryButton, point.secondaryButton].compactMap({ $0 }) where button.identifier == pressed.buttonID {
                    button.handler?(button)
                    return true
                }
            }
            return false
        default:
            return false
        }
    }
}
