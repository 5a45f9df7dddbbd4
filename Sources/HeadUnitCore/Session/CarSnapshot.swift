import HeadUnitWire

/// The Car as a value that outlives the process: what a daemon hands the
/// next one across a `systemctl restart` (systemd's file-descriptor store,
/// PROTOCOL.md section 22), so phones and HMIs carry on where they were.
///
/// Carried over: the phone, HMI and instrument cluster peers, the connected phone's link (token,
/// paired device), its apps with their decisions, scenes, template stacks,
/// modals, tab selections, search results and now-playing content, which scene
/// each screen shows and what the HMIs last saw of it (so the next change is
/// a diff against the same state), the home screen, the vehicle state,
/// pending events (their completion timers start afresh), and the id counters.
///
/// Also carried: navigation (sessions and guidance, previews, panning,
/// dashboard buttons, cluster texts; not an alert shown, which is dismissed
/// first: `prepareForHandover`), which HMIs and clusters subscribed to the
/// metadata stream (they get a fresh snapshot of it, numbered on), and who
/// owns the main audio (not a navigation prompt in progress), the
/// phone's calls (not the call actions waiting for the app's answer), and
/// which HMIs and clusters hear the car's output (24.7) and watch which
/// screen's video (25.5).
///
/// Not carried over (they start clean; the server tells their peers to
/// reconnect before handing over): accessory peers and their External
/// Accessory sessions, a navigation prompt in
/// progress, and a phone that was away within its resumption grace. The
/// phone's audio streams and the microphone are not carried either (their
/// buffers and credit live in the mixer of the process that ends): the
/// snapshot names them and the next process closes each towards the phone
/// with RESTARTED (`restoredConnectionsBack`).
public enum CarSnapshotFormat {
    /// Bumped whenever a field of snapshot.proto changes meaning; a snapshot
    /// of another format is refused (the daemon starts clean).
    public static let current: UInt32 = 1
}

/// Why a snapshot cannot be restored.
public struct SnapshotError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension Car {
    /// A joined peer's handshake facts (role, name, transport, token, device).
    public func peerInfo(_ peer: PeerID) -> PeerInfo? { peers[peer] }

    /// Every joined peer, in id order.
    public var peerIDs: [PeerID] { peers.ids }

    /// Before the snapshot is taken: what the next process does not carry
    /// ends now, and whoever depends on it is told: a navigation alert shown
    /// is dismissed (`alert_dismissed{SYSTEM}` to its app); a remote command
    /// waiting for its app's answer ends, its HMI answered NOT_CONNECTED (the
    /// request would otherwise never be answered); so does a call action.
    public mutating func prepareForHandover() -> [CarEffect] {
        if navigation.alert != nil { dismissNavigationAlert(.system, actionID: "", tell: true) }
        endRemoteCommands(of: templates.appOrder, forget: false, why: "was cut off by the daemon's restart")
        // Call actions waiting for the app are not carried either: answered now, as a lost link does (26.8).
        callsLostLink(why: "was cut off by the daemon's restart")
        // A voice exchange is not carried (27.5): it ends, the phone told, its voice stream closed.
        endAssistant(.shuttingDown)
        settleAudio()
        settlePhoneLink()
        publishScreens()
        return takeEffects()
    }

    private func navigationSnapshot() -> HUNavigationSnapshot {
        var out = HUNavigationSnapshot()
        for appID in navigation.sessions.keys.sorted() {
            let session = navigation.sessions[appID]!
            var entry = HUNavigationSessionSnapshot()
            entry.appID = appID
            switch session.state {
            case .idle: entry.state = 0
            case .active: entry.state = 1
            case .paused(let reason, let description): (entry.state, entry.pauseReason, entry.pauseDescription) = (2, reason, description)
            case .ended(let reason): (entry.state, entry.endReason) = (3, reason)
            }
            entry.trip = session.trip
            entry.routeChoiceID = session.routeChoiceID
            entry.maneuvers = session.maneuvers
            if let estimates = session.tripEstimates { entry.tripEstimates = estimates }
            entry.laneGuidances = session.laneGuidances.guidances
            entry.currentLaneGuidanceID = session.laneGuidances.currentID
            entry.currentRoadNameVariants = session.roadNameVariants
            entry.maneuverState = session.maneuverState
            out.sessions.append(entry)
        }
        out.guidanceAppID = navigation.guidanceAppID
        out.sessionCount = navigation.sessionCount
        out.nativeNavigationActive = navigation.nativeNavigationActive
        if let previews = navigation.previews {
            out.previewsAppID = previews.appID
            out.previews = previews.previews
            out.previewedTripID = previews.previewedTripID
            out.previewedRouteChoiceID = previews.previewedRouteChoiceID
        }
        out.panningAppID = navigation.panningAppID
        for (appID, buttons) in navigation.dashboardButtons { out.dashboardButtons[appID] = HUDashboardButtonList.with { $0.buttons = buttons } }
        for (appID, texts) in navigation.clusterDescriptions { out.clusterDescriptions[appID] = HUStringList.with { $0.values = texts } }
        return out
    }

    private static func restoring(_ entry: HUNavigationSnapshot, into car: inout Car) throws(SnapshotError) {
        var center = NavigationCenter()
        for session in entry.sessions {
            guard car.templates.apps[session.appID] != nil else {
                throw SnapshotError("navigation session of '\(session.appID)', which is not an app of the phone")
            }
            let state: NavigationSession.State
            switch session.state {
            case 0: state = .idle
            case 1: state = .active
            case 2: state = .paused(session.pauseReason, description: session.pauseDescription)
            case 3: state = .ended(session.endReason)
            default: throw SnapshotError("navigation session of '\(session.appID)' in unknown state \(session.state)")
            }
            center.sessions[session.appID] = NavigationSession(
                restoring: state, trip: session.trip, routeChoiceID: session.routeChoiceID, maneuvers: session.maneuvers,
                tripEstimates: session.hasTripEstimates ? session.tripEstimates : nil,
                laneGuidances: HeldLaneGuidances(restoring: session.laneGuidances, currentID: session.currentLaneGuidanceID),
                roadNameVariants: session.currentRoadNameVariants, maneuverState: session.maneuverState)
        }
        center.guidanceAppID = entry.guidanceAppID
        center.sessionCount = entry.sessionCount
        center.nativeNavigationActive = entry.nativeNavigationActive
        if !entry.previewsAppID.isEmpty {
            center.previews = NavigationCenter.Previews(
                appID: entry.previewsAppID, previews: entry.previews, previewedTripID: entry.previewedTripID,
                previewedRouteChoiceID: entry.previewedRouteChoiceID)
        }
        center.panningAppID = entry.panningAppID
        center.dashboardButtons = entry.dashboardButtons.mapValues(\.buttons)
        center.clusterDescriptions = entry.clusterDescriptions.mapValues(\.values)
        car.navigation = center
    }

    /// After a restore, once every handed-over connection is back and the
    /// peers that did not come back have left: the phone hears of each audio
    /// stream the restart ended (AudioStreamClosed{RESTARTED}, or in its
    /// backlog while it is away); video viewers get their streams again and
    /// the phone is asked for keyframes; then audio settles: the mixer learns
    /// the focus, and a microphone still wanted starts anew (section 22).
    public mutating func restoredConnectionsBack() -> [CarEffect] {
        for closed in audioStreams.closedByRestart { sendToPhone(.audioStreamClosed(closed)) }
        audioStreams.closedByRestart = []
        // Accessories are not carried over: each automaker app is owed its
        // availability as this process sees it (sent as the phone takes writes, 18.2).
        owedAvailability.reset()
        for appID in templates.appOrder where currentAvailability(of: appID) != nil { owedAvailability.mayHaveChanged(appID) }
        // Video viewers are sent their streams again and wait for the keyframe
        // asked of the phone now: frames in flight at the restart were lost.
        publishVideo()
        settleAudio()
        return takeEffects()
    }

    /// Roles whose sessions a snapshot carries; other peers are told to reconnect.
    public static func survivesRestart(_ role: HURole) -> Bool {
        switch role {
        case .phone, .hmi, .cluster: return true
        // An accessory's External Accessory sessions are byte streams with
        // credit in flight: they end, and the accessory serves anew.
        case .accessory, .unspecified, .UNRECOGNIZED: return false
        }
    }

    /// The state to hand over. Peers of roles that do not survive a restart
    /// must have left (`peerLeft`) before this is taken.
    public func snapshot() -> HUCarSnapshot {
        var out = HUCarSnapshot()
        for (id, info) in peers.all.sorted(by: { $0.key < $1.key }) where Self.survivesRestart(info.role) {
            var peer = HUPeerSnapshot()
            peer.peerID = id
            peer.role = info.role
            peer.name = info.name
            peer.transport = info.transport.rawValue
            peer.resumptionToken = info.resumptionToken
            peer.deviceID = info.device?.deviceID ?? ""
            peer.deviceName = info.device?.name ?? ""
            out.peers.append(peer)
        }
        out.hmiPeers = peers.hmis
        // Only a connected phone's session is carried: one away within its
        // grace period cannot be reached by the next process's timers.
        if let phone = phoneLink.peer {
            out.phonePeer = phone
            out.phoneToken = phoneLink.token
            out.phoneDeviceID = phoneLink.deviceID ?? ""
            out.phoneAuthenticated = phoneLink.deviceID != nil
            out.deviceName = templates.deviceName
            for appID in templates.appOrder {
                guard let app = templates.apps[appID] else { continue }
                var entry = Self.snapshot(app)
                entry.remoteCommands = remote.declared[app.id] ?? []
                out.apps.append(entry)
            }
            out.nowPlayingAppID = templates.nowPlayingAppID
            // Calls go on across a restart (section 26.8); actions waiting for the app do not.
            out.calls = calls.snapshot
            out.nextCallActionID = calls.nextActionID
            if let ended = calls.lastEnded { out.lastCallEnded = ended }
            out.phoneAssistant = assistant.available
            out.nextAssistantSessionID = assistant.nextID
            if let ended = assistant.lastEnded { out.lastAssistantEnded = ended }
            for (id, event) in templates.pendingEvents.sorted(by: { $0.key < $1.key }) {
                var pending = HUPendingEventSnapshot()
                pending.eventID = id
                pending.appID = event.appID
                pending.sceneKind = event.sceneKind
                pending.templateID = event.templateID
                pending.itemID = event.itemID
                pending.showsSpinner = event.showsSpinner
                pending.isSearch = event.isSearch
                out.pendingEvents.append(pending)
            }
        }
        for screen in [HUScreen.main, .dashboard, .instrumentCluster] {
            var entry = HUScreenSnapshot()
            entry.screen = screen
            if phoneLink.peer != nil, let owner = templates.screenOwners[screen] {
                entry.ownerAppID = owner.appID
                entry.ownerKind = owner.kind
            }
            if let shown = templates.rendered[screen] {
                entry.rendered = shown
            }
            entry.sequence = templates.screenSequence[screen, default: 0]
            out.screens.append(entry)
        }
        var sound = HUAudioSnapshot()
        switch audio.main {
        case .none: break
        case .car(let source): (sound.mainKind, sound.mainID) = (1, source)
        case .phone(let appID): (sound.mainKind, sound.mainID) = (2, appID)
        }
        sound.mainSpoken = audio.mainSpoken
        // The car's own call: the apps' calls are carried as calls (CarSnapshot.calls).
        sound.callActive = audio.vehicleCallActive
        sound.voiceSessionActive = audio.voiceSessionActive
        sound.voiceAppID = audio.voiceAppID
        // Streams are not carried (their buffers and credit live in this
        // process's mixer): the next process closes them towards the phone.
        sound.streams = audioStreams.openAtRestart()
        sound.nextStreamID = audioStreams.nextID
        sound.outputWatchers = audioTap.watchers
        out.audio = sound
        // Only the phone's apps navigate: with no phone carried, nothing of it is.
        if phoneLink.peer != nil { out.navigation = navigationSnapshot() }
        for screen in [HUScreen.main, .dashboard, .instrumentCluster] {
            for viewer in video.viewers[screen] ?? [] where peers[viewer.peer].map({ Self.survivesRestart($0.role) }) ?? false {
                out.videoWatchers.append(HUVideoWatchSnapshot.with { $0.screen = screen; $0.peerID = viewer.peer })
            }
        }
        out.metadataSubscribers = clusterFeed.subscribers.filter { peers[$0].map { Self.survivesRestart($0.role) } ?? false }.sorted()
        out.metadataVersion = clusterFeed.version
        if let home = templates.lastHomeScreen { out.lastHomeScreen = home }
        out.vehicleState = vehicleState
        out.nextEventID = templates.nextEventID
        out.nextSceneID = templates.nextSceneID
        return out
    }

    private static func snapshot(_ app: AppState) -> HUAppSnapshot {
        var out = HUAppSnapshot()
        out.info = app.info
        if let category = app.category {
            out.hasCategory_p = true
            out.category = category
        }
        if let refusal = app.refusal {
            out.hasRefusal_p = true
            out.refusalCode = refusal.code
            out.refusalMessage = refusal.message
        }
        out.matchedProtocols = app.matchedProtocols
        for kind in app.scenes.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            let scene = app.scenes[kind]!
            var entry = HUSceneSnapshot()
            entry.id = scene.id
            entry.kind = kind
            entry.stack = scene.stack
            if let presented = scene.presented {
                entry.presented = presented
            }
            entry.selectedTabs = scene.selectedTabs
            entry.searchResults = scene.searchResults
            out.scenes.append(entry)
        }
        out.nowPlaying = app.nowPlaying
        out.nowPlayingSet = app.nowPlayingSet
        return out
    }

    /// The Car a snapshot describes, and the timers to start for it (event
    /// completions afresh; the announce timeout of a phone that had not
    /// announced yet). `device` looks a paired device up again (its
    /// entitlement allow-list is the registry's, not the snapshot's); a
    /// device no longer paired fails the restore. Nothing is sent: the peers
    /// saw this state before the restart.
    public static func restoring(
        _ snapshot: HUCarSnapshot, configuration: CarConfiguration,
        device: (String) -> AuthenticatedDevice? = { _ in nil }
    ) throws(SnapshotError) -> (car: Car, effects: [CarEffect]) {
        var car = Car(configuration: configuration)
        var effects: [CarEffect] = []
        for entry in snapshot.peers {
            guard entry.peerID != 0, car.peers[entry.peerID] == nil else {
                throw SnapshotError("peer id \(entry.peerID) is zero or repeated")
            }
            guard survivesRestart(entry.role) else {
                throw SnapshotError("peer \(entry.peerID) has role \(RolePolicy.name(of: entry.role)), which a snapshot does not carry")
            }
            guard let transport = Transport(rawValue: entry.transport) else {
                throw SnapshotError("peer \(entry.peerID) has an unknown transport '\(entry.transport)'")
            }
            var info = PeerInfo(role: entry.role, name: entry.name, transport: transport, resumptionToken: entry.resumptionToken)
            if !entry.deviceID.isEmpty {
                guard let known = device(entry.deviceID) else {
                    throw SnapshotError("peer \(entry.peerID)'s device '\(entry.deviceID)' is no longer paired")
                }
                info.device = known
            }
            car.peers.all[entry.peerID] = info
        }
        for id in snapshot.hmiPeers {
            guard car.peers[id]?.role == .hmi else { throw SnapshotError("HMI peer \(id) is not an HMI peer") }
            car.peers.hmis.append(id)
        }
        if snapshot.phonePeer != 0 {
            guard car.peers[snapshot.phonePeer]?.role == .phone else {
                throw SnapshotError("the phone carrying the apps (peer \(snapshot.phonePeer)) is not a phone peer")
            }
            car.phoneLink = PhoneLink(
                restoringPeer: snapshot.phonePeer, token: snapshot.phoneToken,
                deviceID: snapshot.phoneAuthenticated ? snapshot.phoneDeviceID : nil)
            car.templates.deviceName = snapshot.deviceName
            car.assistant.restore(
                available: snapshot.phoneAssistant, nextID: snapshot.nextAssistantSessionID,
                lastEnded: snapshot.hasLastAssistantEnded ? snapshot.lastAssistantEnded : nil)
            for entry in snapshot.apps {
                let app = try restoring(entry)
                guard car.templates.apps[app.id] == nil else { throw SnapshotError("app '\(app.id)' is repeated") }
                car.templates.appOrder.append(app.id)
                car.templates.apps[app.id] = app
                if let violation = car.remote.declare(appID: app.id, entry.remoteCommands) {
                    throw SnapshotError("app '\(app.id)': remote commands: \(violation.message)")
                }
            }
            car.templates.nowPlayingAppID = snapshot.nowPlayingAppID
            for entry in snapshot.pendingEvents {
                guard car.templates.apps[entry.appID]?.scenes[entry.sceneKind] != nil else {
                    throw SnapshotError("pending event \(entry.eventID) belongs to no scene of '\(entry.appID)'")
                }
                car.templates.pendingEvents[entry.eventID] = PendingEvent(
                    appID: entry.appID, sceneKind: entry.sceneKind, templateID: entry.templateID, itemID: entry.itemID,
                    showsSpinner: entry.showsSpinner, isSearch: entry.isSearch)
                effects.append(.startTimer(.completion(eventID: entry.eventID), milliseconds: configuration.completionTimeoutMilliseconds))
            }
        } else if !snapshot.apps.isEmpty {
            throw SnapshotError("apps without a phone carrying them")
        }
        for entry in snapshot.screens {
            guard [HUScreen.main, .dashboard, .instrumentCluster].contains(entry.screen) else {
                throw SnapshotError("unknown screen \(entry.screen)")
            }
            if !entry.ownerAppID.isEmpty {
                guard car.templates.apps[entry.ownerAppID]?.scenes[entry.ownerKind] != nil else {
                    throw SnapshotError("screen \(entry.screen) shows no scene of '\(entry.ownerAppID)'")
                }
                car.templates.screenOwners[entry.screen] = SceneRef(appID: entry.ownerAppID, kind: entry.ownerKind)
            }
            if entry.hasRendered { car.templates.rendered[entry.screen] = entry.rendered }
            car.templates.screenSequence[entry.screen] = entry.sequence
        }
        if snapshot.hasLastHomeScreen { car.templates.lastHomeScreen = snapshot.lastHomeScreen }
        if snapshot.hasVehicleState { car.vehicleState = snapshot.vehicleState }
        car.templates.nextEventID = max(snapshot.nextEventID, 1)
        car.templates.nextSceneID = max(snapshot.nextSceneID, 1)
        if snapshot.hasNavigation { try restoring(snapshot.navigation, into: &car) }
        let sound = snapshot.audio
        let main: AudioFocus.Main
        switch sound.mainKind {
        case 0: main = .none
        case 1: main = .car(source: sound.mainID)
        case 2: main = .phone(appID: sound.mainID)
        default: throw SnapshotError("unknown main audio kind \(sound.mainKind)")
        }
        car.audio = AudioFocus(
            restoringMain: main, spoken: sound.mainSpoken, callActive: sound.callActive,
            voiceSessionActive: sound.voiceSessionActive, voiceAppID: sound.voiceAppID)
        for stream in sound.streams {
            guard stream.streamID != 0, snapshot.phonePeer != 0, car.templates.apps[stream.appID] != nil else {
                throw SnapshotError("audio stream \(stream.streamID) belongs to no app of the phone ('\(stream.appID)')")
            }
            // Its MEDIA, credit or close still in flight is dropped without a word (24.4).
            car.audioStreams.remember(stream.streamID)
            car.audioStreams.closedByRestart.append(HUAudioStreamClosed.with {
                $0.appID = stream.appID
                $0.streamID = stream.streamID
                $0.type = stream.type
                $0.reason = .restarted
                $0.detail = "the daemon restarted and could not carry the stream: its credit is gone; open a new stream"
            })
        }
        car.audioStreams.nextID = max(sound.nextStreamID, 1)
        for peer in sound.outputWatchers {
            guard let role = car.peers[peer]?.role, role == .hmi || role == .cluster else {
                throw SnapshotError("audio output watcher \(peer) is not an HMI or cluster peer")
            }
            if case .success(let command?) = car.audioTap.watch(peer, stop: false) { effects.append(.audio(command)) }
        }
        if snapshot.phonePeer != 0 {
            if let problem = car.calls.restore(
                snapshot.calls, nextActionID: snapshot.nextCallActionID,
                lastEnded: snapshot.hasLastCallEnded ? snapshot.lastCallEnded : nil)
            {
                throw SnapshotError(problem)
            }
            for call in car.calls.calls where car.templates.apps[call.appID]?.category != .communication {
                throw SnapshotError("call \(call.uuid) belongs to no communication app ('\(call.appID)')")
            }
            car.audio.callsChanged(appsInCalls: car.calls.appsInCalls)
            // A ringing call rings out in this process too: its ring time starts again.
            for call in car.calls.calls where call.phase == .ringing {
                effects.append(.startTimer(.callRinging(uuid: call.uuid), milliseconds: configuration.calls.ringTimeoutMilliseconds))
            }
        }
        // Navigation apps were told this style already.
        car.navigation.announcedPromptStyle = car.audio.promptStyle
        car.clusterFeed.continueVersions(from: snapshot.metadataVersion)
        for peer in snapshot.metadataSubscribers {
            guard let role = car.peers[peer]?.role, role == .hmi || role == .cluster else {
                throw SnapshotError("metadata subscriber \(peer) is not an HMI or cluster peer")
            }
            car.clusterFeed.subscribe(peer)
        }
        // A phone that joined but had not announced its apps still must, in time.
        if configuration.announceTimeoutMilliseconds > 0 {
            for (id, info) in car.peers.all.sorted(by: { $0.key < $1.key }) where info.role == .phone && id != snapshot.phonePeer {
                effects.append(.startTimer(.announce(peer: id), milliseconds: configuration.announceTimeoutMilliseconds))
            }
        }
        for entry in snapshot.videoWatchers {
            guard let role = car.peers[entry.peerID]?.role, role == .hmi || role == .cluster else {
                throw SnapshotError("video watcher \(entry.peerID) is not an HMI or cluster peer")
            }
            guard [HUScreen.main, .dashboard, .instrumentCluster].contains(entry.screen) else {
                throw SnapshotError("video watcher \(entry.peerID) watches unknown screen \(entry.screen)")
            }
            // What watching says (the streams, a keyframe) is said once the connections are back.
            var unsaid: [VideoRoutes.Output] = []
            if let violation = car.video.watch(entry.screen, stop: false, peer: entry.peerID, outputs: &unsaid) {
                throw SnapshotError("video watcher \(entry.peerID): \(violation.message)")
            }
        }
        car.reloadHMIImages()
        return (car, effects)
    }

    private static func restoring(_ entry: HUAppSnapshot) throws(SnapshotError) -> AppState {
        guard !entry.info.appID.isEmpty else { throw SnapshotError("an app without an id") }
        var app = AppState(info: entry.info)
        if entry.hasCategory_p { app.category = entry.category }
        if entry.hasRefusal_p { app.refusal = RuleViolation(entry.refusalCode, entry.refusalMessage) }
        app.matchedProtocols = entry.matchedProtocols
        for scene in entry.scenes {
            guard app.scenes[scene.kind] == nil else {
                throw SnapshotError("app '\(app.id)' has two scenes of kind \(scene.kind)")
            }
            var state = SceneState(
                restoring: scene.id, appID: app.id, kind: scene.kind, stack: scene.stack,
                presented: scene.hasPresented ? scene.presented : nil)
            state.selectedTabs = scene.selectedTabs
            state.searchResults = scene.searchResults
            app.scenes[scene.kind] = state
        }
        app.nowPlaying = entry.nowPlaying
        app.nowPlayingSet = entry.nowPlayingSet
        return app
    }
}

extension AudioStreams {
    /// The streams and the microphone open now, in id order, for the snapshot
    /// (the next process closes them: `Car.restoredConnectionsBack`).
    func openAtRestart() -> [HUAudioStreamSnapshot] {
        var out = streams.values.sorted { $0.id < $1.id }.map { stream in
            HUAudioStreamSnapshot.with {
                $0.appID = stream.appID
                $0.streamID = stream.id
                $0.type = stream.type
            }
        }
        if let microphone {
            out.append(HUAudioStreamSnapshot.with {
                $0.appID = microphone.appID
                $0.streamID = microphone.stream
                $0.type = .microphone
            })
        }
        return out
    }
}
