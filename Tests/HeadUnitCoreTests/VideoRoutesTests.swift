import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// PROTOCOL.md section 25 as Core rules: which viewers take a frame, when the
/// phone is asked for a keyframe, and what a screen change does.
@Suite("Base-view video routes")
struct VideoRoutesTests {
    static func frame(_ number: UInt32, key: Bool) -> (VideoFrameHeader, ByteBuffer) {
        var buffer = ByteBuffer()
        let header = VideoFrameHeader(timestampMicroseconds: 0, frameNumber: number, isKeyframe: key)
        header.write(into: &buffer)
        buffer.writeBytes([0, 0, 1, key ? 0x65 : 0x41])
        return (header, buffer)
    }

    static func keyframeRequests(_ harness: inout CarHarness) -> [HURequestKeyframe] {
        harness.drain(harness.phone).compactMap { if case .requestKeyframe(let r) = $0.body { return r } else { return nil } }
    }

    static func send(_ harness: inout CarHarness, _ channel: UInt32, _ number: UInt32, key: Bool) {
        let (header, payload) = Self.frame(number, key: key)
        harness.apply(harness.car.receiveVideo(channel: channel, header, payload, from: harness.phone, now: harness.now))
    }

    @Test func aViewerTakesFramesFromTheFirstKeyframeAndADropWaitsForTheNext() {
        var harness = CarHarness()
        let scene = harness.navigationApp()
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.newViewer])
        Self.send(&harness, scene, 1, key: false)
        #expect(harness.video[harness.hmi] == nil, "no P-frame before a keyframe")
        Self.send(&harness, scene, 2, key: true)
        Self.send(&harness, scene, 3, key: false)
        #expect(harness.video[harness.hmi]?.count == 2)
        // The server could not write frame 4: the viewer waits for a keyframe; the phone is asked once per interval.
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now))
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 10))
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.frameDropped])
        Self.send(&harness, scene, 5, key: false)
        #expect(harness.video[harness.hmi]?.count == 2)
        harness.now += 300
        Self.send(&harness, scene, 6, key: false)
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.frameDropped], "asked again once the interval passed")
        Self.send(&harness, scene, 7, key: true)
        #expect(harness.video[harness.hmi]?.count == 3)
    }

    @Test func aHeldBackKeyframeRequestIsSentWhenTheIntervalEndsNotWithTheNextFrame() {
        var harness = CarHarness()
        let scene = harness.navigationApp()
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        _ = Self.keyframeRequests(&harness)
        Self.send(&harness, scene, 1, key: true)
        // A drop asks at once; a second within the interval is held back, and a timer is set for the interval's end.
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now))
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.frameDropped])
        Self.send(&harness, scene, 2, key: true)
        let held = harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 40)
        #expect(held.contains(.startTimer(.videoKeyframe(channel: scene), milliseconds: 210)))
        harness.apply(held)
        #expect(Self.keyframeRequests(&harness).isEmpty)
        // A further drop while one is owed sets no second timer.
        #expect(!harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 100).contains { if case .startTimer = $0 { true } else { false } })
        // The app draws nothing new (a still map): no frame comes, the timer alone sends the request.
        harness.apply(harness.car.timerFired(.videoKeyframe(channel: scene), nowMilliseconds: harness.now + 250))
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.frameDropped])
        // The next request is paced from that one.
        let next = harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 260)
        #expect(next.contains(.startTimer(.videoKeyframe(channel: scene), milliseconds: 240)))
        harness.apply(next)
        // A timer that fires early waits out the rest of the interval.
        #expect(harness.car.timerFired(.videoKeyframe(channel: scene), nowMilliseconds: harness.now + 495)
            == [.startTimer(.videoKeyframe(channel: scene), milliseconds: 5)])
        #expect(Self.keyframeRequests(&harness).isEmpty)
    }

    @Test func aHeldBackKeyframeRequestIsNotSentWhenAKeyframeCameMeanwhile() {
        var harness = CarHarness()
        let scene = harness.navigationApp()
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        _ = Self.keyframeRequests(&harness)
        Self.send(&harness, scene, 1, key: true)
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now))
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 10))
        #expect(harness.timers.contains(.videoKeyframe(channel: scene)))
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.frameDropped])
        // The app's periodic IDR arrives: the viewer has its keyframe, nothing is owed.
        Self.send(&harness, scene, 2, key: true)
        #expect(harness.car.timerFired(.videoKeyframe(channel: scene), nowMilliseconds: harness.now + 250).isEmpty)
        #expect(Self.keyframeRequests(&harness).isEmpty)
        // Nor for a stream that ended (the scene closed while the timer ran).
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 260))
        harness.apply(harness.car.videoDropped(channel: scene, viewer: harness.hmi, now: harness.now + 270))
        _ = Self.keyframeRequests(&harness)
        #expect(harness.request(harness.hmi, .closeApp(HUCloseApp.with { $0.appID = Nav.appID })).code == .ok)
        _ = Self.keyframeRequests(&harness)
        harness.apply(harness.car.timerFired(.videoKeyframe(channel: scene), nowMilliseconds: harness.now + 600))
        #expect(Self.keyframeRequests(&harness).isEmpty)
    }

    @Test func aSceneComingOnAWatchedScreenTellsItsViewersAndAsksForAKeyframe() {
        var harness = CarHarness()
        harness.join(harness.hmi, .hmi)
        harness.join(harness.phone, .phone)
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .instrumentCluster })).code == .ok)
        _ = harness.drain(harness.hmi)
        _ = harness.announce([(Nav.appID, [EntitlementKey.maps])])
        #expect(harness.request(harness.hmi, .launchApp(HULaunchApp.with { $0.appID = Nav.appID; $0.kind = .instrumentCluster })).code == .ok)
        let streams = harness.drain(harness.hmi).compactMap { if case .videoStreams(let s) = $0.body { return s } else { return nil } }
        #expect(streams.last?.streams.map(\.screen) == [.instrumentCluster])
        #expect(streams.last?.streams.first?.params.widthPx == 960)
        #expect(Self.keyframeRequests(&harness).map(\.reason) == [.shown])
        // The app closes: the viewer is told the screen shows nothing.
        #expect(harness.request(harness.hmi, .closeApp(HUCloseApp.with { $0.appID = Nav.appID })).code == .ok)
        let after = harness.drain(harness.hmi).compactMap { if case .videoStreams(let s) = $0.body { return s } else { return nil } }
        #expect(after.last?.streams.isEmpty == true)
    }

    /// Issue 48, Q38: `VideoStreams` is the whole truth, so a new safe area
    /// (the main stream's window) reaches the main screen's viewers.
    @Test func aNewSafeAreaTellsTheMainScreensViewers() {
        var harness = CarHarness()
        _ = harness.navigationApp()
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        _ = harness.drain(harness.hmi)
        var state = HUVehicleState()
        state.safeArea = HUInsets.with { $0.left = 100 }
        #expect(harness.request(harness.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
        let streams = harness.drain(harness.hmi).compactMap { if case .videoStreams(let s) = $0.body { return s } else { return nil } }
        #expect(streams.count == 1)
        #expect(streams.last?.streams.first?.window.safeArea.left == 100)
        // The same safe area again changes nothing: no VideoStreams.
        #expect(harness.request(harness.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
        #expect(!harness.drain(harness.hmi).contains { if case .videoStreams = $0.body { true } else { false } })
    }

    /// Issue 48, Q33: only a scene that ended is "in flight"; VIDEO on a
    /// connected scene of an app that is not a navigation app is refused.
    @Test func videoOnAConnectedNonNavigationSceneIsRefusedAndOnAnEndedSceneDropped() {
        var harness = CarHarness()
        harness.join(harness.hmi, .hmi)
        harness.join(harness.phone, .phone)
        #expect(harness.announce([(Nav.appID, [EntitlementKey.maps]), ("com.example.radio", [EntitlementKey.audio])]).code == .ok)
        let map = harness.launch(Nav.appID)
        let radio = harness.launch("com.example.radio")
        #expect(map != 0 && radio != 0)
        Self.send(&harness, radio, 1, key: true)
        #expect(harness.refusedData[harness.phone] == [.unknownVideoStream])
        // The navigation app's scene ends: a frame of it still in flight is dropped without a word.
        #expect(harness.request(harness.hmi, .closeApp(HUCloseApp.with { $0.appID = Nav.appID })).code == .ok)
        Self.send(&harness, map, 1, key: true)
        #expect(harness.refusedData[harness.phone] == [.unknownVideoStream])
    }

    @Test func aViewerThatLeavesIsForgotten() {
        var harness = CarHarness()
        _ = harness.navigationApp()
        #expect(harness.request(harness.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        #expect(harness.car.video.viewerCount(.main) == 1)
        harness.apply(harness.car.peerLeft(harness.hmi))
        #expect(harness.car.video.viewerCount(.main) == 0)
    }
}
