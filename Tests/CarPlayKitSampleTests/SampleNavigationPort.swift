// A navigation scene delegate written the way Apple's CarPlay documentation
// writes one (an NSObject subclass, not Sendable, `[weak self]` in handlers,
// "hop to main" with DispatchQueue.main, completion-less stack calls,
// `CPMapTemplate.PanDirection`, `Measurement` distances, a search delegate
// with Apple's non-@Sendable completion). It compiles against CarPlayKit in
// Swift 6 mode with only the differences docs/CARPLAYKIT.md lists; each is
// marked "DIFF". A change of CarPlayKit's shapes that breaks Apple-style code
// breaks this build.
import CarPlayKit  // DIFF: `import CarPlay` (and no `import MapKit`)

class NavigationSceneDelegate: NSObject, CPTemplateApplicationSceneDelegate, CPMapTemplateDelegate, CPSearchTemplateDelegate {
    var interfaceController: CPInterfaceController?
    var mapTemplate: CPMapTemplate?
    var navigationSession: CPNavigationSession?
    var events: [String] = []
    var searchResults: [CPListItem] = []
    var trips: [CPTrip] = []

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController,
                                  to window: CPWindow) {  // DIFF: `CPWindow` for `UIWindow`
        self.interfaceController = interfaceController
        window.rootViewController = MapViewController()
        let mapTemplate = CPMapTemplate()
        mapTemplate.mapDelegate = self
        let panButton = CPMapButton(identifier: "pan") { [weak self] _ in  // DIFF: `isPanningSupported` and a `CPMapButton` whose id starts with `pan`
            self?.mapTemplate?.showPanningInterface(animated: true)
        }
        let searchButton = CPBarButton(title: "Search") { [weak self] _ in
            guard let self else { return }
            let search = CPSearchTemplate()
            search.delegate = self
            self.interfaceController?.pushTemplate(search, animated: true)  // iOS 12-13 call, no completion
        }
        mapTemplate.mapButtons = [panButton]
        mapTemplate.isPanningSupported = true  // DIFF: `isPanningSupported`: the car needs to know up front
        mapTemplate.leadingNavigationBarButtons = [searchButton]
        self.mapTemplate = mapTemplate
        interfaceController.setRootTemplate(mapTemplate, animated: false)  // iOS 12-13 call, no completion
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnect interfaceController: CPInterfaceController,
                                  from window: CPWindow) {
        self.interfaceController = nil
    }

    func showPreviews() {
        let origin = MKMapItem.forCurrentLocation()
        origin.name = "Home"
        let destination = MKMapItem(placemark: MKPlacemark(coordinate: CLLocationCoordinate2D(latitude: 48.85, longitude: 2.35)))
        destination.name = "Work"
        let route = CPRouteChoice(summaryVariants: ["Fastest"], additionalInformationVariants: ["Via A1"], selectionSummaryVariants: ["A1"])
        let trip = CPTrip(origin: origin, destination: destination, routeChoices: [route])
        trips = [trip]
        mapTemplate?.showTripPreviews(trips, textConfiguration: nil)
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, startedTrip trip: CPTrip, using routeChoice: CPRouteChoice) {
        mapTemplate.hideTripPreviews()
        let session = mapTemplate.startNavigationSession(for: trip)
        // Lane guidance (iOS 17.4): added to the session, linked from the maneuver, made current.
        let laneGuidance = CPLaneGuidance()
        laneGuidance.instructionVariants = ["Use the right lane to turn onto Main Street", "Right lane"]
        laneGuidance.lanes = [
            CPLane(angles: [Measurement(value: -90, unit: UnitAngle.degrees)]),
            CPLane(angles: [Measurement(value: 90, unit: UnitAngle.degrees)], highlightedAngle: Measurement(value: 0, unit: UnitAngle.degrees), isPreferred: false),
            CPLane(angles: [], highlightedAngle: Measurement(value: 90, unit: UnitAngle.degrees), isPreferred: true),
        ]
        session.add([laneGuidance])
        let maneuver = CPManeuver()
        maneuver.instructionVariants = ["Turn right onto Main Street", "Right onto Main St"]
        maneuver.maneuverType = .rightTurn
        maneuver.junctionType = .intersection
        maneuver.trafficSide = .right
        maneuver.junctionExitAngle = Measurement(value: 90, unit: UnitAngle.degrees)
        maneuver.junctionElementAngles = [Measurement(value: 0, unit: UnitAngle.degrees), Measurement(value: -90, unit: UnitAngle.degrees)]
        maneuver.linkedLaneGuidance = laneGuidance
        let nextManeuver = CPManeuver()
        nextManeuver.instructionVariants = ["Then turn left"]
        session.upcomingManeuvers = [maneuver, nextManeuver]
        session.currentLaneGuidance = laneGuidance
        session.currentRoadNameVariants = ["Station Road", "Station Rd"]
        session.maneuverState = .prepare
        session.updateEstimates(CPTravelEstimates(distanceRemaining: Measurement(value: 1.2, unit: UnitLength.kilometers),
                                                  timeRemaining: 90), for: maneuver)
        navigationSession = session
        // Apple-style "hop to main": on Linux too, the main queue runs the main actor.
        DispatchQueue.main.async { [weak self] in
            self?.events.append("guiding")
        }
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, panWith direction: CPMapTemplate.PanDirection) {
        events.append("pan \(direction)")
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, displayStyleFor maneuver: CPManeuver) -> CPManeuverDisplayStyle {
        events.append("style asked")
        return .instructionOnly
    }

    /// The next turn, offered as a banner while the app is in the background.
    func announceNextTurn() {
        let maneuver = CPManeuver()
        maneuver.instructionVariants = ["Turn left onto High St"]
        maneuver.notificationInstructionVariants = ["Turn left onto High Street"]
        navigationSession?.upcomingManeuvers = [maneuver]
    }

    // Banners: Apple asks only while the app is in the background.
    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor maneuver: CPManeuver) -> Bool {
        events.append("banner asked")
        return true
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldUpdateNotificationFor maneuver: CPManeuver,
                     with travelEstimates: CPTravelEstimates) -> Bool {
        true
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, shouldShowNotificationFor navigationAlert: CPNavigationAlert) -> Bool {
        true
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect maneuver: CPManeuver) {
        events.append("selected \(maneuver.instructionVariants.first ?? "")")
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene, didSelect navigationAlert: CPNavigationAlert) {
        events.append("selected alert \(navigationAlert.titleVariants.first ?? "")")
    }

    func mapTemplateDidShowPanningInterface(_ mapTemplate: CPMapTemplate) { events.append("pan began") }
    func mapTemplateWillDismissPanningInterface(_ mapTemplate: CPMapTemplate) { events.append("pan will end") }
    func mapTemplate(_ mapTemplate: CPMapTemplate, willShow navigationAlert: CPNavigationAlert) { events.append("alert will show") }
    func mapTemplate(_ mapTemplate: CPMapTemplate, didShow navigationAlert: CPNavigationAlert) { events.append("alert shown") }
    func mapTemplate(_ mapTemplate: CPMapTemplate, willDismiss navigationAlert: CPNavigationAlert,
                     dismissalContext: CPNavigationAlertDismissalContext) {  // DIFF: `CPNavigationAlert.DismissalContext`
        events.append("alert will dismiss")
    }

    // Apple's signatures: the completion handlers are not @Sendable.
    func searchTemplate(_ searchTemplate: CPSearchTemplate, updatedSearchText searchText: String,
                        completionHandler: @escaping ([CPListItem]) -> Void) {
        let results = [CPListItem(text: "Cafe \(searchText)", detailText: nil)]
        searchResults = results
        completionHandler(results)
    }

    func searchTemplate(_ searchTemplate: CPSearchTemplate, selectedResult item: CPListItem,
                        completionHandler: @escaping () -> Void) {
        interfaceController?.popTemplate(animated: true)  // iOS 12-13 call, no completion
        showPreviews()
        completionHandler()
    }
}

/// The app's map view: Apple's sample sets a `UIViewController` drawing with MapKit.
class MapViewController: CPWindowContent {  // DIFF: `UIViewController` as `rootViewController`: a `CPWindowContent` filling BGRA pixels
    var frames = 0
    func draw(_ pixels: CPPixelBuffer, in window: CPWindow) {
        frames += 1
        pixels.fill(red: 242, green: 239, blue: 233)
    }
}

/// The dashboard scene (iOS 13.4+): the map in the dashboard's window and two shortcuts.
class DashboardSceneDelegate: NSObject, CPTemplateApplicationDashboardSceneDelegate {
    var dashboardController: CPDashboardController?
    var windowSize: (width: UInt32, height: UInt32)?
    var events: [String] = []

    func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene,
                                           didConnect dashboardController: CPDashboardController,
                                           to window: CPWindow) {  // DIFF: `CPWindow` for `UIWindow`
        self.dashboardController = dashboardController
        windowSize = (window.width, window.height)
        window.rootViewController = MapViewController()
        let homeImage = CPImage(named: "house", pixelWidth: 80, pixelHeight: 80)  // DIFF: `UIImage(systemName:)`
        let home = CPDashboardButton(titleVariants: ["Home"], subtitleVariants: ["15 min"], image: homeImage) { [weak self] _ in
            self?.events.append("shortcut home")
        }
        let work = CPDashboardButton(titleVariants: ["Work"], subtitleVariants: ["25 min"], image: homeImage) { [weak self] _ in
            self?.events.append("shortcut work")
        }
        dashboardController.shortcutButtons = [home, work]
    }

    func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene,
                                           didDisconnect dashboardController: CPDashboardController,
                                           from window: CPWindow) {  // DIFF: `CPWindow` for `UIWindow`
        self.dashboardController = nil
    }
}

/// The instrument cluster scene (iOS 15.4+): its controller's delegate gets the window and the driver's settings.
class InstrumentClusterSceneDelegate: NSObject, CPTemplateApplicationInstrumentClusterSceneDelegate, CPInstrumentClusterControllerDelegate {
    var instrumentClusterController: CPInstrumentClusterController?
    var events: [String] = []
    var zoom = 1.0

    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene,
                                                   didConnect instrumentClusterController: CPInstrumentClusterController) {
        self.instrumentClusterController = instrumentClusterController
        instrumentClusterController.delegate = self
        instrumentClusterController.inactiveDescriptionVariants = ["Maps is ready to guide", "Maps ready"]
    }

    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene,
                                                   didDisconnectInstrumentClusterController instrumentClusterController: CPInstrumentClusterController) {
        self.instrumentClusterController = nil
    }

    func contentStyleDidChange(_ contentStyle: CPContentStyle) {  // DIFF: `UIUserInterfaceStyle`
        events.append("style \(contentStyle)")
    }

    func instrumentClusterControllerDidConnect(_ instrumentClusterWindow: CPWindow) {  // DIFF: `CPWindow` for `UIWindow`
        instrumentClusterWindow.rootViewController = MapViewController()
        events.append("window \(Int(instrumentClusterWindow.width))x\(Int(instrumentClusterWindow.height))")
    }

    func instrumentClusterControllerDidDisconnectWindow(_ instrumentClusterWindow: CPWindow) {  // DIFF: `CPWindow` for `UIWindow`
        events.append("window gone")
    }

    func instrumentClusterControllerDidZoom(in instrumentClusterController: CPInstrumentClusterController) {
        zoom /= 2
        events.append("zoom in")
    }

    func instrumentClusterControllerDidZoomOut(_ instrumentClusterController: CPInstrumentClusterController) {
        zoom *= 2
        events.append("zoom out")
    }

    func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController,
                                     didChangeCompassSetting compassSetting: CPInstrumentClusterSetting) {
        events.append("compass \(compassSetting)")
    }

    func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController,
                                     didChangeSpeedLimitSetting speedLimitSetting: CPInstrumentClusterSetting) {
        events.append("speed limit \(speedLimitSetting)")
    }
}
