import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 27, item 4 over real sockets: an HMI or cluster hears the car's mixed
/// output (`WatchAudio`, PROTOCOL.md section 24.7) as 20 ms MEDIA frames
/// stamped with when they play; a watcher that stops reading skips chunks and
/// slows nobody; every error code of the request is provoked.
private let music = "com.example.music"
private let pcmStereo = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }

private func bytes(_ samples: [Int16]) -> [UInt8] {
    samples.flatMap { withUnsafeBytes(of: $0.littleEndian) { Array($0) } }
}

@Suite("The car's output heard by HMIs over real sockets", .serialized)
struct AudioOutputTapSocketTests {
    /// A peer that asks to hear the output and keeps the MEDIA frames it reads.
    final class Watcher {
        let client: RawSocketClient
        var chunks: [(timestamp: UInt64, pcm: [UInt8], received: Double)] = []
        var nextRequest: UInt32 = 10

        init(_ daemon: TestDaemon, role: HURole = .hmi) throws {
            client = try daemon.connectUnix()
            try client.handshake(role: role, name: "watcher")
        }

        func watch(stop: Bool = false) throws -> HUResult {
            nextRequest += 1
            let id = nextRequest
            try client.send(.watchAudio(HUWatchAudio.with { $0.stop = stop }), requestID: id)
            let deadline = RawSocketClient.now() + 30
            while true {
                guard let frame = try client.readFrame(timeout: max(0, deadline - RawSocketClient.now())) else {
                    throw RawClientError.closed("watcher")
                }
                guard try take(frame) else { continue }
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                if envelope.requestID == id, case .result(let result) = envelope.body { return result }
            }
        }

        /// Keeps a MEDIA frame; true for a message frame (for the caller to decode).
        private func take(_ frame: RawFrame) throws -> Bool {
            switch FrameKind(rawValue: frame.kind) {
            case .media:
                #expect(frame.channel == 1 && frame.payload.count == 8 + 3840)
                var timestamp: UInt64 = 0
                for byte in frame.payload[0..<8] { timestamp = timestamp << 8 | UInt64(byte) }
                chunks.append((timestamp, Array(frame.payload[8...]), RawSocketClient.now()))
                return false
            case .message: return true
            default: return false
            }
        }

        /// Reads whatever arrives within `timeout`.
        func drain(timeout: Double) throws {
            let deadline = RawSocketClient.now() + timeout
            repeat {
                do {
                    guard let frame = try client.readFrame(timeout: max(0, deadline - RawSocketClient.now())) else {
                        throw RawClientError.closed("watcher")
                    }
                    _ = try take(frame)
                } catch RawClientError.timedOut {
                    return
                }
            } while RawSocketClient.now() < deadline
        }

        /// The left channel of every chunk, -1...1.
        var left: [Float] {
            var samples: [Float] = []
            for chunk in chunks {
                var at = 0
                while at + 4 <= chunk.pcm.count {
                    samples.append(Float(Int16(bitPattern: UInt16(chunk.pcm[at]) | UInt16(chunk.pcm[at + 1]) << 8)) / 32768)
                    at += 4
                }
            }
            return samples
        }
    }

    /// The phone plays 440 Hz for 2 s; a watcher hears it, stamped in play
    /// order, while a second watcher that never reads costs it and the phone nothing.
    @Test func anHMIHearsThePhonesToneAndAStalledOneSlowsNobody() throws {
        var rig = try AudioStreamSocketTests.Rig(output: "none")
        defer { rig.stop() }
        let listener = try Watcher(rig.daemon)
        let stalled = try Watcher(rig.daemon)
        let answer = try listener.watch()
        #expect(answer.code == .ok, "\(answer.message)")
        #expect(answer.audioStream.streamID == 1 && answer.audioStream.type == .output)
        #expect(answer.audioStream.format.codec == .pcmS16Le && answer.audioStream.format.sampleRate == 48_000 && answer.audioStream.format.channels == 2)
        #expect(try stalled.watch().code == .ok)

        try rig.play(music)
        let main = try rig.phone.open(music, .main, pcmStereo)
        #expect(main.code == .ok, "\(main.message)")
        let stream = main.audioStream.streamID
        var tone = AudioStreamSocketTests.Tone(hertz: 440, amplitude: 0.4)
        let packets = 100
        var sent = 0
        let start = RawSocketClient.now()
        listener.chunks.removeAll()
        // Real-time pacing; the listener reads between packets, the stalled watcher never.
        while sent < packets {
            let due = start + Double(sent) * 0.02
            repeat {
                // Credit and the listener's chunks are read while waiting for the next tick or for credit.
                try rig.phone.pump(timeout: 0.001)
                try listener.drain(timeout: min(0.005, max(0.001, due - RawSocketClient.now())))
            } while RawSocketClient.now() < due
            if rig.phone.credit[stream, default: 0] >= AudioStreamSocketTests.packetFrames {
                let pcm = tone.next(AudioStreamSocketTests.packetFrames, channels: 2)
                try rig.phone.sendMedia(stream, timestamp: UInt64(sent) * 20_000, bytes(pcm), frames: AudioStreamSocketTests.packetFrames)
                sent += 1
            }
            #expect(RawSocketClient.now() - start < 10, "the phone was slowed down")
            if RawSocketClient.now() - start > 10 { break }
        }
        let elapsed = RawSocketClient.now() - start
        try listener.drain(timeout: 0.3)
        #expect(sent == packets)
        // The phone got its credit back in real time although one watcher never reads.
        #expect(elapsed < 2.0 + 1.0, "100 packets of 20 ms took \(elapsed) s")

        // Every chunk, in order, 20 ms apart, nothing skipped for the reader.
        let stamps = listener.chunks.map(\.timestamp)
        #expect(stamps.count >= Int((elapsed + 0.2) / 0.02 * 0.9), "\(stamps.count) chunks in \(elapsed) s")
        let steps = zip(stamps.dropFirst(), stamps).map { Int64($0) - Int64($1) }
        #expect(steps.allSatisfy { $0 >= 19_999 && $0 <= 20_001 }, "steps \(Set(steps))")
        // Stamped on the car's CLOCK_MONOTONIC: each plays around when it arrives (it is sent as it is mixed).
        for chunk in listener.chunks.prefix(20) {
            let playsAt = Double(chunk.timestamp) / 1e6
            #expect(abs(playsAt - chunk.received) < 0.5, "plays at \(playsAt), received at \(chunk.received)")
        }
        // The tone is in it, at the level the app sent (no ducking: nothing else plays).
        let output = AudioStreamSocketTests.Output(started: Double(stamps.first ?? 0) / 1e6, left: listener.left)
        let level = output.medianLevel(440, from: output.started, to: output.started + Double(output.left.count) / 48_000)
        #expect(level > 0.3 && level < 0.5, "440 Hz at \(level)")

        // The stalled watcher was skipped, not queued: once it reads, a jump in its stamps, and it is still served.
        try stalled.drain(timeout: 0.5)
        let stalledStamps = stalled.chunks.map(\.timestamp)
        let gaps = zip(stalledStamps.dropFirst(), stalledStamps).filter { $0 - $1 > 20_001 }
        #expect(!gaps.isEmpty, "a watcher that did not read was sent every chunk (\(stalledStamps.count))")
        #expect(stalledStamps.count * 3840 < 2 * 1024 * 1024)
        #expect(try stalled.watch(stop: true).code == .ok)
        #expect(try rig.phone.request(.closeAudioStream(HUCloseAudioStream.with { $0.streamID = stream })).code == .ok)
    }

    /// Who may ask, the cap, stop, and the output rendered with output "none" and no stream.
    @Test func whoMayWatchTheCapAndSilence() throws {
        let rig = try AudioStreamSocketTests.Rig(output: "none")
        defer { rig.stop() }
        // A phone (and an accessory) may not: NOT_FOR_ROLE, before anything else.
        let refused = try rig.phone.request(.watchAudio(HUWatchAudio()))
        #expect(refused.code == .notForRole, "\(refused.message)")
        let accessory = try rig.daemon.connectUnix()
        try accessory.handshake(role: .accessory, name: "accessory")
        try accessory.send(.watchAudio(HUWatchAudio()), requestID: 5)
        #expect(try accessory.readResult().result.code == .notForRole)
        accessory.close()

        // Eight watchers (a cluster among them), then TOO_MANY_VIEWERS with its limit.
        var watchers = [try Watcher(rig.daemon, role: .cluster)]
        for _ in 0..<7 { watchers.append(try Watcher(rig.daemon)) }
        for watcher in watchers { #expect(try watcher.watch().code == .ok) }
        #expect(try watchers[0].watch().code == .ok, "watching again is no second place")
        let ninth = try Watcher(rig.daemon)
        let full = try ninth.watch()
        #expect(full.code == .tooManyViewers && full.limit == "audio.output_watchers" && full.limitValue == 8, "\(full)")
        // A stop frees a place; a stop of a peer not watching is fine.
        #expect(try watchers[7].watch(stop: true).code == .ok)
        #expect(try watchers[7].watch(stop: true).code == .ok)
        #expect(try ninth.watch().code == .ok)
        // A watcher that leaves frees its place too.
        watchers[6].client.close()
        let tenth = try Watcher(rig.daemon)
        var placed = false
        for _ in 0..<100 where !placed {
            placed = try tenth.watch().code == .ok
            if !placed { usleep(20_000) }  // the daemon learns of the close asynchronously
        }
        #expect(placed)

        // With no stream and output "none" the engine still renders for them: silence, 20 ms a chunk.
        ninth.chunks.removeAll()
        try ninth.drain(timeout: 0.5)
        #expect(ninth.chunks.count >= 15, "\(ninth.chunks.count) chunks in 0.5 s")
        #expect(ninth.chunks.allSatisfy { $0.pcm.allSatisfy { $0 == 0 } })
        for watcher in watchers { watcher.client.close() }
        ninth.client.close()
        tenth.client.close()
    }
}
