import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 47 item 10 over real sockets: a frame over `max_payload_bytes` whose
/// header is sound is refused alone (PROTOCOL.md sections 2, 10 and 25.4): its
/// bytes are skipped as they arrive, the peer gets a Result it can read, and
/// its connection and session go on. Past 4 x the maximum, or with a header
/// unsound otherwise, it is still fatal.
@Suite("Oversized frames refused alone over real sockets", .ownThread)
struct FrameLimitSocketTests {
    static let maximum = 1 << 20
    static let music = "com.example.music"
    static let chat = "com.example.chat"
    static let maps = "com.example.maps"
    static let call = "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"

    /// The frame of `kind` with a payload of `length` bytes (a VIDEO header in front for VIDEO).
    static func frame(_ kind: FrameKind, channel: UInt32 = 0, length: Int) -> [UInt8] {
        var payload = kind == .video ? VideoSocketTests.frame(1, key: true) : []
        payload += [UInt8](repeating: 0x5A, count: length - payload.count)
        return RawSocketClient.frameBytes(kind: kind.rawValue, channel: channel, payload: payload)
    }

    /// A phone with a navigation scene on the main screen, its video watched,
    /// an audio stream open and a call ringing sends one VIDEO frame over the
    /// maximum: it is told `BAD_VIDEO_FRAME` (request id 0, the limit named),
    /// and everything goes on: the next VIDEO frames reach the viewer, MEDIA
    /// is taken, the call and the scene are still there.
    @Test func anOversizedVideoFrameIsRefusedAloneAndThePhonesSessionGoesOn() throws {
        let directory = try TestDaemon.makeScratchDirectory()
        let daemon = try TestDaemon.launch(configJSON: "\"audio\": {\"output\": \"wav:\(directory)/out.wav\", \"microphone\": \"tone:1000\"}")
        defer { _ = try? daemon.terminate() }
        let hmi = RecordingPeer(try daemon.connectUnix())
        try hmi.client.handshake(role: .hmi, name: "hmi")
        let phone = AudioStreamSocketTests.AudioPhone(try daemon.connectUnix())
        try phone.client.handshake(role: .phone, name: "phone")
        let apps = [
            HUAppInfo.with { $0.appID = Self.music; $0.displayName = "Music"; $0.entitlements = ["com.apple.developer.carplay-audio"] },
            HUAppInfo.with { $0.appID = Self.chat; $0.displayName = "Chat"; $0.entitlements = ["com.apple.developer.carplay-communication"] },
            HUAppInfo.with { $0.appID = Self.maps; $0.displayName = "Maps"; $0.entitlements = [VideoSocketTests.maps] },
        ]
        let decisions = try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = apps }))
        #expect(decisions.appDecisions.decisions.allSatisfy { $0.accepted })

        // Music plays on its MAIN stream.
        func launch(_ appID: String) throws -> HUSceneConnected {
            #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = appID })).code == .ok)
            return try phone.waitFor { envelope -> HUSceneConnected? in
                if case .sceneConnected(let connected) = envelope.body, connected.appID == appID { return connected }
                return nil
            }
        }
        let musicScene = try launch(Self.music).sceneID
        let playing = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 1 }
        #expect(try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = Self.music; $0.sceneID = musicScene; $0.updateNowPlaying = playing })).code == .ok)
        let opened = try phone.open(Self.music, .main, HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 })
        #expect(opened.code == .ok, "\(opened.message)")
        let stream = opened.audioStream.streamID
        // The map on the main screen, watched by a viewer.
        let mapScene = try launch(Self.maps)
        let channel = mapScene.video.channel
        let viewer = try daemon.connectUnix()
        try viewer.handshake(role: .hmi, name: "viewer")
        try viewer.send(.watchVideo(HUWatchVideo.with { $0.screen = .main }), requestID: 7)
        #expect(try viewer.readResult().result.code == .ok)
        _ = try phone.waitFor { envelope -> HURequestKeyframe? in
            if case .requestKeyframe(let request) = envelope.body, request.channel == channel { return request }
            return nil
        }
        // A call rings.
        let ringing = try phone.request(.callReport(HUCallReport.with {
            $0.appID = Self.chat
            $0.callUuid = Self.call
            $0.kind = .newIncoming
            $0.description_p = HUCallDescription.with { $0.remoteHandle = HUCallHandle.with { $0.type = .phoneNumber; $0.value = "+15550100" } }
        }))
        #expect(ringing.code == .ok, "\(ringing.message)")

        // One VIDEO frame twice the maximum: refused alone.
        try phone.client.send(Self.frame(.video, channel: channel, length: 2 * Self.maximum))
        let refusal = try phone.waitFor { envelope -> (UInt32, HUResult)? in
            if case .result(let result) = envelope.body, envelope.requestID == 0 { return (envelope.requestID, result) }
            return nil
        }
        #expect(refusal.1.code == .badVideoFrame, "\(refusal.1.message)")
        #expect(refusal.1.limit == "max_frame_bytes" && refusal.1.limitValue == UInt32(Self.maximum))
        #expect(!phone.client.sawEOF)

        // Its next frames work: the keyframe reaches the viewer byte for byte.
        let key = VideoSocketTests.frame(2, key: true, size: 20_000)
        try phone.client.sendFrame(.video, channel: channel, payload: key)
        #expect(try VideoSocketTests.videoFrame(viewer).payload == key)
        let next = VideoSocketTests.frame(3, key: false)
        try phone.client.sendFrame(.video, channel: channel, payload: next)
        #expect(try VideoSocketTests.videoFrame(viewer).payload == next)
        // MEDIA on the audio stream is taken (no refusal before the next answer).
        try phone.sendMedia(stream, timestamp: 0, [UInt8](repeating: 0, count: 960 * 4), frames: 960)
        // The call is still the app's, and the scene still connected.
        let updated = try phone.request(.callReport(HUCallReport.with { $0.appID = Self.chat; $0.callUuid = Self.call; $0.kind = .updated }))
        #expect(updated.code == .ok, "\(updated.message)")
        let pushed = try phone.request(.templateRequest(HUTemplateRequest.with {
            $0.appID = Self.maps; $0.sceneID = mapScene.sceneID; $0.setRoot = NavWire.mapRoot()
        }))
        #expect(pushed.code == .ok, "\(pushed.message)")
        let refusals = phone.log.compactMap { envelope -> HUResult? in
            if envelope.requestID == 0, case .result(let result) = envelope.body { return result }
            return nil
        }
        #expect(refusals.isEmpty, "refused after the oversized frame: \(refusals.map(\.message))")
        let closed = phone.log.compactMap { envelope -> HUAudioStreamClosed? in
            if case .audioStreamClosed(let closed) = envelope.body { return closed }
            return nil
        }
        #expect(closed.isEmpty, "audio closed: \(closed)")
        #expect(try hmi.request(.getStatus(HUGetStatus())).status.apps == 3)
    }

    /// Every kind's answer to a frame over the maximum (section 2, step 3): an
    /// oversized MESSAGE is answered `MESSAGE_TOO_LARGE` on the request id it
    /// starts with, a PING `MALFORMED_PAYLOAD`, MEDIA `BAD_MEDIA_FRAME` (from
    /// an HMI, MEDIA and VIDEO are `NOT_FOR_ROLE`), each alone; an oversized
    /// DATA frame is fatal, and past 4 x the maximum the header alone is
    /// (`Goodbye{FRAME_TOO_LARGE}`, before any payload).
    @Test func everyKindOfOversizedFrameHasItsAnswerAndTheBoundsAreFatal() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        // Envelope field 1 (request_id 4242) first, then filler the daemon never reads.
        var payload: [UInt8] = [0x08, 0x92, 0x21]
        payload += [UInt8](repeating: 0xFF, count: Self.maximum + 100 - payload.count)
        try phone.send(RawSocketClient.frameBytes(kind: FrameKind.message.rawValue, payload: payload))
        let (id, result) = try phone.readResult()
        #expect(id == 4242 && result.code == .messageTooLarge, "\(result.message)")
        #expect(result.limit == "max_payload_bytes" && result.limitValue == UInt32(Self.maximum))
        #expect(try phone.pingRoundTrip())
        for (kind, code) in [(FrameKind.ping, HUErrorCode.malformedPayload), (.media, .badMediaFrame)] {
            try phone.send(Self.frame(kind, channel: kind == .media ? 1 : 0, length: Self.maximum + 1))
            let (refusedID, refused) = try phone.readResult()
            #expect(refusedID == 0 && refused.code == code, "\(kind): \(refused.code) \(refused.message)")
        }
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        for kind in [FrameKind.media, .video] {
            try hmi.send(Self.frame(kind, channel: 1, length: Self.maximum + 1))
            let (refusedID, refused) = try hmi.readResult()
            #expect(refusedID == 0 && refused.code == .notForRole, "\(kind): \(refused.code) \(refused.message)")
        }
        #expect(try hmi.pingRoundTrip() && phone.pingRoundTrip())
        // DATA: a session's bytes cannot be skipped.
        // The header and a few bytes: the daemon decides on the header and closes (the rest would meet a closed socket).
        try phone.send(RawSocketClient.frameBytes(kind: FrameKind.data.rawValue, channel: 1, payload: [1, 2, 3], length: UInt32(Self.maximum + 1)))
        #expect(try phone.readGoodbye().code == .frameTooLarge)
        #expect(phone.waitForClose())

        // Past the bound: the header is enough.
        let other = try daemon.connectUnix()
        try other.handshake(role: .phone)
        try other.send(RawSocketClient.frameBytes(kind: FrameKind.video.rawValue, channel: 1, payload: [], length: UInt32(4 * Self.maximum + 1)))
        #expect(try other.readGoodbye().code == .frameTooLarge)
        #expect(other.waitForClose())
    }
}

/// Issue 48 bugs 1 and 7 over real sockets: the slow-consumer rule (section
/// 10.5) holds for a peer whose only output is frames shared with others
/// (video, 25.5; metadata, 19.5): one that stops reading is cut off with
/// `Goodbye{SLOW_CONSUMER}` within `slow_consumer_timeout_ms` and a margin;
/// one that reads slowly but keeps reading is not (video is dropped for it).
@Suite("Shared output and slow consumers over real sockets", .ownThread)
struct SharedOutputSlowConsumerTests {
    /// Whether a peer named `name` is connected, by the HMI's GetStatus.
    static func listed(_ name: String, by hmi: RawSocketClient, id: UInt32) throws -> Bool {
        try hmi.send(.getStatus(HUGetStatus()), requestID: id)
        while true {
            let (answered, result) = try hmi.readResult()
            if answered == id { return result.status.peer.contains { $0.name == name } }
        }
    }

    /// Reads a peer's frames to its end; the last envelope (its Goodbye, if any).
    static func lastEnvelope(_ client: RawSocketClient) throws -> HUEnvelope? {
        var last: HUEnvelope?
        while let frame = try client.readFrame(timeout: 30) {
            if frame.kind == FrameKind.message.rawValue { last = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)) }
        }
        return last
    }

    /// Bug 1: with `slowConsumerTimeoutMs` 3000, a viewer that never reads is
    /// cut off while the phone streams 30 fps; a viewer that reads slowly, all
    /// along, is not (its frames are dropped instead, 25.5). (3 s, not the
    /// issue's 1 s: the slow reader is a thread of a loaded machine.)
    @Test func aViewerThatStopsReadingIsCutOffAndASlowOneIsNot() throws {
        let timeout = 3_000.0
        let daemon = try TestDaemon.launch(limits: ["slowConsumerTimeoutMs": UInt64(timeout), "heartbeatTimeoutMs": 120_000])
        defer { _ = try? daemon.terminate() }
        var rig = try VideoSocketTests.Rig(daemon: daemon)
        let stalled = try daemon.connectUnix()
        try stalled.handshake(role: .hmi, name: "stalled")
        #expect(try rig.watch(stalled).0.code == .ok)
        let slow = try daemon.connectUnix()
        try slow.handshake(role: .hmi, name: "slow")
        #expect(try rig.watch(slow).0.code == .ok)
        // The slow viewer reads a frame every 100 ms (10 a second of 30), on its own thread.
        let reader = SlowReader(slow)
        Thread.detachNewThread { reader.run() }

        let start = RawSocketClient.now()
        var cutAfter: Double?
        var stalledLast: HUEnvelope?
        var number: UInt32 = 0
        // Stream until the stalled viewer is gone, then 3 timeouts more (the slow one must outlast them).
        while RawSocketClient.now() - start < 60 {
            number += 1
            try rig.phone.sendFrame(.video, channel: rig.channel, payload: VideoSocketTests.frame(number, key: number % 10 == 1, size: 40_000))
            while (try? rig.phone.readFrame(timeout: 0.001)) != nil {}
            if number % 15 == 0 {
                if cutAfter == nil, try !Self.listed("stalled", by: rig.hmi, id: 1_000 + number) {
                    cutAfter = RawSocketClient.now() - start
                    // Read now: its Goodbye waits behind what it did not read, for 5 s (10.5).
                    stalledLast = try Self.lastEnvelope(stalled)
                }
                if let cutAfter, RawSocketClient.now() - start > cutAfter + 3 * timeout / 1000 { break }
            }
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        reader.stop()
        print("video slow consumer: stalled viewer cut after \(cutAfter.map { String($0) } ?? "never") s; slow viewer read \(reader.frames) of \(number) frames")
        let cut = try #require(cutAfter, "the stalled viewer was never cut off")
        // Its buffers filled within a second or two; then the timeout; the rest is the margin of a loaded machine.
        #expect(cut < timeout / 1000 + 15)
        #expect(stalledLast?.goodbye.code == .slowConsumer, "\(String(describing: stalledLast))")
        #expect(try Self.listed("slow", by: rig.hmi, id: 9_999), "the slow viewer was cut off: \(reader.goodbye)")
        #expect(reader.goodbye.isEmpty)
        #expect(reader.frames > 0 && reader.frames < Int(number), "the slow viewer read \(reader.frames) of \(number): frames were dropped for it")
    }

    /// Bug 7: with `slowConsumerTimeoutMs` 2000, a cluster that subscribed to
    /// the metadata stream and stops reading while large updates are published
    /// is cut off with `Goodbye{SLOW_CONSUMER}`.
    @Test func aMetadataSubscriberThatStopsReadingIsCutOff() throws {
        let timeout = 2_000.0
        let daemon = try TestDaemon.launch(limits: [
            "slowConsumerTimeoutMs": UInt64(timeout), "heartbeatTimeoutMs": 120_000, "maxRequestsPerSecond": 1_000_000,
        ])
        defer { _ = try? daemon.terminate() }
        let hmi = RecordingPeer(try daemon.connectUnix())
        try hmi.client.handshake(role: .hmi, name: "hmi")
        let phone = RecordingPeer(try daemon.connectUnix())
        try phone.client.handshake(role: .phone, name: "phone")
        let app = HUAppInfo.with { $0.appID = NavWire.appID; $0.displayName = "Maps"; $0.entitlements = [NavWire.maps] }
        #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] })).appDecisions.decisions.allSatisfy(\.accepted))
        #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = NavWire.appID })).code == .ok)
        let scene = try phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
            return nil
        }
        #expect(try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = NavWire.appID; $0.sceneID = scene; $0.setRoot = NavWire.mapRoot() })).code == .ok)
        let stalled = try daemon.connectUnix()
        try stalled.handshake(role: .cluster, name: "stalled")
        try stalled.send(.subscribeMetadata(HUSubscribeMetadata()), requestID: 3)
        #expect(try stalled.readResult().result.code == .ok)
        #expect(try phone.request(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") }))).code == .ok)

        let start = RawSocketClient.now()
        var cutAfter: Double?
        var index = 0
        var published = 0
        var stalledLast: HUEnvelope?
        while RawSocketClient.now() - start < 60, cutAfter == nil {
            // About 8 KB of metadata each: the stalled socket's buffers fill within a second.
            var maneuver = NavWire.maneuver("m\(index % 2)", "Turn right onto a very long street name number \(index)", junction: true)
            maneuver.dashboardInstructionVariants = (0..<8).map { "\(index) \($0) " + String(repeating: "x", count: 1000) }
            try phone.post(NavWire.maneuvers([maneuver]))
            index += 1
            if index % 10 == 0 {
                phone.drain(for: 0.001)
                hmi.drain(for: 0.001)
                if try !Self.listed("stalled", by: hmi.client, id: UInt32(100_000 + index)) {
                    cutAfter = RawSocketClient.now() - start
                    stalledLast = try Self.lastEnvelope(stalled)
                }
                // Paced (a batch of 10 is one metadata version or a few): the time says how long the cut took.
                Thread.sleep(forTimeInterval: 0.02)
            }
            published = index
        }
        print("metadata slow consumer: cut after \(cutAfter.map { String($0) } ?? "never") s, \(published) updates published")
        let cut = try #require(cutAfter, "the stalled subscriber was never cut off")
        #expect(cut < timeout / 1000 + 15)
        #expect(stalledLast?.goodbye.code == .slowConsumer, "\(String(describing: stalledLast))")
    }
}

/// Reads a viewer's frames slowly on its own thread: one every 100 ms, all along.
final class SlowReader: @unchecked Sendable {
    // @unchecked: `frames`, `goodbye` and `stopped` are guarded by `lock`; the client is used by the reading thread alone.
    private let client: RawSocketClient
    private let lock = NSLock()
    private var count = 0
    private var reason = ""
    private var stopped = false

    init(_ client: RawSocketClient) { self.client = client }

    var frames: Int { lock.withLock { count } }
    var goodbye: String { lock.withLock { reason } }
    func stop() { lock.withLock { stopped = true } }

    func run() {
        while !lock.withLock({ stopped }) {
            guard let frame = try? client.readFrame(timeout: 1) else {
                if client.sawEOF { return }
                continue
            }
            if frame.kind == FrameKind.video.rawValue {
                lock.withLock { count += 1 }
                Thread.sleep(forTimeInterval: 0.1)
            } else if frame.kind == FrameKind.message.rawValue,
                case .goodbye(let goodbye)? = (try? EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)))?.body
            {
                lock.withLock { reason = "\(goodbye.code): \(goodbye.reason)" }
                return
            }
        }
    }
}

/// Issue 48 bug 6 over a real socket: a live now-playing template whose
/// `duration_seconds` is NaN (allowed: TEMPLATES.md, finite "unless `live`")
/// is pushed and shown; the debug daemon used to die on it (an assertion on
/// NaN != NaN) and drop every connection.
@Suite("A live now-playing with a NaN duration over a real socket", .ownThread)
struct LiveNowPlayingSocketTests {
    @Test func pushingALiveNowPlayingWithANaNDurationWorksAndTheHMIGetsItsScreen() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let hmi = RecordingPeer(try daemon.connectUnix())
        try hmi.client.handshake(role: .hmi, name: "hmi")
        let phone = RecordingPeer(try daemon.connectUnix())
        try phone.client.handshake(role: .phone, name: "phone")
        let app = HUAppInfo.with { $0.appID = "radio"; $0.displayName = "Radio"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
        #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] })).code == .ok)
        #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = "radio" })).code == .ok)
        let scene = try phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
            return nil
        }
        let root = HUTemplate.with {
            $0.id = "root"
            $0.list = HUListTemplate.with {
                $0.title = "Stations"
                $0.sections = [HUListSection.with { $0.id = "s"; $0.items = [HUListItem.with { $0.id = "one"; $0.general = HUGeneralItem.with { $0.text = "One" } }] }]
            }
        }
        #expect(try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = "radio"; $0.sceneID = scene; $0.setRoot = root })).code == .ok)
        let live = HUTemplate.with {
            $0.id = "now-playing"
            $0.nowPlaying = HUNowPlayingTemplate.with { $0.title = "Live radio"; $0.live = true; $0.playbackRate = 1; $0.durationSeconds = .nan }
        }
        let pushed = try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = "radio"; $0.sceneID = scene; $0.push = live }))
        #expect(pushed.code == .ok, "\(pushed.message)")
        // The HMI's main screen shows it, live, its duration as the app sent it.
        let shown = try hmi.waitFor { envelope -> HUNowPlayingTemplate? in
            guard case .screenUpdate(let update) = envelope.body, update.screen == .main else { return nil }
            switch update.change {
            case .full(let screen)? where screen.top.id == "now-playing": return screen.top.nowPlaying
            case .diff(let diff)?:
                for change in diff.changes {
                    if case .replaced(let template)? = change.element, template.id == "now-playing" { return template.nowPlaying }
                }
                return nil
            default: return nil
            }
        }
        #expect(shown.live && shown.title == "Live radio" && shown.durationSeconds.isNaN)
        // The daemon lives on, and so does every connection.
        #expect(try hmi.request(.getStatus(HUGetStatus())).status.peers == 2)
        #expect(try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = "radio"; $0.sceneID = scene; $0.pop = HUPopTemplate() })).code == .ok)
    }
}
