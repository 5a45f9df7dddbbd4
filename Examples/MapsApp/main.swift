// A navigation app: its own map drawn with cairo (MapRenderer.swift) in the
// main, dashboard and cluster windows and streamed to the car as H.264, map
// buttons (routes, pan, zoom), trip previews, guidance with maneuvers (the car
// drives along the route), a navigation alert, dashboard shortcuts and the
// instrument cluster, and the maneuver spoken through a voicePrompt audio
// session (espeak-ng's voice when it is installed, else a generated chime).
// Run: swift run MapsApp [socket path]; launch "Maps" on the car. Prints
// "video: streaming main 1600x960 ..." when a window's first frame leaves.
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

/// A named place, the MapKit way: an item at a placemark, named afterwards.
@MainActor func namedPlace(_ name: String, _ latitude: CLLocationDegrees, _ longitude: CLLocationDegrees) -> MKMapItem {
    let item = MKMapItem(placemark: MKPlacemark(coordinate: CLLocationCoordinate2D(latitude: latitude, longitude: longitude)))
    item.name = name
    return item
}

final class MapsSceneDelegate: CPTemplateApplicationSceneDelegate, CPMapTemplateDelegate,
    CPTemplateApplicationDashboardSceneDelegate, CPTemplateApplicationInstrumentClusterSceneDelegate,
    CPInstrumentClusterControllerDelegate {
    var interfaceController: CPInterfaceController?
    let map = CPMapTemplate(identifier: "map")
    var session: CPNavigationSession?
    var voice: PromptVoice?
    let model = MapModel()
    var windows: [CPWindow] = []
    var mainWindow: CPWindow?
    let home = CPTrip(origin: namedPlace("Office", 48.137, 11.575), destination: namedPlace("Home", 48.162, 11.586), routeChoices: [
        CPRouteChoice(summaryVariants: ["Fastest route via A1", "Via A1"], additionalInformationVariants: ["Light traffic"],
                      selectionSummaryVariants: ["A1"], travelEstimates: CPTravelEstimates(distanceRemaining: 12_000, timeRemaining: 900),
                      identifier: "a1"),
    ], identifier: "home")

    // The map's window is the app's to draw: CarPlayKit asks the view for frames and streams them.
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController, to window: CPWindow) {
        self.interfaceController = interfaceController
        show(MapView(kind: .main, model: model), in: window)
        mainWindow = window
        map.mapDelegate = self
        let routes = CPMapButton(identifier: "routes") { [unowned self] _ in
            self.map.showTripPreviews([self.home], textConfiguration:
                CPTripPreviewTextConfiguration(startButtonTitle: "Go", additionalRoutesButtonTitle: nil, overviewButtonTitle: nil))
            // The call returns at once, as CarPlay's; the car shows the previews once its request arrived.
            Task { @MainActor in
                do {
                    try await interfaceController.waitForPendingUpdates()
                    log("previews shown")
                } catch {
                    log("previews refused: \(error)")
                }
            }
        }
        routes.image = CPImage(named: "routes", pixelWidth: 88, pixelHeight: 88)
        let pan = CPMapButton(identifier: "pan") { [unowned self] _ in self.map.showPanningInterface(animated: true) }
        pan.image = CPImage(named: "pan", pixelWidth: 88, pixelHeight: 88)
        // Zoom buttons are the app's own: it changes its map and asks the window to draw again.
        let zoomIn = CPMapButton(identifier: "zoom-in") { [unowned self] _ in self.zoomMain(by: 0.5) }
        zoomIn.image = CPImage(named: "zoom-in", pixelWidth: 88, pixelHeight: 88)
        let zoomOut = CPMapButton(identifier: "zoom-out") { [unowned self] _ in self.zoomMain(by: 2) }
        zoomOut.image = CPImage(named: "zoom-out", pixelWidth: 88, pixelHeight: 88)
        map.mapButtons = [routes, pan, zoomIn, zoomOut]
        map.isPanningSupported = true
        map.trailingNavigationBarButtons = [CPBarButton(title: "End", identifier: "end") { [unowned self] _ in
            self.session?.finishTrip()
            self.session = nil
            self.setDriving(false)
            log("trip finished")
        }]
        interfaceController.setRootTemplate(map, animated: false) { success, _ in log("root set: \(success)") }
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnect interfaceController: CPInterfaceController, from window: CPWindow) {
        windows.removeAll { $0 === window }
        log("disconnected")
    }

    // MARK: the map's windows

    func show(_ view: MapView, in window: CPWindow) {
        window.rootViewController = view
        window.isAnimating = model.isDriving
        windows.append(window)
    }

    /// While guiding the car moves: every window redraws at its frame rate.
    func setDriving(_ driving: Bool) {
        if driving { model.startDriving() } else { model.stopDriving() }
        for window in windows { window.isAnimating = driving }
    }

    func zoomMain(by factor: Double) {
        model.mainZoom = min(20, max(0.5, model.mainZoom * factor))
        mainWindow?.setNeedsDisplay()
        log("zoom: \(model.mainZoom) m/px")
    }

    func mapTemplate(_ mapTemplate: CPMapTemplate, panWith direction: CPPanDirection) {
        if let window = mainWindow { model.pan(direction, window: window) }  // CarPlayKit redraws the window after a pan
        log("pan \(direction)")
    }

    func mapTemplateDidDismissPanningInterface(_ mapTemplate: CPMapTemplate) {
        model.panOffset = MapPoint(0, 0)  // back to following the car
        mainWindow?.setNeedsDisplay()
    }

    func contentStyleDidChange(_ contentStyle: CPContentStyle) {
        log("content style: \(contentStyle)")  // the windows redraw in the new style themselves
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
        // What a cluster draws itself (iOS 17.4): the turn, its junction and the lanes before it.
        turn.maneuverType = .rightTurn
        turn.junctionType = .intersection
        turn.trafficSide = .right
        turn.junctionExitAngle = Measurement(value: 90, unit: UnitAngle.degrees)
        turn.junctionElementAngles = [Measurement(value: 0, unit: UnitAngle.degrees), Measurement(value: -90, unit: UnitAngle.degrees)]
        let lanes = CPLaneGuidance(identifier: "main-street-lanes")
        lanes.instructionVariants = ["Use the right lane for Main Street", "Right lane"]
        lanes.lanes = [
            CPLane(angles: [Measurement(value: -90, unit: UnitAngle.degrees), Measurement(value: 0, unit: UnitAngle.degrees)]),
            CPLane(angles: [Measurement(value: 0, unit: UnitAngle.degrees)]),
            CPLane(angles: [Measurement(value: 0, unit: UnitAngle.degrees)], highlightedAngle: Measurement(value: 90, unit: UnitAngle.degrees), isPreferred: true),
        ]
        session.add([lanes])
        turn.linkedLaneGuidance = lanes
        session.upcomingManeuvers = [turn]
        session.currentLaneGuidance = lanes
        session.currentRoadNameVariants = ["Station Road", "Station Rd"]
        session.maneuverState = .initial
        session.updateEstimates(CPTravelEstimates(distanceRemaining: 300, timeRemaining: 45), for: turn)
        self.session = session
        setDriving(true)
        log("guiding \(trip.identifier)")
        voice?.speak(turn.instructionVariants.first ?? "")
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
        setDriving(false)
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
        show(MapView(kind: .dashboard, model: model), in: window)
        log("dashboard connected")
    }

    func templateApplicationInstrumentClusterScene(_ templateApplicationInstrumentClusterScene: CPTemplateApplicationInstrumentClusterScene,
                                                   didConnect instrumentClusterController: CPInstrumentClusterController) {
        instrumentClusterController.delegate = self
        instrumentClusterController.inactiveDescriptionVariants = ["Maps is ready"]
        log("cluster connected")
    }

    // The cluster's map: closer than the main one; CarPlayKit redraws it after each cluster input.
    func instrumentClusterControllerDidConnect(_ instrumentClusterWindow: CPWindow) {
        show(MapView(kind: .cluster, model: model), in: instrumentClusterWindow)
    }

    func instrumentClusterControllerDidDisconnectWindow(_ instrumentClusterWindow: CPWindow) {
        windows.removeAll { $0 === instrumentClusterWindow }
    }

    func instrumentClusterControllerDidZoom(in instrumentClusterController: CPInstrumentClusterController) {
        model.clusterZoom = max(0.3, model.clusterZoom / 2)
        log("cluster zoom in")
    }

    func instrumentClusterControllerDidZoomOut(_ instrumentClusterController: CPInstrumentClusterController) {
        model.clusterZoom = min(10, model.clusterZoom * 2)
        log("cluster zoom out")
    }

    func instrumentClusterController(_ instrumentClusterController: CPInstrumentClusterController,
                                     didChangeCompassSetting compassSetting: CPInstrumentClusterSetting) {
        model.showCompass = compassSetting != .disabled
        log("cluster compass: \(compassSetting)")
    }
}

/// Speaks prompts through the car: a voicePrompt session (the car ducks
/// music and pauses spoken audio while it is active) and a player.
@MainActor
final class PromptVoice {
    let session: AVAudioSession
    private var last: Task<Void, Never>?

    init(session: AVAudioSession) { self.session = session }

    /// One prompt after the other: activate (start_prompt), play, deactivate (end_prompt).
    func speak(_ text: String) {
        let previous = last
        last = Task { [session] in
            await previous?.value
            let (clip, source) = Self.clip(text)
            do {
                try session.setCategory(.playback, mode: .voicePrompt, options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])
                try session.setActive(true)
                let player = CPAudioPlayer(format: .pcm(sampleRate: clip.rate, channels: 1), session: session)
                try await player.play()
                try await player.write(clip.samples)  // paced by the car's credit
                // Deactivating ends the prompt; the car plays out what it holds first.
                try session.setActive(false, options: .notifyOthersOnDeactivation)
                log("prompt spoken (\(source)): \(text)")
            } catch {
                try? session.setActive(false)
                log("prompt failed: \(error)")
            }
        }
    }

    struct Clip { var rate: Int; var samples: [Int16] }

    /// espeak-ng's rendering of `text` when the program is installed, else a chime.
    static func clip(_ text: String) -> (Clip, String) {
        if let spoken = CPSpeech.render(text) { return (Clip(rate: spoken.rate, samples: spoken.samples), "espeak-ng") }
        return (chime(), "chime")
    }

    /// Two falling notes (E6, C6), 48 kHz mono, with a short fade.
    static func chime() -> Clip {
        var samples: [Int16] = []
        for hertz in [1318.5, 1046.5] {
            let count = 12_000  // 250 ms
            for index in 0..<count {
                let envelope = min(1, Double(index) / 240) * (1 - Double(index) / Double(count))
                samples.append(Int16(0.4 * 32767 * envelope * sin(2 * Double.pi * hertz * Double(index) / 48_000)))
            }
        }
        return Clip(rate: 48_000, samples: samples)
    }
}

let socket = CommandLine.arguments.dropFirst().first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.maps", displayName: "Maps", entitlements: [.maps])
let sceneDelegate = MapsSceneDelegate()
app.sceneDelegate = sceneDelegate
app.dashboardSceneDelegate = sceneDelegate
app.instrumentClusterSceneDelegate = sceneDelegate
sceneDelegate.voice = PromptVoice(session: app.audioSession)
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone")
log("connected")
await app.run()
