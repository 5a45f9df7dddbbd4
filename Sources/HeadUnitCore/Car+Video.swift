import HeadUnitWire
import NIOCore

// Base-view video (PROTOCOL.md section 25): the Car knows which scene each
// screen shows and who watches; `VideoRoutes` keeps the watchers and the
// keyframe bookkeeping; the frames' bytes pass through as effects, never kept.
extension Car {
    /// The codec parameters of a navigation scene's stream (section 25.2).
    func videoParams(sceneID: UInt32, kind: HUSceneKind) -> HUVideoStreamParams {
        let window = SceneWindows.window(for: kind, vehicle: configuration.vehicle, safeArea: vehicleState.safeArea)
        var params = HUVideoStreamParams()
        params.channel = sceneID
        params.codec = .h264
        params.profileIdc = 66
        params.levelIdc = 40
        params.widthPx = window.widthPt * max(window.scale, 1)
        params.heightPx = window.heightPt * max(window.scale, 1)
        params.maxFps = Self.videoMaxFPS
        params.keyframeIntervalMs = Self.videoKeyframeIntervalMilliseconds
        params.maxFrameBytes = UInt32(clamping: configuration.composed.maxFrameBytes)
        return params
    }

    static let videoMaxFPS: UInt32 = 30
    static let videoKeyframeIntervalMilliseconds: UInt32 = 2000

    /// A video message (WatchVideo, RequestKeyframe); true when `body` was one.
    mutating func receiveVideoMessage(_ body: HUEnvelope.OneOf_Body, requestID: UInt32, from peer: PeerID, now: UInt64) -> Bool {
        var outputs: [VideoRoutes.Output] = []
        switch body {
        case .watchVideo(let watch):
            let screen = watch.screen
            let present: Bool
            switch screen {
            case .main: present = true
            case .dashboard: present = configuration.vehicle.dashboardPresent
            case .instrumentCluster: present = configuration.vehicle.instrumentClusterPresent
            case .unspecified, .UNRECOGNIZED:
                answer(peer, requestID, .failure(RuleViolation(.invalidArgument, "WatchVideo needs a screen (main, dashboard or instrument cluster)")))
                return true
            }
            guard present else {
                answer(peer, requestID, .failure(RuleViolation(.noSuchScreen, "this vehicle has no \(screen == .dashboard ? "dashboard" : "instrument cluster") screen")))
                return true
            }
            if let violation = video.watch(screen, stop: watch.stop, peer: peer, outputs: &outputs) {
                answer(peer, requestID, .failure(violation))
                return true
            }
            // The Result, then the streams, then the keyframe request (section 25.5).
            answer(peer, requestID, .ok)
            perform(outputs)
        case .requestKeyframe(let request):
            if let violation = video.viewerAsked(channel: request.channel, peer: peer, now: now, outputs: &outputs) {
                answer(peer, requestID, .failure(violation))
            } else {
                answer(peer, requestID, .ok)
                perform(outputs)
            }
        default:
            return false
        }
        return true
    }

    /// A phone's VIDEO frame (header already checked): `sendVideo` to each
    /// viewer that takes it, or refused (section 25.4).
    public mutating func receiveVideo(channel: UInt32, _ header: VideoFrameHeader, _ payload: ByteBuffer, from peer: PeerID, now: UInt64) -> [CarEffect] {
        guard let phonePeer, peer == phonePeer, isVideoStream(channel) else {
            // A frame in flight when its scene ended (one of the last 256 scenes) is dropped without a word;
            // a scene still connected (not a navigation app's) is refused: the app sends video it may not.
            let recent = channel != 0 && channel < templates.nextSceneID && templates.nextSceneID - channel <= Self.recentScenes
            if peer == phonePeer, recent, !isConnectedScene(channel) { return [] }
            effects.append(.refuseData(peer, .unknownVideoStream, "channel \(channel) is not a connected navigation scene of this phone; VIDEO frame dropped"))
            return takeEffects()
        }
        var outputs: [VideoRoutes.Output] = []
        switch video.frame(channel: channel, header, now: now, outputs: &outputs) {
        case .failure(let violation):
            effects.append(.refuseData(peer, violation.code, violation.message))
        case .success(let viewers):
            for viewer in viewers { effects.append(.sendVideo(viewer, channel: channel, payload)) }
        }
        perform(outputs)
        return takeEffects()
    }

    static let recentScenes: UInt32 = 256

    /// The server could not write a frame to a viewer (it is behind): the viewer waits for a keyframe.
    public mutating func videoDropped(channel: UInt32, viewer: PeerID, now: UInt64) -> [CarEffect] {
        var outputs: [VideoRoutes.Output] = []
        video.dropped(channel: channel, peer: viewer, now: now, outputs: &outputs)
        perform(outputs)
        return takeEffects()
    }

    /// A keyframe request the interval held back is due (`CarTimer.videoKeyframe`).
    mutating func videoKeyframeTimerFired(channel: UInt32, now: UInt64) {
        var outputs: [VideoRoutes.Output] = []
        video.keyframeTimerFired(channel: channel, now: now, outputs: &outputs)
        perform(outputs)
    }

    /// Whether `channel` is a connected scene of a navigation app (the phone's).
    func isVideoStream(_ channel: UInt32) -> Bool {
        // Usually a shown one: three lookups.
        for screen in VideoRoutes.screens where video.channel(shownOn: screen) == channel { return true }
        for app in templates.apps.values where app.category == .navigation {
            if app.scenes.values.contains(where: { $0.id == channel }) { return true }
        }
        return false
    }

    /// Whether `channel` is a connected scene of any app (only on a refusal's path).
    func isConnectedScene(_ channel: UInt32) -> Bool {
        templates.apps.values.contains { app in app.scenes.values.contains { $0.id == channel } }
    }

    /// The navigation scene each screen shows now.
    func shownVideo() -> [HUScreen: UInt32] {
        var shown: [HUScreen: UInt32] = [:]
        for (screen, ref) in templates.screenOwners {
            guard let app = templates.apps[ref.appID], app.category == .navigation, let scene = app.scenes[ref.kind] else { continue }
            shown[screen] = scene.id
        }
        return shown
    }

    /// After every input: viewers of a screen whose stream changed are told.
    mutating func publishVideo() {
        var outputs: [VideoRoutes.Output] = []
        video.show(shownVideo(), outputs: &outputs)
        perform(outputs)
    }

    /// What a watcher is sent: the streams of the screens it watches.
    func videoStreams(for peer: PeerID) -> HUVideoStreams {
        var message = HUVideoStreams()
        for screen in video.watched(by: peer) {
            guard let channel = video.channel(shownOn: screen), let ref = templates.screenOwners[screen], let app = templates.apps[ref.appID],
                let scene = app.scenes[ref.kind], scene.id == channel
            else { continue }
            var stream = HUVideoStream()
            stream.screen = screen
            stream.appID = ref.appID
            stream.sceneID = scene.id
            stream.kind = ref.kind
            stream.window = SceneWindows.window(for: ref.kind, vehicle: configuration.vehicle, safeArea: vehicleState.safeArea)
            stream.params = videoParams(sceneID: scene.id, kind: ref.kind)
            message.streams.append(stream)
        }
        return message
    }

    mutating func perform(_ outputs: [VideoRoutes.Output]) {
        for output in outputs {
            switch output {
            case .streams(let peer):
                guard peers[peer] != nil else { continue }
                emit(peer, body: .videoStreams(videoStreams(for: peer)))
            case .keyframe(let channel, let reason):
                // Not kept for a phone away: resuming asks afresh (section 25.5).
                guard let phonePeer else { continue }
                var request = HURequestKeyframe()
                request.channel = channel
                request.reason = reason
                emit(phonePeer, body: .requestKeyframe(request))
            case .keyframeTimer(let channel, let milliseconds):
                effects.append(.startTimer(.videoKeyframe(channel: channel), milliseconds: milliseconds))
            }
        }
    }
}
