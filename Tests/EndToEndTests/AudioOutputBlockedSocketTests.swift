import Foundation
import HeadUnitWire
import TestSupport
import Testing

/// Issue 47 item 8 over real sockets: the car's output is a `raw:` FIFO that
/// nobody reads (the open blocks), or that a reader opened and never reads
/// (the writes block once the pipe is full). The mixer keeps its clock and
/// drops what the output cannot take: the phone's stream keeps getting its
/// credit back, the HMI is answered, the blocked output is logged, and
/// SIGTERM ends the daemon within the shutdown grace and the output's 1 s
/// (PROTOCOL.md section 24.5).
@Suite("A blocked audio output never blocks the mixer or the stop", .serialized)
struct AudioOutputBlockedSocketTests {
    private static let music = "com.example.music"
    private static let pcmStereo = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }

    @Test(arguments: [false, true])
    func aFIFONobodyReadsCostsTheAudioButNotTheDaemon(openedByAReader: Bool) async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            let fifo = directory + "/out.fifo"
            #expect(mkfifo(fifo, 0o600) == 0, "mkfifo: \(String(cString: strerror(errno)))")
            // Opened for reading and never read: the daemon's open succeeds and its writes block when the pipe is full.
            var reader = openedByAReader ? open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1
            defer { if reader >= 0 { close(reader) } }
            var rig = try AudioStreamSocketTests.Rig(output: "raw:" + fifo, microphone: "silence")
            defer { rig.hmi.close(); rig.phone.client.close() }
            try rig.play(Self.music)
            let opened = try rig.phone.open(Self.music, .main, Self.pcmStereo)
            #expect(opened.code == .ok, "\(opened.message)")
            let stream = opened.audioStream.streamID

            // Three seconds of music, sent as credit allows: the mixer plays it
            // by its clock (into nothing) and the credit comes back throughout.
            let packets = 150
            var sent = 0
            let samples = [UInt8](repeating: 0, count: 4 * AudioStreamSocketTests.packetFrames)
            let deadline = RawSocketClient.now() + 30
            while sent < packets, RawSocketClient.now() < deadline {
                if rig.phone.credit[stream, default: 0] >= AudioStreamSocketTests.packetFrames {
                    try rig.phone.sendMedia(stream, timestamp: UInt64(sent) * 20_000, samples, frames: AudioStreamSocketTests.packetFrames)
                    sent += 1
                } else {
                    try rig.phone.pump(timeout: 0.1)
                }
            }
            #expect(sent == packets, "the stream stalled after \(sent) packets: the mixer waited for the output")
            #expect(!rig.phone.log.contains { if case .audioStreamClosed = $0.body { return true } else { return false } })

            // The HMI and the phone are served meanwhile.
            #expect(try rig.hmi.request(.getStatus(HUGetStatus())).code == .ok)
            #expect(try rig.phone.client.pingRoundTrip())

            // The blocked output is told (the daemon's log), once and not per chunk.
            let logged = RawSocketClient.now() + 30
            while !rig.daemon.log.contains("audio output blocked"), RawSocketClient.now() < logged { usleep(50_000) }
            let log = rig.daemon.log
            #expect(log.contains("audio output blocked"), "\(log.suffix(3000))")
            #expect(log.components(separatedBy: "audio output cannot keep up").count - 1 <= 8, "drops are logged at most once a second")
            // ... and the HMIs see it in GetStatus.
            func outputStatus() throws -> HUAudioOutputStatus { try rig.hmi.request(.getStatus(HUGetStatus())).status.audioOutput }
            var shown = try outputStatus()
            while !(shown.blocked && shown.droppedFrames > 0), RawSocketClient.now() < logged { usleep(50_000); shown = try outputStatus() }
            #expect(shown.blocked && shown.droppedFrames > 0 && shown.failure.isEmpty, "\(shown)")

            if openedByAReader {
                // The reader goes away: the blocked write fails (EPIPE, never SIGPIPE), the daemon serves on.
                close(reader)
                reader = -1
                let failed = RawSocketClient.now() + 30
                while !rig.daemon.log.contains("audio output no longer blocked"), RawSocketClient.now() < failed { usleep(50_000) }
                #expect(rig.daemon.log.contains("audio output no longer blocked"), "\(rig.daemon.log.suffix(3000))")
                #expect(try rig.phone.client.pingRoundTrip())
                shown = try outputStatus()
                while !(!shown.blocked && !shown.failure.isEmpty), RawSocketClient.now() < failed { usleep(50_000); shown = try outputStatus() }
                #expect(!shown.blocked && shown.failure.contains("Broken pipe"), "\(shown)")
            }

            // SIGTERM: Goodbye to everyone, a blocked output abandoned after 1 s, exit 0.
            let stopped = RawSocketClient.now()
            let status = try rig.daemon.terminate(timeout: 12)
            let took = RawSocketClient.now() - stopped
            print("blocked audio output (\(openedByAReader ? "opened, never read" : "never opened")): SIGTERM to exit \(Int(took * 1000)) ms")
            #expect(status == 0)
            #expect(took < 8, "the stop waited \(took) s for the output")
            if !openedByAReader {
                #expect(rig.daemon.log.contains("abandoned at the stop"), "\(rig.daemon.log.suffix(2000))")
            }
        }
    }
}
