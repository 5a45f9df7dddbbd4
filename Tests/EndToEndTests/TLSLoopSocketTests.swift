import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 47, item 9, over real sockets: every byte a TCP phone sends is
/// decrypted on the serving loop, so a phone pushing a navigation app's
/// video over TLS as fast as its link allows must not delay an HMI's
/// requests by more than one bounded read (64 KiB) at a time (PROTOCOL.md
/// section 10.2, "Reads are bounded work").
@Suite("TLS work on the serving loop", .serialized, .ownThread)
struct TLSLoopSocketTests {
    /// HMI PING round trips, in seconds, sorted.
    static func pings(_ hmi: RawSocketClient, count: Int) throws -> [Double] {
        var times: [Double] = []
        for index in 0..<count {
            let start = RawSocketClient.now()
            #expect(try hmi.pingRoundTrip([UInt8(index & 0xFF), 7]))
            times.append(RawSocketClient.now() - start)
            Thread.sleep(forTimeInterval: 0.002)
        }
        return times.sorted()
    }

    @Test func aPhoneStreamingVideoOverTLSAtFullSpeedDoesNotDelayTheHMI() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        let alice = PhoneIdentity()
        try AdmissionSocketTests.pair(daemon, alice)
        let phone = try daemon.connectTCP()
        let welcome = try phone.handshake(role: .phone)
        try AuthenticationTests.authenticate(phone, welcome: welcome, identity: alice)
        #expect(try phone.readResult().result.code == .ok)
        let app = HUAppInfo.with { $0.appID = "maps"; $0.displayName = "Maps"; $0.entitlements = [VideoSocketTests.maps] }
        #expect(try RequestErrorTests.announce(phone, [app], requestID: 4).1.code == .ok)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try RequestErrorTests.launch(hmi, "maps").1.code == .ok)
        var scene: HUSceneConnected?
        while scene == nil {
            if case .sceneConnected(let connected) = try phone.readEnvelope().body { scene = connected }
        }
        let channel = scene!.video.channel
        // Drain what the HMI was sent so far, then the idle round trips.
        while (try? hmi.readFrame(timeout: 0.2)) != nil {}
        let idle = try Self.pings(hmi, count: 200)

        // The phone's flood: 256 KiB frames back to back over TLS, on a thread of its own.
        let stop = AdmissionSocketTests.Attack()
        let flooder = AdmissionSocketTests.Handed(phone)  // the test thread waits on `done` before using it again
        let frameBytes = VideoSocketTests.frame(1, key: true, size: 256 << 10).count
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var number: UInt32 = 0
            while !stop.isStopped {
                number += 1
                let payload = VideoSocketTests.frame(number, key: number % 30 == 1, size: 256 << 10)
                guard (try? flooder.value.sendFrame(.video, channel: channel, payload: payload)) != nil else { break }
                stop.count("frames")
            }
            done.signal()
        }
        Thread.sleep(forTimeInterval: 0.3)
        // The probe in two halves, the frames the phone got through counted in each.
        let startFrames = stop.count(of: "frames")
        let start = RawSocketClient.now()
        let firstHalf = try Self.pings(hmi, count: 150)
        let middleFrames = stop.count(of: "frames")
        let secondHalf = try Self.pings(hmi, count: 150)
        let endFrames = stop.count(of: "frames")
        let seconds = RawSocketClient.now() - start
        let loaded = (firstHalf + secondHalf).sorted()
        let rate = Double((endFrames - startFrames) * frameBytes) / seconds / 1e6
        stop.stop()
        done.wait()
        let idleP99 = idle[idle.count * 99 / 100], loadedP99 = loaded[loaded.count * 99 / 100]
        print("TLS video flood: \(Int(rate)) MB/s decrypted; HMI PING p50/p99 idle \(idle[idle.count / 2] * 1000)/\(idleP99 * 1000) ms, during \(loaded[loaded.count / 2] * 1000)/\(loadedP99 * 1000) ms, max \(loaded.last! * 1000) ms")
        // The flood was real and lasted the whole probe: video frames went
        // through the loop in each half. Not a rate: how fast a debug daemon
        // decrypts on 2 shared cores depends on their load (1.5 to 2+ MB/s;
        // the red team's 516 MB/s came from a separate host).
        #expect(middleFrames > startFrames && endFrames > middleFrames, "frames \(startFrames), \(middleFrames), \(endFrames)")
        // One bounded read at a time: p99 within 10 ms or 8x the idle p99 of the same run (the red
        // team measured 17 ms before reads were bounded; this 2-core machine runs other tests beside it).
        #expect(loadedP99 < max(0.010, 8 * idleP99), "p99 \(loadedP99 * 1000) ms against idle \(idleP99 * 1000) ms")
        // The phone was never cut off, nor any frame refused: it still answers.
        var refusals: [String] = []
        while let frame = try? phone.readFrame(timeout: 0.2), frame.kind == FrameKind.message.rawValue {
            if let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)), case .result(let result) = envelope.body { refusals.append("\(result.code) \(result.message)") }
            if let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)), case .goodbye(let goodbye) = envelope.body { refusals.append("goodbye \(goodbye.code) \(goodbye.reason)") }
        }
        #expect(refusals.isEmpty, "\(refusals.prefix(3))")
        #expect(try phone.pingRoundTrip())
    }
}
