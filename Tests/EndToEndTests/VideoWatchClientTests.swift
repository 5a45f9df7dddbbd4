import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import Testing

/// HeadUnitClient's `VideoWatch` (the HMI side of PROTOCOL.md section 25.5)
/// against the real daemon and a raw phone: streams first, frames in order,
/// and a consumer slower than the stream gets only frames it can decode, with
/// a keyframe asked for (VIEWER_ASKED) instead of a growing queue.
@Suite("VideoWatch: the HMI SDK's base-view video", .ownThread)
struct VideoWatchClientTests {
    @Test func aSlowConsumerGetsOnlyDecodableFramesAndTheCarIsAskedForAKeyframe() async throws {
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
        func nextFrame() async -> VideoFrame? {
            guard case .frame(let frame)? = await events.next() else { return nil }
            return frame
        }
        // Read as they come: in order, the access unit without the header, on the main screen.
        try await send(1, key: true)
        let first = await nextFrame()
        #expect(first?.header.frameNumber == 1 && first?.header.isKeyframe == true && first?.screen == .main)
        #expect(first?.accessUnit.readableBytesView.prefix(4).elementsEqual([0, 0, 0, 1]) == true)
        try await send(2, key: false)
        #expect(await nextFrame()?.header.frameNumber == 2)

        // Not read: 3 waits; 4 cannot replace it (a P-frame needs 3 decoded first) and is dropped.
        try await send(3, key: false)
        try await send(4, key: false)
        let deadline = Date().addingTimeInterval(10)
        while await watch.counts().dropped == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(await watch.counts().dropped == 1)
        #expect(await nextFrame()?.header.frameNumber == 3)

        // The car asks the phone on the watch's behalf; P-frames meanwhile stay out.
        let asked = try await onOwnThread { () throws -> Bool in
            var number: UInt32 = 5
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

    /// The bound itself, no socket: one waiting frame per channel, keyframes
    /// replace, P-frames never skip one, channels served in arrival order.
    @Test func latestVideoFramesKeepsOnlyWhatTheConsumerCanDecode() {
        var frames = LatestVideoFrames<Int>()
        #expect(frames.offer(1, channel: 7, isKeyframe: false) == .needKeyframe, "a P-frame before any keyframe")
        #expect(frames.offer(2, channel: 7, isKeyframe: true) == .wake)
        #expect(frames.offer(3, channel: 7, isKeyframe: false) == .needKeyframe, "2 waits: 3 cannot replace it")
        #expect(frames.offer(4, channel: 7, isKeyframe: false) == .needKeyframe, "out of sync until a keyframe")
        #expect(frames.offer(10, channel: 9, isKeyframe: true) == .wake)
        #expect(frames.offer(5, channel: 7, isKeyframe: true) == .replaced, "a keyframe replaces the waiting frame")
        #expect(frames.dropped == 4)
        #expect(frames.take()! == (7, 5) && frames.take()! == (9, 10), "oldest channel first")
        #expect(frames.take() == nil)
        #expect(frames.offer(6, channel: 7, isKeyframe: false) == .wake, "in sync again after the keyframe")
        frames.lostSync(7)
        #expect(frames.offer(7, channel: 7, isKeyframe: false) == .needKeyframe)
        #expect(frames.take(7) == 6, "what waited before the loss is still decodable")
        frames.remove(9)
        #expect(frames.offer(11, channel: 9, isKeyframe: false) == .needKeyframe, "a removed stream starts from a keyframe")
        #expect(frames.offer(12, channel: 9, isKeyframe: true) == .wake && frames.offer(8, channel: 7, isKeyframe: true) == .wake)
        frames.keep(only: [7])
        #expect(frames.take()! == (7, 8) && frames.take() == nil, "only the streams still shown")
    }
}
