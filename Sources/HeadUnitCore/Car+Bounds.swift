import HeadUnitWire

// What requests add up to (PROTOCOL.md section 10.4, ComposedLimits): a
// request whose resulting state could not be sent in one frame, or would make
// the phone hold more templates than the car allows, is refused: a template
// request's changed scene is measured before it is stored (`undoPoint`),
// anything else is undone.
extension Car {
    /// The first composed bound the current state breaks within `scope`, or nil.
    /// `appID`: the app whose scenes a phone request changed.
    func composedViolation(_ scope: ComposedScope, appID: String?) -> RuleViolation? {
        let limits = configuration.composed
        if scope.contains(.home) {
            var home = homeScreen()
            HMIImages.rewriteAsSent(&home)
            let bytes = ComposedLimits.homeScreenBytes(home)
            if bytes > limits.maxFrameBytes {
                return limits.frameViolation("the home screen", limit: "home_screen.bytes", bytes: bytes)
            }
        }
        if scope.contains(.appScenes) {
            if let violation = appScenesViolation(appID) { return violation }
        } else if scope.contains(.home) {
            // Announcing apps adds their infos to what the phone holds.
            let held = phoneTemplateBytes
            if held > limits.maxPhoneTemplateBytes { return limits.templateBytesViolation(held) }
        }
        if scope.contains(.shownScreens) {
            for screen in [HUScreen.main, .dashboard, .instrumentCluster] where templates.screenOwners[screen] != nil {
                let shown = templates.shownScene(templates.screenOwners[screen])
                let bytes = composedScreenBytes(screen, app: shown?.app, scene: shown?.scene)
                if bytes > limits.maxFrameBytes {
                    return limits.frameViolation("the \(screen) screen", limit: "screen.bytes", bytes: bytes)
                }
            }
        }
        if scope.contains(.metadata) {
            let bytes = ComposedLimits.metadataBytes(metadataState())
            if bytes > limits.maxFrameBytes {
                return limits.frameViolation("the metadata stream's full update", limit: "metadata.bytes", bytes: bytes)
            }
        }
        return nil
    }

    /// Every scene of `appID`'s app, as it would be shown, lists uncut (the
    /// car may stop limiting lists at any time), then the phone's template
    /// bytes. `candidate`: a scene a template request would store in place of
    /// the one of its kind, measured before it is stored (no undo then).
    func appScenesViolation(_ appID: String?, candidate: SceneState? = nil) -> RuleViolation? {
        let limits = configuration.composed
        var held = phoneTemplateBytes
        if let appID, let app = templates.apps[appID] {
            func check(_ kind: HUSceneKind, _ stored: SceneState) -> RuleViolation? {
                var scene = stored
                if let candidate, candidate.kind == kind {
                    scene = candidate
                    held += candidate.heldBytes - stored.heldBytes
                }
                let bytes = composedScreenBytes(screen(for: kind), app: app, scene: scene)
                guard bytes > limits.maxFrameBytes else { return nil }
                return limits.frameViolation("the \(kind) screen of '\(appID)'", limit: "screen.bytes", bytes: bytes)
            }
            // In kind order, so the screen named is the same whichever scene
            // changed. One scene (most apps) needs no sort, which allocated.
            if app.scenes.count == 1 {
                for (kind, stored) in app.scenes { if let violation = check(kind, stored) { return violation } }
            } else {
                for (kind, stored) in app.scenes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                    if let violation = check(kind, stored) { return violation }
                }
            }
        }
        if held > limits.maxPhoneTemplateBytes { return limits.templateBytesViolation(held) }
        return nil
    }

    /// `screen` showing `scene` of `app`, lists uncut, as HMIs are sent it
    /// (`ComposedLimits.screenBytes` of `HMIImages.rewriteAsSent`).
    func composedScreenBytes(_ screen: HUScreen, app: AppState?, scene: SceneState?) -> Int {
        var rendered = render(screen, app: app, scene: scene, listCap: nil)
        // A top template the scene holds without inline images is sent as it
        // is: only the rest is rewritten (the screen changed in place, not
        // copied: a copy of a screen and its destruction cost as much as the rewrite).
        if let top = takeHeldTop(&rendered, scene: scene, where: { !$0.hasInlineImages }) {
            HMIImages.rewriteAsSent(&rendered)
            rendered.top = top
        } else {
            HMIImages.rewriteAsSent(&rendered)
        }
        return ComposedLimits.screenBytes(rendered)
    }

    /// What the phone's apps hold, encoded: their announcements and templates:
    /// stacks, modals, search results (cached per scene) and now-playing
    /// content. Icons are not counted: `max_apps` x `max_image_bytes` bounds
    /// them already, and HMIs get each image once (section 12.6).
    public var phoneTemplateBytes: Int {
        templates.apps.values.reduce(0) { total, app in
            total + app.infoBytes + app.scenes.reduce(0) { $0 + $1.value.heldBytes } + (app.nowPlayingSet ? app.nowPlayingBytes : 0)
        }
    }

    /// Whether a diff would be over a frame; the full screen is sent then.
    func diffIsOversized(_ diff: HUTemplateDiff, screen: HUScreen) -> Bool {
        var update = HUScreenUpdate()
        update.screen = screen
        update.sequence = .max
        update.diff = diff
        var envelope = HUEnvelope()
        envelope.screenUpdate = update
        return envelope.wireSize > configuration.composed.maxFrameBytes
    }

    /// The car as it was before `body`, to go back to when the request breaks
    /// a composed bound (`nil`: it can break none, or it is measured before
    /// anything changes). A template request that leaves the now-playing
    /// content alone changes only its scene: `handleTemplateRequest` measures
    /// the scene before storing it. Keeping the car (or only the app) instead
    /// held a second reference to what the request changes, so each change
    /// copied what it touched, and the copy was destroyed after every request.
    func undoPoint(_ body: HUEnvelope.OneOf_Body?, scope: ComposedScope) -> Car? {
        if scope.isEmpty || Self.measuredBeforeStored(body, scope: scope) { return nil }
        return self
    }

    /// A template request that changes only its scene (not the now-playing
    /// content) is measured against the composed bounds before it is stored.
    static func measuredBeforeStored(_ body: HUEnvelope.OneOf_Body?, scope: ComposedScope) -> Bool {
        guard scope == [.appScenes], case .templateRequest = body else { return false }
        return true
    }

    /// The app a request changes the scenes of.
    static func scenesApp(of body: HUEnvelope.OneOf_Body?) -> String? {
        switch body {
        case .templateRequest(let request): return request.appID
        case .completeEvent(let complete): return complete.appID
        case .remoteCommands(let declare): return declare.appID
        default: return nil
        }
    }

    /// Whether the effects hold an OK answer to `requestID` for `peer` (only a
    /// request that changed something can have broken a bound).
    func answeredOK(_ peer: PeerID, _ requestID: UInt32) -> Bool {
        for effect in effects.reversed() {
            switch effect {
            case .send(let to, let envelope) where to == peer && envelope.requestID == requestID:
                if case .result(let result) = envelope.body { return result.code == .ok }
            default:
                break
            }
        }
        return false
    }
}
