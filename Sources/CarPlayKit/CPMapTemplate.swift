import Foundation
import HeadUnitWire

/// Distance and time left (`CPTravelEstimates`; ours: meters and seconds
/// instead of `Measurement` and `TimeInterval`, as the car takes them).
public struct CPTravelEstimates: Sendable, Equatable {
    /// Meters left.
    public var distanceRemaining: Double
    /// Seconds left.
    public var timeRemaining: TimeInterval
    /// Estimates.
    public init(distanceRemaining: Double, timeRemaining: TimeInterval) {
        self.distanceRemaining = distanceRemaining
        self.timeRemaining = timeRemaining
    }

    /// Estimates with Apple's distance type; sent in meters (the wire's unit).
    public init(distanceRemaining: Measurement<UnitLength>, timeRemaining: TimeInterval) {
        self.init(distanceRemaining: distanceRemaining.converted(to: .meters).value, timeRemaining: timeRemaining)
    }

    var wire: HUTravelEstimates {
        var estimates = HUTravelEstimates()
        estimates.distanceRemainingM = distanceRemaining
        estimates.timeRemainingS = UInt32(max(0, timeRemaining))
        return estimates
    }
}

/// One way to drive a trip (`CPRouteChoice`).
@MainActor
public final class CPRouteChoice {
    /// The route's id, unique within its trip (made up when not given).
    public let identifier: String
    /// Summaries, the car shows the longest that fits.
    public let summaryVariants: [String]
    /// More information ("Via A1").
    public let additionalInformationVariants: [String]
    /// The summary shown once the route is chosen.
    public let selectionSummaryVariants: [String]
    /// The route's estimates (ours: in CarPlay they go through `CPMapTemplate.updateEstimates`).
    public var travelEstimates: CPTravelEstimates?
    /// Anything you want to keep with the route.
    public var userInfo: (any Sendable)?

    /// A route choice.
    public init(summaryVariants: [String], additionalInformationVariants: [String], selectionSummaryVariants: [String],
                travelEstimates: CPTravelEstimates? = nil, identifier: String? = nil) {
        self.summaryVariants = summaryVariants
        self.additionalInformationVariants = additionalInformationVariants
        self.selectionSummaryVariants = selectionSummaryVariants
        self.travelEstimates = travelEstimates
        self.identifier = identifier ?? ElementID.make("route")
    }

    var wire: HURouteChoice {
        var route = HURouteChoice()
        route.id = identifier
        route.summaryVariants = summaryVariants.longestFirst
        route.additionalInformationVariants = additionalInformationVariants.longestFirst
        route.selectionSummaryVariants = selectionSummaryVariants.longestFirst
        if let travelEstimates { route.estimates = travelEstimates.wire }
        return route
    }
}

/// A trip from an origin to a destination with one to three routes (`CPTrip`).
@MainActor
public final class CPTrip {
    /// The trip's id (made up when not given).
    public let identifier: String
    /// Where it starts.
    public let origin: MKMapItem
    /// Where it ends.
    public let destination: MKMapItem
    /// The routes, 1 to 3.
    public let routeChoices: [CPRouteChoice]
    /// The whole trip's estimates (ours: in CarPlay they go through `updateEstimates(_:for:)`).
    public var travelEstimates: CPTravelEstimates?
    /// Anything you want to keep with the trip.
    public var userInfo: (any Sendable)?

    /// A trip.
    public init(origin: MKMapItem, destination: MKMapItem, routeChoices: [CPRouteChoice],
                travelEstimates: CPTravelEstimates? = nil, identifier: String? = nil) {
        self.origin = origin
        self.destination = destination
        self.routeChoices = routeChoices
        self.travelEstimates = travelEstimates
        self.identifier = identifier ?? ElementID.make("trip")
    }

    var wire: HUTrip {
        var trip = HUTrip()
        trip.id = identifier
        trip.origin = origin.wire
        trip.destination = destination.wire
        trip.routeChoices = routeChoices.map(\.wire)
        if let travelEstimates { trip.estimates = travelEstimates.wire }
        return trip
    }

    func routeChoice(withID id: String) -> CPRouteChoice? {
        id.isEmpty ? routeChoices.first : routeChoices.first { $0.identifier == id }
    }
}

/// The button titles of the trip previews (`CPTripPreviewTextConfiguration`).
public struct CPTripPreviewTextConfiguration: Sendable, Equatable {
    /// "Go".
    public var startButtonTitle: String?
    /// "Overview".
    public var overviewButtonTitle: String?
    /// "More routes".
    public var additionalRoutesButtonTitle: String?
    /// A configuration; nil keeps the car's titles.
    public init(startButtonTitle: String?, additionalRoutesButtonTitle: String?, overviewButtonTitle: String?) {
        self.startButtonTitle = startButtonTitle
        self.additionalRoutesButtonTitle = additionalRoutesButtonTitle
        self.overviewButtonTitle = overviewButtonTitle
    }

    var wire: HUTripPreviewTexts {
        var texts = HUTripPreviewTexts()
        texts.startButtonTitle = startButtonTitle ?? ""
        texts.overviewButtonTitle = overviewButtonTitle ?? ""
        texts.additionalRoutesButtonTitle = additionalRoutesButtonTitle ?? ""
        return texts
    }
}

/// How the second maneuver is drawn (`CPManeuverDisplayStyle`).
public enum CPManeuverDisplayStyle: Sendable, Equatable {
    /// The car decides.
    case `default`
    /// Symbol before the instruction.
    case leadingSymbol
    /// Symbol after the instruction.
    case trailingSymbol
    /// Instruction only.
    case instructionOnly
    /// Symbol only (lane guidance).
    case symbolOnly

    var wire: HUManeuverDisplayStyle {
        switch self {
        case .default: return .default
        case .leadingSymbol: return .leadingSymbol
        case .trailingSymbol: return .trailingSymbol
        case .instructionOnly: return .instructionOnly
        case .symbolOnly: return .symbolOnly
        }
    }
}

/// One turn-by-turn step (`CPManeuver`).
@MainActor
public final class CPManeuver {
    /// The maneuver's id (made up when not given); estimates are updated by it.
    public let identifier: String
    /// The symbol (light content and default).
    public var symbolImage: CPImage?
    /// The symbol for dark content.
    public var darkSymbolImage: CPImage?
    /// The instruction, the car shows the longest that fits.
    public var instructionVariants: [String] = []
    /// The instruction on the dashboard.
    public var dashboardInstructionVariants: [String] = []
    /// A junction image.
    public var junctionImage: CPImage?
    /// Estimates to this maneuver.
    public var initialTravelEstimates: CPTravelEstimates?
    /// How it is drawn when it is the second maneuver.
    public var displayStyle: CPManeuverDisplayStyle = .default
    /// The fields of iOS 14 and 17.4 (CPLaneGuidance.swift).
    var newerFields = CPManeuverNewerFields()
    /// Anything you want to keep with the maneuver.
    public var userInfo: (any Sendable)?

    /// A maneuver; set its properties before handing it to the session.
    public init(identifier: String? = nil) {
        self.identifier = identifier ?? ElementID.make("maneuver")
    }

    var wire: HUManeuver {
        var maneuver = HUManeuver()
        maneuver.id = identifier
        if let symbolImage { maneuver.symbol = symbolImage.wire }
        if let darkSymbolImage { maneuver.darkSymbol = darkSymbolImage.wire }
        maneuver.instructionVariants = instructionVariants.longestFirst
        maneuver.dashboardInstructionVariants = dashboardInstructionVariants.longestFirst
        if let junctionImage { maneuver.junctionImage = junctionImage.wire }
        if let initialTravelEstimates { maneuver.estimates = initialTravelEstimates.wire }
        maneuver.displayStyle = displayStyle.wire
        addNewerFields(to: &maneuver)
        return maneuver
    }
}

/// Why guidance is paused (`CPTripPauseReason`).
public enum CPTripPauseReason: Sendable, Equatable {
    /// Arrived.
    case arrived
    /// Loading the route.
    case loading
    /// Looking for the car's position.
    case locating
    /// Finding a new route.
    case rerouting
    /// Drive to the route first.
    case proceedToRoute

    var wire: HUPauseReason {
        switch self {
        case .arrived: return .arrived
        case .loading: return .loading
        case .locating: return .locating
        case .rerouting: return .rerouting
        case .proceedToRoute: return .proceedToRoute
        }
    }
}

/// Guidance of one trip, started with ``CPMapTemplate/startNavigationSession(for:routeChoice:)`` (`CPNavigationSession`).
///
/// As in CarPlay its methods do not throw: the requests reach the car in
/// order; ``CPInterfaceController/waitForPendingUpdates()`` throws the first one refused.
@MainActor
public final class CPNavigationSession {
    /// The trip being guided.
    public let trip: CPTrip
    /// The route being guided (ours: CarPlay keeps it inside the trip).
    public let routeChoice: CPRouteChoice?
    unowned let application: CPApplication
    /// The template whose delegate is asked for the second maneuver's display style.
    weak var mapTemplate: CPMapTemplate?
    private var maneuvers: [CPManeuver] = []
    /// The lane guidances sent, and the session's values of iOS 17.4 (CPLaneGuidance.swift).
    var sentLaneGuidances = SentLaneGuidances()
    var guidanceState = CPNavigationGuidanceState()

    init(trip: CPTrip, routeChoice: CPRouteChoice?, application: CPApplication, mapTemplate: CPMapTemplate?) {
        self.trip = trip
        self.routeChoice = routeChoice
        self.application = application
        self.mapTemplate = mapTemplate
    }

    /// The next one or two maneuvers; setting them sends them to the car.
    /// With two, the map delegate's `mapTemplate(_:displayStyleFor:)` decides
    /// how the second is drawn (asked on the main actor, in request order).
    /// Their linked lane guidances are added first when the session has not
    /// (or may no longer have) added them.
    ///
    /// A new first maneuver (another identifier than before) is offered as a
    /// banner: the map delegate's `mapTemplate(_:shouldShowNotificationFor:)`
    /// answers, and the car shows the banner only while the app is not on the
    /// main screen (PROTOCOL.md 19.9).
    public var upcomingManeuvers: [CPManeuver] {
        get { maneuvers }
        set {
            let previousFirst = maneuvers.first?.identifier
            maneuvers = newValue
            send(notSurelyHeld(newValue.compactMap(\.linkedLaneGuidance)))
            let wires = newValue.map(\.wire)
            let second = newValue.count > 1 ? newValue[1] : nil
            let offered = newValue.first.flatMap { $0.identifier == previousFirst ? nil : $0 }
            let map = mapTemplate
            application.postNavigation {
                var update = HUManeuverUpdate()
                update.maneuvers = wires
                if let second, let map {
                    let style = map.mapDelegate?.mapTemplate(map, displayStyleFor: second) ?? second.displayStyle
                    update.maneuvers[1].displayStyle = style.wire
                }
                if let offered, let map {
                    update.notify = map.offerBanner(for: offered)
                }
                return .updateManeuvers(update)
            }
        }
    }

    /// Pauses guidance (arrived, rerouting...).
    public func pauseTrip(for reason: CPTripPauseReason, description: String?) {
        var pause = HUPauseNavigation()
        pause.reason = reason.wire
        pause.description_p = description ?? ""
        application.postNavigation(.pause(pause))
    }

    /// Updates the estimates to `maneuver`.
    /// The map delegate's `mapTemplate(_:shouldUpdateNotificationFor:with:)`
    /// says whether a banner shown for `maneuver` shows them too.
    public func updateEstimates(_ estimates: CPTravelEstimates, for maneuver: CPManeuver) {
        var update = HUEstimatesUpdate()
        update.maneuverID = maneuver.identifier
        update.estimates = estimates.wire
        let map = mapTemplate
        application.postNavigation { [update] in
            var update = update
            if let map {
                update.notify = map.mapDelegate?.mapTemplate(map, shouldUpdateNotificationFor: maneuver, with: estimates) ?? false
            }
            return .updateEstimates(update)
        }
    }

    /// The trip is done.
    public func finishTrip() { application.postNavigation(.finish(HUFinishNavigation())) }
    /// The app stops guiding.
    public func cancelTrip() { application.postNavigation(.cancel(HUCancelNavigation())) }
}

/// A banner over the map with up to two actions (`CPNavigationAlert`).
@MainActor
public final class CPNavigationAlert {
    /// The alert's id (made up).
    public let identifier = ElementID.make("nav-alert")
    /// Titles, the car shows the longest that fits.
    public let titleVariants: [String]
    /// Subtitles.
    public let subtitleVariants: [String]
    /// An image.
    public let image: CPImage?
    /// The main action.
    public let primaryAction: CPAlertAction
    /// A second action.
    public let secondaryAction: CPAlertAction?
    /// Seconds shown; 0: until dismissed.
    public let duration: TimeInterval

    /// An alert.
    public init(titleVariants: [String], subtitleVariants: [String], image: CPImage?,
                primaryAction: CPAlertAction, secondaryAction: CPAlertAction?, duration: TimeInterval) {
        self.titleVariants = titleVariants
        self.subtitleVariants = subtitleVariants
        self.image = image
        self.primaryAction = primaryAction
        self.secondaryAction = secondaryAction
        self.duration = duration
    }

    var actions: [CPAlertAction] { [primaryAction] + (secondaryAction.map { [$0] } ?? []) }

    var wire: HUNavigationAlert {
        var alert = HUNavigationAlert()
        alert.id = identifier
        if let image { alert.image = image.wire }
        alert.titleVariants = titleVariants.longestFirst
        alert.subtitleVariants = subtitleVariants.longestFirst
        alert.actions = actions.map(\.wire)
        alert.durationMs = UInt32(max(0, duration * 1000))
        return alert
    }
}

/// Why a navigation alert went away (`CPNavigationAlert.DismissalContext`).
public enum CPNavigationAlertDismissalContext: Sendable, Equatable {
    /// Its time ran out.
    case timeout
    /// The driver chose an action or closed it.
    case userDismissed
    /// The app or the system dismissed it.
    case systemDismissed
}

/// A pan direction (`CPMapTemplate.PanDirection`).
public struct CPPanDirection: OptionSet, Sendable, Hashable {
    /// The bit mask.
    public let rawValue: Int
    /// Wraps a mask.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Left.
    public static let left = CPPanDirection(rawValue: 1 << 0)
    /// Right.
    public static let right = CPPanDirection(rawValue: 1 << 1)
    /// Up.
    public static let up = CPPanDirection(rawValue: 1 << 2)
    /// Down.
    public static let down = CPPanDirection(rawValue: 1 << 3)
}

/// A round button over the map (`CPMapButton`). An id starting with "pan" makes
/// it the panning button the car requires for ``CPMapTemplate/isPanningSupported``.
@MainActor
public final class CPMapButton: CPTemplateElement {
    /// The image.
    public var image: CPImage? { didSet { elementDidChange() } }
    /// The image while focused.
    public var focusedImage: CPImage? { didSet { elementDidChange() } }
    /// Hidden buttons are not drawn.
    public var isHidden = false { didSet { elementDidChange() } }
    /// Disabled buttons are greyed out.
    public var isEnabled = true { didSet { elementDidChange() } }
    /// Called when the driver presses it.
    public var handler: (@MainActor (CPMapButton) -> Void)?

    /// A map button.
    public init(identifier: String? = nil, handler: (@MainActor (CPMapButton) -> Void)? = nil) {
        super.init(identifier: identifier, prefix: "map-button")
        self.handler = handler
    }

    var wire: HUMapButton {
        var button = HUMapButton()
        button.id = identifier
        if let image { button.image = image.wire }
        if let focusedImage { button.focusedImage = focusedImage.wire }
        button.hidden = isHidden
        button.disabled = !isEnabled
        return button
    }
}

/// Hears the driver on the map: trips, navigation end, alerts, panning (`CPMapTemplateDelegate`).
@MainActor
public protocol CPMapTemplateDelegate: AnyObject {
    /// The driver looks at `routeChoice` of `trip` in the previews.
    func mapTemplate(_ mapTemplate: CPMapTemplate, selectedPreviewFor trip: CPTrip, using routeChoice: CPRouteChoice)
    /// The driver pressed start: start a navigation session for the trip.
    func mapTemplate(_ mapTemplate: CPMapTemplate, startedTrip trip: CPTrip, using routeChoice: CPRouteChoice)
    /// The car ended the app's guidance.
    func mapTemplateDidCancelNavigation(_ mapTemplate: CPMapTemplate)
    /// A navigation alert went away.
    func mapTemplate(_ mapTemplate: CPMapTemplate, didDismiss navigationAlert: CPNavigationAlert, dismissalContext: CPNavigationAlertDismissalContext)
    /// The panning interface is shown.
    func mapTemplateDidShowPanningInterface(_ mapTemplate: CPMapTemplate)
    /// The panning interface is about to go away.
    func mapTemplateWillDismissPanningInterface(_ mapTemplate: CPMapTemplate)
    /// The panning interface went away.
    func mapTemplateDidDismissPanningInterface(_ mapTemplate: CPMapTemplate)
    /// A navigation alert is about to be shown (before the request is sent).
    func mapTemplate(_ mapTemplate: CPMapTemplate, willShow navigationAlert: CPNavigationAlert)
    /// The car accepted the navigation alert (its answer to `show_alert`).
    func mapTemplate(_ mapTemplate: CPMapTemplate, didShow navigationAlert: CPNavigationAlert)
    /// A navigation alert is about to go away (the car's `alert_dismissed`, or the app's dismissal).
    func mapTemplate(_ mapTemplate: CPMapTemplate, willDismiss navigationAlert: CPNavigationAlert, dismissalContext: CPNavigationAlertDismissalContext)
    /// One pan step.
    func mapTemplate(_ mapTemplate: CPMapTemplate, panWith direction: CPPanDirection)
    /// How the car draws `maneuver` when it is the second of the upcoming
    /// maneuvers: asked each time ``CPNavigationSession/upcomingManeuvers`` is
    /// set with two, before they are sent (the protocol carries the style of
    /// the second maneuver only).
    func mapTemplate(_ mapTemplate: CPMapTemplate, displayStyleFor maneuver: CPManeuver) -> CPManeuverDisplayStyle
    /// Whether the car shows a banner for a new first maneuver while the app
    /// is not on the main screen (asked whenever one is set; the car decides
    /// whether the app is in front: PROTOCOL.md 19.9).
    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor maneuver: CPManeuver) -> Bool
    /// Whether a banner shown for `maneuver` shows the new estimates.
    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldUpdateNotificationFor maneuver: CPManeuver, with travelEstimates: CPTravelEstimates) -> Bool
    /// Whether the car shows a banner for a navigation alert while the app is not on the main screen.
    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor navigationAlert: CPNavigationAlert) -> Bool
}

extension CPMapTemplateDelegate {
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, selectedPreviewFor trip: CPTrip, using routeChoice: CPRouteChoice) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, startedTrip trip: CPTrip, using routeChoice: CPRouteChoice) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplateDidCancelNavigation(_ mapTemplate: CPMapTemplate) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, didDismiss navigationAlert: CPNavigationAlert, dismissalContext: CPNavigationAlertDismissalContext) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplateDidShowPanningInterface(_ mapTemplate: CPMapTemplate) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplateWillDismissPanningInterface(_ mapTemplate: CPMapTemplate) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplateDidDismissPanningInterface(_ mapTemplate: CPMapTemplate) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, willShow navigationAlert: CPNavigationAlert) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, didShow navigationAlert: CPNavigationAlert) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, willDismiss navigationAlert: CPNavigationAlert, dismissalContext: CPNavigationAlertDismissalContext) {}
    /// Does nothing (optional in CarPlay).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, panWith direction: CPPanDirection) {}
    /// The maneuver's own ``CPManeuver/displayStyle`` (optional in CarPlay, whose default is the car's choice).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, displayStyleFor maneuver: CPManeuver) -> CPManeuverDisplayStyle {
        maneuver.displayStyle
    }
    /// No banner (CarPlay's default).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor maneuver: CPManeuver) -> Bool { false }
    /// No banner update (CarPlay's default).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, shouldUpdateNotificationFor maneuver: CPManeuver, with travelEstimates: CPTravelEstimates) -> Bool { false }
    /// No banner (CarPlay's default).
    public func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor navigationAlert: CPNavigationAlert) -> Bool { false }
}

/// A navigation app's root template: buttons over the app's map, trip
/// previews, guidance, alerts and panning (`CPMapTemplate`).
///
/// Navigation requests (previews, sessions, alerts, panning) do not throw, as
/// in CarPlay; they reach the car in order and
/// ``CPInterfaceController/waitForPendingUpdates()`` throws the first refused.
@MainActor
public final class CPMapTemplate: CPTemplate, CPBarButtonProviding {
    /// Apple's name for the pan direction (`CPMapTemplate.PanDirection`).
    public typealias PanDirection = CPPanDirection
    /// Hears the driver (held weakly).
    public var mapDelegate: (any CPMapTemplateDelegate)? {
        get { delegateRef.object as? any CPMapTemplateDelegate }
        set { delegateRef = Weak(newValue) }
    }
    private var delegateRef = Weak<AnyObject>(nil)
    /// Leading bar buttons (at most 2).
    public var leadingNavigationBarButtons: [CPBarButton] = [] { didSet { leadingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Trailing bar buttons (at most 2).
    public var trailingNavigationBarButtons: [CPBarButton] = [] { didSet { trailingNavigationBarButtons.adopt(by: self); setNeedsUpdate() } }
    /// Buttons over the map (at most 4).
    public var mapButtons: [CPMapButton] = [] { didSet { mapButtons.adopt(by: self); setNeedsUpdate() } }
    /// Hides the navigation bar after a while.
    public var automaticallyHidesNavigationBar = true { didSet { setNeedsUpdate() } }
    /// Hides the map buttons with the bar.
    public var hidesButtonsWithNavigationBar = false { didSet { setNeedsUpdate() } }
    /// The guidance card's background, "#RRGGBB" (ours: `UIColor` in CarPlay).
    public var guidanceBackgroundColor: String? { didSet { setNeedsUpdate() } }
    /// Whether the map can be panned (ours: the car needs it up front; needs a map button whose id starts with "pan").
    public var isPanningSupported = false { didSet { setNeedsUpdate() } }
    /// The trips shown in the previews.
    private var previewTrips: [CPTrip] = []
    private var alert: CPNavigationAlert?
    /// The session being guided, if any.
    public private(set) var navigationSession: CPNavigationSession?
    /// Whether the panning interface is shown.
    public private(set) var isPanningInterfaceVisible = false

    /// A map template.
    public init(identifier: String? = nil) {
        super.init(identifier: identifier, prefix: "map")
    }

    /// The navigation alert shown now.
    public var currentNavigationAlert: CPNavigationAlert? { alert }

    private var application: CPApplication? { interfaceController?.application }

    /// Shows trip previews; the delegate hears which one the driver looks at and starts.
    public func showTripPreviews(_ tripPreviews: [CPTrip], selectedTrip: CPTrip? = nil, textConfiguration: CPTripPreviewTextConfiguration?) {
        previewTrips = tripPreviews
        var previews = HUTripPreviews()
        previews.trips = tripPreviews.map(\.wire)
        previews.selectedTripID = selectedTrip?.identifier ?? ""
        if let textConfiguration { previews.texts = textConfiguration.wire }
        application?.postNavigation(.showTripPreviews(previews))
    }

    /// Hides the previews.
    public func hideTripPreviews() {
        application?.postNavigation(.hideTripPreviews(HUHideTripPreviews()))
    }

    /// Starts guiding `trip` (ours: the route can be named; CarPlay takes it from the trip).
    public func startNavigationSession(for trip: CPTrip, routeChoice: CPRouteChoice? = nil) -> CPNavigationSession {
        guard let application else {
            preconditionFailure("startNavigationSession: the map template is not shown by a connected interface controller")
        }
        let route = routeChoice ?? trip.routeChoices.first
        let session = CPNavigationSession(trip: trip, routeChoice: route, application: application, mapTemplate: self)
        navigationSession = session
        var start = HUStartNavigation()
        start.trip = trip.wire
        start.routeChoiceID = route?.identifier ?? ""
        application.postNavigation(.start(start))
        return session
    }

    /// Shows a navigation alert over the map.
    /// The map delegate's `mapTemplate(_:shouldShowNotificationFor:)` says
    /// whether the car shows it as a banner while the app is not on the main screen.
    public func present(navigationAlert: CPNavigationAlert, animated: Bool) {
        alert = navigationAlert
        let wire = navigationAlert.wire
        Task { @MainActor [weak self] in
            guard let self else { return }
            self.mapDelegate?.mapTemplate(self, willShow: navigationAlert)
        }
        application?.postNavigation(building: { [weak self] in
            var wire = wire
            if let self { wire.notify = self.offerBanner(for: navigationAlert) }
            return .showAlert(wire)
        }, accepted: { [weak self] in
            // The car's answer: the alert is on screen (as CarPlay's didShow).
            guard let self else { return }
            self.mapDelegate?.mapTemplate(self, didShow: navigationAlert)
        })
    }

    /// Dismisses the alert; `completion` gets whether one was shown.
    public func dismissNavigationAlert(animated: Bool, completion: @escaping @MainActor (Bool) -> Void) {
        let shown = alert
        application?.postNavigation(.dismissAlert(HUDismissNavigationAlert()))
        Task { @MainActor [weak self] in
            if let self, let shown { self.mapDelegate?.mapTemplate(self, willDismiss: shown, dismissalContext: .systemDismissed) }
            completion(shown != nil)
        }
    }

    /// Shows the panning interface.
    public func showPanningInterface(animated: Bool) {
        application?.postNavigation(.showPanning(HUShowPanning()))
    }

    /// Dismisses the panning interface.
    public func dismissPanningInterface(animated: Bool) {
        application?.postNavigation(.dismissPanning(HUDismissPanning()))
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var map = HUMapTemplate()
        map.leadingButtons = leadingNavigationBarButtons.map(\.wire)
        map.trailingButtons = trailingNavigationBarButtons.map(\.wire)
        map.mapButtons = mapButtons.map(\.wire)
        map.automaticallyHidesNavigationBar = automaticallyHidesNavigationBar
        map.hidesButtonsWithNavigationBar = hidesButtonsWithNavigationBar
        map.panningSupported = isPanningSupported
        map.guidanceBackgroundColor = guidanceBackgroundColor ?? ""
        return .map(map)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .buttonPressed(let pressed) = event.kind else { return false }
        if let button = mapButtons.first(where: { $0.identifier == pressed.buttonID }) {
            button.handler?(button)
            return true
        }
        return pressBarButton(pressed.buttonID, leading: leadingNavigationBarButtons, trailing: trailingNavigationBarButtons)
    }

    private func trip(_ chosen: HUTripChosen) -> (CPTrip, CPRouteChoice)? {
        let trips = previewTrips + (navigationSession.map { [$0.trip] } ?? [])
        guard let trip = trips.first(where: { $0.identifier == chosen.tripID }),
              let route = trip.routeChoice(withID: chosen.routeChoiceID) else { return nil }
        return (trip, route)
    }

    /// The maneuvers and alerts offered as banners, by identifier, so the
    /// driver's tap names the object the app gave (the last 8 of each).
    private var bannerManeuvers: [CPManeuver] = []
    private var bannerAlerts: [CPNavigationAlert] = []

    /// Asks the delegate whether `maneuver` may be a banner, and remembers it if so.
    func offerBanner(for maneuver: CPManeuver) -> Bool {
        guard mapDelegate?.mapTemplate(self, shouldShowNotificationFor: maneuver) == true else { return false }
        bannerManeuvers = Array((bannerManeuvers.filter { $0.identifier != maneuver.identifier } + [maneuver]).suffix(8))
        return true
    }

    func offerBanner(for alert: CPNavigationAlert) -> Bool {
        guard mapDelegate?.mapTemplate(self, shouldShowNotificationFor: alert) == true else { return false }
        bannerAlerts = Array((bannerAlerts.filter { $0.identifier != alert.identifier } + [alert]).suffix(8))
        return true
    }

    /// What the tapped banner showed (`banner_selected`).
    func bannerSubject(_ selected: HUBannerSelected) -> (CPManeuver?, CPNavigationAlert?) {
        if !selected.maneuverID.isEmpty {
            return (bannerManeuvers.last { $0.identifier == selected.maneuverID }, nil)
        }
        return (nil, bannerAlerts.last { $0.identifier == selected.alertID })
    }

    /// A navigation event of the car for this app's main scene.
    func handle(_ event: HUNavigationEvent) {
        let delegate = mapDelegate
        switch event.kind {
        case .tripPreviewed(let chosen):
            if let (trip, route) = trip(chosen) { delegate?.mapTemplate(self, selectedPreviewFor: trip, using: route) }
        case .tripStarted(let chosen):
            if let (trip, route) = trip(chosen) { delegate?.mapTemplate(self, startedTrip: trip, using: route) }
        case .navigationCancelled:
            navigationSession = nil
            delegate?.mapTemplateDidCancelNavigation(self)
        case .alertDismissed(let dismissed):
            guard let shown = alert, shown.identifier == dismissed.alertID else { return }
            alert = nil
            if dismissed.reason == .userAction, let action = shown.actions.first(where: { $0.identifier == dismissed.actionID }) {
                action.handler(action)
            }
            let context: CPNavigationAlertDismissalContext
            switch dismissed.reason {
            case .timeout: context = .timeout
            case .userAction: context = .userDismissed
            default: context = .systemDismissed
            }
            delegate?.mapTemplate(self, willDismiss: shown, dismissalContext: context)
            delegate?.mapTemplate(self, didDismiss: shown, dismissalContext: context)
        case .panning(let pan):
            switch pan.kind {
            case .began?:
                isPanningInterfaceVisible = true
                delegate?.mapTemplateDidShowPanningInterface(self)
            case .ended?:
                delegate?.mapTemplateWillDismissPanningInterface(self)
                isPanningInterfaceVisible = false
                delegate?.mapTemplateDidDismissPanningInterface(self)
            case .direction(let direction)?:
                let mapped: CPPanDirection
                switch direction {
                case .up: mapped = .up
                case .down: mapped = .down
                case .left: mapped = .left
                case .right: mapped = .right
                default: return
                }
                delegate?.mapTemplate(self, panWith: mapped)
            case nil:
                break
            }
        default:
            break
        }
    }
}

/// A shortcut button on the CarPlay dashboard (`CPDashboardButton`).
@MainActor
public final class CPDashboardButton {
    /// The button's id (made up when not given).
    public let identifier: String
    /// Titles, the car shows the longest that fits.
    public let titleVariants: [String]
    /// Subtitles.
    public let subtitleVariants: [String]
    /// The image.
    public let image: CPImage
    /// Called when the driver presses it on the dashboard.
    public let handler: (@MainActor (CPDashboardButton) -> Void)?

    /// A dashboard button.
    public init(titleVariants: [String], subtitleVariants: [String], image: CPImage, identifier: String? = nil,
                handler: (@MainActor (CPDashboardButton) -> Void)? = nil) {
        self.titleVariants = titleVariants
        self.subtitleVariants = subtitleVariants
        self.image = image
        self.handler = handler
        self.identifier = identifier ?? ElementID.make("dashboard")
    }

    var wire: HUDashboardButton {
        var button = HUDashboardButton()
        button.id = identifier
        button.titleVariants = titleVariants.longestFirst
        button.subtitleVariants = subtitleVariants.longestFirst
        button.image = image.wire
        return button
    }
}

/// A navigation app's dashboard scene: its shortcut buttons (`CPDashboardController`).
@MainActor
public final class CPDashboardController {
    unowned let application: CPApplication
    let sceneID: UInt32
    private var buttons: [CPDashboardButton] = []

    init(application: CPApplication, sceneID: UInt32) {
        self.application = application
        self.sceneID = sceneID
    }

    /// The shortcut buttons (0 to 2); setting them sends them to the car.
    public var shortcutButtons: [CPDashboardButton] {
        get { buttons }
        set {
            buttons = newValue
            var message = HUDashboardButtons()
            message.buttons = newValue.map(\.wire)
            application.postNavigation(.setDashboardButtons(message))
        }
    }

    func press(_ id: String) {
        guard let button = buttons.first(where: { $0.identifier == id }) else { return }
        button.handler?(button)
    }
}

/// A cluster setting the driver chose (`CPInstrumentClusterSetting`).
public enum CPInstrumentClusterSetting: Sendable, Equatable {
    /// The car did not say.
    case unspecified
    /// Shown.
    case enabled
    /// Hidden.
    case disabled
    /// As the driver prefers.
    case userPreference

    init(_ setting: HUClusterSetting) {
        switch setting {
        case .enabled: self = .enabled
        case .disabled: self = .disabled
        case .userPreference: self = .userPreference
        default: self = .unspecified
        }
    }
}

/// Hears the instrument cluster's controls (`CPInstrumentClusterControllerDelegate`).
@MainActor
public protocol CPInstrumentClusterControllerDelegate: AnyObject {
    /// The driver zoomed in on the cluster's map.
    func instrumentClusterControllerDidZoom(in instrumentClusterController: CPInstrumentClusterController)
    /// The driver zoomed out.
    func instrumentClusterControllerDidZoomOut(_ instrumentClusterController: CPInstrumentClusterController)
    /// The compass setting changed.
    func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController, didChangeCompassSetting compassSetting: CPInstrumentClusterSetting)
    /// The speed-limit setting changed.
    func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController, didChangeSpeedLimitSetting speedLimitSetting: CPInstrumentClusterSetting)
    /// The cluster's window connected: set its ``CPWindow/rootViewController`` to draw the cluster's map.
    func instrumentClusterControllerDidConnect(_ instrumentClusterWindow: CPWindow)
    /// The cluster's window went away.
    func instrumentClusterControllerDidDisconnectWindow(_ instrumentClusterWindow: CPWindow)
}

extension CPInstrumentClusterControllerDelegate {
    /// Does nothing (optional in CarPlay).
    public func instrumentClusterControllerDidZoom(in instrumentClusterController: CPInstrumentClusterController) {}
    /// Does nothing (optional in CarPlay).
    public func instrumentClusterControllerDidZoomOut(_ instrumentClusterController: CPInstrumentClusterController) {}
    /// Does nothing (optional in CarPlay).
    public func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController, didChangeCompassSetting compassSetting: CPInstrumentClusterSetting) {}
    /// Does nothing (optional in CarPlay).
    public func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController, didChangeSpeedLimitSetting speedLimitSetting: CPInstrumentClusterSetting) {}
    /// Does nothing (required in CarPlay; ours: a cluster map is optional).
    public func instrumentClusterControllerDidConnect(_ instrumentClusterWindow: CPWindow) {}
    /// Does nothing.
    public func instrumentClusterControllerDidDisconnectWindow(_ instrumentClusterWindow: CPWindow) {}
}

/// A navigation app's instrument-cluster scene (`CPInstrumentClusterController`).
@MainActor
public final class CPInstrumentClusterController {
    unowned let application: CPApplication
    let sceneID: UInt32
    private var delegateRef = Weak<AnyObject>(nil)
    private var descriptions: [String] = []
    /// The cluster's window, while connected: the app draws the cluster's map in it.
    public internal(set) var instrumentClusterWindow: CPWindow?

    init(application: CPApplication, sceneID: UInt32) {
        self.application = application
        self.sceneID = sceneID
    }

    /// Hears the cluster's controls (held weakly).
    public var delegate: (any CPInstrumentClusterControllerDelegate)? {
        get { delegateRef.object as? any CPInstrumentClusterControllerDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// What the cluster shows while the app does not guide; setting sends it to the car.
    public var inactiveDescriptionVariants: [String] {
        get { descriptions }
        set {
            descriptions = newValue
            var message = HUClusterDescriptions()
            message.inactiveDescriptionVariants = newValue.longestFirst
            application.postNavigation(.setClusterDescriptions(message))
        }
    }

    func handle(_ input: HUClusterInput) {
        guard let delegate else { return }
        switch input.kind {
        case .zoomIn?: delegate.instrumentClusterControllerDidZoom(in: self)
        case .zoomOut?: delegate.instrumentClusterControllerDidZoomOut(self)
        case .compass(let setting)?: delegate.instrumentClusterController(self, didChangeCompassSetting: CPInstrumentClusterSetting(setting))
        case .speedLimit(let setting)?: delegate.instrumentClusterController(self, didChangeSpeedLimitSetting: CPInstrumentClusterSetting(setting))
        case nil: break
        }
    }
}
