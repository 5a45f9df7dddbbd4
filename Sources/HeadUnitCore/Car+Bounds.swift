import HeadUnitWire

// What requests add up to (PROTOCOL.md section 10.4, ComposedLimits): a
// request whose resulting state could not be sent in one frame, or would make
// the phone hold more templates than the car allows, is undone and refused.
extension Car {
    /// The first composed bound the current state breaks within `scope`, or nil.
    /// `appID`: the app whose scenes a phone request changed.
    func composedViolation(_ scope: ComposedScope, appID: String?) -> RuleViolation? {
        let limits = configuration.composed
        if scope.contains(.home) {
            let bytes = ComposedLimits.homeScreenBytes(HMIImages.asSent(homeScreen()))
            if bytes > limits.maxFrameBytes {
                return limits.frameViolation("the home screen", limit: "home_screen.bytes", bytes: bytes)
            }
        }
        if scope.contains(.appScenes), let appID, let app = apps[appID] {
            // Every scene of the app, as it would be shown, lists uncut (the
            // car may stop limiting lists at any time).
            for kind in app.scenes.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
                let screen = screen(for: kind)
                let bytes = composedScreenBytes(screen, owner: SceneRef(appID: appID, kind: kind))
                if bytes > limits.maxFrameBytes {
                    return limits.frameViolation("the \(kind) screen of '\(appID)'", limit: "screen.bytes", bytes: bytes)
                }
            }
        }
        if !scope.isDisjoint(with: [.home, .appScenes]) {
            let held = phoneTemplateBytes
            if held > limits.maxPhoneTemplateBytes { return limits.templateBytesViolation(held) }
        }
        if scope.contains(.shownScreens) {
            for screen in [HUScreen.main, .dashboard, .instrumentCluster] where screenOwners[screen] != nil {
                let bytes = composedScreenBytes(screen, owner: screenOwners[screen])
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

    /// `screen` showing `owner`'s scene, lists uncut, as HMIs are sent it
    /// (`ComposedLimits.screenBytes` of `HMIImages.asSent`). The scene's top
    /// and modal templates, when shown as held and without an inline PNG, are
    /// not walked again: their sizes were taken when they were stored
    /// (`SceneState.Held`), and only the rest of the screen is measured.
    func composedScreenBytes(_ screen: HUScreen, owner: SceneRef?) -> Int {
        var rendered = render(screen, owner: owner, listCap: nil)
        var known = 0
        if let owner, let scene = apps[owner.appID]?.scenes[owner.kind] {
            // Not a now-playing top: the render puts the app's shared content in it.
            if rendered.hasTop, let held = scene.stackHeld.last, !held.hasInlineImages, held.kind != .nowPlaying {
                known += LinearEncoder.messageFieldSize(fieldNumber: LinearEncoder.renderedTopField, contentBytes: held.bytes)
                rendered.clearTop()
            }
            if rendered.hasPresented, let held = scene.presentedHeld, !held.hasInlineImages {
                known += LinearEncoder.messageFieldSize(fieldNumber: LinearEncoder.renderedPresentedField, contentBytes: held.bytes)
                rendered.clearPresented()
            }
        }
        let bytes = ComposedLimits.screenBytes(HMIImages.asSent(rendered), adding: known)
        assert(
            known == 0 || bytes == ComposedLimits.screenBytes(HMIImages.asSent(render(screen, owner: owner, listCap: nil))),
            "the held sizes add up to the screen's as measured whole")
        return bytes
    }

    /// What the phone's apps hold, encoded: their announcements and templates:
    /// stacks, modals, search results (cached per scene) and now-playing
    /// content. Icons are not counted: `max_apps` x `max_image_bytes` bounds
    /// them already, and HMIs get each image once (section 12.6).
    public var phoneTemplateBytes: Int {
        apps.values.reduce(0) { total, app in
            assert(app.infoBytes == LinearEncoder.size(of: app.info) - app.info.icon.png.count, "info size kept")
            assert(app.nowPlayingBytes == LinearEncoder.size(of: app.nowPlaying), "now-playing size kept")
            return total + app.infoBytes + app.scenes.reduce(0) { $0 + $1.value.heldBytes } + (app.nowPlayingSet ? app.nowPlayingBytes : 0)
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
        return LinearEncoder.size(of: envelope) > configuration.composed.maxFrameBytes
    }

    /// What a request is undone to when it breaks a composed bound.
    enum Undo {
        /// The request can break none.
        case nothing
        /// A template request that leaves the now-playing content alone changes
        /// one app's scenes and adds effects, nothing else: the app as it was
        /// and how many effects there were. Keeping the whole Car instead held
        /// a second reference to each of its boxes, so every change the request
        /// made copied what it touched (the apps dictionary above all).
        case app(String, AppState?, effects: Int)
        /// Anything else: the whole Car (copy-on-write).
        case car(Car)

        var isNothing: Bool { if case .nothing = self { true } else { false } }
    }

    /// The state to keep before `body` runs, for `restore`.
    func undoPoint(_ body: HUEnvelope.OneOf_Body?, scope: ComposedScope) -> Undo {
        if scope.isEmpty { return .nothing }
        if scope == [.appScenes], case .templateRequest(let request) = body {
            return .app(request.appID, apps[request.appID], effects: effects.count)
        }
        return .car(self)
    }

    /// Back to the state before the request (its effects dropped too).
    mutating func restore(_ undo: Undo) {
        switch undo {
        case .nothing: break
        case .app(let appID, let app, let count):
            apps[appID] = app
            effects.removeSubrange(count...)
        case .car(let car): self = car
        }
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
            case .sendEncodedAnswer(let to, requestID, _) where to == peer:
                return true
            default:
                break
            }
        }
        return false
    }
}
