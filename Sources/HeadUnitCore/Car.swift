import HeadUnitWire

/// The whole car as one value: phones, apps, scenes, template stacks and the
/// HMI. Inputs come in as method calls; what must happen comes out as effects.
/// No I/O, no clocks: time arrives as `nowMilliseconds` (monotonic).
///
/// One phone at a time carries the apps; any number of HMI peers watch the
/// screens and send input (the car's screen renderer, a debugging `watch`).
///
/// The car composes one value per concern (the peers, the phone link, the
/// template session, navigation, audio, calls...) instead of holding each
/// fact itself: at most 18 stored properties (`TemplateSessionTests`).
public struct Car: Sendable {
    @CopyOnWrite public private(set) var configuration: CarConfiguration
    public internal(set) var vehicleState: HUVehicleState

    /// The peers that completed the handshake; the HMIs among them in join order.
    var peers = PeerTable()
    /// The phone whose apps are announced (connected, or lost and resumable).
    @CopyOnWrite var phoneLink = PhoneLink()
    var phonePeer: PeerID? { phoneLink.peer }
    /// The phone's apps, their scenes and stacks, the screens, the events
    /// waiting for an app, the home screen and the HMIs' images (Session/TemplateSession).
    var templates = TemplateSession()
    /// External Accessory protocols served and the sessions on them.
    @CopyOnWrite var accessories: AccessoryHub
    /// The accessory availability the phone's automaker apps are owed: state, sent when the phone takes writes (18.2).
    var owedAvailability = OwedAvailability()
    var effects: [CarEffect] = []
    /// Navigation sessions, previews, alerts (Navigation/), and the metadata stream (Cluster/).
    @CopyOnWrite public internal(set) var navigation = NavigationCenter()
    @CopyOnWrite public internal(set) var clusterFeed = ClusterFeed()
    /// The inputs `clusterFeed`'s state was last built from (`takeMetadata`).
    @CopyOnWrite var metadataBuiltFrom = MetadataInputs.unbuilt
    @CopyOnWrite public internal(set) var audio = AudioFocus()
    /// The apps' remote commands and the commands waiting for their answer (section 23).
    @CopyOnWrite public internal(set) var remote: RemoteCommands
    /// The audio streams to the mixer and the microphone (section 24).
    @CopyOnWrite public internal(set) var audioStreams: AudioStreams
    /// Who hears the car's mixed output (section 24.7), and the output as the mixer last reported it.
    @CopyOnWrite public internal(set) var audioTap: AudioTap
    /// The car's audio output as the mixer last reported it (section 24.5),
    /// set by the server; shown in `GetStatus`. Nil until audio first played.
    public var audioOutput: HUAudioOutputStatus? {
        get { audioTap.outputStatus }
        set { audioTap.outputStatus = newValue }
    }
    /// Who watches which screen's base-view video (Video/, section 25).
    @CopyOnWrite public internal(set) var video: VideoRoutes
    /// The phone's calls and the actions waiting for the app (Calls/, section 26).
    @CopyOnWrite public internal(set) var calls: CallSession
    /// The phone's assistant and its one session (Assistant/, section 27).
    @CopyOnWrite public internal(set) var assistant: AssistantSession

    typealias SceneRef = TemplateSession.SceneRef
    typealias PendingEvent = TemplateSession.PendingEvent

    public init(configuration: CarConfiguration) {
        self.configuration = configuration
        var state = HUVehicleState()
        state.contentStyle = configuration.vehicle.initialContentStyle == .unspecified ? .dark : configuration.vehicle.initialContentStyle
        state.safeArea = configuration.vehicle.mainDisplay.safeArea
        self.vehicleState = state
        self.accessories = AccessoryHub(vehicleProtocols: configuration.vehicle.accessoryProtocols, peerBudget: configuration.accessoryPeerBudget)
        self.remote = RemoteCommands(limits: configuration.remoteCommandLimits)
        self.video = VideoRoutes(limits: configuration.video)
        self.audioStreams = AudioStreams(limits: configuration.audio)
        self.audioTap = AudioTap(maxWatchers: configuration.audio.maxOutputWatchers)
        self.calls = CallSession(limits: configuration.calls)
        self.assistant = AssistantSession(limits: configuration.assistant)
    }

    // MARK: - inputs

    /// A peer completed the handshake (role already checked against transport).
    public mutating func peerJoined(_ peer: PeerID, info: PeerInfo) -> [CarEffect] {
        peers.join(peer, info)
        if info.role == .phone, configuration.announceTimeoutMilliseconds > 0 {
            effects.append(.startTimer(.announce(peer: peer), milliseconds: configuration.announceTimeoutMilliseconds))
        }
        if info.role == .hmi {
            // The latest state, shared with HMIs catching up (images first, section 12.6).
            var streams: [HMIStream] = [.home, .screen(.main)]
            for screen in [HUScreen.dashboard, .instrumentCluster] where templates.screenOwners[screen] != nil {
                streams.append(.screen(screen))
            }
            effects.append(.hmiJoined(peer, streams))
        }
        return takeEffects()
    }

    /// An envelope from an established peer. With `publishingScreens` false
    /// the HMIs' screens are left for a later `publishScreenChanges()`, so a
    /// server can answer first and publish once for a batch of requests.
    /// `unknownEnum`: what a walk of the envelope found already (the
    /// connection's limits check makes one), else the car walks it here.
    public mutating func receive(
        _ envelope: HUEnvelope, from peer: PeerID, nowMilliseconds: UInt64, publishingScreens: Bool = true,
        unknownEnum: KnownEnums.Walked = .notYet
    ) -> [CarEffect] {
        guard let info = peers[peer] else { return [] }
        let request = envelope.requestID
        // A value this version does not know, in any enum field of any request (section 9, code 113).
        let unknown: KnownEnums.Unknown? = switch unknownEnum {
        case .notYet: KnownEnums.firstUnknown(in: envelope)
        case .found(let found): found
        }
        if let unknown {
            answer(peer, request, .failure(RuleViolation(.invalidArgument, unknown.message)))
            return takeEffects()
        }
        // Read once: each `envelope.body` copies the body out of the envelope's storage.
        let body = envelope.body
        let scope = ComposedScope(body)
        // What to restore if the request leaves composed state no frame can carry (Car+Bounds).
        let undo = undoPoint(body, scope: scope)
        // A push's answer, four lifecycle events and the HMIs' screen: one
        // allocation, not the four an array growing from empty makes.
        effects.reserveCapacity(8)
        if let body, receiveStreamMessage(body, requestID: request, from: peer, now: nowMilliseconds) {
            return takeEffects()
        }
        dispatch(body, requestID: request, from: peer, role: info.role, now: nowMilliseconds, scope: scope)
        if let undo, answeredOK(peer, request), let violation = composedViolation(scope, appID: Self.scenesApp(of: body)) {
            self = undo  // its effects too: the answer and events of what did not happen
            answer(peer, request, .failure(violation))
        }
        settlePhoneLink()
        settleAudio()
        if publishingScreens { publishScreens() }
        return takeEffects()
    }

    /// Accessory-session traffic, watching video and audio streams: true
    /// when `body` was one of these. They change no screen: no re-render after them.
    mutating func receiveStreamMessage(_ body: HUEnvelope.OneOf_Body, requestID: UInt32, from peer: PeerID, now: UInt64) -> Bool {
        if receiveAccessoryMessage(body, requestID: requestID, from: peer)
            || receiveVideoMessage(body, requestID: requestID, from: peer, now: now)
        {
            return true
        }
        guard receiveAudioMessage(body, requestID: requestID, from: peer) else { return false }
        // A VOICE stream opened or closed can start or stop the microphone
        // (24.6): settled after this request's answer, as after every
        // request (issue 48: it waited for the next one).
        settleAudio()
        return true
    }

    /// Every other request to its one handler (the stream messages went to `receiveStreamMessage`).
    mutating func dispatch(
        _ body: HUEnvelope.OneOf_Body?, requestID request: UInt32, from peer: PeerID, role: HURole, now: UInt64, scope: ComposedScope
    ) {
        switch body {
        // The phone's apps and their templates (Car+Phone).
        case .announceApps(let announce): answer(peer, request, announceApps(announce, from: peer))
        case .templateRequest(let templateRequest):
            let measured = Self.measuredBeforeStored(body, scope: scope)
            receiveTemplateRequest(templateRequest, requestID: request, from: peer, now: now, measuringBounds: measured)
        case .completeEvent(let complete): answer(peer, request, completeEvent(complete, from: peer))
        case .appClosed(let closed): answer(peer, request, appClosed(closed.appID, from: peer))
        case .resumeSession(let resume): resumeSession(resume, requestID: request, from: peer)
        // The HMI (Car+HMI).
        case .launchApp(let launch): answer(peer, request, launchApp(launch))
        case .hmiInput(let input): answer(peer, request, handleInput(input))
        case .setVehicleState(let set): answer(peer, request, setVehicleState(set.state))
        case .closeApp(let close): answer(peer, request, closeApp(close.appID))
        case .getImage(let get): answer(peer, request, getImage(get))
        case .getStatus: answer(peer, request, .success(statusResult()))
        // Navigation, the cluster and the metadata stream (Car+Navigation).
        case .navigationRequest(let navigationRequest): answer(peer, request, handleNavigationRequest(navigationRequest, from: peer))
        case .navigationInput(let input): answer(peer, request, handleNavigationInput(input))
        case .clusterInput(let input): answer(peer, request, handleClusterInput(input))
        case .subscribeMetadata: answer(peer, request, subscribeMetadata(peer))
        // Remote commands (Car+Remote).
        case .remoteCommands(let declare): answer(peer, request, declareRemoteCommands(declare, from: peer))
        case .sendRemoteCommand(let send): sendRemoteCommand(send, requestID: request, from: peer)
        case .carButton(let press): carButtonPressed(press, requestID: request, from: peer)
        case .remoteCommandAnswer(let remoteAnswer): answer(peer, request, remoteCommandAnswered(remoteAnswer, from: peer))
        // Calls (Car+Calls).
        case .callReport(let report): answer(peer, request, callReported(report, from: peer))
        case .callRequest(let callRequest): callRequested(callRequest, requestID: request, from: peer)
        case .callActionAnswer(let actionAnswer): answer(peer, request, callActionAnswered(actionAnswer, from: peer))
        case .callInput(let input): callInput(input, requestID: request, from: peer)
        // The phone's assistant (Car+Assistant).
        case .assistantInput(let input): answer(peer, request, assistantInput(input))
        case .assistantUpdate(let update): answer(peer, request, assistantUpdated(update, from: peer))
        case .postNotification(let post): answer(peer, request, postNotification(post, from: peer, now: now))
        case .notificationInput(let input): answer(peer, request, notificationInput(input))
        case .serveProtocols, .openSession, .answerSession, .closeSession, .sessionCredit, .watchVideo, .requestKeyframe,
            .openAudioStream, .closeAudioStream, .audioCredit, .watchAudio:
            break  // handled by `receiveStreamMessage`
        case .startPairing, .listPairedDevices, .removePairedDevice, .pair, .pairStart, .authenticate:
            // Pairing needs keys, randomness and files: the server's PairingRegistry
            // answers these before the Car (CarHost); a bare Car has no registry.
            answer(peer, request, .failure(RuleViolation(.pairingNotOpen, "pairing is not available here")))
        case .hello, .welcome, .goodbye, .result, .sceneConnected, .sceneDisconnected, .appEvent,
            .sessionConfiguration, .homeScreen, .screenUpdate, .imageData, .accessoryAvailability, .sessionRequested,
            .sessionOpened, .sessionClosed, .sessionFinished, .navigationEvent, .metadataUpdate, .pairingAttempt, .remoteCommandEvent, .videoStreams,
            .audioStreamClosed, .microphoneStarted, .callActionEvent, .callActionTimedOut, .assistantEvent, nil:
            // The connection layer filters these by role; reaching here is a bug there.
            answer(peer, request, .failure(RuleViolation(.notForRole, "\(role) may not send this message")))
        }
    }

    /// A template request: `Result{template_shown}` (section 11), or its refusal.
    mutating func receiveTemplateRequest(
        _ request: HUTemplateRequest, requestID: UInt32, from peer: PeerID, now: UInt64, measuringBounds: Bool
    ) {
        answer(peer, requestID, handleTemplateRequest(request, from: peer, now: now, measuringBounds: measuringBounds).map { shown in
            var result = HUResult()
            result.templateShown = shown
            return result
        })
    }

    /// What changed on the HMIs' screens since they were last published.
    public mutating func publishScreenChanges() -> [CarEffect] {
        publishScreens()
        return takeEffects()
    }

    /// The peer's connection is gone (closed, timed out or cut off); how it
    /// went decides whether a phone may resume (PROTOCOL.md section 21).
    public mutating func peerLeft(_ peer: PeerID, departure: PeerDeparture = .lost) -> [CarEffect] {
        guard let info = peers.leave(peer) else { return [] }
        if info.role == .phone, configuration.announceTimeoutMilliseconds > 0 {
            effects.append(.cancelTimer(.announce(peer: peer)))
        }
        remote.askerLeft(peer)
        calls.askerLeft(peer)
        var outputs: [AccessoryHub.Output] = []
        accessories.departing = peer
        defer { accessories.departing = nil }
        accessories.accessoryLeft(peer, outputs: &outputs)
        clusterFeed.unsubscribe(peer)
        video.forget(peer)
        if let command = audioTap.forget(peer) { effects.append(.audio(command)) }
        if peer == phonePeer {
            let graceSerial = phoneLink.lost(departure)
            // Byte streams cannot resume without loss: the phone's accessory
            // sessions end now. A phone that may resume is told in its
            // backlog; one gone for good is not told (it has no connection).
            for appID in templates.appOrder {
                accessories.appEnded(appID, reason: .phoneGone, tellPhone: graceSerial != nil, outputs: &outputs)
            }
            if let graceSerial {
                // A command cannot wait out a reconnection: its HMI hears now.
                endRemoteCommands(of: templates.appOrder, forget: false, why: "lost its phone's connection")
                // The calls go on (the phone's network carries them); actions waiting end.
                callsLostLink()
                // A voice exchange does not wait out a reconnection (27.5): the phone finds why in its backlog.
                endAssistant(.phoneGone)
                effects.append(.startTimer(.resumeGrace(serial: graceSerial), milliseconds: configuration.resumeGraceMilliseconds))
            } else {
                endPhoneApps()
            }
        }
        accessories.forget(peer)
        perform(outputs)
        settlePhoneLink()
        settleAudio()
        publishScreens()
        return takeEffects()
    }

    /// Everything of the phone ends: scenes, pending events, icons (the phone is not told: it is gone).
    mutating func endPhoneApps() {
        var outputs: [AccessoryHub.Output] = []
        for appID in templates.appOrder {
            accessories.appEnded(appID, reason: .phoneGone, tellPhone: false, outputs: &outputs)
        }
        endAssistant(.phoneGone)
        assistant.phoneEnded()
        phoneLink.end()
        owedAvailability.reset()
        perform(outputs)
        endRemoteCommands(of: templates.appOrder, forget: true, why: "went away with its phone")
        endCalls(of: templates.appOrder, reason: .phoneGone)
        for appID in templates.appOrder {
            endScenes(of: appID, reason: .phoneGone, tellPhone: false)
        }
        templates.forgetApps()
    }

    /// A phone away whose backlog overflowed cannot resume without loss: its apps end now.
    mutating func settlePhoneLink() {
        guard phoneLink.backlogOverflowed else { return }
        endPhoneApps()
        publishScreens()
    }

    public mutating func timerFired(_ timer: CarTimer, nowMilliseconds: UInt64) -> [CarEffect] {
        switch timer {
        case .completion(let eventID):
            guard let pending = templates.timeOut(eventID) else { return [] }
            // The app never answered: stop the spinner so the screen is not wedged, and tell the app.
            var event = HUAppEvent()
            event.appID = pending.appID
            event.sceneID = templates.apps[pending.appID]?.scenes[pending.sceneKind]?.id ?? 0
            event.templateID = pending.templateID
            var timedOut = HUEventTimedOut()
            timedOut.timedOutEventID = eventID
            event.kind = .timedOut(timedOut)
            sendToPhone(.appEvent(event))
            if pending.showsSpinner {
                sendSpinnerStopped(eventID: eventID, pending: pending)
            }
        case .navigationAlert(let serial):
            navigationAlertExpired(serial: serial)
        case .navigationBanner(let bannerID):
            _ = navigation.banner.expired(bannerID: bannerID)
        case .navigationPrompt(let serial):
            audio.endPrompt(serial: serial)
        case .remoteCommand(let commandID):
            remoteCommandTimedOut(commandID: commandID)
        case .videoKeyframe(let channel):
            videoKeyframeTimerFired(channel: channel, now: nowMilliseconds)
        case .callAction(let actionID):
            callActionTimedOut(actionID: actionID)
            publishScreens()
        case .callRinging(let uuid):
            callRangOut(uuid)
            publishScreens()
        case .assistant:
            assistantTimedOut()
        case .accessoryOpen(let channel, let serial):
            var outputs: [AccessoryHub.Output] = []
            accessories.openTimedOut(channel: channel, serial: serial, outputs: &outputs)
            perform(outputs)
        case .resumeGrace(let serial):
            guard phoneLink.graceExpired(serial: serial) else { return [] }
            endPhoneApps()
            publishScreens()
        case .announce(let peer):
            // A phone holding a connection without carrying apps (a second phone, or one that never announced).
            if peers[peer] != nil, phonePeer != peer {
                let seconds = Double(configuration.announceTimeoutMilliseconds) / 1000
                effects.append(.close(peer, .announceTimeout, "no apps accepted from this phone within \(seconds) s of its Welcome (announce_timeout_ms)"))
            }
        }
        settlePhoneLink()
        settleAudio()
        return takeEffects()
    }

    /// The daemon is stopping: every scene ends, peers are told why.
    public mutating func shutdown(reason: String) -> [CarEffect] {
        var outputs: [AccessoryHub.Output] = []
        accessories.shutdown(outputs: &outputs)
        perform(outputs)
        var audioOutputs: [AudioStreams.Output] = []
        audioStreams.endAll(reason: .shuttingDown, tell: phonePeer != nil, outputs: &audioOutputs)
        performAudio(audioOutputs, from: nil)
        endAssistant(.shuttingDown)
        for appID in templates.appOrder {
            endScenes(of: appID, reason: .shuttingDown, tellPhone: true)
        }
        for peer in peers.ids {
            effects.append(.close(peer, .shuttingDown, reason))
        }
        peers = PeerTable()
        phoneLink.end()
        templates.apps = [:]
        templates.appOrder = []
        return takeEffects()
    }

    /// Phones, announced apps and connected scenes: cheap enough to check after every input.
    public var counts: (phones: UInt32, apps: UInt32, scenes: UInt32) {
        let held = templates.counts
        return (phonePeer == nil ? 0 : 1, held.apps, held.scenes)
    }

    /// `GetStatus`'s answer.
    func statusResult() -> HUResult {
        var result = HUResult()
        result.status = status()
        return result
    }

    public func status() -> HUStatus {
        var status = HUStatus()
        (status.phones, status.apps, status.scenes) = counts
        status.peers = UInt32(peers.count)
        status.peer = peers.ids.map { id in
            var peer = HUPeerStatus()
            peer.connectionID = id
            peer.role = peers[id]!.role
            peer.name = peers[id]!.name
            peer.transport = peers[id]!.transport.rawValue
            return peer
        }
        status.app = templates.appOrder.compactMap { templates.apps[$0] }.map { app in
            var appStatus = HUAppStatus()
            appStatus.appID = app.id
            appStatus.displayName = app.info.displayName
            appStatus.category = app.category ?? .unspecified
            appStatus.accepted = app.category != nil
            appStatus.scene = app.scenes.values.sorted { $0.id < $1.id }.map { scene in
                var sceneStatus = HUSceneStatus()
                sceneStatus.sceneID = scene.id
                sceneStatus.kind = scene.kind
                sceneStatus.stack = scene.stack.map(\.id)
                sceneStatus.presented = scene.presented?.id ?? ""
                return sceneStatus
            }
            return appStatus
        }
        status.vehicleState = vehicleState
        status.phoneLink = phoneLink.wire
        status.accessoryProtocols = accessoryStatus()
        status.authenticatedPhones = UInt32(peers.all.values.filter { $0.device != nil }.count)
        if let output = audioTap.outputStatus { status.audioOutput = output }
        return status
    }

    // MARK: - effects plumbing

    mutating func takeEffects() -> [CarEffect] {
        defer { effects = [] }
        return effects
    }

    mutating func emit(_ peer: PeerID, body: HUEnvelope.OneOf_Body, requestID: UInt32 = 0) {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = body
        effects.append(.send(peer, envelope))
    }

    /// Answers a request: OK (with detail) or the violation's typed error.
    mutating func answer(_ peer: PeerID, _ requestID: UInt32, _ outcome: Result<HUResult, RuleViolation>) {
        switch outcome {
        case .success(let result): emit(peer, body: .result(result), requestID: requestID)
        case .failure(let violation): emit(peer, body: .result(violation.result), requestID: requestID)
        }
    }

    /// To the phone carrying the apps; while it is away, into its backlog.
    mutating func sendToPhone(_ body: HUEnvelope.OneOf_Body) {
        if let phonePeer {
            emit(phonePeer, body: body)
        } else if phoneLink.isReconnecting {
            phoneLink.keep(body)
        }
    }

    /// `images`: the refs `body` carries, when the caller already found them
    /// (a full screen: `HMIImages.externalize` did); else they are looked up here.
    mutating func sendToHMIs(_ stream: HMIStream, _ body: HUEnvelope.OneOf_Body, images: [String]? = nil) {
        guard !peers.hmis.isEmpty else { return }
        var envelope = HUEnvelope()
        envelope.body = body
        effects.append(.toHMIs(stream, envelope, images: images ?? HMIImages.refs(in: envelope)))
    }

    /// The bytes of an image the HMIs' current state shows (section 12.6).
    public func hmiImage(_ ref: String) -> HUImageData? {
        guard let png = templates.hmiImages.png(ref) else { return nil }
        var data = HUImageData()
        data.ref = ref
        data.png = png
        return data
    }

    /// `GetImage`: an image the HMI lacks.
    func getImage(_ request: HUGetImage) -> Result<HUResult, RuleViolation> {
        guard let data = hmiImage(request.ref) else {
            return .failure(RuleViolation(.unknownImage, "no image shown now has the ref '\(request.ref)'"))
        }
        var result = HUResult()
        result.imageData = data
        return .success(result)
    }

    /// The HMI peers, in join order (for the server's fan-out).
    public var hmiPeerIDs: [PeerID] { peers.hmis }

    /// The images the HMIs' state shows (section 12.6; the server's fan-out drops what is no longer shown).
    public var hmiImages: HMIImages {
        _read { yield templates.hmiImages }
    }

    /// The latest state of a stream, for an HMI that fell behind: the home
    /// screen, or a `full` ScreenUpdate at the screen's current sequence.
    /// Nil when the HMI has never been shown that screen.
    /// `images`: the refs it shows (`HMIImages`).
    public mutating func catchUp(_ stream: HMIStream) -> (envelope: HUEnvelope, images: [String])? {
        var envelope = HUEnvelope()
        switch stream {
        case .home:
            if templates.lastHomeScreen == nil {
                var home = homeScreen()
                templates.hmiImages.externalize(&home)
                templates.lastHomeScreen = home
            }
            envelope.body = .homeScreen(templates.lastHomeScreen!)
        case .screen(let screen):
            if templates.rendered[screen] == nil, screen == .main || templates.screenOwners[screen] != nil {
                var full = render(screen)
                templates.hmiImages.externalize(&full)
                templates.rendered[screen] = full
            }
            guard let full = templates.rendered[screen] else { return nil }
            var update = HUScreenUpdate()
            update.screen = screen
            update.sequence = templates.screenSequence[screen, default: 0]
            update.full = full
            envelope.body = .screenUpdate(update)
        }
        return (envelope, HMIImages.refs(in: envelope))
    }
}

extension Result where Success == HUResult, Failure == RuleViolation {
    static var ok: Self { .success(HUResult()) }
}
