import HeadUnitWire

/// PROTOCOL.md §25: a navigation app's base-view video: its stream's
/// parameters, watchers taking frames from a keyframe on, keyframe requests
/// reaching the phone, and the refusals of VIDEO frames and watches.
enum VideoChecks {
    static let appID = "com.example.conformance.video"
    /// Viewers per screen (`max_video_viewers`, §25.6): 1 to 64, not in Welcome, so the check finds it.
    static let maxViewersRange = 1...64

    /// A VIDEO payload (§25.3): timestamp, frame number, flags (bit 0 keyframe),
    /// 3 reserved bytes, then a start code, an IDR (0x65) or non-IDR (0x41) NAL
    /// header and `size` bytes that carry the number.
    static func frame(_ number: UInt32, key: Bool, size: Int = 48, flags: UInt8? = nil, reserved: [UInt8] = [0, 0, 0], startCode: Bool = true) -> [UInt8] {
        var bytes = AudioStreamChecks.timestampBytes(UInt64(number) * 33_333)
        bytes += [UInt8(number >> 24 & 0xFF), UInt8(number >> 16 & 0xFF), UInt8(number >> 8 & 0xFF), UInt8(number & 0xFF)]
        bytes += [flags ?? (key ? 1 : 0)] + reserved
        bytes += startCode ? [0, 0, 0, 1, key ? 0x65 : 0x41] : [0x12, 0x34, 0x56, 0x78, 0x9A]
        bytes += (0..<size).map { UInt8(truncatingIfNeeded: Int(number) &* 31 &+ $0) }
        return bytes
    }

    static func watch(_ viewer: WireConnection, _ screen: HUScreen = .main, stop: Bool = false) throws -> HUResult {
        var watch = HUWatchVideo()
        watch.screen = screen
        watch.stop = stop
        return try viewer.request(.watchVideo(watch), "WatchVideo{\(screen), stop \(stop)}")
    }

    static func streams(_ viewer: WireConnection, _ what: String) throws -> HUVideoStreams {
        try viewer.take("VideoStreams after \(what)") { envelope -> HUVideoStreams? in
            if case .videoStreams(let streams) = envelope.body { return streams }
            return nil
        }
    }

    static func keyframeRequest(_ phone: WireConnection, _ reason: HUKeyframeReason, channel: UInt32, _ what: String, timeoutMs: Int) throws -> HURequestKeyframe {
        try phone.take("RequestKeyframe{\(channel), \(reason)} after \(what)", timeoutMs: timeoutMs) { envelope -> HURequestKeyframe? in
            if case .requestKeyframe(let request) = envelope.body, request.channel == channel, request.reason == reason { return request }
            return nil
        }
    }

    static func videoFrame(_ viewer: WireConnection, _ what: String) throws -> WireFrame {
        try viewer.takeStreamFrame(what) { $0.kind == FrameKind.video.rawValue }
    }

    static func viewer(_ ctx: CheckContext, _ label: String) throws -> WireConnection {
        let viewer = try ctx.hmi(label)
        viewer.keepsStreamFrames = true
        return viewer
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "video.stream-params", .p("25.2"),
            "a navigation app's scene comes with its stream (SceneConnected.video): channel the scene_id, H.264 constrained baseline (profile_idc 66) level 4.0 (level_idc 40), the window in pixels (points x scale), max_fps 30, keyframe_interval_ms 2000, max_frame_bytes max_payload_bytes",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: appID)
            let video = app.scene.video
            let window = app.scene.window
            try require(video.channel == app.scene.sceneID, "channel \(app.scene.sceneID) (the scene_id)", got: "\(video.channel)")
            try require(video.codec == .h264 && video.profileIdc == 66 && video.levelIdc == 40, "H.264, profile_idc 66, level_idc 40", got: "\(video.codec) \(video.profileIdc) \(video.levelIdc)")
            try require(video.widthPx == window.widthPt * window.scale && video.heightPx == window.heightPt * window.scale && video.widthPx > 0,
                        "\(window.widthPt * window.scale)x\(window.heightPt * window.scale) pixels (the window at its scale)", got: "\(video.widthPx)x\(video.heightPx)")
            try require(video.maxFps == 30 && video.keyframeIntervalMs == 2000, "max_fps 30, keyframe_interval_ms 2000", got: "\(video.maxFps), \(video.keyframeIntervalMs)")
            try require(video.maxFrameBytes == ctx.limits.maxPayloadBytes, "max_frame_bytes \(ctx.limits.maxPayloadBytes) (max_payload_bytes)", got: "\(video.maxFrameBytes)")
        },
        ConformanceCheck(
            "video.watch-and-keyframes", .p("25.5"),
            "WatchVideo{MAIN} is answered OK, then VideoStreams with the scene's stream; the phone is asked RequestKeyframe{NEW_VIEWER}; the viewer gets nothing before the first keyframe, then every frame unchanged on the scene's channel; the viewer's RequestKeyframe is answered OK and reaches the phone as VIEWER_ASKED, and the viewer again takes nothing until the next keyframe; a RequestKeyframe for a channel it does not watch UNKNOWN_VIDEO_STREAM",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: appID)
            let channel = app.scene.video.channel
            app.hmi.keepsStreamFrames = true
            try requireCode(try watch(app.hmi), .ok, "WatchVideo{MAIN}")
            let shown = try streams(app.hmi, "WatchVideo{MAIN}")
            try require(shown.streams.count == 1 && shown.streams[0].screen == .main && shown.streams[0].appID == app.appID
                        && shown.streams[0].sceneID == app.scene.sceneID && shown.streams[0].params.channel == channel,
                        "VideoStreams{one stream: MAIN, \(app.appID), scene \(app.scene.sceneID), channel \(channel)}", got: "\(shown)")
            // Asked at once (not within keyframe_interval_ms): the kit's time-out is shorter than that interval allows for.
            _ = try keyframeRequest(app.phone, .newViewer, channel: channel, "a new viewer", timeoutMs: ctx.timeoutMs)

            let early = frame(1, key: false)
            let key = frame(2, key: true, size: 4000)
            let next = frame(3, key: false)
            for payload in [early, key, next] { try app.phone.sendFrame(.video, channel: channel, payload: payload) }
            let first = try videoFrame(app.hmi, "the first keyframe")
            try require(first.channel == channel && first.payload == key, "the keyframe (frame 2) first, byte for byte, on channel \(channel)", got: "frame of \(first.payload.count) bytes on channel \(first.channel)")
            let second = try videoFrame(app.hmi, "the P-frame after the keyframe")
            try require(second.payload == next, "frame 3, byte for byte", got: "\(second.payload.count) bytes")

            var ask = HURequestKeyframe()
            ask.channel = channel
            ask.reason = .viewerAsked
            try requireCode(try app.hmi.request(.requestKeyframe(ask), "RequestKeyframe from the viewer"), .ok, "RequestKeyframe from a viewer")
            // Paced: one per keyframe_request_interval_ms (250) at most, so within the time-out.
            _ = try keyframeRequest(app.phone, .viewerAsked, channel: channel, "the viewer's RequestKeyframe", timeoutMs: ctx.timeoutMs + 1000)
            let skipped = frame(4, key: false)
            let again = frame(5, key: true, size: 4000)
            for payload in [skipped, again] { try app.phone.sendFrame(.video, channel: channel, payload: payload) }
            let resumed = try videoFrame(app.hmi, "the keyframe after the viewer asked")
            try require(resumed.payload == again, "the keyframe (frame 5) next: no P-frame while the viewer waits for one", got: "a frame of \(resumed.payload.count) bytes")

            ask.channel = channel &+ 100_000
            try requireCode(try app.hmi.request(.requestKeyframe(ask), "RequestKeyframe for a channel not watched"), .unknownVideoStream, "RequestKeyframe for a channel not watched")
        },
        ConformanceCheck(
            "video.frame-refusals", .p("25.4"),
            "VIDEO refused with request_id 0 in the order of §25.4: under 19 bytes, reserved bits set, frame_number 0 or no start code BAD_VIDEO_FRAME; a channel that is no scene UNKNOWN_VIDEO_STREAM; a P-frame whose number does not grow BAD_VIDEO_FRAME; from an HMI NOT_FOR_ROLE; the stream goes on (a viewer takes the next keyframe)",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: appID)
            let channel = app.scene.video.channel
            app.hmi.keepsStreamFrames = true
            try requireCode(try watch(app.hmi), .ok, "WatchVideo{MAIN}")
            func refused(_ payload: [UInt8], on: UInt32 = channel, _ code: HUErrorCode, _ what: String) throws {
                try app.phone.sendFrame(.video, channel: on, payload: payload)
                try requireCode(try AudioStreamChecks.refusal(app.phone, what), code, what)
            }
            try refused(Array(frame(1, key: true).prefix(18)), .badVideoFrame, "VIDEO of 18 bytes")
            try refused(frame(1, key: true, flags: 0x03), .badVideoFrame, "VIDEO with a flags bit other than keyframe set")
            try refused(frame(1, key: true, reserved: [0, 1, 0]), .badVideoFrame, "VIDEO with reserved bytes set")
            try refused(frame(0, key: true), .badVideoFrame, "VIDEO with frame_number 0")
            try refused(frame(1, key: true, startCode: false), .badVideoFrame, "VIDEO without a start code")
            try refused(frame(1, key: true), on: channel &+ 100_000, .unknownVideoStream, "VIDEO on a channel that is no scene")
            let key = frame(7, key: true)
            try app.phone.sendFrame(.video, channel: channel, payload: key)
            try refused(frame(7, key: false), .badVideoFrame, "a P-frame whose frame_number does not grow")
            try app.hmi.sendFrame(.video, channel: channel, payload: frame(8, key: true))
            try requireCode(try AudioStreamChecks.refusal(app.hmi, "VIDEO from an HMI"), .notForRole, "VIDEO from an HMI")
            let taken = try videoFrame(app.hmi, "the keyframe sent between the refusals")
            try require(taken.payload == key, "the keyframe (frame 7), nothing refused", got: "a frame of \(taken.payload.count) bytes")
            let next = frame(8, key: false)
            try app.phone.sendFrame(.video, channel: channel, payload: next)
            try require(try videoFrame(app.hmi, "the P-frame after the refusals").payload == next, "frame 8: the stream goes on", got: "another frame")
        },
        ConformanceCheck(
            "video.watch-refusals", .p("16.19"),
            "WatchVideo from a phone NOT_FOR_ROLE; screen UNSPECIFIED INVALID_ARGUMENT; past max_video_viewers (1 to 64; 8 by default) on a screen TOO_MANY_VIEWERS limit max_video_viewers with limit_value the cap, a peer watching already not counted again; stop always OK, and a place freed by a stop is taken",
            needsCarRole: true
        ) { ctx in
            let phone = try ctx.phone()
            try requireCode(try watch(phone), .notForRole, "WatchVideo from a phone")
            var viewers: [WireConnection] = []
            var refused: (WireConnection, HUResult)?
            while refused == nil {
                guard viewers.count <= maxViewersRange.upperBound else {
                    throw CheckFailure(expected: "TOO_MANY_VIEWERS by viewer \(viewers.count) (max_video_viewers is at most \(maxViewersRange.upperBound))", got: "every one watching")
                }
                let viewer = try viewer(ctx, "hmi viewer \(viewers.count + 1)")
                if viewers.isEmpty {
                    try requireCode(try watch(viewer, .unspecified), .invalidArgument, "WatchVideo{SCREEN_UNSPECIFIED}")
                }
                let result = try watch(viewer)
                if result.code == .ok {
                    viewers.append(viewer)
                    // A peer watching already is not counted again.
                    if viewers.count == 1 { try requireCode(try watch(viewer), .ok, "WatchVideo{MAIN} again by a viewer watching already") }
                } else {
                    refused = (viewer, result)
                }
            }
            let (extra, over) = refused!
            try requireCode(over, .tooManyViewers, "a viewer past \(viewers.count)")
            try require(over.limit == "max_video_viewers" && Int(over.limitValue) == viewers.count && maxViewersRange.contains(viewers.count),
                        "limit max_video_viewers=\(viewers.count) (1 to 64)", got: describe(over))
            try requireCode(try watch(extra, stop: true), .ok, "WatchVideo{stop} while not watching")
            try requireCode(try watch(viewers[0], stop: true), .ok, "WatchVideo{stop}")
            try requireCode(try watch(extra), .ok, "WatchVideo{MAIN} once a viewer stopped")
        },
        ConformanceCheck(
            "video.no-such-screen", .p("25.5"),
            "WatchVideo for a screen the vehicle lacks (Welcome.vehicle: no dashboard or no instrument cluster) NO_SUCH_SCREEN",
            needsCarRole: true
        ) { ctx in
            guard let vehicle = ctx.reference?.vehicle else { throw CheckSkipped("no Welcome.vehicle to learn the screens from") }
            let missing: HUScreen
            if !vehicle.dashboardPresent {
                missing = .dashboard
            } else if !vehicle.instrumentClusterPresent {
                missing = .instrumentCluster
            } else {
                throw CheckSkipped("the vehicle has every screen (Welcome.vehicle: dashboard and instrument cluster present)")
            }
            let viewer = try viewer(ctx, "hmi viewer")
            try requireCode(try watch(viewer, missing), .noSuchScreen, "WatchVideo{\(missing)} on a vehicle without it")
        },
    ]
}
