import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Valid navigation messages that a test then breaks in one way.
enum Nav {
    static let appID = "com.example.maps"

    static func estimates(meters: Double, seconds: UInt32) -> HUTravelEstimates {
        HUTravelEstimates.with { $0.distanceRemainingM = meters; $0.timeRemainingS = seconds }
    }

    static func route(_ id: String) -> HURouteChoice {
        HURouteChoice.with {
            $0.id = id
            $0.summaryVariants = ["Via Main Street and the river", "Via Main St"]
            $0.estimates = estimates(meters: 12_000, seconds: 1_200)
        }
    }

    static func trip(_ id: String = "home", routes: Int = 2) -> HUTrip {
        HUTrip.with {
            $0.id = id
            $0.origin = HUPlace.with { $0.name = "Office" }
            $0.destination = HUPlace.with { $0.name = "Home" }
            $0.routeChoices = (0..<routes).map { route("\(id)-r\($0)") }
            $0.estimates = estimates(meters: 12_000, seconds: 1_200)
        }
    }

    static func previews(trips: Int = 2) -> HUTripPreviews {
        HUTripPreviews.with {
            $0.trips = (0..<trips).map { trip("t\($0)") }
            $0.texts = HUTripPreviewTexts.with { $0.startButtonTitle = "Go" }
        }
    }

    static func maneuver(_ id: String, _ instruction: String = "Turn right onto Main St") -> HUManeuver {
        HUManeuver.with {
            $0.id = id
            $0.instructionVariants = [instruction, "Turn right"]
            $0.symbol = Fixture.asset("turn-right", width: 100, height: 100)
            $0.estimates = estimates(meters: 800, seconds: 90)
        }
    }

    /// A second maneuver with text: its symbol is 18 x 18 pt.
    static func second(_ id: String, _ instruction: String = "Then keep left") -> HUManeuver {
        var maneuver = maneuver(id, instruction)
        maneuver.symbol = Fixture.asset("keep-left", width: 36, height: 36)
        return maneuver
    }

    /// A symbol-only second maneuver with no instructions: lane guidance.
    static func laneGuidance(_ id: String = "lanes") -> HUManeuver {
        HUManeuver.with {
            $0.id = id
            $0.displayStyle = .symbolOnly
            $0.symbol = Fixture.asset("lanes", width: 240, height: 36)
        }
    }

    static func alert(_ id: String = "speed-trap", actions: Int = 2, durationMs: UInt32 = 0) -> HUNavigationAlert {
        HUNavigationAlert.with {
            $0.id = id
            $0.titleVariants = ["Speed camera ahead in 500 m", "Speed camera"]
            $0.subtitleVariants = ["Reported 5 minutes ago"]
            $0.actions = (0..<actions).map { Fixture.textButton("a\($0)") }
            $0.durationMs = durationMs
        }
    }

    static func mapRoot(panning: Bool = false) -> HUTemplate {
        var template = Fixture.map("map", leading: 2, trailing: 2, mapButtons: panning ? 4 : 2)
        if panning, case .map(var map) = template.kind {
            map.mapButtons[0].id = "pan"
            map.panningSupported = true
            template.kind = .map(map)
        }
        return template
    }
}

extension CarHarness {
    /// Phone and HMI joined, a navigation app launched with a map root; returns its main scene id.
    mutating func navigationApp(_ appID: String = Nav.appID, panning: Bool = false) -> UInt32 {
        if car.peers[phone] == nil {
            join(hmi, .hmi)
            join(phone, .phone)
        }
        _ = announce([(appID, [EntitlementKey.maps])])
        let scene = launch(appID)
        let root = template(appID, scene, .setRoot(Nav.mapRoot(panning: panning)))
        #expect(root.code == .ok, "\(root.message)")
        return scene
    }

    @discardableResult
    mutating func navigate(_ op: HUNavigationRequest.OneOf_Op, app: String = Nav.appID) -> HUResult {
        request(phone, .navigationRequest(HUNavigationRequest.with { $0.appID = app; $0.op = op }))
    }

    @discardableResult
    mutating func navigationInput(_ kind: HUNavigationInput.OneOf_Kind, app: String = "") -> HUResult {
        request(hmi, .navigationInput(HUNavigationInput.with { $0.appID = app; $0.kind = kind }))
    }

    /// The navigation events the phone received since the last drain.
    mutating func navigationEvents() -> [HUNavigationEvent.OneOf_Kind] {
        drain(phone).compactMap { envelope in
            if case .navigationEvent(let event) = envelope.body { return event.kind }
            return nil
        }
    }

    mutating func startGuidance(trip: HUTrip = Nav.trip()) {
        let result = navigate(.start(HUStartNavigation.with { $0.trip = trip }))
        #expect(result.code == .ok, "\(result.message)")
    }

    /// The metadata state after the last input, as the server would publish it.
    mutating func metadata() -> HUMetadataState {
        _ = car.takeMetadata()
        // takeMetadata skips the build when its inputs did not change: never stale.
        #expect(car.clusterFeed.state == car.metadataState(), "the published state is what a build from scratch gives")
        return car.clusterFeed.state
    }
}
