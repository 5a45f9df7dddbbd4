import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// HeadUnitClient's `VideoWatch` (the HMI side of PROTOCOL.md section 25.5)
/// against the real daemon and a raw phone: streams first, frames in order;
/// a consumer slower than the stream takes the frames that came meanwhile as
/// one run (no keyframe asked for), and one that stopped gets only frames it
/// can decode, with a keyframe asked for (VIEWER_ASKED) instead of a growing queue.
@Suite("VideoWatch: the HMI SDK's base-view video", .ownThread)
struct VideoWatchClientTests {
    @Test func aSlowConsumerTakesRunsAndAStoppedOneGetsOnlyDecodableFramesAndTheCarIsAskedForAKeyframe() async throws {
        let daemon = try TestDaemon.launch()
        let phone = try await onOwnThread { () throws -> RawSocketClient in
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let app = HUAppInfo.with { $0.appID = "maps"; $0.displayName = "Maps"; $0.entitlements = [VideoSocketTests.maps] }
            #expect(try RequestErrorTests.announce(phone, [app]).1.code == .ok)
            return phone
        }
        let hmi = try await HMISession.connect(to: .unix(path: daemon.unixSocketPath), name: "video watch test")
        defer { Task { await hmi.close() } }
        try await hmi.launch("maps")
        let scene = try await onOwnThread { () throws -> HUSceneConnected in
            while true { if case .sceneConnected(let scene) = try phone.readEnvelope().body { return scene } }
        }
        let channel = scene.video.channel

        let watch = try await hmi.watchVideo([.main])
        var events = watch.makeAsyncIterator()
        guard case .streams(let streams)? = await events.next() else {
            Issue.record("VideoStreams first")
            return
        }
        #expect(streams.streams.map(\.params.channel) == [channel] && streams.streams.first?.screen == .main)
        #expect(try await onOwnThread { try VideoSocketTests.keyframeRequest(phone).reason } == .newViewer)

        func send(_ number: UInt32, key: Bool) async throws {
            try await onOwnThread { try phone.sendFrame(.video, channel: channel, payload: VideoSocketTests.frame(number, key: key)) }
        }
        func nextRun() async -> [UInt32] {
            guard case .frames(let frames)? = await events.next() else { return [] }
            return frames.map(\.header.frameNumber)
        }
        func nextFrame() async -> VideoFrame? {
            guard case .frames(let frames)? = await events.next(), frames.count == 1 else { return nil }
            return frames[0]
        }
        func received(_ count: Int) async throws {
            let deadline = Date().addingTimeInterval(10)
            while await watch.counts().received < count, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        }
        // Read as they come: in order, the access unit without the header, on the main screen.
        try await send(1, key: true)
        let first = await nextFrame()
        #expect(first?.header.frameNumber == 1 && first?.header.isKeyframe == true && first?.screen == .main)
        #expect(first?.accessUnit.readableBytesView.prefix(4).elementsEqual([0, 0, 0, 1]) == true)
        try await send(2, key: false)
        #expect(await nextFrame()?.header.frameNumber == 2)

        // Not read while 3 and 4 come: they wait as one run (4 needs 3 decoded first), taken whole.
        try await send(3, key: false)
        try await send(4, key: false)
        try await received(4)
        #expect(await nextRun() == [3, 4])
        #expect(await watch.counts().dropped == 0, "a slow consumer loses nothing")

        // A consumer that stops: past the run's bound (30 frames) what waits is
        // dropped, and P-frames after it, until a keyframe.
        for number in UInt32(5)...35 { try await send(number, key: false) }
        try await received(35)
        #expect(await watch.counts().dropped == 31)

        // The car asks the phone on the watch's behalf; P-frames meanwhile stay out.
        let asked = try await onOwnThread { () throws -> Bool in
            var number: UInt32 = 36
            let until = RawSocketClient.now() + 10
            while RawSocketClient.now() < until {
                // The daemon paces viewers' requests (25.5): frames keep flowing until it passes it on.
                try phone.sendFrame(.video, channel: channel, payload: VideoSocketTests.frame(number, key: false))
                number += 1
                while let frame = try? phone.readFrame(timeout: 0.05) {
                    if frame.kind == FrameKind.message.rawValue,
                        case .requestKeyframe(let ask) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body {
                        #expect(ask.channel == channel)
                        if ask.reason == .viewerAsked { return true }
                    }
                }
            }
            return false
        }
        #expect(asked, "RequestKeyframe{VIEWER_ASKED} reached the phone")
        try await send(1000, key: true)
        #expect(await nextFrame()?.header.frameNumber == 1000, "the next frame handed out is the keyframe")
        try await send(1001, key: false)
        #expect(await nextFrame()?.header.frameNumber == 1001)
        await watch.stop()
    }

    /// The bound itself, no socket: one run of waiting frames per channel,
    /// keyframes replace it, P-frames never skip one, a run past its bound is
    /// dropped, channels served in arrival order.
    @Test func latestVideoFramesKeepsOnlyWhatTheConsumerCanDecode() {
        var frames = LatestVideoFrames<Int>(maxFramesWaiting: 3, maxBytesWaiting: 1000)
        func offer(_ frame: Int, _ channel: UInt32, key: Bool, bytes: Int = 100) -> LatestVideoFrames<Int>.Offer {
            frames.offer(frame, channel: channel, isKeyframe: key, bytes: bytes)
        }
        func take() -> [Int]? { frames.take().map { [Int($0.channel)] + $0.frames } }
        #expect(offer(1, 7, key: false) == .needKeyframe, "a P-frame before any keyframe")
        #expect(offer(2, 7, key: true) == .wake)
        #expect(offer(3, 7, key: false) == .waiting && offer(4, 7, key: false) == .waiting, "2 waits: 3 and 4 join it")
        #expect(offer(10, 9, key: true) == .wake)
        #expect(offer(5, 7, key: true) == .waiting, "a keyframe replaces the waiting run")
        #expect(frames.dropped == 4)
        #expect(take() == [7, 5] && take() == [9, 10], "oldest channel first")
        #expect(take() == nil)
        #expect(offer(6, 7, key: false) == .wake, "in sync after the keyframe")
        #expect(offer(7, 7, key: false) == .waiting && offer(8, 7, key: false) == .waiting)
        #expect(offer(9, 7, key: false) == .needKeyframe, "a fourth frame passes the bound: the run goes with it")
        #expect(frames.dropped == 8 && take() == nil)
        #expect(offer(10, 7, key: false) == .skipped, "out of sync until a keyframe, asked for once")
        #expect(offer(11, 7, key: true, bytes: 5000) == .wake, "a run's first frame is kept, however large")
        #expect(offer(12, 7, key: false) == .needKeyframe, "past the bytes bound")
        #expect(offer(12, 7, key: false) == .skipped)
        #expect(offer(13, 7, key: true) == .wake && offer(14, 7, key: false) == .waiting)
        let askNow = frames.lostSync(7), askAgain = frames.lostSync(7)
        #expect(askNow && !askAgain, "a decoder error: ask once, not again until the keyframe comes")
        #expect(offer(15, 7, key: false) == .skipped)
        #expect(frames.take(7) == [13, 14], "what waited before the loss is still decodable")
        frames.remove(9)
        #expect(offer(16, 9, key: false) == .needKeyframe, "a removed stream starts from a keyframe")
        #expect(offer(17, 9, key: true) == .wake && offer(18, 7, key: true) == .wake)
        frames.keep(only: [7])
        #expect(take() == [7, 18] && take() == nil, "only the streams still shown")
    }
}
