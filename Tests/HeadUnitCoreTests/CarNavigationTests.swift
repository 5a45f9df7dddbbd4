import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Navigation apps through the whole car: windows, previews, guidance, the
/// car cancelling guidance, alerts, disconnects, the dashboard, the cluster.
@Suite struct CarNavigationTests {
    func connected(_ h: inout CarHarness, _ kind: HUSceneKind) -> HUSceneConnected? {
        _ = h.drain(h.phone)
        #expect(h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = Nav.appID; $0.kind = kind })).code == .ok)
        return h.drain(h.phone).compactMap { envelope -> HUSceneConnected? in
            if case .sceneConnected(let connected) = envelope.body { return connected }
            return nil
        }.first
    }

    @Test func eachSceneGetsTheWindowOfItsOwnDisplay() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        var state = HUVehicleState()
        state.safeArea = HUInsets.with { $0.left = 120 }
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state }))
        _ = h.announce([(Nav.appID, [EntitlementKey.maps])])
        let main = connected(&h, .main)
        #expect(main?.window.widthPt == 800 && main?.window.heightPt == 480 && main?.window.scale == 2)
        #expect(main?.window.safeArea.left == 120)
        let dashboard = connected(&h, .dashboard)
        #expect(dashboard?.window.widthPt == 520 && dashboard?.window.heightPt == 480)
        let cluster = connected(&h, .instrumentCluster)
        #expect(cluster?.window.widthPt == 480 && cluster?.window.heightPt == 240)
    }

    @Test func navigationRequestsAreForNavigationAppsWithAMapRoot() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("com.example.radio", [EntitlementKey.audio]), (Nav.appID, [EntitlementKey.maps])])
        _ = h.launch("com.example.radio")
        #expect(h.navigate(.showTripPreviews(Nav.previews()), app: "com.example.radio").code == .notAllowedForCategory)
        #expect(h.navigate(.showTripPreviews(Nav.previews())).code == .notConnected)
        let scene = h.launch(Nav.appID)
        #expect(h.navigate(.showTripPreviews(Nav.previews())).code == .noMapTemplate)
        #expect(h.template(Nav.appID, scene, .setRoot(Fixture.list("root"))).code == .ok)
        #expect(h.navigate(.start(HUStartNavigation.with { $0.trip = Nav.trip() })).code == .noMapTemplate)
    }

    @Test func theHMIPreviewsARouteAndStartsItAndTheAppIsTold() {
        var h = CarHarness()
        _ = h.navigationApp()
        #expect(h.navigate(.showTripPreviews(Nav.previews(trips: 3))).code == .ok)
        var previews = h.metadata().previews
        #expect(previews.appID == Nav.appID && previews.previews.trips.count == 3 && previews.previewedTripID == "t0")
        _ = h.drain(h.phone)
        #expect(h.navigationInput(.previewTrip(HUTripChosen.with { $0.tripID = "t1"; $0.routeChoiceID = "t1-r1" })).code == .ok)
        #expect(h.navigationInput(.previewTrip(HUTripChosen.with { $0.tripID = "t9" })).code == .unknownItem)
        #expect(h.navigationInput(.startTrip(HUTripChosen.with { $0.tripID = "t1"; $0.routeChoiceID = "t1-r9" })).code == .unknownItem)
        #expect(h.navigationInput(.startTrip(HUTripChosen.with { $0.tripID = "t1"; $0.routeChoiceID = "t1-r1" })).code == .ok)
        previews = h.metadata().previews
        #expect(previews.previewedTripID == "t1" && previews.previewedRouteChoiceID == "t1-r1")
        let chosen = HUTripChosen.with { $0.tripID = "t1"; $0.routeChoiceID = "t1-r1" }
        #expect(h.navigationEvents() == [.tripPreviewed(chosen), .tripStarted(chosen)])
        // The app starts guidance for it: previews hide, the cluster sees the trip.
        h.startGuidance(trip: Nav.trip("t1"))
        let state = h.metadata()
        #expect(!state.previews.hasPreviews)
        #expect(state.guidance.state == .active && state.guidance.appID == Nav.appID && state.guidance.trip.id == "t1")
        #expect(state.guidance.session == 1)
        // No previews left to choose from.
        #expect(h.navigationInput(.startTrip(chosen)).code == .invalidPosition)
    }

    /// The maneuvers section carries the lanes to draw (the current lane
    /// guidance, then those the maneuvers link), the road and the maneuver state.
    @Test func laneGuidanceRoadNameAndManeuverStateReachTheMetadata() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        let guidances = ["g1", "g2", "g3"].map { LaneGuidanceTests.guidance($0) }
        #expect(h.navigate(.addLaneGuidances(HULaneGuidances.with { $0.laneGuidances = guidances })).code == .ok)
        // Adding alone draws nothing.
        #expect(h.metadata().maneuvers.laneGuidances.isEmpty)
        var first = Nav.maneuver("m1")
        first.linkedLaneGuidanceID = "g1"
        first.maneuverType = .rightTurn
        var second = Nav.second("m2")
        second.linkedLaneGuidanceID = "g2"
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [first, second] })).code == .ok)
        #expect(h.navigate(.setCurrentLaneGuidance(HUCurrentLaneGuidance.with { $0.laneGuidanceID = "g3" })).code == .ok)
        #expect(h.navigate(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = ["Main Street", "Main St"] })).code == .ok)
        #expect(h.navigate(.setManeuverState(HUCurrentManeuverState.with { $0.state = .execute })).code == .ok)
        var section = h.metadata().maneuvers
        #expect(section.laneGuidances == [guidances[2], guidances[0], guidances[1]])
        #expect(section.currentLaneGuidanceID == "g3" && section.maneuvers[0].maneuverType == .rightTurn)
        #expect(section.currentRoadNameVariants == ["Main Street", "Main St"] && section.maneuverState == .execute)
        // An unknown link is refused and changes nothing.
        var unknown = Nav.maneuver("m3")
        unknown.linkedLaneGuidanceID = "g9"
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [unknown] })).code == .unknownItem)
        #expect(h.metadata().maneuvers == section)
        // Finishing clears it all.
        #expect(h.navigate(.finish(HUFinishNavigation())).code == .ok)
        section = h.metadata().maneuvers
        #expect(section == HUManeuversSection())
    }

    @Test func guidanceStepsReachTheMetadataInOrder() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        #expect(h.navigate(.pause(HUPauseNavigation.with { $0.reason = .loading; $0.description_p = "Loading route" })).code == .ok)
        var state = h.metadata()
        #expect(state.guidance.state == .paused && state.guidance.pauseReason == .loading && state.guidance.pauseDescription == "Loading route")
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m1"), Nav.laneGuidance()] })).code == .ok)
        state = h.metadata()
        #expect(state.guidance.state == .active)
        #expect(state.maneuvers.maneuvers.map(\.id) == ["m1", "lanes"])
        #expect(state.tripEstimates.present)
        #expect(h.navigate(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = Nav.estimates(meters: 400, seconds: 45) })).code == .ok)
        #expect(h.metadata().maneuvers.maneuvers[0].estimates == Nav.estimates(meters: 400, seconds: 45))
        #expect(h.navigate(.finish(HUFinishNavigation())).code == .ok)
        state = h.metadata()
        #expect(state.guidance.state == .ended && state.guidance.endReason == .finished)
        #expect(state.maneuvers.maneuvers.isEmpty && !state.tripEstimates.present)
    }

    @Test func anUpdateThatIsNotSignificantIsAcceptedButNotPublished() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m1")] }))
        _ = h.car.takeMetadata()
        let version = h.car.clusterFeed.version
        let result = h.navigate(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = Nav.estimates(meters: 803, seconds: 95) }))
        #expect(result.code == .ok)
        #expect(h.car.takeMetadata().changed.isEmpty)
        #expect(h.car.clusterFeed.version == version)
    }

    @Test func nativeNavigationCancelsTheAppsGuidance() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m1")] }))
        h.navigate(.showAlert(Nav.alert()))
        _ = h.drain(h.phone)
        var state = HUVehicleState()
        state.nativeNavigationActive = true
        #expect(h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
        let events = h.navigationEvents()
        guard case .navigationCancelled(let ended)? = events.first else {
            Issue.record("expected navigation_cancelled, got \(events)")
            return
        }
        #expect(ended.reason == .nativeNavigation)
        // Its alert went with it.
        #expect(events.contains(.alertDismissed(HUAlertDismissed.with { $0.alertID = "speed-trap"; $0.reason = .system })))
        let metadata = h.metadata()
        #expect(metadata.guidance.state == .ended && metadata.guidance.endReason == .nativeNavigation && metadata.guidance.nativeNavigationActive)
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m2")] })).code == .navigationCancelledByCar)
        #expect(h.navigate(.start(HUStartNavigation.with { $0.trip = Nav.trip() })).code == .nativeNavigationActive)
        // Once the car's guidance stops, the app may start again.
        state.nativeNavigationActive = false
        h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state }))
        h.startGuidance()
        #expect(h.metadata().guidance.session == 2)
    }

    @Test func oneAppGuidesAtATime() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        _ = h.navigationApp("com.example.other")
        _ = h.drain(h.phone)
        #expect(h.navigate(.start(HUStartNavigation.with { $0.trip = Nav.trip() }), app: "com.example.other").code == .ok)
        let cancelled = h.drain(h.phone).compactMap { envelope -> HUNavigationEvent? in
            if case .navigationEvent(let event) = envelope.body { return event }
            return nil
        }
        #expect(cancelled.map(\.appID) == [Nav.appID])
        #expect(cancelled.first?.navigationCancelled.reason == .otherApp)
        #expect(h.metadata().guidance.appID == "com.example.other")
        #expect(h.navigate(.pause(HUPauseNavigation.with { $0.reason = .loading })).code == .navigationCancelledByCar)
    }

    @Test func navigationAlertsAreAutoDismissedByTheCarAndTheReasonIsReported() {
        var h = CarHarness()
        _ = h.navigationApp()
        #expect(h.navigate(.showAlert(Nav.alert(durationMs: 5000))).code == .ok)
        #expect(h.metadata().alert.alert.id == "speed-trap")
        #expect(h.timers.contains(.navigationAlert(serial: 1)))
        _ = h.drain(h.phone)
        h.apply(h.car.timerFired(.navigationAlert(serial: 1), nowMilliseconds: h.now + 5000))
        #expect(h.navigationEvents() == [.alertDismissed(HUAlertDismissed.with { $0.alertID = "speed-trap"; $0.reason = .timeout })])
        #expect(!h.metadata().alert.hasAlert)
        // The driver picks an action.
        h.navigate(.showAlert(Nav.alert("a2")))
        #expect(h.navigationInput(.alertAction("nope")).code == .unknownItem)
        #expect(h.navigationInput(.alertAction("a1")).code == .ok)
        #expect(h.navigationEvents().last == .alertDismissed(HUAlertDismissed.with { $0.alertID = "a2"; $0.reason = .userAction; $0.actionID = "a1" }))
        // The app dismisses; a stale timer does nothing; nothing left to dismiss.
        h.navigate(.showAlert(Nav.alert("a3", durationMs: 1000)))
        #expect(h.navigate(.dismissAlert(HUDismissNavigationAlert())).code == .ok)
        #expect(h.navigationEvents().last == .alertDismissed(HUAlertDismissed.with { $0.alertID = "a3"; $0.reason = .app }))
        h.apply(h.car.timerFired(.navigationAlert(serial: 3), nowMilliseconds: h.now))
        #expect(h.navigationEvents().isEmpty)
        #expect(h.navigate(.dismissAlert(HUDismissNavigationAlert())).code == .nothingPresented)
        #expect(h.navigationInput(.dismissAlert(HUDismissNavigationAlert())).code == .nothingPresented)
    }

    @Test func theAppVanishingMidGuidanceEndsGuidanceWithAReasonAndLeavesOtherAppsAlone() {
        var h = CarHarness()
        _ = h.navigationApp()
        _ = h.announce([("com.example.radio", [EntitlementKey.audio])])
        let radio = h.launch("com.example.radio")
        var np = HUNowPlayingTemplate()
        np.title = "Song"
        np.playbackRate = 1
        #expect(h.template("com.example.radio", radio, .updateNowPlaying(np)).code == .ok)
        h.startGuidance()
        h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m1")] }))
        let before = h.metadata()
        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = Nav.appID })).code == .ok)
        let after = h.metadata()
        #expect(after.guidance.state == .ended && after.guidance.endReason == .appClosed && after.guidance.appID == Nav.appID)
        #expect(after.maneuvers.maneuvers.isEmpty)
        #expect(after.nowPlaying == before.nowPlaying)
        #expect(after.nowPlaying.title == "Song" && after.nowPlaying.appID == "com.example.radio")
        #expect(h.car.templates.apps["com.example.radio"]?.scenes[.main] != nil)
    }

    @Test func thePhoneVanishingMidGuidanceEndsGuidanceWithPhoneGone() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        h.apply(h.car.peerLeft(h.phone))
        let state = h.metadata()
        #expect(state.guidance.state == .ended && state.guidance.endReason == .phoneGone)
        #expect(state.maneuvers.maneuvers.isEmpty)
    }

    @Test func clusterInputReachesTheAppsClusterScene() {
        var h = CarHarness()
        let cluster: PeerID = 3
        h.join(cluster, .cluster)
        _ = h.navigationApp()
        let zoom = HUClusterInput.with { $0.zoomIn = true }
        #expect(h.request(cluster, .clusterInput(zoom)).code == .notConnected)
        _ = connected(&h, .instrumentCluster)
        let sceneID = h.car.templates.apps[Nav.appID]!.scenes[.instrumentCluster]!.id
        #expect(h.request(cluster, .clusterInput(zoom)).code == .ok)
        #expect(h.request(cluster, .clusterInput(HUClusterInput.with { $0.compass = .userPreference })).code == .ok)
        #expect(h.request(cluster, .clusterInput(HUClusterInput())).code == .invalidArgument)
        let events = h.drain(h.phone).compactMap { envelope -> HUNavigationEvent? in
            if case .navigationEvent(let event) = envelope.body { return event }
            return nil
        }
        #expect(events.map(\.sceneID) == [sceneID, sceneID])
        #expect(events.map(\.clusterInput) == [zoom, HUClusterInput.with { $0.compass = .userPreference }])
        #expect(h.metadata().cluster.appID == Nav.appID)
    }

    @Test func panningIsEnteredThroughTheAppAndTakesFourDirections() {
        var h = CarHarness()
        _ = h.navigationApp(panning: false)
        #expect(h.navigate(.showPanning(HUShowPanning())).code == .invalidPosition)
        #expect(h.navigationInput(.pan(.up)).code == .invalidPosition)
        var p = CarHarness()
        _ = p.navigationApp(panning: true)
        #expect(p.navigate(.showPanning(HUShowPanning())).code == .ok)
        #expect(p.metadata().cluster.panning)
        for direction in [HUPanDirection.up, .down, .left, .right] {
            #expect(p.navigationInput(.pan(direction)).code == .ok)
        }
        #expect(p.navigationInput(.pan(.unspecified)).code == .invalidArgument)
        #expect(p.navigationInput(.exitPanning(HUDismissPanning())).code == .ok)
        let events = p.navigationEvents().compactMap { kind -> HUPanEvent? in
            if case .panning(let pan) = kind { return pan }
            return nil
        }
        #expect(events.map(\.kind) == [.began(true), .direction(.up), .direction(.down), .direction(.left), .direction(.right), .ended(true)])
        #expect(p.navigate(.dismissPanning(HUDismissPanning())).code == .invalidPosition)
    }

    @Test func dashboardButtonsShowWhileNotNavigatingAndReachTheApp() {
        var h = CarHarness()
        _ = h.navigationApp()
        let buttons = ["home", "work"].map { id in HUDashboardButton.with { $0.id = id; $0.titleVariants = [id.capitalized] } }
        #expect(h.navigate(.setDashboardButtons(HUDashboardButtons.with { $0.buttons = buttons })).code == .ok)
        #expect(h.navigationInput(.dashboardButton("home")).code == .notConnected)
        let dashboard = connected(&h, .dashboard)
        #expect(h.metadata().cluster.dashboardButtons.map(\.id) == ["home", "work"])
        #expect(h.navigationInput(.dashboardButton("gym"), app: Nav.appID).code == .unknownItem)
        #expect(h.navigationInput(.dashboardButton("work"), app: Nav.appID).code == .ok)
        let events = h.drain(h.phone).compactMap { envelope -> HUNavigationEvent? in
            if case .navigationEvent(let event) = envelope.body { return event }
            return nil
        }
        #expect(events.map(\.dashboardButtonPressed) == ["work"])
        #expect(events.first?.sceneID == dashboard?.sceneID)
        // While navigating the dashboard shows guidance instead.
        h.startGuidance()
        #expect(h.navigationInput(.dashboardButton("work"), app: Nav.appID).code == .invalidPosition)
    }

    @Test func nowPlayingReachesTheMetadata() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("com.example.radio", [EntitlementKey.audio])])
        let scene = h.launch("com.example.radio")
        var np = HUNowPlayingTemplate()
        (np.title, np.artist, np.album, np.elapsedSeconds, np.durationSeconds, np.playbackRate) = ("Song", "Artist", "Album", 12, 200, 1)
        #expect(h.template("com.example.radio", scene, .updateNowPlaying(np)).code == .ok)
        let section = h.metadata().nowPlaying
        #expect(section.appID == "com.example.radio" && section.title == "Song" && section.artist == "Artist" && section.album == "Album")
        #expect(section.elapsedSeconds == 12 && section.durationSeconds == 200 && section.playbackRate == 1 && !section.live)
    }
}
