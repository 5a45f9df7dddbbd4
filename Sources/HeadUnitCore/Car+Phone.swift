import HeadUnitWire

// What the phone and its apps ask of the car.
extension Car {
    /// A paired device's own allow-list, else the car's global policy.
    func entitlementPolicy(for peer: PeerID) -> EntitlementPolicy {
        peers[peer]?.device?.entitlements ?? configuration.entitlements
    }

    mutating func announceApps(_ announce: HUAnnounceApps, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if let phonePeer, phonePeer != peer {
            return .failure(RuleViolation(.phoneAlreadyConnected, "another phone ('\(templates.deviceName)') is connected"))
        }
        if phoneLink.isReconnecting {
            // A phone that announces afresh (one that lost its token, or another
            // phone) replaces the one that may still resume: its apps end now.
            endPhoneApps()
        }
        let newApps = announce.apps.count
        guard templates.appOrder.count + newApps <= configuration.maxApps else {
            var violation = RuleViolation(
                .limitExceeded, "\(templates.appOrder.count) apps announced already and \(newApps) more is over the car's maximum of \(configuration.maxApps); nothing was announced")
            violation.limit = "announce.apps"
            violation.limitValue = UInt32(configuration.maxApps)
            return .failure(violation)
        }
        if phonePeer != peer, configuration.announceTimeoutMilliseconds > 0 {
            effects.append(.cancelTimer(.announce(peer: peer)))
        }
        if phonePeer != peer {
            phoneLink.carry(peer: peer, token: peers[peer]?.resumptionToken ?? "", deviceID: peers[peer]?.device?.deviceID)
        }
        templates.deviceName = announce.deviceName.isEmpty ? (peers[peer]?.name ?? "") : announce.deviceName
        // Once said, for the phone (section 27): an announce without it takes nothing back.
        if announce.assistant { assistant.available = true }
        var decisions = HUAppDecisions()
        var seen = Set<String>()
        for info in announce.apps {
            var decision = HUAppDecision()
            decision.appID = info.appID
            defer { decisions.decisions.append(decision) }
            if info.appID.isEmpty {
                decision.code = .invalidArgument
                decision.reason = "app_id is empty"
                continue
            }
            if templates.apps[info.appID] != nil || !seen.insert(info.appID).inserted {
                decision.code = .duplicateApp
                decision.reason = "app '\(info.appID)' is already announced"
                continue
            }
            var app = AppState(info: info)
            // An icon the car cannot show refuses the app: no icon-less or clipped home-screen entries.
            let iconViolation = info.hasIcon
                ? ImageRules.check(info.icon, use: .appIcon, scale: configuration.vehicle.mainDisplay.scale, what: "app icon") : nil
            switch iconViolation.map(Result.failure) ?? Entitlements.category(for: info.entitlements, appID: info.appID, policy: entitlementPolicy(for: peer)) {
            case .success(let category):
                app.category = category
                if category == .automaker {
                    // Seed 003: an automaker app appears only if it shares a protocol with the vehicle.
                    let vehicle = configuration.vehicle.accessoryProtocols
                    app.matchedProtocols = AccessoryProtocols.match(app: info.accessoryProtocols, vehicle: vehicle)
                    decision.vehicleProtocols = vehicle
                    if app.matchedProtocols.isEmpty {
                        app.category = nil
                        app.refusal = RuleViolation(
                            .entitlementRefused,
                            "none of the app's accessory protocols (\(info.accessoryProtocols.joined(separator: ", "))) is declared by the vehicle")
                    }
                }
            case .failure(let violation):
                app.refusal = violation
            }
            decision.accepted = app.category != nil
            decision.category = app.category ?? .unspecified
            decision.matchedProtocols = app.matchedProtocols
            if let refusal = app.refusal {
                decision.code = refusal.code
                decision.reason = refusal.message
            }
            templates.apps[info.appID] = app
            templates.appOrder.append(info.appID)
        }
        // Each accepted automaker app learns which of its protocols are served now.
        let newAutomakerApps = decisions.decisions.filter { $0.accepted && $0.category == .automaker }.map(\.appID)
        for appID in newAutomakerApps { sendAvailability(of: appID) }
        decisions.resumptionToken = phoneLink.token
        decisions.resumeGraceMs = phoneLink.token.isEmpty ? 0 : UInt32(clamping: configuration.resumeGraceMilliseconds)
        var result = HUResult()
        result.appDecisions = decisions
        return .success(result)
    }

    /// A new connection asks for a lost phone's apps back (PROTOCOL.md
    /// section 21): answered, then followed by what the car kept for it.
    mutating func resumeSession(_ resume: HUResumeSession, requestID: UInt32, from peer: PeerID) {
        // The paired device that carries the apps comes back on a newer
        // connection while the car still holds its stale one (its link
        // dropped unnoticed, PROTOCOL.md 10.1 item 4): the right token from
        // the same device lets the stale one go as a lost link, then resumes.
        if let stale = phoneLink.peer, stale != peer, let device = peers[peer]?.device?.deviceID,
            phoneLink.deviceID == device, PhoneLink.sameToken(resume.resumptionToken, phoneLink.token)
        {
            effects.append(.close(stale, .connectionEvicted, "the same paired device resumed its session on a newer connection"))
            // peerLeft hands back every effect so far, the close included: kept in order.
            let left = peerLeft(stale, departure: .cutOff(.connectionEvicted))
            effects.append(contentsOf: left)
        }
        let grace = phoneLink.graceSerial
        let newToken = peers[peer]?.resumptionToken ?? ""
        switch phoneLink.resume(peer: peer, token: resume.resumptionToken, newToken: newToken, deviceID: peers[peer]?.device?.deviceID) {
        case .failure(let refusal):
            let message: String
            switch refusal {
            case .carryingApps: message = "this connection carries the apps already"
            case .nothingToResume: message = "no phone's session is waiting to be resumed; announce apps"
            case .wrongToken: message = "the token is not the one of the session waiting to be resumed; announce apps"
            case .otherDevice: message = "the session waiting to be resumed belongs to another paired device (PROTOCOL.md section 20)"
            }
            answer(peer, requestID, .failure(RuleViolation(.resumeRefused, message)))
        case .success(let replay):
            if let grace { effects.append(.cancelTimer(.resumeGrace(serial: grace))) }
            if configuration.announceTimeoutMilliseconds > 0 { effects.append(.cancelTimer(.announce(peer: peer))) }
            var resumed = HUResumed()
            resumed.resumptionToken = newToken
            resumed.resumeGraceMs = UInt32(clamping: configuration.resumeGraceMilliseconds)
            resumed.apps = status().app
            resumed.replayed = UInt32(replay.count)
            // Scenes connected while the phone was away come as SceneConnected in the replay, not here.
            let connectedMeanwhile = Set(replay.compactMap { body -> UInt32? in
                if case .sceneConnected(let scene) = body { return scene.sceneID }
                return nil
            })
            for appID in templates.appOrder {
                guard let app = templates.apps[appID], let category = app.category else { continue }
                for scene in app.scenes.values.sorted(by: { $0.id < $1.id }) where !connectedMeanwhile.contains(scene.id) {
                    resumed.scenes.append(sceneConnected(appID: appID, sceneID: scene.id, kind: scene.kind, category: category))
                }
            }
            var result = HUResult()
            result.resumed = resumed
            emit(peer, body: .result(result), requestID: requestID)
            for body in replay { emit(peer, body: body) }
            // Availability is state, never in the backlog (18.2): after the
            // replay, each automaker app's as it is now, whatever the old
            // connection was told.
            owedAvailability.reset()
            for appID in templates.appOrder { sendAvailability(of: appID) }
            // Video frames in flight were lost: every watched stream starts again from a keyframe (section 25.5).
            var videoOutputs: [VideoRoutes.Output] = []
            video.resumed(outputs: &videoOutputs)
            perform(videoOutputs)
        }
    }

    /// The first two checks of every request a phone makes about one of its apps
    /// (PROTOCOL.md section 16.2): a phone has announced apps, and this phone announced this app.
    func announcedApp(_ appID: String, from peer: PeerID) -> Result<AppState, RuleViolation> {
        guard let phonePeer else { return .failure(RuleViolation(.noPhone, "announce apps before using them")) }
        guard peer == phonePeer, let app = templates.apps[appID] else {
            return .failure(RuleViolation(.unknownApp, "app '\(appID)' was not announced by this phone"))
        }
        return .success(app)
    }

    /// Finds the scene a template request names: NO_PHONE, UNKNOWN_APP,
    /// ENTITLEMENT_REFUSED, NOT_YOUR_SCENE, NOT_CONNECTED, in that order.
    /// With the app's category and the scene as they are: one lookup of the
    /// app for the whole request.
    func requestedScene(for appID: String, sceneID: UInt32, from peer: PeerID)
        -> Result<(kind: HUSceneKind, category: HUCategory, scene: SceneState), RuleViolation>
    {
        let app: AppState
        switch announcedApp(appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return .failure(violation)
        }
        guard let category = app.category else {
            return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
        }
        for (kind, scene) in app.scenes where scene.id == sceneID { return .success((kind, category, scene)) }
        if templates.sceneOwner(sceneID) != nil {
            return .failure(RuleViolation(.notYourScene, "scene \(sceneID) belongs to another app"))
        }
        return .failure(RuleViolation(.notConnected, "scene \(sceneID) of '\(appID)' is not connected"))
    }

    /// `measuringBounds`: the changed scene is measured against the composed
    /// bounds before it is stored, and refused without a trace when it breaks one.
    mutating func handleTemplateRequest(
        _ request: HUTemplateRequest, from peer: PeerID, now: UInt64, measuringBounds: Bool = false
    ) -> Result<HUTemplateShown, RuleViolation> {
        let kind: HUSceneKind, category: HUCategory
        var scene: SceneState
        switch requestedScene(for: request.appID, sceneID: request.sceneID, from: peer) {
        case .success(let found): (kind, category, scene) = found
        case .failure(let violation): return .failure(violation)
        }
        let appID = request.appID
        let scale = configuration.vehicle.mainDisplay.scale
        let outcome: Result<SceneState.Transition, RuleViolation>
        switch request.op {
        case .setRoot(let template):
            outcome = scene.setRoot(adoptNowPlaying(template, appID: appID), category: category, scale: scale)
        case .push(let template):
            outcome = scene.push(adoptNowPlaying(template, appID: appID), category: category, scale: scale)
        case .showNowPlaying:
            var template = HUTemplate()
            template.id = nowPlayingTemplateID
            template.nowPlaying = templates.apps[appID]!.nowPlaying
            if scene.top?.id == nowPlayingTemplateID {
                outcome = .success(SceneState.Transition())
            } else {
                outcome = scene.push(template, category: category, scale: scale)
            }
        case .pop:
            outcome = scene.pop()
        case .popToRoot:
            outcome = scene.popToRoot()
        case .popTo(let templateID):
            outcome = scene.popTo(templateID)
        case .present(let template):
            outcome = scene.present(template, category: category, scale: scale)
        case .dismiss:
            outcome = scene.dismiss()
        case .update(let template):
            outcome = scene.update(
                adoptNowPlaying(template, appID: appID), category: category, scale: scale, nowMilliseconds: now)
                .map { SceneState.Transition() }
        case .updateItem(let update):
            outcome = scene.updateItem(update.item, inTemplate: update.templateID, category: category, scale: scale, nowMilliseconds: now)
                .map { SceneState.Transition() }
        case .updateNowPlaying(let nowPlaying):
            outcome = updateNowPlaying(nowPlaying, appID: appID, category: category, scale: scale)
        case nil:
            outcome = .failure(RuleViolation(.invalidArgument, "template request names no operation"))
        }
        switch outcome {
        case .failure(let violation):
            return .failure(violation)
        case .success(let transition):
            if measuringBounds, let violation = appScenesViolation(appID, candidate: scene) { return .failure(violation) }
            templates.apps[appID]!.scenes[kind] = scene
            let onScreen = templates.screenOwners[screen(for: kind)] == SceneRef(appID: appID, kind: kind)
            if onScreen {
                sendLifecycle(transition, appID: appID, scene: scene, animated: request.animated)
            }
            var shown = HUTemplateShown()
            shown.templateID = scene.visibleTemplateID ?? ""
            shown.depth = UInt32(scene.stack.count)
            if let held = scene.stackHeld.last, held.kind == .list {
                // Counted as the HMI is shown it (render applies the same cut).
                let counts = DrivingLimits.counts(
                    sectionItems: held.listSectionItems, maxItems: listCap ?? Int.max, maxSections: sectionCap ?? Int.max)
                shown.itemsShown = UInt32(counts.shown)
                shown.itemsTotal = UInt32(counts.total)
            }
            return .success(shown)
        }
    }

    /// A now-playing template the app pushes (or updates) becomes the app's shared instance.
    mutating func adoptNowPlaying(_ template: HUTemplate, appID: String) -> HUTemplate {
        guard case .nowPlaying(let content) = template.kind else { return template }
        if content != HUNowPlayingTemplate() {
            templates.apps[appID]!.nowPlaying = content
            templates.apps[appID]!.nowPlayingSet = true
            noteNowPlaying(appID, content: content)
        }
        return template
    }

    mutating func updateNowPlaying(_ content: HUNowPlayingTemplate, appID: String, category: HUCategory, scale: UInt32) -> Result<SceneState.Transition, RuleViolation> {
        var probe = HUTemplate()
        probe.id = nowPlayingTemplateID
        probe.nowPlaying = content
        // Validated as if pushed onto a list: only the content's own limits apply here.
        if let violation = TemplateValidator.validate(probe, context: TemplateContext(category: category, placement: .push(onTopOf: .list), displayScale: scale)) {
            return .failure(violation)
        }
        templates.apps[appID]!.nowPlaying = content
        templates.apps[appID]!.nowPlayingSet = true
        noteNowPlaying(appID, content: content)
        return .success(SceneState.Transition())
    }

    /// The home screen's Now Playing button follows the app that last started playing.
    mutating func noteNowPlaying(_ appID: String, content: HUNowPlayingTemplate) {
        audio.nowPlaying(appID: appID, playing: content.playbackRate > 0, spoken: content.spokenAudio)
        if content.playbackRate > 0 || templates.nowPlayingAppID.isEmpty {
            templates.nowPlayingAppID = appID
        }
    }

    mutating func completeEvent(_ complete: HUCompleteEvent, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if case .failure(let violation) = announcedApp(complete.appID, from: peer) { return .failure(violation) }
        if templates.hasTimedOut(complete.eventID, appID: complete.appID) {
            return .failure(RuleViolation(
                .completionTimeout, "event \(complete.eventID) timed out after \(configuration.completionTimeoutMilliseconds) ms before it was completed",
                limit: "completion.timeout_ms", limitValue: UInt32(clamping: configuration.completionTimeoutMilliseconds)))
        }
        guard let pending = templates.pendingEvents[complete.eventID], pending.appID == complete.appID else {
            return .failure(RuleViolation(.unknownEvent, "event \(complete.eventID) of '\(complete.appID)' is not pending (completed, timed out or never sent)"))
        }
        if pending.isSearch, let category = templates.apps[pending.appID]?.category {
            let context = TemplateContext(category: category, placement: .root, displayScale: configuration.vehicle.mainDisplay.scale)
            if let violation = TemplateValidator.validateSearchResults(complete.searchResults, context: context) {
                return .failure(violation)  // still pending: the app may answer again in time
            }
        }
        templates.pendingEvents[complete.eventID] = nil
        effects.append(.cancelTimer(.completion(eventID: complete.eventID)))
        if pending.isSearch, var scene = templates.apps[pending.appID]?.scenes[pending.sceneKind] {
            scene.searchResults = complete.searchResults
            templates.apps[pending.appID]!.scenes[pending.sceneKind] = scene
        }
        if pending.showsSpinner {
            sendSpinnerStopped(eventID: complete.eventID, pending: pending)
        }
        return .ok
    }

    mutating func appClosed(_ appID: String, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if case .failure(let violation) = announcedApp(appID, from: peer) { return .failure(violation) }
        endScenes(of: appID, reason: .appClosed, tellPhone: true)
        endRemoteCommands(of: [appID], forget: true, why: "was closed")
        endCalls(of: [appID], reason: .appClosed)
        var outputs: [AccessoryHub.Output] = []
        accessories.appEnded(appID, reason: .appClosed, tellPhone: true, outputs: &outputs)
        perform(outputs)
        return .ok
    }

    /// Ends every scene of an app and whatever hung on them; only that app is touched.
    mutating func endScenes(of appID: String, reason: HUDisconnectReason, tellPhone: Bool) {
        guard var app = templates.apps[appID] else { return }
        for (eventID, pending) in templates.endPending(of: appID) {
            effects.append(.cancelTimer(.completion(eventID: eventID)))
            if pending.showsSpinner { sendSpinnerStopped(eventID: eventID, pending: pending) }
        }
        for kind in app.scenes.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            let scene = app.scenes[kind]!
            video.streamEnded(scene.id)
            if tellPhone {
                var disconnected = HUSceneDisconnected()
                disconnected.appID = appID
                disconnected.sceneID = scene.id
                disconnected.reason = reason
                sendToPhone(.sceneDisconnected(disconnected))
            }
            let screen = screen(for: kind)
            if templates.screenOwners[screen] == SceneRef(appID: appID, kind: kind) {
                templates.screenOwners[screen] = nil
            }
        }
        app.scenes = [:]
        templates.apps[appID] = app
        endAudio(of: appID, tellPhone: tellPhone)
        endNavigation(of: appID, reason: reason)
    }

    mutating func sendLifecycle(_ transition: SceneState.Transition, appID: String, scene: SceneState, animated: Bool) {
        let sceneID = scene.id
        // Four events a push or pop, in this order.
        let events = [(transition.disappeared, HULifecyclePhase.willDisappear), (transition.appeared, .willAppear),
                      (transition.disappeared, .didDisappear), (transition.appeared, .didAppear)]
        if let phone = phonePeer {
            for (ids, phase) in events {
                for id in ids {
                    var envelope = HUEnvelope()
                    envelope.body = Self.lifecycleEvent(appID: appID, sceneID: sceneID, templateID: id, phase: phase, animated: animated)
                    effects.append(.send(phone, envelope))
                }
            }
        } else if phoneLink.isReconnecting {
            for (ids, phase) in events {
                for id in ids {
                    phoneLink.keep(Self.lifecycleEvent(appID: appID, sceneID: sceneID, templateID: id, phase: phase, animated: animated))
                }
            }
        }
    }

    /// `AppEvent{lifecycle}` for one template (section 11.7).
    static func lifecycleEvent(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> HUEnvelope.OneOf_Body {
        var event = HUAppEvent()
        event.appID = appID
        event.sceneID = sceneID
        event.templateID = templateID
        var lifecycle = HUTemplateLifecycle()
        lifecycle.phase = phase
        lifecycle.animated = animated
        event.kind = .lifecycle(lifecycle)
        return .appEvent(event)
    }
}
