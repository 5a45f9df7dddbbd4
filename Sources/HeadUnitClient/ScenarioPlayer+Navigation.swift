import HeadUnitWire
import NIOCore

/// The metadata stream as the scenario player's cluster sees it.
actor MetadataWatcher {
    private(set) var model = MetadataModel()
    func apply(_ update: HUMetadataUpdate) { model.apply(update) }
}

/// A cluster connection the player opens for `expect_metadata` steps.
final class ScenarioCluster: Sendable {
    let session: ClusterSession
    let watcher = MetadataWatcher()
    private let reader: Task<Void, Never>

    init(session: ClusterSession) {
        self.session = session
        let watcher = self.watcher
        reader = Task {
            for await update in session.updates { await watcher.apply(update) }
        }
    }

    static func open(_ endpoint: HeadUnitEndpoint) async throws -> ScenarioCluster {
        let session = try await ClusterSession.connect(to: endpoint, name: "headunitctl play (cluster)")
        try await session.subscribe()
        return ScenarioCluster(session: session)
    }

    /// Waits until the state matches; returns it (and whether it matched).
    func wait(timeout: TimeAmount, until matches: (HUMetadataState) -> Bool) async -> (Bool, HUMetadataState) {
        let deadline = NIODeadline.now() + timeout
        while true {
            let state = await watcher.model.state
            if matches(state) { return (true, state) }
            if NIODeadline.now() >= deadline { return (false, state) }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    func close() async {
        reader.cancel()
        await session.close()
    }
}

extension ScenarioPlayer {
    static func needsCluster(_ step: HUScenarioStep) -> Bool {
        switch step.action {
        case .expectMetadata, .clusterInput, .selectBanner: return true
        default: return false
        }
    }

    static func describe(_ input: HUClusterInput) -> String {
        switch input.kind {
        case .zoomIn: return "zoom_in"
        case .zoomOut: return "zoom_out"
        case .compass(let setting): return "compass \(setting)"
        case .speedLimit(let setting): return "speed_limit \(setting)"
        case nil: return "(no kind)"
        }
    }

    func clusterInput(_ step: HUScenarioClusterInput) async -> Outcome {
        guard let cluster else { return .skipped("no cluster connection") }
        do {
            return check(try await cluster.session.connection.resultOf(.clusterInput(step.input)), expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    /// The HMI taps the banner the cluster sees now (PROTOCOL.md 19.9).
    func selectBanner(_ step: HUScenarioSelectBanner) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let cluster else { return .skipped("no cluster connection") }
        let banner = await cluster.watcher.model.state.banner
        let shown = banner.appID.isEmpty ? 0 : banner.bannerID
        let input = HUNavigationInput.with {
            $0.appID = step.appID
            $0.selectBanner = HUSelectBanner.with { $0.bannerID = step.stale ? shown + 1 : shown }
        }
        do {
            return check(try await hmi.connection.resultOf(.navigationInput(input)), expect: step.expect, okDetail: "banner \(input.selectBanner.bannerID)")
        } catch {
            return failure(error)
        }
    }

    func navigate(_ step: HUScenarioNavigate) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        do {
            let result = try await phone.connection.resultOf(.navigationRequest(step.request))
            if !step.expectLimit.isEmpty && result.code != .ok && result.limit != step.expectLimit {
                return .failed("limit '\(result.limit)', expected '\(step.expectLimit)' (\(HeadUnitError(result: result)))")
            }
            return check(result, expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    func navigationInput(_ step: HUScenarioNavigationInput) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        do {
            return check(try await hmi.connection.resultOf(.navigationInput(step.input)), expect: step.expect)
        } catch {
            return failure(error)
        }
    }

    func expectNavigationEvent(_ expect: HUScenarioExpectNavigationEvent) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        let wait = expect.timeoutMs == 0 ? timeout : .milliseconds(Int64(expect.timeoutMs))
        let event = await phone.nextEvent(timeout: wait) { event in
            guard case .other(let envelope) = event, case .navigationEvent(let navigation) = envelope.body else { return false }
            return Self.matches(navigation, expect)
        }
        return event == nil ? .failed("no such navigation event within \(wait.nanoseconds / 1_000_000) ms") : .ok("")
    }

    static func matches(_ event: HUNavigationEvent, _ expect: HUScenarioExpectNavigationEvent) -> Bool {
        if !expect.appID.isEmpty && event.appID != expect.appID { return false }
        var kind = "", trip = "", route = "", id = "", action = ""
        var endReason = HUNavigationEndReason.unspecified
        var dismissReason = HUAlertDismissReason.unspecified
        switch event.kind {
        case .tripPreviewed(let c): (kind, trip, route) = ("trip_previewed", c.tripID, c.routeChoiceID)
        case .tripStarted(let c): (kind, trip, route) = ("trip_started", c.tripID, c.routeChoiceID)
        case .navigationCancelled(let e): (kind, endReason) = ("navigation_cancelled", e.reason)
        case .alertDismissed(let d): (kind, id, dismissReason, action) = ("alert_dismissed", d.alertID, d.reason, d.actionID)
        case .panning: kind = "panning"
        case .dashboardButtonPressed(let button): (kind, id) = ("dashboard_button_pressed", button)
        case .clusterInput: kind = "cluster_input"
        case .promptStyle: kind = "prompt_style"
        case .bannerSelected(let b): (kind, id) = ("banner_selected", b.maneuverID.isEmpty ? b.alertID : b.maneuverID)
        case nil: return false
        }
        if !expect.kind.isEmpty && normalize(expect.kind) != normalize(kind) { return false }
        if !expect.tripID.isEmpty && trip != expect.tripID { return false }
        if !expect.routeChoiceID.isEmpty && route != expect.routeChoiceID { return false }
        if !expect.id.isEmpty && id != expect.id { return false }
        if expect.endReason != .unspecified && endReason != expect.endReason { return false }
        if expect.dismissReason != .unspecified && dismissReason != expect.dismissReason { return false }
        if !expect.actionID.isEmpty && action != expect.actionID { return false }
        return true
    }

    func expectMetadata(_ expect: HUScenarioExpectMetadata) async -> Outcome {
        guard let cluster else { return .skipped("no cluster connection") }
        let wait = expect.timeoutMs == 0 ? timeout : .milliseconds(Int64(expect.timeoutMs))
        let (matched, state) = await cluster.wait(timeout: wait) { Self.matches($0, expect) }
        if matched { return .ok("") }
        return .failed("cluster shows: " + MetadataText.render(state).joined(separator: "; "))
    }

    static func matches(_ state: HUMetadataState, _ expect: HUScenarioExpectMetadata) -> Bool {
        if expect.hasGuidance && state.guidance.state != expect.guidance { return false }
        if expect.hasPauseReason && state.guidance.pauseReason != expect.pauseReason { return false }
        if expect.hasEndReason && state.guidance.endReason != expect.endReason { return false }
        if expect.checkManeuvers && state.maneuvers.maneuvers.map(\.id) != expect.maneuverIds { return false }
        if expect.hasAlertID && (state.alert.hasAlert ? state.alert.alert.id : "") != expect.alertID { return false }
        if expect.hasGuidanceAppID && state.guidance.appID != expect.guidanceAppID { return false }
        if expect.hasPreviewedTripID && state.previews.previewedTripID != expect.previewedTripID { return false }
        if expect.hasTripsShown && UInt32(state.previews.hasPreviews ? state.previews.previews.trips.count : 0) != expect.tripsShown { return false }
        if expect.hasBannerAppID && state.banner.appID != expect.bannerAppID { return false }
        if expect.hasBannerManeuverID && state.banner.maneuverID != expect.bannerManeuverID { return false }
        if expect.hasBannerAlertID && state.banner.alertID != expect.bannerAlertID { return false }
        if expect.hasBannerInstruction && (state.banner.instructionVariants.first ?? "") != expect.bannerInstruction { return false }
        return true
    }

    static func describe(_ expect: HUScenarioExpectMetadata) -> String {
        var parts: [String] = []
        if expect.hasGuidance { parts.append("guidance \(expect.guidance)") }
        if expect.hasPauseReason { parts.append("pause \(expect.pauseReason)") }
        if expect.hasEndReason { parts.append("ended \(expect.endReason)") }
        if expect.checkManeuvers { parts.append("maneuvers [\(expect.maneuverIds.joined(separator: ", "))]") }
        if expect.hasAlertID { parts.append(expect.alertID.isEmpty ? "no alert" : "alert '\(expect.alertID)'") }
        if expect.hasTripsShown { parts.append("\(expect.tripsShown) trips shown") }
        if expect.hasPreviewedTripID { parts.append("previewing '\(expect.previewedTripID)'") }
        if expect.hasBannerAppID { parts.append(expect.bannerAppID.isEmpty ? "no banner" : "banner of \(expect.bannerAppID)") }
        if expect.hasBannerManeuverID { parts.append("banner maneuver '\(expect.bannerManeuverID)'") }
        if expect.hasBannerAlertID { parts.append("banner alert '\(expect.bannerAlertID)'") }
        if expect.hasBannerInstruction { parts.append("banner '\(expect.bannerInstruction)'") }
        return "expect_metadata " + parts.joined(separator: ", ")
    }

    static func describe(_ input: HUNavigationInput) -> String {
        let kind: String
        switch input.kind {
        case .previewTrip(let c): kind = "preview_trip '\(c.tripID)' via \(c.routeChoiceID)"
        case .startTrip(let c): kind = "start_trip '\(c.tripID)' via \(c.routeChoiceID)"
        case .alertAction(let id): kind = "alert_action '\(id)'"
        case .dismissAlert: kind = "dismiss_alert"
        case .pan(let direction): kind = "pan \(direction)"
        case .exitPanning: kind = "exit_panning"
        case .dashboardButton(let id): kind = "dashboard_button '\(id)'"
        case .selectBanner(let b): kind = "select_banner \(b.bannerID)"
        case nil: kind = "(none)"
        }
        return "navigation_input \(kind)"
    }

    static func describe(_ request: HUNavigationRequest) -> String {
        let op: String
        switch request.op {
        case .showTripPreviews(let p): op = "show_trip_previews \(p.trips.count) trips"
        case .hideTripPreviews: op = "hide_trip_previews"
        case .start(let s): op = "start '\(s.trip.id)'\(s.routeChoiceID.isEmpty ? "" : " via \(s.routeChoiceID)")"
        case .pause(let p): op = "pause \(p.reason)"
        case .updateManeuvers(let u): op = "update_maneuvers [\(u.maneuvers.map(\.id).joined(separator: ", "))]"
        case .updateEstimates(let e): op = "update_estimates \(e.maneuverID.isEmpty ? "trip" : "'\(e.maneuverID)'")"
        case .finish: op = "finish"
        case .cancel: op = "cancel"
        case .showAlert(let a): op = "show_alert '\(a.id)'"
        case .dismissAlert: op = "dismiss_alert"
        case .setDashboardButtons(let b): op = "set_dashboard_buttons \(b.buttons.count)"
        case .showPanning: op = "show_panning"
        case .dismissPanning: op = "dismiss_panning"
        case .setClusterDescriptions: op = "set_cluster_descriptions"
        case .startPrompt(let p): op = "start_prompt \(p.durationMs) ms"
        case .endPrompt: op = "end_prompt"
        case .setVoiceSession(let v): op = "set_voice_session \(v.active)"
        case .addLaneGuidances(let a): op = "add_lane_guidances [\(a.laneGuidances.map(\.id).joined(separator: ", "))]"
        case .setCurrentLaneGuidance(let c): op = "set_current_lane_guidance \(c.laneGuidanceID.isEmpty ? "none" : "'\(c.laneGuidanceID)'")"
        case .setCurrentRoadName(let r): op = "set_current_road_name '\(r.variants.first ?? "")'"
        case .setManeuverState(let m): op = "set_maneuver_state \(m.state)"
        case nil: op = "(no op)"
        }
        return "navigate \(op) (\(request.appID))"
    }
}
