import HeadUnitWire

/// The template session: the phone's announced apps with their scenes and
/// stacks, what each screen shows (its owner, what the HMIs were last sent
/// and its sequence), the events waiting for an app to complete them (and
/// those that timed out), the home screen last built, and the images the
/// HMIs' state shows. One value that `Car` composes (issue 49): the car
/// checks requests against the rules and turns what changes here into
/// effects; the bookkeeping of ids, sequences and pending events lives here.
struct TemplateSession: Sendable {
    /// The phone's name as announced (the home screen shows it).
    var deviceName = ""
    /// Apps in announce order (the home screen's order).
    var appOrder: [String] = []
    /// The apps by id (compared while few, hashed when many: `SmallMap`).
    var apps: SmallMap<String, AppState> = [:]
    /// The app whose content the home screen's Now Playing button opens.
    var nowPlayingAppID = ""
    /// Which app scene each screen shows; absent: the home screen.
    var screenOwners: SmallMap<HUScreen, SceneRef> = [:]
    /// What each screen last showed the HMI, for diffs.
    var rendered: SmallMap<HUScreen, HURenderedScreen> = [:]
    /// The sequence of each screen's last `ScreenUpdate`.
    var screenSequence: SmallMap<HUScreen, UInt64> = [:]
    var lastHomeScreen: HUHomeScreen?
    /// What the last home screen built came from (`HomeInputs`), and the
    /// refs of its images: equal inputs give an equal home screen, so a
    /// publish need not build it again.
    var lastHomeInputs: (inputs: HomeInputs, refs: [String])?
    /// Events sent to an app that wait for its `CompleteEvent`.
    var pendingEvents: [UInt64: PendingEvent] = [:]
    /// Recently timed-out events (bounded), so a late completion is told so.
    var timedOutEvents: [TimedOutEvent] = []
    static let timedOutMemory = 64
    var nextEventID: UInt64 = 1
    var nextSceneID: UInt32 = 1
    /// The images the HMIs' state shows, each sent to an HMI once (section 12.6).
    @CopyOnWrite var hmiImages = HMIImages()

    struct SceneRef: Hashable, Sendable {
        var appID: String
        var kind: HUSceneKind
    }

    struct TimedOutEvent: Equatable, Sendable {
        var id: UInt64
        var appID: String
    }

    /// An event the car waits for the app to complete.
    struct PendingEvent: Sendable {
        var appID: String
        var sceneKind: HUSceneKind
        var templateID: String
        var itemID: String
        /// Selections show a spinner on the HMI until completed.
        var showsSpinner: Bool
        var isSearch: Bool

        /// The spinner as the HMI sees it.
        func selection(_ eventID: UInt64) -> HUPendingSelection {
            var selection = HUPendingSelection()
            selection.eventID = eventID
            selection.templateID = templateID
            selection.itemID = itemID
            return selection
        }
    }

    // MARK: - apps and scenes

    /// Announced apps and connected scenes.
    var counts: (apps: UInt32, scenes: UInt32) {
        (UInt32(appOrder.count), UInt32(apps.values.reduce(0) { $0 + $1.scenes.count }))
    }

    /// `owner`'s app and scene, read once for whatever a screen showing it needs.
    func shownScene(_ owner: SceneRef?) -> (app: AppState, scene: SceneState)? {
        guard let owner, let app = apps[owner.appID], let scene = app.scenes[owner.kind] else { return nil }
        return (app, scene)
    }

    /// The app and kind of the connected scene with this id.
    func sceneOwner(_ sceneID: UInt32) -> SceneRef? {
        for (appID, app) in apps {
            if let kind = app.scenes.first(where: { $0.value.id == sceneID })?.key {
                return SceneRef(appID: appID, kind: kind)
            }
        }
        return nil
    }

    /// The id of a scene about to connect.
    mutating func newSceneID() -> UInt32 {
        defer { nextSceneID &+= 1 }
        return nextSceneID
    }

    /// The phone's apps are gone (their scenes ended first).
    mutating func forgetApps() {
        apps = [:]
        appOrder = []
        deviceName = ""
        nowPlayingAppID = ""
    }

    // MARK: - screens

    /// The sequence of `screen`'s next update (`advance`), or of its last one.
    mutating func sequence(_ screen: HUScreen, advance: Bool) -> UInt64 {
        if advance { screenSequence[screen, default: 0] += 1 }
        return screenSequence[screen, default: 0]
    }

    // MARK: - pending events

    /// The selection a spinner shows on `owner`'s scene, if any.
    func spinning(on owner: SceneRef) -> HUPendingSelection? {
        var selection: HUPendingSelection?
        for (id, pending) in pendingEvents where pending.showsSpinner && pending.appID == owner.appID && pending.sceneKind == owner.kind {
            selection = pending.selection(id)
        }
        return selection
    }

    /// Waits for `pending` under a new event id. A selection (spinner)
    /// replaces the app's selections still spinning: those are returned.
    mutating func startPending(_ pending: PendingEvent) -> (eventID: UInt64, replaced: [(id: UInt64, pending: PendingEvent)]) {
        let eventID = nextEventID
        nextEventID &+= 1
        var replaced: [(id: UInt64, pending: PendingEvent)] = []
        for (id, old) in pendingEvents where old.appID == pending.appID && old.showsSpinner && pending.showsSpinner {
            pendingEvents[id] = nil
            replaced.append((id, old))
        }
        pendingEvents[eventID] = pending
        return (eventID, replaced)
    }

    /// The app did not complete `eventID` in time: no longer pending, and
    /// remembered (bounded) so a late completion is told it timed out.
    mutating func timeOut(_ eventID: UInt64) -> PendingEvent? {
        guard let pending = pendingEvents.removeValue(forKey: eventID) else { return nil }
        timedOutEvents.append(TimedOutEvent(id: eventID, appID: pending.appID))
        if timedOutEvents.count > Self.timedOutMemory { timedOutEvents.removeFirst() }
        return pending
    }

    func hasTimedOut(_ eventID: UInt64, appID: String) -> Bool {
        timedOutEvents.contains(TimedOutEvent(id: eventID, appID: appID))
    }

    /// Every event of `appID` stops waiting (its scenes end): those are returned.
    mutating func endPending(of appID: String) -> [(id: UInt64, pending: PendingEvent)] {
        var ended: [(id: UInt64, pending: PendingEvent)] = []
        for (id, pending) in pendingEvents where pending.appID == appID {
            pendingEvents[id] = nil
            ended.append((id, pending))
        }
        return ended
    }
}
