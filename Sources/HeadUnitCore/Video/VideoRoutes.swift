import HeadUnitWire

/// Who watches which screen's base-view video, which viewer waits for a
/// keyframe, and when the app was last asked for one (PROTOCOL.md section 25).
/// The bytes never come here: the Car asks, per frame, which viewers take it,
/// and the server writes the payload to them (or drops it) itself.
///
/// A viewer that misses a frame cannot decode the next ones (each P-frame
/// refers to the one before), so it takes nothing until a keyframe, which
/// the app is asked for at once, at most once per `keyframeInterval` per
/// stream: latest frame wins, nothing stale is ever queued. A request the
/// interval holds back is sent when the interval ends (`keyframeTimer`,
/// then `keyframeTimerFired`), not with the app's next frame: an app that
/// draws nothing new (a still map) would never send one.
public struct VideoRoutes: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        /// Peers watching one screen at once (`max_video_viewers`).
        public var maxViewers: Int
        /// At most one keyframe request per stream in this time (`keyframe_request_interval_ms`).
        public var keyframeIntervalMilliseconds: UInt64

        public static let defaultMaxViewers = 8
        public static let defaultKeyframeInterval: UInt64 = 250
        /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6).
        public static let maxViewersRange = 1...64
        public static let keyframeIntervalRange: ClosedRange<UInt64> = 50...10_000

        public init(maxViewers: Int = defaultMaxViewers, keyframeIntervalMilliseconds: UInt64 = defaultKeyframeInterval) {
            self.maxViewers = maxViewers
            self.keyframeIntervalMilliseconds = keyframeIntervalMilliseconds
        }
    }

    /// What the Car must do for the routes.
    public enum Output: Sendable, Equatable {
        /// Send this peer its `VideoStreams` (the screens it watches changed).
        case streams(PeerID)
        /// Ask the phone for a keyframe on this stream.
        case keyframe(channel: UInt32, HUKeyframeReason)
        /// Call `keyframeTimerFired(channel:)` in this many milliseconds: a
        /// request the interval held back is owed then.
        case keyframeTimer(channel: UInt32, milliseconds: UInt64)
    }

    struct Viewer: Sendable, Equatable {
        var peer: PeerID
        /// Missed a frame, or has seen none yet: takes nothing but a keyframe.
        var needsKeyframe = true
    }

    struct StreamState: Sendable, Equatable {
        var lastFrameNumber: UInt32 = 0
        /// When the phone was last asked for a keyframe; nil: never.
        var keyframeAskedAt: UInt64?
        /// A viewer waits for a keyframe that was not asked for (throttled):
        /// the reason to send when the interval ends; a timer is running.
        var keyframeOwed: HUKeyframeReason?
    }

    public var limits: Limits
    /// Viewers per screen, in the order they started watching.
    var viewers: [HUScreen: [Viewer]] = [:]
    /// The channel (scene id) of the navigation scene each screen shows, as last published.
    private(set) var shown: [HUScreen: UInt32] = [:]
    var streams: [UInt32: StreamState] = [:]

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    static let screens: [HUScreen] = [.main, .dashboard, .instrumentCluster]

    /// The screens `peer` watches, in screen order.
    func watched(by peer: PeerID) -> [HUScreen] {
        Self.screens.filter { screen in viewers[screen]?.contains { $0.peer == peer } ?? false }
    }

    public func viewerCount(_ screen: HUScreen) -> Int { viewers[screen]?.count ?? 0 }

    /// The navigation scene a screen shows now, if any.
    public func channel(shownOn screen: HUScreen) -> UInt32? { shown[screen] }

    // MARK: - Watching

    /// `WatchVideo` once the Car checked the screen exists: start or stop.
    /// TOO_MANY_VIEWERS past `maxViewers`; watching again is fine (a fresh
    /// keyframe, as for a new viewer).
    public mutating func watch(_ screen: HUScreen, stop: Bool, peer: PeerID, outputs: inout [Output]) -> RuleViolation? {
        var list = viewers[screen] ?? []
        if stop {
            list.removeAll { $0.peer == peer }
            viewers[screen] = list.isEmpty ? nil : list
            outputs.append(.streams(peer))
            return nil
        }
        if let index = list.firstIndex(where: { $0.peer == peer }) {
            list[index].needsKeyframe = true
        } else {
            guard list.count < limits.maxViewers else {
                return RuleViolation(
                    .tooManyViewers, "\(list.count) peers watch the \(screen) screen already (max_video_viewers)",
                    limit: "max_video_viewers", limitValue: UInt32(clamping: limits.maxViewers))
            }
            list.append(Viewer(peer: peer))
        }
        viewers[screen] = list
        outputs.append(.streams(peer))
        // Asked at once, not throttled: a viewer shows the map within a frame
        // or two, not a keyframe interval (watching is a rate-limited request).
        if let channel = shown[screen] { askKeyframe(channel, .newViewer, now: nil, outputs: &outputs) }
        return nil
    }

    /// The peer is gone.
    public mutating func forget(_ peer: PeerID) {
        for screen in Self.screens {
            guard var list = viewers[screen] else { continue }
            list.removeAll { $0.peer == peer }
            viewers[screen] = list.isEmpty ? nil : list
        }
    }

    // MARK: - What the screens show

    /// After every input: the navigation scene each screen shows now. A
    /// screen whose stream changed tells its viewers (`VideoStreams`), and
    /// the new stream's app is asked for a keyframe if anyone watches.
    public mutating func show(_ now: [HUScreen: UInt32], outputs: inout [Output]) {
        guard now != shown else { return }
        var told = Set<PeerID>()
        for screen in Self.screens where now[screen] != shown[screen] {
            guard var list = viewers[screen] else { continue }
            for index in list.indices { list[index].needsKeyframe = true }
            viewers[screen] = list
            for viewer in list where told.insert(viewer.peer).inserted { outputs.append(.streams(viewer.peer)) }
            if let channel = now[screen] { askKeyframe(channel, .shown, now: nil, outputs: &outputs) }
        }
        shown = now
    }

    /// The window a screen's scene is drawn in changed (the main screen's
    /// safe area): its viewers are told, as `VideoStreams` is the whole truth.
    public mutating func windowChanged(_ screen: HUScreen, outputs: inout [Output]) {
        guard shown[screen] != nil, let list = viewers[screen] else { return }
        for viewer in list { outputs.append(.streams(viewer.peer)) }
    }

    /// A scene ended: its stream state goes with it.
    public mutating func streamEnded(_ channel: UInt32) {
        streams[channel] = nil
    }

    // MARK: - Frames

    /// A frame on a stream of the phone (the Car checked the channel): the
    /// viewers that take it, or BAD_VIDEO_FRAME when its number does not
    /// grow (a keyframe may start the count again: the app's encoder restarted).
    public mutating func frame(
        channel: UInt32, _ header: VideoFrameHeader, now: UInt64, outputs: inout [Output]
    ) -> Result<[PeerID], RuleViolation> {
        var stream = streams[channel] ?? StreamState()
        guard header.isKeyframe || header.frameNumber > stream.lastFrameNumber else {
            return .failure(RuleViolation(
                .badVideoFrame, "frame_number \(header.frameNumber) on channel \(channel) does not follow \(stream.lastFrameNumber); frame dropped"))
        }
        stream.lastFrameNumber = header.frameNumber
        if header.isKeyframe { stream.keyframeOwed = nil }
        streams[channel] = stream
        var takers: [PeerID] = []
        var waiting = false
        for screen in Self.screens where shown[screen] == channel {
            guard var list = viewers[screen] else { continue }
            for index in list.indices {
                if header.isKeyframe { list[index].needsKeyframe = false }
                if list[index].needsKeyframe {
                    waiting = true
                } else if !takers.contains(list[index].peer) {
                    takers.append(list[index].peer)
                }
            }
            viewers[screen] = list
        }
        // Someone still waits (a request was throttled, or lost): ask again once the interval allows.
        if waiting, !header.isKeyframe { askKeyframe(channel, .frameDropped, now: now, outputs: &outputs) }
        return .success(takers)
    }

    /// The server could not write a frame to `peer` (its buffer is full):
    /// that viewer waits for a keyframe, which is asked for.
    public mutating func dropped(channel: UInt32, peer: PeerID, now: UInt64, outputs: inout [Output]) {
        for screen in Self.screens where shown[screen] == channel {
            guard var list = viewers[screen], let index = list.firstIndex(where: { $0.peer == peer }) else { continue }
            list[index].needsKeyframe = true
            viewers[screen] = list
        }
        askKeyframe(channel, .frameDropped, now: now, outputs: &outputs)
    }

    /// A viewer's decoder lost sync (`RequestKeyframe` from an HMI or
    /// cluster): UNKNOWN_VIDEO_STREAM unless a screen it watches shows `channel`.
    public mutating func viewerAsked(channel: UInt32, peer: PeerID, now: UInt64, outputs: inout [Output]) -> RuleViolation? {
        let screens = Self.screens.filter { shown[$0] == channel && (viewers[$0]?.contains { $0.peer == peer } ?? false) }
        guard !screens.isEmpty else {
            return RuleViolation(.unknownVideoStream, "channel \(channel) is not the video of a screen this peer watches (WatchVideo first)")
        }
        for screen in screens {
            guard var list = viewers[screen], let index = list.firstIndex(where: { $0.peer == peer }) else { continue }
            list[index].needsKeyframe = true
            viewers[screen] = list
        }
        askKeyframe(channel, .viewerAsked, now: now, outputs: &outputs)
        return nil
    }

    /// The phone came back (section 21): frames in flight were lost, every
    /// viewer waits for a keyframe and every watched stream is asked for one.
    public mutating func resumed(outputs: inout [Output]) {
        for screen in Self.screens {
            guard var list = viewers[screen] else { continue }
            for index in list.indices { list[index].needsKeyframe = true }
            viewers[screen] = list
            if let channel = shown[screen] { askKeyframe(channel, .resumed, now: nil, outputs: &outputs) }
        }
    }

    /// The timer of a held-back request ran out (`Output.keyframeTimer`): the
    /// request goes now if a viewer of the stream still waits for a keyframe
    /// and none came meanwhile. Nothing for a stream that ended.
    public mutating func keyframeTimerFired(channel: UInt32, now: UInt64, outputs: inout [Output]) {
        guard var stream = streams[channel], let reason = stream.keyframeOwed else { return }
        if let last = stream.keyframeAskedAt, now < last + limits.keyframeIntervalMilliseconds {
            // Early (the loop's timer and this clock round differently): wait out the rest.
            outputs.append(.keyframeTimer(channel: channel, milliseconds: last + limits.keyframeIntervalMilliseconds - now))
            return
        }
        guard isWaitingForKeyframe(channel) else {
            stream.keyframeOwed = nil
            streams[channel] = stream
            return
        }
        askKeyframe(channel, reason, now: now, outputs: &outputs)
    }

    /// Some viewer of a screen showing `channel` takes nothing until a keyframe.
    func isWaitingForKeyframe(_ channel: UInt32) -> Bool {
        Self.screens.contains { screen in
            shown[screen] == channel && (viewers[screen]?.contains { $0.needsKeyframe } ?? false)
        }
    }

    /// Asks the phone for a keyframe: at once when `now` is nil (a new viewer,
    /// a new stream, a resume: rare, and each from a bounded request), else
    /// at most once per interval per stream (drops and decoder errors can
    /// come with every frame); one held back is owed, and a timer sends it
    /// when the interval ends.
    mutating func askKeyframe(_ channel: UInt32, _ reason: HUKeyframeReason, now: UInt64?, outputs: inout [Output]) {
        var stream = streams[channel] ?? StreamState()
        if let now {
            if let last = stream.keyframeAskedAt, now < last + limits.keyframeIntervalMilliseconds {
                if stream.keyframeOwed == nil {
                    outputs.append(.keyframeTimer(channel: channel, milliseconds: last + limits.keyframeIntervalMilliseconds - now))
                }
                stream.keyframeOwed = stream.keyframeOwed ?? reason
                streams[channel] = stream
                return
            }
            stream.keyframeAskedAt = now
        }
        stream.keyframeOwed = nil
        streams[channel] = stream
        outputs.append(.keyframe(channel: channel, reason))
    }
}
