import Foundation
import HeadUnitClient
import HeadUnitVideo
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 28's done-means test: frames drawn with an encoded counter and a
/// known pattern, encoded by the phone side's H.264 encoder (OpenH264), sent
/// through the real daemon, decoded on the car side. Order, latency, a
/// stalled viewer beside a reading one, the control traffic meanwhile, and a
/// viewer joining mid-stream decoding from the keyframe it asked for.
@Suite("Base-view video encoded, routed and decoded", .ownThread)
struct VideoCodecEndToEndTests {
    static let block = 32
    static let bits = 16

    /// The known pattern: a horizontal luma ramp, and the counter's 16 bits as
    /// black or white blocks along the top-left.
    static func picture(_ base: I420Picture, counter: UInt32) -> I420Picture {
        var picture = base
        for bit in 0..<bits {
            let value: UInt8 = (counter >> UInt32(bit)) & 1 == 1 ? 235 : 16
            for row in 0..<block {
                let start = row * picture.width + bit * block
                for column in 0..<block { picture.y[start + column] = value }
            }
        }
        return picture
    }

    static func base(width: Int, height: Int) -> I420Picture {
        var picture = I420Picture(width: width, height: height)
        for row in 0..<height {
            for column in 0..<width { picture.y[row * width + column] = UInt8(16 + column * 219 / width) }
        }
        return picture
    }

    static func counter(in picture: I420Picture) -> UInt32 {
        var value: UInt32 = 0
        for bit in 0..<bits where picture.y[(block / 2) * picture.width + bit * block + block / 2] > 128 {
            value |= 1 << UInt32(bit)
        }
        return value
    }

    /// The ramp survived the trip (the codec is lossy: within a few steps).
    static func patternHolds(_ picture: I420Picture) -> Bool {
        let row = picture.height / 2
        return stride(from: 0, to: picture.width, by: picture.width / 8).allSatisfy { column in
            abs(Int(picture.y[row * picture.width + column]) - (16 + column * 219 / picture.width)) <= 12
        }
    }

    static func microseconds() -> UInt64 { UInt64(RawSocketClient.now() * 1_000_000) }

    @Test func framesWithACounterAreDecodedInOrderOnTheCarSide() throws {
        var rig = try VideoSocketTests.Rig()
        let params = rig.scene.video
        let width = Int(params.widthPx), height = Int(params.heightPx)
        let encoder = try H264Encoder(width: width, height: height, fps: 30, keyframeInterval: 60)
        let base = Self.base(width: width, height: height)

        let stalled = try rig.daemon.connectUnix()
        try stalled.handshake(role: .hmi)
        #expect(try rig.watch(stalled).0.code == .ok)
        #expect(try rig.watch(rig.hmi).0.code == .ok)
        let decoder = try H264Decoder()
        var late: (client: RawSocketClient, decoder: H264Decoder, first: UInt32?)?

        var latencies: [Double] = []
        var rtts: [Double] = []
        var keyframesAsked = 0
        let frames: UInt32 = 90
        for number in 1...frames {
            // Keyframe requests the phone got since the last frame.
            while let frame = try? rig.phone.readFrame(timeout: 0.001) {
                guard frame.kind == FrameKind.message.rawValue,
                    case .requestKeyframe = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body
                else { continue }
                keyframesAsked += 1
                encoder.requestKeyframe()
            }
            let drawn = RawSocketClient.now()
            let picture = Self.picture(base, counter: number)
            guard let (accessUnit, isKeyframe) = try encoder.encode(picture, timestampMilliseconds: Int64(drawn * 1000)) else {
                Issue.record("the encoder skipped frame \(number)")
                continue
            }
            var payload = ByteBuffer()
            VideoFrameHeader(timestampMicroseconds: Self.microseconds(), frameNumber: number, isKeyframe: isKeyframe).write(into: &payload)
            payload.writeBytes(accessUnit)
            try rig.phone.sendFrame(.video, channel: params.channel, payload: Array(payload.readableBytesView))

            // The reading viewer decodes this very frame: its counter, its pattern.
            let received = try VideoSocketTests.videoFrame(rig.hmi, timeout: 10)
            let decoded = try #require(try decoder.decode(Array(received.payload[VideoFrameHeader.size...])), "frame \(number) decodes")
            latencies.append(RawSocketClient.now() - drawn)
            #expect(Self.counter(in: decoded) == number, "frame \(number) in order")
            if number == 1 || number % 30 == 0 { #expect(Self.patternHolds(decoded), "the pattern of frame \(number)") }

            if number % 10 == 0 {
                let start = RawSocketClient.now()
                #expect(try rig.request(rig.hmi, .getStatus(HUGetStatus())).code == .ok)
                rtts.append(RawSocketClient.now() - start)
            }
            // A viewer joins mid-stream (the last keyframe was frame 1).
            if number == 30 {
                let client = try rig.daemon.connectUnix()
                try client.handshake(role: .hmi)
                #expect(try rig.watch(client).0.code == .ok)
                late = (client, try H264Decoder(), nil)
            }
            if var joined = late, joined.first == nil, let frame = try? VideoSocketTests.videoFrame(joined.client, timeout: 0.2) {
                let picture = try joined.decoder.decode(Array(frame.payload[VideoFrameHeader.size...]))
                joined.first = picture.map(Self.counter(in:))
                late = joined
            }
        }
        // The late viewer's first frame was the keyframe asked for on its
        // behalf: the one after it joined (31) or the next (the request crossed a frame).
        let first = try #require(late?.first)
        #expect(first == 31 || first == 32, "the late viewer started at frame \(first)")
        #expect(keyframesAsked >= 2, "new viewers asked the phone for keyframes")

        latencies.sort()
        rtts.sort()
        let p50 = latencies[latencies.count / 2] * 1000, p99 = latencies[latencies.count * 99 / 100] * 1000
        print("video codec e2e: \(width)x\(height), draw+encode+route+decode latency p50 \(p50) ms p99 \(p99) ms; HMI GetStatus RTT while streaming max \((rtts.last ?? 0) * 1000) ms")
        // The median, not the tail: latency is measured by benchmarks (BENCHMARKS.md); this
        // catches frames queued behind one another (a busy-core CI run's p99 was 2.5 s, its p50 93 ms).
        #expect(p50 < 1000, "decoded within a second even on a loaded machine (p50 \(p50) ms, p99 \(p99) ms)")
        #expect(!stalled.sawEOF)
    }

    /// The SDK's phone: frames encoded and sent with `PhoneSession.sendVideoFrame`,
    /// keyframe requests answered, decoded by a watching HMI.
    @Test func thePhoneSDKSendsEncodedFramesAndAnswersKeyframeRequests() async throws {
        let daemon = try TestDaemon.launch()
        let phone = try await PhoneSession.connect(to: .unix(path: daemon.unixSocketPath), deviceName: "SDK phone")
        defer { Task { await phone.close() } }
        let app = HUAppInfo.with { $0.appID = "maps"; $0.displayName = "Maps"; $0.entitlements = [VideoSocketTests.maps] }
        _ = try await phone.announce([app])
        let (scene, hmi) = try await onOwnThread { () throws -> (Void, RawSocketClient) in
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            #expect(try RequestErrorTests.launch(hmi, "maps").1.code == .ok)
            return ((), hmi)
        }
        _ = scene
        let controller = try await phone.waitForScene(appID: "maps")
        let params = controller.scene.video
        #expect(params.channel == controller.sceneID)
        let encoder = try H264Encoder(width: Int(params.widthPx), height: Int(params.heightPx))
        let base = Self.base(width: Int(params.widthPx), height: Int(params.heightPx))
        try await onOwnThread {
            try hmi.send(.watchVideo(HUWatchVideo.with { $0.screen = .main }), requestID: 7)
            #expect(try hmi.readResult().result.code == .ok)
        }
        // The car asks for a keyframe for its new viewer.
        let asked = await phone.nextEvent(timeout: .seconds(10)) { event in
            if case .other(let envelope) = event, case .requestKeyframe = envelope.body { return true }
            return false
        }
        #expect(asked != nil)
        encoder.requestKeyframe()
        let decoder = try H264Decoder()
        for number in UInt32(1)...10 {
            let (accessUnit, key) = try #require(try encoder.encode(Self.picture(base, counter: number), timestampMilliseconds: Int64(number)))
            var sent = false
            // Latest frame wins on the phone too: a busy channel skips; here it never stays busy for long.
            for _ in 0..<1000 where !sent {
                sent = await phone.sendVideoFrame(
                    channel: params.channel, VideoFrameHeader(timestampMicroseconds: Self.microseconds(), frameNumber: number, isKeyframe: key),
                    accessUnit: ByteBuffer(bytes: accessUnit))
                if !sent { try await Task.sleep(for: .milliseconds(1)) }
            }
            #expect(sent)
            let counter = try await onOwnThread { () throws -> UInt32? in
                let frame = try VideoSocketTests.videoFrame(hmi, timeout: 10)
                return try decoder.decode(Array(frame.payload[VideoFrameHeader.size...])).map(Self.counter(in:))
            }
            #expect(counter == number)
        }
    }
}
