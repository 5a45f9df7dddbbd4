import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// One raw connection that keeps every envelope it did not wait for, so a
/// test can check what arrived and in which order.
final class RecordingPeer {
    let client: RawSocketClient
    private(set) var log: [HUEnvelope] = []
    private var nextRequest: UInt32 = 100

    init(_ client: RawSocketClient) { self.client = client }

    /// Sends a request and waits for its Result; everything else is logged.
    @discardableResult
    func request(_ body: HUEnvelope.OneOf_Body, timeout: Double = 30) throws -> HUResult {
        nextRequest += 1
        let id = nextRequest
        try client.send(body, requestID: id)
        let deadline = RawSocketClient.now() + timeout
        while true {
            let envelope = try explained { try client.readEnvelope(timeout: max(0, deadline - RawSocketClient.now())) }
            if envelope.requestID == id, case .result(let result) = envelope.body { return result }
            log.append(envelope)
        }
    }

    /// A close says why: the daemon's Goodbye, if it sent one before closing.
    private func explained<T>(_ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch RawClientError.closed(let what) {
            let goodbye = log.last { if case .goodbye = $0.body { true } else { false } }
            guard case .goodbye(let why)? = goodbye?.body else { throw RawClientError.closed(what + " (no Goodbye)") }
            throw RawClientError.closed(what + " (after Goodbye{\(why.code), \"\(why.reason)\"})")
        }
    }

    /// Sends without waiting (pipelining); answers land in the log.
    func post(_ body: HUEnvelope.OneOf_Body) throws {
        nextRequest += 1
        try client.send(body, requestID: nextRequest)
    }

    /// Waits until an envelope matching `match` has arrived; returns it and forgets everything before it.
    @discardableResult
    func waitFor<T>(timeout: Double = 30, _ match: (HUEnvelope) -> T?) throws -> T {
        let deadline = RawSocketClient.now() + timeout
        var index = 0
        while true {
            while index < log.count {
                if let found = match(log[index]) {
                    log.removeFirst(index + 1)
                    return found
                }
                index += 1
            }
            log.append(try explained { try client.readEnvelope(timeout: max(0, deadline - RawSocketClient.now())) })
        }
    }

    func navigationEvent(timeout: Double = 30) throws -> HUNavigationEvent {
        try waitFor(timeout: timeout) { envelope in
            if case .navigationEvent(let event) = envelope.body { return event }
            return nil
        }
    }

    /// Reads everything that arrives within `seconds`.
    func drain(for seconds: Double) {
        let deadline = RawSocketClient.now() + seconds
        while RawSocketClient.now() < deadline {
            guard let envelope = try? client.readEnvelope(timeout: max(0.01, deadline - RawSocketClient.now())) else { break }
            log.append(envelope)
        }
    }

    func close() { client.close() }
}

/// Applies metadata updates the way a cluster must: a full update replaces
/// everything, a change replaces the sections it carries.
struct MetadataModel {
    var state = HUMetadataState()
    var version: UInt64 = 0
    var updates = 0
    /// (guidance state, pause reason) each time it changed, in order.
    var guidanceSteps: [String] = []

    /// Each update's frame payload in bytes (the encoding is canonical).
    var frameSizes: [Int] = []

    mutating func apply(_ update: HUMetadataUpdate) {
        updates += 1
        frameSizes.append(HUEnvelope.with { $0.metadataUpdate = update }.wireSize)
        version = update.version
        if update.full { state = update.state }
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
        if s.hasBanner { state.banner = s.banner }
        if s.hasGuidance || update.full {
            let step = "\(state.guidance.state)" + (state.guidance.state == .paused ? "(\(state.guidance.pauseReason))" : "")
                + (state.guidance.state == .ended ? "(\(state.guidance.endReason))" : "")
            if guidanceSteps.last != step { guidanceSteps.append(step) }
        }
    }

    /// Applies every metadata update in the peer's log (and removes them).
    mutating func consume(_ peer: RecordingPeer) {
        while let update = try? peer.waitFor(timeout: 0, { envelope -> HUMetadataUpdate? in
            if case .metadataUpdate(let update) = envelope.body { return update }
            return nil
        }) {
            apply(update)
        }
    }
}

enum NavWire {
    static let appID = "com.example.maps"
    static let maps = "com.apple.developer.carplay-maps"

    static func asset(_ name: String, _ width: UInt32, _ height: UInt32) -> HUImage {
        HUImage.with { $0.asset = name; $0.widthPx = width; $0.heightPx = height }
    }

    static func mapRoot() -> HUTemplate {
        HUTemplate.with {
            $0.id = "map"
            $0.map = HUMapTemplate.with {
                $0.mapButtons = [HUMapButton.with { $0.id = "pan"; $0.image = asset("pan", 88, 88) }]
                $0.panningSupported = true
                $0.trailingButtons = [HUBarButton.with { $0.id = "search"; $0.title = "Search" }]
            }
        }
    }

    static func estimates(_ meters: Double, _ seconds: UInt32) -> HUTravelEstimates {
        HUTravelEstimates.with { $0.distanceRemainingM = meters; $0.timeRemainingS = seconds }
    }

    static func trip(_ id: String) -> HUTrip {
        HUTrip.with {
            $0.id = id
            $0.destination = HUPlace.with { $0.name = "Home" }
            $0.routeChoices = ["fast", "scenic"].map { route in
                HURouteChoice.with { $0.id = route; $0.summaryVariants = ["Via the \(route) road", route]; $0.estimates = estimates(12_000, 1_200) }
            }
        }
    }

    static func nav(_ op: HUNavigationRequest.OneOf_Op) -> HUEnvelope.OneOf_Body {
        .navigationRequest(HUNavigationRequest.with { $0.appID = appID; $0.op = op })
    }

    static func input(_ kind: HUNavigationInput.OneOf_Kind) -> HUEnvelope.OneOf_Body {
        .navigationInput(HUNavigationInput.with { $0.appID = appID; $0.kind = kind })
    }

    static func maneuvers(_ list: [HUManeuver]) -> HUEnvelope.OneOf_Body {
        nav(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = list }))
    }

    static func maneuver(_ id: String, _ text: String, junction: Bool = false) -> HUManeuver {
        HUManeuver.with {
            $0.id = id
            $0.instructionVariants = [text]
            $0.symbol = asset("turn", 100, 100)
            $0.darkSymbol = asset("turn-dark", 100, 100)
            if junction { $0.junctionImage = asset("junction", 280, 200) }
            $0.estimates = estimates(800, 90)
        }
    }

    static let lanes = HUManeuver.with {
        $0.id = "lanes"
        $0.displayStyle = .symbolOnly
        $0.symbol = asset("lanes", 240, 36)
    }
}

/// A daemon with an HMI, a phone carrying a navigation app (launched, map
/// root set) and a cluster subscribed to the metadata stream.
struct NavRig {
    let daemon: TestDaemon
    let hmi: RecordingPeer
    let phone: RecordingPeer
    let cluster: RecordingPeer
    var clusterModel = MetadataModel()
    var hmiModel = MetadataModel()

    static func start(extraApps: [HUAppInfo] = [], limits: [String: UInt64] = [:]) throws -> NavRig {
        let daemon = try TestDaemon.launch(limits: limits)
        let hmi = RecordingPeer(try daemon.connectUnix())
        try hmi.client.handshake(role: .hmi, name: "hmi")
        let phone = RecordingPeer(try daemon.connectUnix())
        try phone.client.handshake(role: .phone, name: "phone")
        let cluster = RecordingPeer(try daemon.connectUnix())
        try cluster.client.handshake(role: .cluster, name: "cluster")
        let app = HUAppInfo.with { $0.appID = NavWire.appID; $0.displayName = "Maps"; $0.entitlements = [NavWire.maps] }
        let decisions = try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] + extraApps }))
        #expect(decisions.appDecisions.decisions.allSatisfy { $0.accepted })
        #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = NavWire.appID })).code == .ok)
        let scene = try phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
            return nil
        }
        let root = try phone.request(.templateRequest(HUTemplateRequest.with {
            $0.appID = NavWire.appID; $0.sceneID = scene; $0.setRoot = NavWire.mapRoot()
        }))
        #expect(root.code == .ok, "\(root.message)")
        #expect(try cluster.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        #expect(try hmi.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        return NavRig(daemon: daemon, hmi: hmi, phone: phone, cluster: cluster)
    }

    /// Lets the metadata for the last step arrive, then applies it to both models.
    mutating func settle(_ seconds: Double = 0.15) {
        cluster.drain(for: seconds)
        hmi.drain(for: 0.01)
        clusterModel.consume(cluster)
        hmiModel.consume(hmi)
    }

    func ok(_ body: HUEnvelope.OneOf_Body, on peer: RecordingPeer, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try peer.request(body)
        #expect(result.code == .ok, "\(result.message)", sourceLocation: sourceLocation)
    }

    func stop() {
        for peer in [hmi, phone, cluster] { peer.close() }
        _ = try? daemon.terminate()
    }
}

@Suite("Navigation, dashboard and cluster over real sockets", .serialized)
struct NavigationEndToEndTests {
    @Test func navigationWalkthroughIsSeenByTheHMIAndTheClusterInOrder() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            rig.settle()
            #expect(rig.clusterModel.updates >= 1)
            #expect(rig.clusterModel.state.guidance.state == .idle)
            // Previews: the HMI previews a route and starts it; the app is told which.
            try rig.ok(NavWire.nav(.showTripPreviews(HUTripPreviews.with {
                $0.trips = [NavWire.trip("home"), NavWire.trip("work")]
                $0.texts = HUTripPreviewTexts.with { $0.startButtonTitle = "Drive" }
            })), on: rig.phone)
            rig.settle()
            #expect(rig.hmiModel.state.previews.previews.trips.map(\.id) == ["home", "work"])
            try rig.ok(NavWire.input(.previewTrip(HUTripChosen.with { $0.tripID = "work"; $0.routeChoiceID = "scenic" })), on: rig.hmi)
            #expect(try rig.phone.navigationEvent().tripPreviewed.routeChoiceID == "scenic")
            try rig.ok(NavWire.input(.startTrip(HUTripChosen.with { $0.tripID = "work"; $0.routeChoiceID = "scenic" })), on: rig.hmi)
            let started = try rig.phone.navigationEvent().tripStarted
            #expect(started.tripID == "work" && started.routeChoiceID == "scenic")
            // Start, loading, maneuvers with lane guidance and a junction image.
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("work"); $0.routeChoiceID = "scenic" })), on: rig.phone)
            rig.settle()
            try rig.ok(NavWire.nav(.pause(HUPauseNavigation.with { $0.reason = .loading; $0.description_p = "Loading route" })), on: rig.phone)
            rig.settle()
            try rig.ok(NavWire.maneuvers([NavWire.maneuver("m1", "Turn right onto Main St", junction: true), NavWire.lanes]), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers.maneuvers.map(\.id) == ["m1", "lanes"])
            #expect(rig.clusterModel.state.maneuvers.maneuvers[0].hasJunctionImage)
            try rig.ok(NavWire.nav(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = NavWire.estimates(300, 30) })), on: rig.phone)
            try rig.ok(NavWire.nav(.updateEstimates(HUEstimatesUpdate.with { $0.estimates = NavWire.estimates(11_000, 1_100) })), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers.maneuvers[0].estimates == NavWire.estimates(300, 30))
            #expect(rig.clusterModel.state.tripEstimates.estimates == NavWire.estimates(11_000, 1_100))
            // Reroute.
            try rig.ok(NavWire.nav(.pause(HUPauseNavigation.with { $0.reason = .rerouting; $0.description_p = "Rerouting" })), on: rig.phone)
            rig.settle()
            try rig.ok(NavWire.maneuvers([NavWire.maneuver("m2", "Turn left")]), on: rig.phone)
            rig.settle()
            // Alert, the driver acts on it.
            try rig.ok(NavWire.nav(.showAlert(HUNavigationAlert.with {
                $0.id = "closure"; $0.titleVariants = ["Road closed ahead"]; $0.actions = [HUTextButton.with { $0.id = "avoid"; $0.title = "Avoid" }]
                $0.durationMs = 10_000
            })), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.alert.alert.id == "closure")
            try rig.ok(NavWire.input(.alertAction("avoid")), on: rig.hmi)
            let dismissed = try rig.phone.navigationEvent().alertDismissed
            #expect(dismissed.reason == .userAction && dismissed.actionID == "avoid")
            rig.settle()
            #expect(!rig.clusterModel.state.alert.hasAlert)
            // Arrive and finish.
            try rig.ok(NavWire.nav(.pause(HUPauseNavigation.with { $0.reason = .arrived })), on: rig.phone)
            rig.settle()
            try rig.ok(NavWire.nav(.finish(HUFinishNavigation())), on: rig.phone)
            rig.settle()
            let expected = [
                "idle", "active", "paused(loading)", "active", "paused(rerouting)", "active", "paused(arrived)", "ended(finished)",
            ]
            #expect(rig.clusterModel.guidanceSteps == expected)
            #expect(rig.hmiModel.guidanceSteps == expected)
            #expect(rig.clusterModel.state == rig.hmiModel.state)
        }
    }

    @Test func guidanceCancelledByTheCarsNativeNavigation() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") })), on: rig.phone)
            try rig.ok(NavWire.maneuvers([NavWire.maneuver("m1", "Turn right")]), on: rig.phone)
            try rig.ok(.setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.nativeNavigationActive = true } }), on: rig.hmi)
            let cancelled = try rig.phone.navigationEvent()
            #expect(cancelled.navigationCancelled.reason == .nativeNavigation)
            rig.settle()
            #expect(rig.clusterModel.guidanceSteps.suffix(2) == ["active", "ended(nativeNavigation)"])
            #expect(rig.hmiModel.state.guidance.endReason == .nativeNavigation)
            // Further maneuver updates get a typed error; so does starting again while the car guides.
            #expect(try rig.phone.request(NavWire.maneuvers([NavWire.maneuver("m2", "Turn left")])).code == .navigationCancelledByCar)
            #expect(try rig.phone.request(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") }))).code == .nativeNavigationActive)
        }
    }

    /// A dropped phone may resume (section 21): guidance goes on, the cluster
    /// shows "reconnecting"; when the grace period ends, guidance ends.
    @Test func losingThePhoneMidRouteEndsGuidanceForTheClusterAndTheHMI() async throws {
        try await onOwnThread {
            var rig = try NavRig.start(limits: ["resumeGraceMs": 1_500])
            defer { rig.stop() }
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") })), on: rig.phone)
            try rig.ok(NavWire.maneuvers([NavWire.maneuver("m1", "Turn right")]), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers.maneuvers.count == 1)
            rig.phone.close()  // dropped, no Goodbye
            rig.settle(0.3)
            #expect(rig.clusterModel.state.phone.link == .reconnecting)
            #expect(rig.clusterModel.state.guidance.state == .active)
            #expect(rig.clusterModel.state.maneuvers.maneuvers.count == 1)
            rig.settle(2.0)
            #expect(rig.clusterModel.state.phone.link == .none)
            #expect(rig.clusterModel.state.guidance.state == .ended)
            #expect(rig.clusterModel.state.guidance.endReason == .phoneGone)
            #expect(rig.clusterModel.state.maneuvers.maneuvers.isEmpty)
            #expect(rig.hmiModel.state.guidance.endReason == .phoneGone)
        }
    }

    @Test func navigationNotActiveAndNavigationAlreadyActive() async throws {
        try await onOwnThread {
            let rig = try NavRig.start()
            defer { rig.stop() }
            #expect(try rig.phone.request(NavWire.maneuvers([NavWire.maneuver("m1", "Turn")])).code == .navigationNotActive)
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") })), on: rig.phone)
            #expect(try rig.phone.request(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("work") }))).code == .navigationAlreadyActive)
        }
    }

    @Test func noMapTemplate() async throws {
        try await onOwnThread {
            let rig = try NavRig.start(extraApps: [HUAppInfo.with { $0.appID = "com.example.other-maps"; $0.displayName = "Other"; $0.entitlements = [NavWire.maps] }])
            defer { rig.stop() }
            try rig.ok(.launchApp(HULaunchApp.with { $0.appID = "com.example.other-maps" }), on: rig.hmi)
            let result = try rig.phone.request(.navigationRequest(HUNavigationRequest.with {
                $0.appID = "com.example.other-maps"
                $0.showTripPreviews = HUTripPreviews.with { $0.trips = [NavWire.trip("home")] }
            }))
            #expect(result.code == .noMapTemplate)
        }
    }

    @Test func clusterInputReachesTheAppAndOtherRolesAreRefused() async throws {
        try await onOwnThread {
            let rig = try NavRig.start()
            defer { rig.stop() }
            #expect(try rig.cluster.request(.clusterInput(HUClusterInput.with { $0.zoomIn = true })).code == .notConnected)
            try rig.ok(.launchApp(HULaunchApp.with { $0.appID = NavWire.appID; $0.kind = .instrumentCluster }), on: rig.hmi)
            let window = try rig.phone.waitFor { envelope -> HUDisplay? in
                if case .sceneConnected(let connected) = envelope.body, connected.kind == .instrumentCluster { return connected.window }
                return nil
            }
            #expect(window.widthPt == 480 && window.heightPt == 240)
            try rig.ok(.clusterInput(HUClusterInput.with { $0.speedLimit = .disabled }), on: rig.cluster)
            #expect(try rig.phone.navigationEvent().clusterInput.speedLimit == .disabled)
            // A phone may not subscribe; a cluster may not send navigation requests.
            #expect(try rig.phone.request(.subscribeMetadata(HUSubscribeMetadata())).code == .notForRole)
            #expect(try rig.cluster.request(NavWire.maneuvers([])).code == .notForRole)
        }
    }

    @Test func audioFocusIsVisibleToTheClusterAndPromptStyleReachesTheApp() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            try rig.ok(.setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.carAudioSource = "FM 101.1" } }), on: rig.hmi)
            try rig.ok(NavWire.nav(.startPrompt(HUAudioPrompt.with { $0.durationMs = 1500 })), on: rig.phone)
            rig.settle()
            var audio = rig.clusterModel.state.audio
            #expect(audio.mainOwner == .car && audio.carSource == "FM 101.1" && audio.mainDucked && audio.promptAppID == NavWire.appID, "\(audio)")
            // The car ends the prompt after its duration.
            let deadline = RawSocketClient.now() + 5
            while rig.clusterModel.state.audio.mainDucked && RawSocketClient.now() < deadline { rig.settle(0.1) }
            audio = rig.clusterModel.state.audio
            #expect(!audio.mainDucked && audio.promptAppID.isEmpty)
            #expect(rig.hmiModel.state.audio == audio)
            // A call: prompts become a short tone, and the app is told.
            try rig.ok(.setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.callActive = true } }), on: rig.hmi)
            #expect(try rig.phone.navigationEvent().promptStyle == .short)
            // A voice session needs the voice-control template presented.
            #expect(try rig.phone.request(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = true }))).code == .invalidPosition)
            #expect(try rig.phone.request(NavWire.nav(.startPrompt(HUAudioPrompt.with { $0.durationMs = 60_000 }))).code == .invalidArgument)
        }
    }

    /// PROTOCOL.md 16.13, 19.8: a voice session needs the app's voice-control
    /// template **shown**; presented on a hidden scene (the driver went home)
    /// it is `INVALID_POSITION`, and no prompt is silenced.
    @Test func aHiddenNavigationAppCannotStartAVoiceSession() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            let status = try rig.hmi.request(.getStatus(HUGetStatus())).status
            let main = try #require(status.app.first { $0.appID == NavWire.appID }?.scene.first { $0.kind == .main }).sceneID
            let voice = HUTemplate.with {
                $0.id = "voice"
                $0.voiceControl = HUVoiceControlTemplate.with {
                    $0.states = [HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening"] }]
                    $0.activeStateID = "listening"
                }
            }
            try rig.ok(
                .templateRequest(HUTemplateRequest.with { $0.appID = NavWire.appID; $0.sceneID = main; $0.op = .present(voice) }), on: rig.phone)
            try rig.ok(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }), on: rig.hmi)
            let refused = try rig.phone.request(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = true })))
            #expect(refused.code == .invalidPosition && refused.message.contains("shown"), "\(refused)")
            // Prompts still play: the style stays NORMAL and a prompt is taken.
            try rig.ok(NavWire.nav(.startPrompt(HUAudioPrompt.with { $0.durationMs = 1500 })), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.audio.voiceAppID.isEmpty && rig.clusterModel.state.audio.promptAppID == NavWire.appID)
            // The driver opens the app again: its template is shown, the session starts.
            try rig.ok(.launchApp(HULaunchApp.with { $0.appID = NavWire.appID }), on: rig.hmi)
            try rig.ok(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = true })), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.audio.voiceAppID == NavWire.appID && rig.clusterModel.state.audio.promptStyle == .none)
        }
    }

    /// PROTOCOL.md 19.5 (issue 26, N6 and N7): "A frame is **taken** when the kernel accepted it ... a subscriber
    /// that stops reading may still find in its socket buffers the frames written before they filled, then at most
    /// one catch-up frame with the newest values"; "A subscriber is cut off only by the ordinary rules, which apply
    /// to it as to any peer" (this test ends well within the heartbeat timeout, so it stays).
    @Test func aStalledSubscriberNeitherSlowsOthersNorGrowsAQueue() async throws {
        try await onOwnThread {
            // The phone posts 3,000 updates as fast as it can: over the default request rate.
            // The stalled subscriber is within the slow-consumer timeout throughout (it applies to it, 10.5).
            var rig = try NavRig.start(limits: ["maxRequestsPerSecond": 1_000_000, "slowConsumerTimeoutMs": 60_000])
            defer { rig.stop() }
            // A second cluster subscribes and then stops reading.
            let stalled = RecordingPeer(try rig.daemon.connectUnix())
            try stalled.client.handshake(role: .cluster, name: "stalled")
            #expect(try stalled.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") })), on: rig.phone)
            // Big maneuvers (inline-sized junction images) so the stalled socket's buffer fills quickly.
            let updates = 3_000
            for index in 0..<updates {
                var maneuver = NavWire.maneuver("m\(index % 2)", "Turn right onto a very long street name number \(index)", junction: true)
                maneuver.dashboardInstructionVariants = [String(repeating: "x", count: 400)]
                try rig.phone.post(NavWire.maneuvers([maneuver]))
                if index % 200 == 199 { rig.phone.drain(for: 0.001) }
            }
            // The reading cluster sees the last one.
            let deadline = RawSocketClient.now() + 10
            while rig.clusterModel.state.maneuvers.maneuvers.first?.instructionVariants.first?.hasSuffix("number \(updates - 1)") != true {
                #expect(RawSocketClient.now() < deadline, "the reading cluster never saw the latest maneuver")
                if RawSocketClient.now() >= deadline { return }
                rig.settle(0.05)
            }
            // The stalled one was not cut off, and when it reads it ends at the latest state
            // having received far fewer frames than there were updates.
            var model = MetadataModel()
            stalled.drain(for: 1.0)
            model.consume(stalled)
            #expect(model.state.maneuvers.maneuvers.first?.instructionVariants.first?.hasSuffix("number \(updates - 1)") == true)
            #expect(model.updates < updates / 2, "\(model.updates) frames for \(updates) updates")
            #expect(try stalled.request(.getStatus(HUGetStatus())).code == .ok)
        }
    }
}
