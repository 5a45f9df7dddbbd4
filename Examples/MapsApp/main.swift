// A navigation app: a map with buttons, trip previews, guidance with
// maneuvers, a navigation alert, dashboard shortcuts and the instrument
// cluster. Run: swift run MapsApp [socket path]; launch "Maps" on the car.
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

final class MapsSceneDelegate: CPTemplateApplicationSceneDelegate, CPMapTemplateDelegate,
    CPTemplateApplicationDashboardSceneDelegate, CPTemplateApplicationInstrumentClusterSceneDelegate,
    CPInstrumentClusterControllerDelegate, @unchecked Sendable {
    var interfaceController: CPInterfaceController?
    let map = CPMapTemplate(identifier: "map")
    var session: CPNavigationSession?
    let home = CPTrip(origin: CPMapItem(name: "Office"), destination: CPMapItem(name: "Home"), routeChoices: [
        CPRouteChoice(summaryVariants: ["Fastest route via A1", "Via A1"], additionalInformationVariants: ["Light traffic"],
                      selectionSummaryVariants: ["A1"], travelEstimates: CPTravelEstimates(distanceRemaining: 12_000, timeRemaining: 900),
                      identifier: "a1"),
    ], identifier: "home")

    // The map's window is the app's to draw; CarPlayKit tells its size.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController, to window: CPWindow) {
        self.interfaceController = interfaceController
        map.mapDelegate = self
        let routes = CPMapButton(identifier: "routes") { [unowned self] _ in
            self.map.showTripPreviews([self.home], textConfiguration:
                CPTripPreviewTextConfiguration(startButtonTitle: "Go", additionalRoutesButtonTitle: nil, overviewButtonTitle: nil))
            log("previews shown")
        }
        routes.image = CPImage(named: "routes", pixelWidth: 88, pixelHeight: 88)
        map.mapButtons = [routes]
        map.trailingNavigationBarButtons = [CPBarButton(title: "End", identifier: "end") { [unowned self] _ in
            self.session?.finishTrip()
            self.session = nil
            log("trip finished")
        }]
        interfaceController.setRootTemplate(map, animated: false) { success, _ in log("root set: \(success)") }
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnect interfaceController: CPInterfaceController, from window: CPWindow) {
        log("disconnected")
    }

    // MARK: CPMapTemplateDelegate

    func mapTemplate(_ mapTemplate: CPMapTemplate, selectedPreviewFor trip: CPTrip, using routeChoice: CPRouteChoice) {
        log("previewing \(trip.identifier) via \(routeChoice.identifier)")
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, startedTrip trip: CPTrip, using routeChoice: CPRouteChoice) {
        mapTemplate.hideTripPreviews()
        let session = mapTemplate.startNavigationSession(for: trip, routeChoice: routeChoice)
        let turn = CPManeuver(identifier: "turn-1")
        turn.instructionVariants = ["Turn right onto Main Street", "Turn right"]
        turn.symbolImage = CPImage(named: "turn-right", pixelWidth: 100, pixelHeight: 100)
        turn.initialTravelEstimates = CPTravelEstimates(distanceRemaining: 400, timeRemaining: 60)
        session.upcomingManeuvers = [turn]
        session.updateEstimates(CPTravelEstimates(distanceRemaining: 300, timeRemaining: 45), for: turn)
        self.session = session
        log("guiding \(trip.identifier)")
        let ok = CPAlertAction(title: "OK", style: .default, identifier: "ok") { _ in log("alert ok") }
        mapTemplate.present(navigationAlert: CPNavigationAlert(titleVariants: ["Accident ahead"], subtitleVariants: ["Expect delays"],
                                                               image: nil, primaryAction: ok, secondaryAction: nil, duration: 0),
                            animated: true)
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, willShow navigationAlert: CPNavigationAlert) { log("alert will show") }
    func mapTemplate(_ mapTemplate: CPMapTemplate, didShow navigationAlert: CPNavigationAlert) { log("alert shown") }
    func mapTemplate(_ mapTemplate: CPMapTemplate, willDismiss navigationAlert: CPNavigationAlert,
                     dismissalContext: CPNavigationAlertDismissalContext) {
        log("alert will dismiss: \(dismissalContext)")
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, didDismiss navigationAlert: CPNavigationAlert,
                     dismissalContext: CPNavigationAlertDismissalContext) {
        log("alert dismissed: \(dismissalContext)")
    }

    func mapTemplateDidCancelNavigation(_ mapTemplate: CPMapTemplate) {
        session = nil
        log("navigation cancelled by the car")
    }

    // MARK: dashboard and cluster

    func templateApplicationDashboardScene(_ templateApplicationDashboardScene: CPTemplateApplicationDashboardScene,
                                           didConnect dashboardController: CPDashboardController, to window: CPWindow) {
        dashboardController.shortcutButtons = [
            CPDashboardButton(titleVariants: ["Home"], subtitleVariants: ["15 min"], image: CPImage(named: "home", pixelWidth: 80, pixelHeight: 80),
                              identifier: "go-home") { [unowned self] _ in
                self.mapTemplate(self.map, startedTrip: self.home, using: self.home.routeChoices[0])
                log("dashboard: home")
            },
        ]
        log("dashboard connected")
    }

    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene,
                                                   didConnect instrumentClusterController: CPInstrumentClusterController) {
        instrumentClusterController.delegate = self
        instrumentClusterController.inactiveDescriptionVariants = ["Maps is ready"]
        log("cluster connected")
    }

    func instrumentClusterControllerDidZoom(in instrumentClusterController: CPInstrumentClusterController) { log("cluster zoom in") }
}

let socket = CommandLine.arguments.dropFirst().first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.maps", displayName: "Maps", entitlements: [.maps])
let sceneDelegate = MapsSceneDelegate()
app.sceneDelegate = sceneDelegate
app.dashboardSceneDelegate = sceneDelegate
app.instrumentClusterSceneDelegate = sceneDelegate
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone")
log("connected")
await app.run()
