import HeadUnitWire

/// PROTOCOL.md §19 (navigation, the dashboard, the cluster and the metadata
/// stream) and its order of checks in §16.13-16.16.
enum NavigationChecks {
    static let mapsID = "com.example.conformance.maps"

    static func request(_ app: LaunchedApp, _ op: HUNavigationRequest.OneOf_Op) -> HUEnvelope.OneOf_Body {
        var request = HUNavigationRequest()
        request.appID = app.appID
        request.op = op
        return .navigationRequest(request)
    }

    @discardableResult
    static func ok(_ app: LaunchedApp, _ op: HUNavigationRequest.OneOf_Op, _ what: String) throws -> HUResult {
        let result = try app.phone.request(request(app, op), what)
        try requireCode(result, .ok, what)
        return result
    }

    static func trip(_ id: String) -> HUTrip {
        var trip = HUTrip()
        trip.id = id
        trip.destination.name = "Home"
        trip.routeChoices = ["fast", "scenic"].map { route in
            var choice = HURouteChoice()
            choice.id = route
            choice.summaryVariants = ["Via the \(route) road"]
            return choice
        }
        return trip
    }

    static func start(_ trip: String = "home") -> HUNavigationRequest.OneOf_Op {
        var start = HUStartNavigation()
        start.trip = Self.trip(trip)
        return .start(start)
    }

    static func maneuver(_ id: String, meters: Double, seconds: UInt32) -> HUManeuver {
        var maneuver = HUManeuver()
        maneuver.id = id
        maneuver.instructionVariants = ["Turn right"]
        maneuver.estimates.distanceRemainingM = meters
        maneuver.estimates.timeRemainingS = seconds
        return maneuver
    }

    /// A navigation app launched with a map root, and a cluster subscribed to the metadata stream.
    static func mapsWithCluster(_ ctx: CheckContext) throws -> (LaunchedApp, WireConnection) {
        let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
        try app.ok(.setRoot(Make.map("map")), "set_root map")
        let cluster = try ctx.carRole(.cluster, "cluster")
        try requireCode(try cluster.request(.subscribeMetadata(HUSubscribeMetadata()), "SubscribeMetadata"), .ok, "SubscribeMetadata")
        _ = try cluster.takeMetadata("the first MetadataUpdate (full)")
        return (app, cluster)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("metadata.subscribe-full", .p("19.5"), "SubscribeMetadata: Result OK, then MetadataUpdate{full} carrying every section; a second subscribe: OK, no second full", needsCarRole: true) { ctx in
            let cluster = try ctx.carRole(.cluster, "cluster")
            try requireCode(try cluster.request(.subscribeMetadata(HUSubscribeMetadata()), "SubscribeMetadata"), .ok, "SubscribeMetadata")
            let update = try cluster.takeMetadata("MetadataUpdate{full}")
            try require(update.full, "full: true first", got: "full: false")
            let state = update.state
            let missing = [("guidance", state.hasGuidance), ("maneuvers", state.hasManeuvers), ("trip_estimates", state.hasTripEstimates),
                           ("alert", state.hasAlert), ("now_playing", state.hasNowPlaying), ("display", state.hasDisplay),
                           ("previews", state.hasPreviews), ("cluster", state.hasCluster), ("audio", state.hasAudio), ("phone", state.hasPhone)]
                .filter { !$0.1 }.map(\.0)
            try require(missing.isEmpty, "every section in the full update", got: "missing " + missing.joined(separator: ", "))
            try requireCode(try cluster.request(.subscribeMetadata(HUSubscribeMetadata()), "a second SubscribeMetadata"), .ok, "a second SubscribeMetadata")
            let extra = try cluster.quietPeriod(ms: 300).filter { if case .metadataUpdate(let u) = $0.body { return u.full } else { return false } }
            try require(extra.isEmpty, "no second full update (§16.15)", got: "\(extra.count)")
        },
        ConformanceCheck("navigation.order-of-checks", .p("16.13"), "NavigationRequest: a non-navigation app NOT_ALLOWED_FOR_CATEGORY before NOT_CONNECTED; no main scene NOT_CONNECTED; no op INVALID_ARGUMENT; no map root NO_MAP_TEMPLATE", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            var other = HUAnnounceApps()
            other.apps = [appInfo("com.example.conformance.music", [Entitlement.audio]), appInfo("com.example.conformance.maps2", [Entitlement.maps])]
            try requireCode(try app.phone.request(.announceApps(other), "AnnounceApps of two more apps"), .ok, "AnnounceApps")
            for (appID, code) in [("com.example.conformance.music", HUErrorCode.notAllowedForCategory), ("com.example.conformance.maps2", .notConnected)] {
                var request = HUNavigationRequest()
                request.appID = appID
                request.hideTripPreviews = HUHideTripPreviews()
                try requireCode(try app.phone.request(.navigationRequest(request), "hide_trip_previews for \(appID)"), code, "hide_trip_previews for \(appID) (never launched)")
            }
            var none = HUNavigationRequest()
            none.appID = app.appID
            try requireCode(try app.phone.request(.navigationRequest(none), "NavigationRequest without op"), .invalidArgument, "no op")
            try requireCode(try app.phone.request(request(app, start()), "start without a map root"), .noMapTemplate, "start with no root")
        },
        ConformanceCheck("navigation.previews-and-guidance", .p("19.4"), "previews start at selected_trip_id; preview_trip events carry the resolved route; start, maneuvers, pause and finish reach the cluster; ENDED clears the trip", needsCarRole: true) { ctx in
            let (app, cluster) = try mapsWithCluster(ctx)
            var previews = HUTripPreviews()
            previews.trips = [trip("home"), trip("work")]
            previews.selectedTripID = "work"
            try ok(app, .showTripPreviews(previews), "show_trip_previews")
            var state = try cluster.metadataUntil("previews of work") { $0.previews.appID == app.appID ? $0 : nil }
            try require(state.previews.previewedTripID == "work" && state.previews.previewedRouteChoiceID == "fast",
                        "previewed work/fast before any input (§16.13)", got: "\(state.previews.previewedTripID)/\(state.previews.previewedRouteChoiceID)")
            var input = HUNavigationInput()
            input.appID = app.appID
            var chosen = HUTripChosen()
            chosen.tripID = "home"
            input.previewTrip = chosen
            try requireCode(try app.hmi.request(.navigationInput(input), "NavigationInput preview_trip home"), .ok, "preview_trip")
            let event = try app.phone.takeNavigationEvent("trip_previewed") { if case .tripPreviewed(let t) = $0.kind { return t } else { return nil } }
            try require(event.tripID == "home" && event.routeChoiceID == "fast", "trip_previewed home/fast (the resolved route)", got: "\(event.tripID)/\(event.routeChoiceID)")
            try ok(app, start(), "start")
            state = try cluster.metadataUntil("guidance ACTIVE") { $0.guidance.state == .active ? $0 : nil }
            try require(state.guidance.appID == app.appID && state.guidance.trip.id == "home" && state.previews.appID.isEmpty,
                        "guidance of the app for trip home, previews hidden", got: "\(state.guidance) \(state.previews)")
            var maneuvers = HUManeuverUpdate()
            maneuvers.maneuvers = [maneuver("m1", meters: 800, seconds: 90)]
            try ok(app, .updateManeuvers(maneuvers), "update_maneuvers")
            var pause = HUPauseNavigation()
            pause.reason = .rerouting
            try ok(app, .pause(pause), "pause")
            _ = try cluster.metadataUntil("guidance PAUSED") { $0.guidance.state == .paused ? $0 : nil }
            try ok(app, .finish(HUFinishNavigation()), "finish")
            state = try cluster.metadataUntil("guidance ENDED") { $0.guidance.state == .ended ? $0 : nil }
            try require(state.guidance.endReason == .finished && !state.guidance.hasTrip && state.maneuvers.maneuvers.isEmpty,
                        "ENDED FINISHED without trip or maneuvers (§19.5)", got: "\(state.guidance)")
            try requireCode(try app.phone.request(request(app, .finish(HUFinishNavigation())), "finish again"), .navigationNotActive, "finish after finish")
        },
        ConformanceCheck("navigation.estimates-rounded-down", .p("19.2"), "estimates are significant when the distance rounded down (100 m steps from 1000 m) or the minutes differ", needsCarRole: true) { ctx in
            let (app, cluster) = try mapsWithCluster(ctx)
            try ok(app, start(), "start")
            var maneuvers = HUManeuverUpdate()
            maneuvers.maneuvers = [maneuver("m1", meters: 1000, seconds: 90)]
            try ok(app, .updateManeuvers(maneuvers), "update_maneuvers at 1000 m")
            _ = try cluster.metadataUntil("maneuver m1 at 1000 m") { $0.maneuvers.maneuvers.first?.estimates.distanceRemainingM == 1000 ? $0 : nil }
            for meters in [1060.0, 1100] {
                var update = HUEstimatesUpdate()
                update.maneuverID = "m1"
                update.estimates.distanceRemainingM = meters
                update.estimates.timeRemainingS = 90
                try ok(app, .updateEstimates(update), "update_estimates \(meters) m")
            }
            let state = try cluster.metadataUntil("maneuver m1 at 1100 m") { $0.maneuvers.maneuvers.first?.estimates.distanceRemainingM == 1100 ? $0 : nil }
            let shown = cluster.metadataSeen.compactMap { $0.maneuvers.maneuvers.first?.estimates.distanceRemainingM }
            try require(!shown.contains(1060), "1060 m not shown (it shows as 1000 m, rounded down)", got: "\(shown)")
            _ = state
        },
        ConformanceCheck("navigation.native-navigation", .p("19.2"), "the car's own navigation cancels the app's guidance (navigation_cancelled NATIVE_NAVIGATION); then updates are NAVIGATION_CANCELLED_BY_CAR and start NATIVE_NAVIGATION_ACTIVE", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            try app.ok(.setRoot(Make.map("map")), "set_root map")
            ctx.onCleanup {
                var state = HUSetVehicleState()
                state.state.nativeNavigationActive = false
                _ = try? app.hmi.request(.setVehicleState(state), "SetVehicleState without native navigation")
            }
            try ok(app, start(), "start")
            var native = HUSetVehicleState()
            native.state.nativeNavigationActive = true
            try requireCode(try app.hmi.request(.setVehicleState(native), "SetVehicleState native navigation"), .ok, "SetVehicleState")
            let cancelled = try app.phone.takeNavigationEvent("navigation_cancelled") { if case .navigationCancelled(let c) = $0.kind { return c } else { return nil } }
            try require(cancelled.reason == .nativeNavigation, "reason NATIVE_NAVIGATION", got: "\(cancelled.reason)")
            var pause = HUPauseNavigation()
            pause.reason = .loading
            try requireCode(try app.phone.request(request(app, .pause(pause)), "pause after the car cancelled"), .navigationCancelledByCar, "a guidance update after the car cancelled")
            try requireCode(try app.phone.request(request(app, start()), "start while native navigation guides"), .nativeNavigationActive, "start under native navigation")
        },
        ConformanceCheck("navigation.input-order", .p("16.14"), "NavigationInput: no kind INVALID_ARGUMENT; the home screen with an empty app_id NOT_CONNECTED; no previews INVALID_POSITION", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            try app.ok(.setRoot(Make.map("map")), "set_root map")
            var input = HUNavigationInput()
            input.appID = app.appID
            try requireCode(try app.hmi.request(.navigationInput(input), "NavigationInput without kind"), .invalidArgument, "no kind")
            var chosen = HUTripChosen()
            chosen.tripID = "home"
            input.startTrip = chosen
            try requireCode(try app.hmi.request(.navigationInput(input), "start_trip with no previews"), .invalidPosition, "no previews shown")
            var home = HUHmiInput()
            home.goHome = HUGoHome()
            try requireCode(try app.hmi.request(.hmiInput(home), "go_home"), .ok, "go_home")
            input.appID = ""
            try requireCode(try app.hmi.request(.navigationInput(input), "start_trip for the main screen showing home"), .notConnected, "empty app_id on the home screen")
        },
        ConformanceCheck("navigation.panning", .p("16.13"), "show_panning: panning{began} (again: OK, nothing); dismiss_panning: panning{ended}; not panning: INVALID_POSITION", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            var map = Make.map("map")
            var pan = HUMapButton()
            pan.id = "pan"  // TEMPLATES.md §5: panning_supported needs a map button whose id starts with "pan"
            map.map.mapButtons = [pan]
            map.map.panningSupported = true
            try app.ok(.setRoot(map), "set_root map with panning")
            try requireCode(try app.phone.request(request(app, .dismissPanning(HUDismissPanning())), "dismiss_panning when not panning"), .invalidPosition, "dismiss_panning when not panning")
            try ok(app, .showPanning(HUShowPanning()), "show_panning")
            _ = try app.phone.takeNavigationEvent("panning{began}") { if case .panning(let p) = $0.kind, p.began { return true } else { return nil } }
            try ok(app, .showPanning(HUShowPanning()), "show_panning while panning")
            try ok(app, .dismissPanning(HUDismissPanning()), "dismiss_panning")
            let next = try app.phone.takeNavigationEvent("panning{ended}") { if case .panning(let p) = $0.kind { return p } else { return nil } }
            try require(next.ended, "panning{ended} next (no second began)", got: "\(next)")
        },
        ConformanceCheck("navigation.lane-guidance", .p("16.13"), "lane guidance: a link or current id not added UNKNOWN_ITEM; an angle outside -180...180 INVALID_ARGUMENT (navigation.angle); added, linked and made current it reaches the cluster in maneuvers.lane_guidances, current first; finish clears it", needsCarRole: true) { ctx in
            let (app, cluster) = try mapsWithCluster(ctx)
            try ok(app, start(), "start")
            var lane = HULane()
            lane.status = .preferred
            lane.highlightedAngleDeg = 90
            lane.anglesDeg = [0]
            var guidance = HULaneGuidance()
            guidance.id = "g1"
            guidance.lanes = [lane]
            guidance.instructionVariants = ["Right lane"]
            var linked = maneuver("m1", meters: 800, seconds: 90)
            linked.linkedLaneGuidanceID = "g1"
            var update = HUManeuverUpdate()
            update.maneuvers = [linked]
            try requireCode(try app.phone.request(request(app, .updateManeuvers(update)), "update_maneuvers linking g1 before it was added"), .unknownItem, "a link to a lane guidance not added")
            var current = HUCurrentLaneGuidance()
            current.laneGuidanceID = "g2"
            try requireCode(try app.phone.request(request(app, .setCurrentLaneGuidance(current)), "set_current_lane_guidance g2 (not added)"), .unknownItem, "a current lane guidance not added")
            var bad = guidance
            bad.lanes[0].highlightedAngleDeg = 181
            var add = HULaneGuidances()
            add.laneGuidances = [bad]
            let refused = try app.phone.request(request(app, .addLaneGuidances(add)), "add_lane_guidances with an angle of 181")
            try requireCode(refused, .invalidArgument, "an angle outside -180...180")
            try require(refused.limit == "navigation.angle" && refused.limitValue == 180, "limit navigation.angle, 180", got: "\(refused.limit) \(refused.limitValue)")
            var second = guidance
            second.id = "g2"
            add.laneGuidances = [guidance, second]
            try ok(app, .addLaneGuidances(add), "add_lane_guidances g1, g2")
            try ok(app, .updateManeuvers(update), "update_maneuvers linking g1")
            try ok(app, .setCurrentLaneGuidance(current), "set_current_lane_guidance g2")
            let state = try cluster.metadataUntil("lane guidances g2, g1") { $0.maneuvers.laneGuidances.map(\.id) == ["g2", "g1"] ? $0 : nil }
            try require(state.maneuvers.currentLaneGuidanceID == "g2" && state.maneuvers.laneGuidances[1] == guidance,
                        "g2 current, g1 as sent", got: "\(state.maneuvers)")
            try ok(app, .finish(HUFinishNavigation()), "finish")
            _ = try cluster.metadataUntil("no lane guidance after finish") { $0.guidance.state == .ended && $0.maneuvers.laneGuidances.isEmpty ? $0 : nil }
        },
        ConformanceCheck("navigation.cluster-input", .p("16.16"), "ClusterInput: NOT_CONNECTED with no cluster scene; reaches the app's cluster scene; no kind INVALID_ARGUMENT", needsCarRole: true) { ctx in
            guard ctx.reference?.vehicle.instrumentClusterPresent == true else { throw CheckSkipped("the vehicle has no instrument cluster (Welcome.vehicle)") }
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            let cluster = try ctx.carRole(.cluster, "cluster")
            var zoom = HUClusterInput()
            zoom.zoomIn = true
            try requireCode(try cluster.request(.clusterInput(zoom), "ClusterInput with no cluster scene"), .notConnected, "no cluster scene")
            var launch = HULaunchApp()
            launch.appID = app.appID
            launch.kind = .instrumentCluster
            try requireCode(try app.hmi.request(.launchApp(launch), "LaunchApp INSTRUMENT_CLUSTER"), .ok, "LaunchApp INSTRUMENT_CLUSTER")
            let scene = try app.phone.take("SceneConnected for the cluster") { envelope -> UInt32? in
                if case .sceneConnected(let s) = envelope.body, s.kind == .instrumentCluster { return s.sceneID }
                return nil
            }
            try requireCode(try cluster.request(.clusterInput(zoom), "ClusterInput zoom_in"), .ok, "zoom_in")
            let event = try app.phone.take("NavigationEvent cluster_input") { envelope -> HUNavigationEvent? in
                if case .navigationEvent(let e) = envelope.body, case .clusterInput = e.kind { return e }
                return nil
            }
            try require(event.sceneID == scene && event.clusterInput.zoomIn, "cluster_input zoom_in on scene \(scene)", got: "\(event)")
            try requireCode(try cluster.request(.clusterInput(HUClusterInput()), "ClusterInput without kind"), .invalidArgument, "no kind")
        },
    ]
}

extension WireConnection {
    /// Every MetadataState this connection applied (§19.5: full replaces, a change replaces its sections).
    var metadataSeen: [HUMetadataState] { metadataStates }

    func takeMetadata(_ what: String, timeoutMs: Int? = nil) throws -> HUMetadataUpdate {
        let update = try take(what, timeoutMs: timeoutMs) { envelope -> HUMetadataUpdate? in
            if case .metadataUpdate(let update) = envelope.body { return update }
            return nil
        }
        apply(update)
        return update
    }

    /// Applies metadata updates until the state satisfies `match`.
    func metadataUntil<T>(_ what: String, _ match: (HUMetadataState) -> T?) throws -> T {
        if let last = metadataStates.last, let found = match(last) { return found }
        while true {
            _ = try takeMetadata(what)
            if let found = match(metadataStates.last!) { return found }
        }
    }

    private func apply(_ update: HUMetadataUpdate) {
        var state = update.full ? update.state : (metadataStates.last ?? HUMetadataState())
        let s = update.state
        if s.hasGuidance { state.guidance = s.guidance }
        if s.hasManeuvers { state.maneuvers = s.maneuvers }
        if s.hasTripEstimates { state.tripEstimates = s.tripEstimates }
        if s.hasAlert { state.alert = s.alert }
        if s.hasNowPlaying { state.nowPlaying = s.nowPlaying }
        if s.hasDisplay { state.display = s.display }
        if s.hasPreviews { state.previews = s.previews }
        if s.hasCluster { state.cluster = s.cluster }
        if s.hasAudio { state.audio = s.audio }
        if s.hasPhone { state.phone = s.phone }
        metadataStates.append(state)
    }

    func takeNavigationEvent<T>(_ what: String, _ match: (HUNavigationEvent) -> T?) throws -> T {
        try take("NavigationEvent \(what)") { envelope -> T? in
            if case .navigationEvent(let event) = envelope.body { return match(event) }
            return nil
        }
    }
}
