import HeadUnitWire

// Navigation apps, the dashboard, the instrument cluster and the metadata
// stream (PROTOCOL.md section 19). The rules live in NavigationSession,
// NavigationRules and ClusterFeed; this file routes requests to them.
extension Car {
    // MARK: - the phone's navigation requests

    mutating func handleNavigationRequest(_ request: HUNavigationRequest, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        let appID = request.appID
        let app: AppState
        switch navigationApp(appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return .failure(violation)
        }
        let scale = configuration.vehicle.mainDisplay.scale
        switch request.op {
        case .showTripPreviews(let previews): return showTripPreviews(previews, appID: appID)
        case .hideTripPreviews:
            if navigation.previews?.appID == appID { navigation.previews = nil }
            return .ok
        // Guidance (`NavigationSession` holds its rules).
        case .start(let start): return startGuidance(start, request: request, appID: appID)
        case .pause(let pause): return guide(request, appID: appID) { $0.pause(pause.reason, description: pause.description_p) }
        case .updateManeuvers(let update): return guide(request, appID: appID) { $0.updateManeuvers(update.maneuvers, scale: scale) }
        case .addLaneGuidances(let add): return guide(request, appID: appID) { $0.addLaneGuidances(add.laneGuidances) }
        case .setCurrentLaneGuidance(let current): return guide(request, appID: appID) { $0.setCurrentLaneGuidance(current.laneGuidanceID) }
        case .setCurrentRoadName(let road): return guide(request, appID: appID) { $0.setRoadName(road.variants) }
        case .setManeuverState(let state): return guide(request, appID: appID) { $0.setManeuverState(state.state) }
        case .updateEstimates(let update):
            return guide(request, appID: appID) { $0.updateEstimates(maneuverID: update.maneuverID, update.estimates).map { _ in () } }
        case .finish: return guide(request, appID: appID) { $0.finish() }
        case .cancel: return guide(request, appID: appID) { $0.cancel() }
        case .showAlert(let alert):
            let shown = showNavigationAlert(alert, appID: appID, scale: scale)
            if case .success = shown, alert.notify {
                applyBanner(navigation.banner.show(alert: alert, appID: appID, appInFront: isOnMainScreen(appID)))
            }
            return shown
        case .dismissAlert:
            guard navigation.alert?.appID == appID else {
                return .failure(RuleViolation(.nothingPresented, "'\(appID)' shows no navigation alert"))
            }
            dismissNavigationAlert(.app, actionID: "", tell: true)
            return .ok
        case .setDashboardButtons(let buttons):
            if let violation = NavigationRules.check(dashboardButtons: buttons.buttons, scale: scale) { return .failure(violation) }
            navigation.dashboardButtons[appID] = buttons.buttons
            return .ok
        case .showPanning: return showPanning(app, appID: appID)
        case .dismissPanning: return dismissPanning(appID)
        case .startPrompt(let prompt): return startPrompt(prompt, appID: appID)
        case .endPrompt:
            audio.endPrompt(appID: appID)
            return .ok
        case .setVoiceSession(let voice): return setVoiceSession(voice, appID: appID)
        case .setClusterDescriptions(let descriptions):
            if let violation = NavigationRules.longestFirst(descriptions.inactiveDescriptionVariants, "inactive description") {
                return .failure(violation)
            }
            navigation.clusterDescriptions[appID] = descriptions.inactiveDescriptionVariants
            return .ok
        case nil:
            return .failure(RuleViolation(.invalidArgument, "navigation request names no operation"))
        }
    }

    /// The checks before any navigation request, in this order: NO_PHONE,
    /// UNKNOWN_APP, ENTITLEMENT_REFUSED, NOT_ALLOWED_FOR_CATEGORY (a
    /// navigation app), NOT_CONNECTED (its main scene).
    func navigationApp(_ appID: String, from peer: PeerID) -> Result<AppState, RuleViolation> {
        guard peer == phonePeer, let app = templates.apps[appID] else {
            return .failure(RuleViolation(
                phonePeer == nil ? .noPhone : .unknownApp,
                phonePeer == nil ? "announce apps before using them" : "app '\(appID)' was not announced by this phone"))
        }
        guard let category = app.category else {
            return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
        }
        guard category == .navigation else {
            return .failure(RuleViolation(.notAllowedForCategory, "navigation requests are for navigation apps, not \(category)"))
        }
        guard app.scenes[.main] != nil else {
            return .failure(RuleViolation(.notConnected, "the main scene of '\(appID)' is not connected"))
        }
        return .success(app)
    }

    mutating func showTripPreviews(_ previews: HUTripPreviews, appID: String) -> Result<HUResult, RuleViolation> {
        if let violation = requireMapRoot(appID) ?? NavigationRules.check(previews: previews) { return .failure(violation) }
        let trip = previews.trips.first { $0.id == previews.selectedTripID } ?? previews.trips[0]
        navigation.previews = NavigationCenter.Previews(
            appID: appID, previews: previews, previewedTripID: trip.id, previewedRouteChoiceID: trip.routeChoices[0].id)
        return .ok
    }

    /// `change` to the app's guidance session (`NavigationSession` holds
    /// its rules): stored when it succeeds, and the app's banner follows.
    /// `started`: it started guidance (`guidanceStarted`).
    mutating func guide(
        _ request: HUNavigationRequest, appID: String, started: Bool = false,
        _ change: (inout NavigationSession) -> Result<Void, RuleViolation>
    ) -> Result<HUResult, RuleViolation> {
        var session = navigation.sessions[appID] ?? NavigationSession()
        if case .failure(let violation) = change(&session) { return .failure(violation) }
        if started { guidanceStarted(appID) }
        navigation.sessions[appID] = session
        updateBanner(after: request, appID: appID, session: session)
        return .ok
    }

    mutating func startGuidance(_ start: HUStartNavigation, request: HUNavigationRequest, appID: String) -> Result<HUResult, RuleViolation> {
        if let violation = requireMapRoot(appID) { return .failure(violation) }
        if navigation.nativeNavigationActive {
            return .failure(RuleViolation(.nativeNavigationActive, "the car's own navigation is guiding; the app may not start guidance now"))
        }
        return guide(request, appID: appID, started: true) { $0.start(trip: start.trip, routeChoiceID: start.routeChoiceID) }
    }

    /// `appID` started guidance: one app guides at a time.
    mutating func guidanceStarted(_ appID: String) {
        // Another app's guidance is cancelled by the car.
        if navigation.guidanceAppID != appID, navigation.guidance?.isRunning == true {
            cancelGuidance(reason: .otherApp, detail: "'\(appID)' started guidance")
        }
        navigation.sessionCount += 1
        navigation.guidanceAppID = appID
        // Starting guidance hides the app's previews.
        if navigation.previews?.appID == appID { navigation.previews = nil }
    }

    mutating func showPanning(_ app: AppState, appID: String) -> Result<HUResult, RuleViolation> {
        guard case .map(let map)? = app.scenes[.main]?.stack.first?.kind else {
            return .failure(RuleViolation(.noMapTemplate, "panning needs a map template as the root of the main scene"))
        }
        guard map.panningSupported else {
            return .failure(RuleViolation(.invalidPosition, "the map template does not support panning (panning_supported)"))
        }
        if navigation.panningAppID != appID {
            navigation.panningAppID = appID
            sendNavigationEvent(appID, .main, .panning(HUPanEvent.with { $0.began = true }))
        }
        return .ok
    }

    mutating func dismissPanning(_ appID: String) -> Result<HUResult, RuleViolation> {
        guard navigation.panningAppID == appID else {
            return .failure(RuleViolation(.invalidPosition, "the map of '\(appID)' is not in panning mode"))
        }
        navigation.panningAppID = ""
        sendNavigationEvent(appID, .main, .panning(HUPanEvent.with { $0.ended = true }))
        return .ok
    }

    mutating func startPrompt(_ prompt: HUAudioPrompt, appID: String) -> Result<HUResult, RuleViolation> {
        switch audio.startPrompt(appID: appID, durationMilliseconds: prompt.durationMs) {
        case .failure(let violation): return .failure(violation)
        case .success(let serial):
            effects.append(.startTimer(.navigationPrompt(serial: serial), milliseconds: UInt64(prompt.durationMs)))
            return .ok
        }
    }

    mutating func setVoiceSession(_ voice: HUVoiceSession, appID: String) -> Result<HUResult, RuleViolation> {
        // Shown, not only presented: a hidden app's voice session would
        // silence every navigation prompt while the driver sees another app (19.8).
        if voice.active, voiceControlShown() != appID {
            return .failure(
                RuleViolation(
                    .invalidPosition,
                    "the voice-control template of '\(appID)' must be shown (presented on its main scene while that scene is on the main screen) before starting a voice session"))
        }
        audio.setVoiceSession(appID: appID, active: voice.active)
        announcePromptStyle()
        return .ok
    }

    // MARK: - banners (PROTOCOL.md 19.9)

    /// A guidance update the app asked to notify shows or updates its banner;
    /// a banner whose maneuver is no longer upcoming, or whose guidance ended, goes.
    mutating func updateBanner(after request: HUNavigationRequest, appID: String, session: NavigationSession) {
        guard session.isRunning else {
            applyBanner(navigation.banner.dismissManeuver(appID: appID))
            return
        }
        switch request.op {
        case .updateManeuvers(let update):
            if update.notify, let first = session.maneuvers.first {
                applyBanner(navigation.banner.show(maneuver: first, appID: appID, appInFront: isOnMainScreen(appID)))
            } else {
                applyBanner(navigation.banner.dismissManeuver(appID: appID, unless: session.maneuvers.map(\.id)))
            }
        case .updateEstimates(let update) where update.notify:
            if let maneuver = session.maneuvers.first(where: { $0.id == update.maneuverID }), maneuver.hasEstimates {
                navigation.banner.update(estimates: maneuver.estimates, maneuverID: maneuver.id, appID: appID)
            }
        default:
            break
        }
    }

    /// Whether the app's main scene is what the main screen shows (no banner then).
    func isOnMainScreen(_ appID: String) -> Bool {
        templates.screenOwners[.main] == SceneRef(appID: appID, kind: .main)
    }

    mutating func applyBanner(_ changes: [NavigationBanner.TimerChange]) {
        for change in changes {
            switch change {
            case .start(let id): effects.append(.startTimer(.navigationBanner(bannerID: id), milliseconds: NavigationBanner.durationMilliseconds))
            case .cancel(let id): effects.append(.cancelTimer(.navigationBanner(bannerID: id)))
            }
        }
    }

    /// The driver tapped the banner: the app's map comes to the main screen
    /// (which removes the banner), then the app hears what was selected.
    mutating func selectBanner(_ select: HUSelectBanner, appID: String) -> Result<HUResult, RuleViolation> {
        let subject: NavigationBanner.Subject
        switch navigation.banner.select(appID: appID, bannerID: select.bannerID) {
        case .failure(let violation): return .failure(violation)
        case .success(let selected): subject = selected
        }
        connectScene(appID: appID, kind: .main, nowPlaying: nil)
        var selected = HUBannerSelected()
        switch subject {
        case .maneuver(let id): selected.maneuverID = id
        case .alert(let id): selected.alertID = id
        }
        sendNavigationEvent(appID, .main, .bannerSelected(selected))
        return .ok
    }

    /// Previews, guidance and panning draw on the app's map: its main scene's root must be one.
    func requireMapRoot(_ appID: String) -> RuleViolation? {
        guard case .map? = templates.apps[appID]?.scenes[.main]?.stack.first?.kind else {
            return RuleViolation(.noMapTemplate, "set a map template as the root of the main scene first")
        }
        return nil
    }

    mutating func sendNavigationEvent(_ appID: String, _ kind: HUSceneKind, _ body: HUNavigationEvent.OneOf_Kind) {
        var event = HUNavigationEvent()
        event.appID = appID
        event.sceneID = templates.apps[appID]?.scenes[kind]?.id ?? 0
        event.kind = body
        sendToPhone(.navigationEvent(event))
    }

    /// The car ends the guiding app's session and tells the app.
    mutating func cancelGuidance(reason: HUNavigationEndReason, detail: String) {
        let appID = navigation.guidanceAppID
        guard navigation.sessions[appID]?.end(reason) == true else { return }
        var ended = HUNavigationEnded()
        ended.reason = reason
        ended.detail = detail
        sendNavigationEvent(appID, .main, .navigationCancelled(ended))
        applyBanner(navigation.banner.dismissManeuver(appID: appID))
        if navigation.alert?.appID == appID { dismissNavigationAlert(.system, actionID: "", tell: true) }
    }

    // MARK: - alerts

    mutating func showNavigationAlert(_ alert: HUNavigationAlert, appID: String, scale: UInt32) -> Result<HUResult, RuleViolation> {
        if let violation = NavigationRules.check(alert: alert, scale: scale) { return .failure(violation) }
        // A new alert replaces the one shown; its app is told.
        if navigation.alert != nil {
            dismissNavigationAlert(navigation.alert?.appID == appID ? .app : .system, actionID: "", tell: true)
        }
        navigation.alertSerial += 1
        navigation.alert = NavigationCenter.Alert(appID: appID, alert: alert, serial: navigation.alertSerial)
        if alert.durationMs > 0 {
            effects.append(.startTimer(.navigationAlert(serial: navigation.alertSerial), milliseconds: UInt64(alert.durationMs)))
        }
        return .ok
    }

    mutating func dismissNavigationAlert(_ reason: HUAlertDismissReason, actionID: String, tell: Bool) {
        guard let shown = navigation.alert else { return }
        navigation.alert = nil
        effects.append(.cancelTimer(.navigationAlert(serial: shown.serial)))
        applyBanner(navigation.banner.dismissAlert(appID: shown.appID, alertID: shown.alert.id))
        if tell {
            var dismissed = HUAlertDismissed()
            dismissed.alertID = shown.alert.id
            dismissed.reason = reason
            dismissed.actionID = actionID
            sendNavigationEvent(shown.appID, .main, .alertDismissed(dismissed))
        }
    }

    mutating func navigationAlertExpired(serial: UInt64) {
        guard navigation.alert?.serial == serial else { return }
        dismissNavigationAlert(.timeout, actionID: "", tell: true)
    }

    // MARK: - the HMI's navigation input

    mutating func handleNavigationInput(_ input: HUNavigationInput) -> Result<HUResult, RuleViolation> {
        // A phone that is reconnecting still carries its apps: what they are sent waits for it.
        guard phoneLink.carriesApps else { return .failure(RuleViolation(.noPhone, "no phone is connected")) }
        let appID = input.appID.isEmpty ? (templates.screenOwners[.main]?.appID ?? "") : input.appID
        guard let app = templates.apps[appID], !app.scenes.isEmpty else {
            return .failure(RuleViolation(.notConnected, appID.isEmpty ? "the main screen shows no app" : "'\(appID)' has no connected scene"))
        }
        switch input.kind {
        case .previewTrip(let choice), .startTrip(let choice):
            guard let shown = navigation.previews, shown.appID == appID else {
                return .failure(RuleViolation(.invalidPosition, "'\(appID)' shows no trip previews"))
            }
            guard let trip = shown.previews.trips.first(where: { $0.id == choice.tripID }) else {
                return .failure(RuleViolation(.unknownItem, "no trip '\(choice.tripID)' in the previews"))
            }
            let routeID = choice.routeChoiceID.isEmpty ? trip.routeChoices[0].id : choice.routeChoiceID
            guard trip.routeChoices.contains(where: { $0.id == routeID }) else {
                return .failure(RuleViolation(.unknownItem, "trip '\(trip.id)' has no route choice '\(routeID)'"))
            }
            navigation.previews?.previewedTripID = trip.id
            navigation.previews?.previewedRouteChoiceID = routeID
            let chosen = HUTripChosen.with { $0.tripID = trip.id; $0.routeChoiceID = routeID }
            if case .startTrip = input.kind {
                sendNavigationEvent(appID, .main, .tripStarted(chosen))
            } else {
                sendNavigationEvent(appID, .main, .tripPreviewed(chosen))
            }
        case .alertAction(let actionID):
            guard let shown = navigation.alert, shown.appID == appID else {
                return .failure(RuleViolation(.nothingPresented, "'\(appID)' shows no navigation alert"))
            }
            guard shown.alert.actions.contains(where: { $0.id == actionID }) else {
                return .failure(RuleViolation(.unknownItem, "navigation alert '\(shown.alert.id)' has no action '\(actionID)'"))
            }
            dismissNavigationAlert(.userAction, actionID: actionID, tell: true)
        case .dismissAlert:
            guard navigation.alert?.appID == appID else {
                return .failure(RuleViolation(.nothingPresented, "'\(appID)' shows no navigation alert"))
            }
            dismissNavigationAlert(.userAction, actionID: "", tell: true)
        case .pan(let direction):
            guard navigation.panningAppID == appID else {
                return .failure(RuleViolation(.invalidPosition, "the map is not in panning mode (the app enters it from its pan button)"))
            }
            switch direction {
            case .up, .down, .left, .right:
                sendNavigationEvent(appID, .main, .panning(HUPanEvent.with { $0.direction = direction }))
            case .unspecified, .UNRECOGNIZED:
                return .failure(RuleViolation(.invalidArgument, "pan needs a direction (up, down, left, right)"))
            }
        case .exitPanning:
            guard navigation.panningAppID == appID else {
                return .failure(RuleViolation(.invalidPosition, "the map is not in panning mode"))
            }
            navigation.panningAppID = ""
            sendNavigationEvent(appID, .main, .panning(HUPanEvent.with { $0.ended = true }))
        case .dashboardButton(let buttonID):
            guard app.scenes[.dashboard] != nil else {
                return .failure(RuleViolation(.notConnected, "the dashboard scene of '\(appID)' is not connected"))
            }
            // Dashboard buttons show only while not navigating; then guidance takes their place.
            if navigation.guidanceAppID == appID, navigation.guidance?.isRunning == true {
                return .failure(RuleViolation(.invalidPosition, "the dashboard shows guidance, not buttons, while navigating"))
            }
            guard navigation.dashboardButtons[appID]?.contains(where: { $0.id == buttonID }) == true else {
                return .failure(RuleViolation(.unknownItem, "no dashboard button '\(buttonID)'"))
            }
            sendNavigationEvent(appID, .dashboard, .dashboardButtonPressed(buttonID))
        case .selectBanner(let select):
            return selectBanner(select, appID: appID)
        case nil:
            return .failure(RuleViolation(.invalidArgument, "navigation input names no action"))
        }
        return .ok
    }

    // MARK: - the cluster

    mutating func handleClusterInput(_ input: HUClusterInput) -> Result<HUResult, RuleViolation> {
        guard let owner = templates.screenOwners[.instrumentCluster], templates.apps[owner.appID]?.scenes[.instrumentCluster] != nil else {
            return .failure(RuleViolation(.notConnected, "no navigation app's instrument-cluster scene is connected"))
        }
        switch input.kind {
        case .compass(let setting), .speedLimit(let setting):
            if case .UNRECOGNIZED = setting { return .failure(RuleViolation(.invalidArgument, "unknown cluster setting \(setting.rawValue)")) }
        case .zoomIn, .zoomOut:
            break
        case nil:
            return .failure(RuleViolation(.invalidArgument, "cluster input names no action"))
        }
        sendNavigationEvent(owner.appID, .instrumentCluster, .clusterInput(input))
        return .ok
    }

    // MARK: - hooks from the rest of the car

    /// An app's scenes ended: its guidance ends with a reason the cluster sees; nothing of other apps changes.
    mutating func endNavigation(of appID: String, reason: HUDisconnectReason) {
        let endReason: HUNavigationEndReason
        switch reason {
        case .appClosed: endReason = .appClosed
        case .closedByCar: endReason = .closedByCar
        case .phoneGone: endReason = .phoneGone
        case .shuttingDown: endReason = .shuttingDown
        case .unspecified, .UNRECOGNIZED: endReason = .unspecified
        }
        navigation.sessions[appID]?.end(endReason)
        applyBanner(navigation.banner.dismiss(appID: appID))
        if navigation.alert?.appID == appID { dismissNavigationAlert(.system, actionID: "", tell: false) }
        navigation.forget(appID)
        audio.appGone(appID)
        announcePromptStyle()
        // The session is kept only while the app is: a relaunched scene starts afresh.
        if navigation.guidanceAppID != appID { navigation.sessions[appID] = nil }
    }

    /// The HMI set the vehicle state: native navigation, the car's audio source, calls, voice sessions.
    mutating func vehicleStateChanged(_ state: HUVehicleState) {
        noteNativeNavigation(state.nativeNavigationActive)
        audio.vehicleChanged(carSource: state.carAudioSource, callActive: state.callActive, voiceSessionActive: state.voiceSessionActive)
        announcePromptStyle()
    }

    /// Navigation apps learn the prompt style when it changes.
    mutating func announcePromptStyle() {
        let style = audio.promptStyle
        guard style != navigation.announcedPromptStyle else { return }
        navigation.announcedPromptStyle = style
        for appID in templates.appOrder where templates.apps[appID]?.category == .navigation && templates.apps[appID]?.scenes[.main] != nil {
            sendNavigationEvent(appID, .main, .promptStyle(style))
        }
    }

    /// The car's own guidance cancels the app's.
    mutating func noteNativeNavigation(_ active: Bool) {
        let started = active && !navigation.nativeNavigationActive
        navigation.nativeNavigationActive = active
        if started {
            cancelGuidance(reason: .nativeNavigation, detail: "the car's navigation started guidance")
        }
    }

    // MARK: - the metadata stream

    mutating func subscribeMetadata(_ peer: PeerID) -> Result<HUResult, RuleViolation> {
        clusterFeed.subscribe(peer)
        return .ok
    }

    /// The metadata state as the car's components should see it now.
    func metadataState() -> HUMetadataState {
        Self.metadataState(from: metadataInputs())
    }

    /// Everything the metadata state is built from.
    func metadataInputs() -> MetadataInputs {
        let app = templates.apps[templates.nowPlayingAppID]
        return MetadataInputs(
            navigation: $navigation, nowPlayingAppID: templates.nowPlayingAppID,
            nowPlaying: app?.nowPlayingSet == true ? app?.nowPlaying : nil,
            contentStyle: vehicleState.contentStyle,
            clusterOwnerAppID: templates.screenOwners[.instrumentCluster]?.appID, dashboardOwnerAppID: templates.screenOwners[.dashboard]?.appID,
            audio: $audio, microphone: audioStreams.microphoneUse, phoneLink: phoneLink.wire, deviceName: templates.deviceName)
    }

    /// The metadata state from its inputs alone (nothing else of the car is
    /// in reach here), so equal inputs give an equal state.
    static func metadataState(from inputs: MetadataInputs) -> HUMetadataState {
        let navigation = inputs.navigation.wrappedValue
        var state = HUMetadataState()
        var guidance = HUGuidanceSection()
        guidance.nativeNavigationActive = navigation.nativeNavigationActive
        guidance.session = navigation.sessionCount
        var maneuvers = HUManeuversSection()
        var tripEstimates = HUTripEstimatesSection()
        if let session = navigation.guidance {
            guidance.appID = navigation.guidanceAppID
            switch session.state {
            case .idle: guidance.state = .idle
            case .active: guidance.state = .active
            case .paused(let reason, let description):
                guidance.state = .paused
                guidance.pauseReason = reason
                guidance.pauseDescription = description
            case .ended(let reason):
                guidance.state = .ended
                guidance.endReason = reason
            }
            if session.isRunning {
                guidance.trip = session.trip
                guidance.routeChoiceID = session.routeChoiceID
                maneuvers.maneuvers = session.maneuvers
                maneuvers.laneGuidances = session.shownLaneGuidances
                maneuvers.currentLaneGuidanceID = session.laneGuidances.currentID
                maneuvers.currentRoadNameVariants = session.roadNameVariants
                maneuvers.maneuverState = session.maneuverState
                if let estimates = session.tripEstimates {
                    tripEstimates.estimates = estimates
                    tripEstimates.present = true
                }
            }
        }
        state.guidance = guidance
        state.maneuvers = maneuvers
        state.tripEstimates = tripEstimates
        var alert = HUAlertSection()
        if let shown = navigation.alert {
            alert.alert = shown.alert
            alert.appID = shown.appID
        }
        state.alert = alert
        state.banner = navigation.banner.section
        var nowPlaying = HUNowPlayingSection()
        if let content = inputs.nowPlaying {
            nowPlaying.appID = inputs.nowPlayingAppID
            nowPlaying.title = content.title
            nowPlaying.artist = content.artist
            nowPlaying.album = content.album
            nowPlaying.elapsedSeconds = content.elapsedSeconds
            nowPlaying.durationSeconds = content.live ? 0 : content.durationSeconds
            nowPlaying.playbackRate = content.playbackRate
            nowPlaying.live = content.live
        }
        state.nowPlaying = nowPlaying
        state.display = HUDisplaySection.with { $0.contentStyle = inputs.contentStyle }
        var previews = HUPreviewsSection()
        if let shown = navigation.previews {
            previews.appID = shown.appID
            previews.previews = shown.previews
            previews.previewedTripID = shown.previewedTripID
            previews.previewedRouteChoiceID = shown.previewedRouteChoiceID
        }
        state.previews = previews
        var cluster = HUClusterSection()
        if let owner = inputs.clusterOwnerAppID {
            cluster.appID = owner
            cluster.inactiveDescriptionVariants = navigation.clusterDescriptions[owner] ?? []
        }
        cluster.panning = !navigation.panningAppID.isEmpty
        if let owner = inputs.dashboardOwnerAppID {
            cluster.dashboardButtons = navigation.dashboardButtons[owner] ?? []
        }
        state.cluster = cluster
        state.audio = inputs.audio.wrappedValue.section
        // The car's own record of its microphone (24.6), whatever the app shows or says.
        if let microphone = inputs.microphone {
            state.audio.microphoneAppID = microphone.appID
            state.audio.microphonePurpose = microphone.purpose
        }
        state.phone = HUPhoneSection.with {
            $0.link = inputs.phoneLink
            $0.deviceName = inputs.deviceName
        }
        return state
    }

    /// Called by the server after each input: rebuilds the metadata state and
    /// returns which subscribers need a snapshot and which sections changed.
    /// Inputs equal to those of the last build (most template requests, every
    /// input to a screen) skip the build and the section compares: the state
    /// reads nothing but its inputs (`metadataState(from:)`), so equal inputs
    /// are an equal state.
    public mutating func takeMetadata() -> (snapshots: [PeerID], changed: MetadataSections) {
        let inputs = metadataInputs()
        if inputs != metadataBuiltFrom {
            clusterFeed.update(to: Self.metadataState(from: inputs))
        }
        // Kept even when equal: it then shares the car's current storage, so
        // the next comparison is mostly identity checks.
        metadataBuiltFrom = inputs
        return clusterFeed.take()
    }
}

/// What `Car.metadataState(from:)` reads: the navigation center, the
/// now-playing app's content, the content style, the cluster's and
/// dashboard's owners, audio and the microphone's use, the phone link and the device's name. Copies
/// share storage (copy-on-write), so comparing inputs that did not change is
/// mostly identity checks: far cheaper than building the state and comparing
/// its eleven sections.
struct MetadataInputs: Equatable, Sendable {
    /// The car's own boxes (`CopyOnWrite`): unchanged, they compare by identity.
    var navigation: CopyOnWrite<NavigationCenter>
    var nowPlayingAppID: String
    /// The app's content, when it set one.
    var nowPlaying: HUNowPlayingTemplate?
    var contentStyle: HUContentStyle
    var clusterOwnerAppID: String?
    var dashboardOwnerAppID: String?
    var audio: CopyOnWrite<AudioFocus>
    /// Who the car's microphone streams to (`AudioStreams.microphoneUse`).
    var microphone: MicrophoneUse?
    var phoneLink: HUPhoneLink
    var deviceName: String
    /// False only in `.unbuilt`, so no car's inputs equal it.
    var built = true

    /// What a car starts with: nothing built yet.
    static let unbuilt = MetadataInputs(
        navigation: CopyOnWrite(wrappedValue: NavigationCenter()), nowPlayingAppID: "", nowPlaying: nil, contentStyle: .unspecified,
        clusterOwnerAppID: nil, dashboardOwnerAppID: nil, audio: CopyOnWrite(wrappedValue: AudioFocus()), microphone: nil, phoneLink: .none,
        deviceName: "", built: false)
}
