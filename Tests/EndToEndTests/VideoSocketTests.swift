import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Base-view video (PROTOCOL.md section 25) over real sockets: routing from
/// the phone to every watcher, keyframes on request, latest frame wins, and
/// every error code the section adds.
@Suite("Base-view video over real sockets", .ownThread)
struct VideoSocketTests {
    static let maps = "com.apple.developer.carplay-maps"

    /// A daemon, a phone with a navigation app whose main scene is connected, and an HMI.
    struct Rig {
        let daemon: TestDaemon
        let phone: RawSocketClient
        let hmi: RawSocketClient
        let scene: HUSceneConnected
        var nextID: UInt32 = 100

        init(daemon: TestDaemon? = nil) throws {
            self.daemon = try daemon ?? TestDaemon.launch()
            phone = try self.daemon.connectUnix()
            try phone.handshake(role: .phone)
            let app = HUAppInfo.with { $0.appID = "maps"; $0.displayName = "Maps"; $0.entitlements = [VideoSocketTests.maps] }
            #expect(try RequestErrorTests.announce(phone, [app]).1.code == .ok)
            hmi = try self.daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            #expect(try RequestErrorTests.launch(hmi, "maps").1.code == .ok)
            var connected: HUSceneConnected?
            while connected == nil {
                if case .sceneConnected(let scene) = try phone.readEnvelope().body { connected = scene }
            }
            scene = connected!
        }

        var channel: UInt32 { scene.video.channel }

        mutating func request(_ client: RawSocketClient, _ body: HUEnvelope.OneOf_Body) throws -> HUResult {
            nextID += 1
            try client.send(body, requestID: nextID)
            while true {
                let (id, result) = try client.readResult()
                if id == nextID { return result }
            }
        }

        /// WatchVideo; returns its Result and the VideoStreams that follows an OK.
        mutating func watch(_ client: RawSocketClient, _ screen: HUScreen = .main) throws -> (HUResult, HUVideoStreams?) {
            let result = try request(client, .watchVideo(HUWatchVideo.with { $0.screen = screen }))
            guard result.code == .ok else { return (result, nil) }
            while true {
                if case .videoStreams(let streams) = try client.readEnvelope().body { return (result, streams) }
            }
        }
    }

    /// A VIDEO payload: the 16-byte header, a start code, an IDR or non-IDR
    /// NAL header byte, then `size` bytes of pattern carrying the number.
    static func frame(_ number: UInt32, key: Bool, size: Int = 64, timestamp: UInt64 = 0) -> [UInt8] {
        var buffer = ByteBuffer()
        VideoFrameHeader(timestampMicroseconds: timestamp, frameNumber: number, isKeyframe: key).write(into: &buffer)
        buffer.writeBytes([0, 0, 0, 1, key ? 0x65 : 0x41])
        buffer.writeBytes((0..<size).map { UInt8(truncatingIfNeeded: Int(number) &* 31 &+ $0) })
        return Array(buffer.readableBytesView)
    }

    /// Reads until a RequestKeyframe reaches the phone.
    static func keyframeRequest(_ phone: RawSocketClient, timeout: Double = 30) throws -> HURequestKeyframe {
        let deadline = RawSocketClient.now() + timeout
        while true {
            let envelope = try phone.readEnvelope(timeout: max(0, deadline - RawSocketClient.now()))
            if case .requestKeyframe(let request) = envelope.body { return request }
        }
    }

    /// The next VIDEO frame a viewer gets (envelopes in between are skipped).
    static func videoFrame(_ client: RawSocketClient, timeout: Double = 30) throws -> RawFrame {
        let deadline = RawSocketClient.now() + timeout
        while true {
            guard let frame = try client.readFrame(timeout: max(0, deadline - RawSocketClient.now())) else { throw RawClientError.closed("video") }
            if frame.kind == FrameKind.video.rawValue { return frame }
        }
    }

    // MARK: - Streams and routing (25.2, 25.5)

    @Test func aNavigationSceneComesWithItsVideoStreamParameters() throws {
        let rig = try Rig()
        let video = rig.scene.video
        #expect(video.channel == rig.scene.sceneID)
        #expect(video.codec == .h264 && video.profileIdc == 66 && video.levelIdc == 40)
        #expect(video.widthPx == rig.scene.window.widthPt * rig.scene.window.scale)
        #expect(video.heightPx == rig.scene.window.heightPt * rig.scene.window.scale)
        #expect(video.widthPx == 1600 && video.heightPx == 960)
        #expect(video.maxFrameBytes == 1 << 20)
    }

    @Test func everyWatcherGetsTheFramesUnchangedFromTheFirstKeyframeOn() throws {
        var rig = try Rig()
        let (result, streams) = try rig.watch(rig.hmi)
        #expect(result.code == .ok)
        #expect(streams?.streams.map(\.params.channel) == [rig.channel])
        #expect(streams?.streams.first?.appID == "maps" && streams?.streams.first?.screen == .main)
        #expect(try Self.keyframeRequest(rig.phone).reason == .newViewer)
        let second = try rig.daemon.connectUnix()
        try second.handshake(role: .hmi)
        #expect(try rig.watch(second).0.code == .ok)
        #expect(try Self.keyframeRequest(rig.phone).channel == rig.channel)

        // A P-frame before any keyframe is of no use to a new viewer: not sent.
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(1, key: false))
        let key = Self.frame(2, key: true, size: 40_000)
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: key)
        let next = Self.frame(3, key: false)
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: next)
        for viewer in [rig.hmi, second] {
            let first = try Self.videoFrame(viewer)
            #expect(first.channel == rig.channel && first.payload == key, "the keyframe first, byte for byte")
            #expect(try Self.videoFrame(viewer).payload == next)
        }
        // The phone heard nothing bad meanwhile.
        #expect(try rig.request(rig.phone, .getStatus(HUGetStatus())).code == .notForRole)
    }

    @Test func aViewerJoiningMidStreamIsSentAKeyframeRequestAtOnce() throws {
        var rig = try Rig()
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        _ = try Self.keyframeRequest(rig.phone)
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(1, key: true))
        for number in 2...20 { try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(UInt32(number), key: false)) }
        #expect(try Self.videoFrame(rig.hmi).payload == Self.frame(1, key: true))
        // A new viewer mid-stream: the phone is asked now, not at its next interval.
        let late = try rig.daemon.connectUnix()
        try late.handshake(role: .hmi)
        let asked = RawSocketClient.now()
        #expect(try rig.watch(late).0.code == .ok)
        let request = try Self.keyframeRequest(rig.phone)
        #expect(request.reason == .newViewer && request.channel == rig.channel)
        #expect(RawSocketClient.now() - asked < 5)
        // P-frames go on to the first viewer only; the keyframe reaches both.
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(21, key: false))
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(22, key: true))
        #expect(try Self.videoFrame(late).payload == Self.frame(22, key: true))
    }

    // MARK: - Error codes (25.4, 25.5)

    @Test func badVideoFramesAreRefusedWithBadVideoFrame() throws {
        var rig = try Rig()
        let c = rig.channel
        var tooShort = Self.frame(1, key: true)
        tooShort.removeLast(tooShort.count - 10)
        var reserved = Self.frame(1, key: true)
        reserved[12] = 0x03
        var noStartCode = Self.frame(1, key: true)
        noStartCode[16...19] = [9, 9, 9, 9]
        for payload in [tooShort, reserved, noStartCode] {
            try rig.phone.sendFrame(.video, channel: c, payload: payload)
            let (id, result) = try rig.phone.readResult()
            #expect(id == 0 && result.code == .badVideoFrame, "\(result.message)")
        }
        try rig.phone.sendFrame(.video, channel: c, payload: Self.frame(5, key: true))
        try rig.phone.sendFrame(.video, channel: c, payload: Self.frame(5, key: false))
        let again = try rig.phone.readResult()
        #expect(again.result.code == .badVideoFrame && again.result.message.contains("does not follow 5"))
        #expect(!rig.phone.sawEOF)
        _ = try rig.request(rig.phone, .appClosed(HUAppClosed.with { $0.appID = "nothing" }))
    }

    @Test func framesOnNoStreamAndKeyframeRequestsForUnwatchedStreamsAreUnknownVideoStream() throws {
        var rig = try Rig()
        try rig.phone.sendFrame(.video, channel: 9_999, payload: Self.frame(1, key: true))
        let refused = try rig.phone.readResult()
        #expect(refused.requestID == 0 && refused.result.code == .unknownVideoStream && refused.result.message.contains("9999"))
        // The HMI does not watch the main screen yet.
        let result = try rig.request(rig.hmi, .requestKeyframe(HURequestKeyframe.with { $0.channel = rig.channel; $0.reason = .viewerAsked }))
        #expect(result.code == .unknownVideoStream)
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        let ok = try rig.request(rig.hmi, .requestKeyframe(HURequestKeyframe.with { $0.channel = rig.channel; $0.reason = .viewerAsked }))
        #expect(ok.code == .ok)
    }

    /// Issue 48, Q33: "one of the last 256 scenes" is a scene that ended;
    /// VIDEO on a connected scene of an app that is not a navigation app is refused.
    @Test func videoOnAConnectedSceneOfANonNavigationAppIsUnknownVideoStream() throws {
        let daemon = try TestDaemon.launch()
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let radio = HUAppInfo.with { $0.appID = "radio"; $0.displayName = "Radio"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
        #expect(try RequestErrorTests.announce(phone, [radio]).1.code == .ok)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try RequestErrorTests.launch(hmi, "radio").1.code == .ok)
        var scene: HUSceneConnected?
        while scene == nil {
            if case .sceneConnected(let connected) = try phone.readEnvelope().body { scene = connected }
        }
        try phone.sendFrame(.video, channel: scene!.sceneID, payload: Self.frame(1, key: true))
        let refused = try phone.readResult()
        #expect(refused.requestID == 0 && refused.result.code == .unknownVideoStream)
        #expect(!phone.sawEOF)
    }

    @Test func watchingAScreenTheVehicleLacksIsNoSuchScreen() throws {
        let daemon = try TestDaemon.launch(configJSON: "\"vehicle\": {\"mainDisplay\": {\"widthPt\": 800, \"heightPt\": 480, \"scale\": 2}}")
        var rig = try Rig(daemon: daemon)
        #expect(try rig.watch(rig.hmi, .dashboard).0.code == .noSuchScreen)
        #expect(try rig.watch(rig.hmi, .instrumentCluster).0.code == .noSuchScreen)
        #expect(try rig.watch(rig.hmi, .unspecified).0.code == .invalidArgument)
        #expect(try rig.watch(rig.hmi, .main).0.code == .ok)
    }

    @Test func watchersPastTheCapAreTooManyViewers() throws {
        var rig = try Rig(daemon: try TestDaemon.launch(limits: ["maxVideoViewers": 1]))
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        let second = try rig.daemon.connectUnix()
        try second.handshake(role: .cluster)
        let (refused, _) = try rig.watch(second)
        #expect(refused.code == .tooManyViewers && refused.limit == "max_video_viewers" && refused.limitValue == 1)
        // Another screen has room; and once the first stops, the second may watch.
        #expect(try rig.watch(second, .instrumentCluster).0.code == .ok)
        #expect(try rig.request(rig.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main; $0.stop = true })).code == .ok)
        #expect(try rig.watch(second).0.code == .ok)
    }

    @Test func onlyAPhoneSendsVideoAndOnlyHMIsAndClustersWatch() throws {
        var rig = try Rig()
        try rig.hmi.sendFrame(.video, channel: rig.channel, payload: Self.frame(1, key: true))
        #expect(try rig.hmi.readResult().result.code == .notForRole)
        #expect(try rig.request(rig.phone, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .notForRole)
    }

    // MARK: - Latest frame wins (25.5)

    /// A viewer lost a frame and the request the interval held back is sent
    /// when the interval ends, although the app sends nothing more (a still
    /// map draws no new frame to carry it): the viewer is not left black.
    @Test func aHeldBackKeyframeRequestReachesAnAppThatStoppedSending() throws {
        var rig = try Rig()
        // The rig's HMI watches and never reads: its frames are dropped once its buffer is full.
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        #expect(try Self.keyframeRequest(rig.phone).reason == .newViewer)
        var number: UInt32 = 0
        var firstDrop: Double?
        while firstDrop == nil, number < 2_000 {
            number += 1
            try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(number, key: number == 1, size: 48 << 10))
            while let frame = try? rig.phone.readFrame(timeout: 0.001) {
                guard frame.kind == FrameKind.message.rawValue,
                    case .requestKeyframe(let r) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body
                else { continue }
                #expect(r.reason == .frameDropped && r.channel == rig.channel)
                firstDrop = RawSocketClient.now()
            }
        }
        let asked = try #require(firstDrop, "the stalled viewer's frames were dropped and a keyframe asked for")
        // One more P-frame: the viewer waits for a keyframe, and this request is held back by the interval.
        number += 1
        try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(number, key: false, size: 1_000))
        // Then nothing: the app draws no new frame. The held request comes by itself at the interval's end.
        let owed = try Self.keyframeRequest(rig.phone, timeout: 3)
        let after = RawSocketClient.now() - asked
        print("video e2e: held-back keyframe request reached the silent app \(Int(after * 1000)) ms after the first (interval 250 ms)")
        #expect(owed.reason == .frameDropped && owed.channel == rig.channel)
        #expect(after < 1.5, "within about the interval (250 ms) of the first request, not never: \(after) s")
        // And only one: nothing more is owed.
        #expect(throws: (any Error).self) { try Self.keyframeRequest(rig.phone, timeout: 0.6) }
    }

    /// A viewer that reads nothing does not slow another viewer, the other
    /// viewer's requests, or the phone: its frames are dropped (it waits for
    /// a keyframe, which is asked for), never queued without bound.
    @Test func aStalledViewerDoesNotSlowAnotherViewerOrTheControlTraffic() throws {
        var rig = try Rig()
        let stalled = try rig.daemon.connectUnix()
        try stalled.handshake(role: .hmi)
        #expect(try rig.watch(stalled).0.code == .ok)
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        let frames = 240
        var dropRequests = 0
        var received = 0
        var latencies: [Double] = []
        var worstRTT = 0.0
        for number in 1...frames {
            // 48 KiB a frame: about 11 MiB in all, far beyond what the stalled peer's socket and buffer hold.
            let sent = RawSocketClient.now()
            try rig.phone.sendFrame(.video, channel: rig.channel, payload: Self.frame(UInt32(number), key: number % 60 == 1, size: 48 << 10))
            // The reading viewer gets this very frame next, in order.
            let frame = try Self.videoFrame(rig.hmi, timeout: 10)
            latencies.append(RawSocketClient.now() - sent)
            let got = frame.payload[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(got == UInt32(number), "in order, none dropped")
            received += 1
            if number % 40 == 0 {
                let start = RawSocketClient.now()
                #expect(try rig.request(rig.hmi, .getStatus(HUGetStatus())).code == .ok)
                worstRTT = max(worstRTT, RawSocketClient.now() - start)
            }
            while let frame = try? rig.phone.readFrame(timeout: 0.001) {
                guard frame.kind == FrameKind.message.rawValue else { continue }
                if case .requestKeyframe(let r) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body, r.reason == .frameDropped { dropRequests += 1 }
            }
        }
        latencies.sort()
        let p99 = latencies[latencies.count * 99 / 100]
        print("video e2e: 48 KiB frames, reading viewer latency p50 \(latencies[latencies.count / 2] * 1000) ms p99 \(p99 * 1000) ms; control RTT worst \(worstRTT * 1000) ms; \(dropRequests) keyframe requests for the stalled viewer")
        #expect(received == frames, "the reading viewer got every frame")
        #expect(dropRequests > 0, "the stalled viewer's drops asked the phone for keyframes")
        #expect(worstRTT < 5, "the reading viewer's requests were answered meanwhile (worst \(worstRTT) s)")
        #expect(try rig.request(rig.phone, .appClosed(HUAppClosed.with { $0.appID = "other" })).code == .unknownApp)
        // What the stalled viewer holds when it reads again: a few frames, each
        // decodable (after a gap comes a keyframe or nothing), none of the rest.
        var numbers: [(UInt32, Bool)] = []
        while let frame = try? stalled.readFrame(timeout: 1), !stalled.sawEOF {
            guard frame.kind == FrameKind.video.rawValue else { continue }
            numbers.append((frame.payload[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }, frame.payload[12] & 1 == 1))
        }
        #expect(!numbers.isEmpty && numbers.count < frames / 2, "the stalled viewer got \(numbers.count) frames")
        #expect(numbers.first?.1 == true)
        for (previous, next) in zip(numbers, numbers.dropFirst()) where next.0 != previous.0 + 1 {
            #expect(next.1, "frame \(next.0) after \(previous.0) is a keyframe")
        }
    }
}
