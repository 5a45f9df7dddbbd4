import Foundation
import HeadUnitServer
import HeadUnitWire
import Logging
import TestSupport
import Testing

/// Issue 47 item 5 through a real restart handover (PROTOCOL.md section 22),
/// in process: the server hands its connections and the snapshot to a
/// stand-in for systemd's fd store (duplicates of the descriptors, the
/// snapshot's bytes) and a second server takes them back, as `headunitd`
/// does across `systemctl restart`. The phone's audio stream does not
/// survive the restart: it is told (`AudioStreamClosed{RESTARTED}`), its
/// MEDIA still in flight is dropped without a word, and a new stream gets
/// its credit and plays. An HMI hearing the output still hears it.
@Suite("A restart while audio streams", .serialized)
struct AudioRestartHandoverTests {
    private static let music = "com.example.music"
    private static let pcmStereo = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }

    /// What systemd's fd store keeps across the restart.
    // @unchecked: `descriptors` and `snapshot` are guarded by `lock`.
    final class StandInFDStore: @unchecked Sendable {
        private let lock = NSLock()
        private var descriptors: [String: CInt] = [:]
        private var snapshot: [UInt8]?

        var store: DescriptorStore {
            DescriptorStore(
                storeDescriptor: { fd, name in
                    let copy = dup(fd)
                    guard copy >= 0 else { return false }
                    self.lock.withLock { self.descriptors[name] = copy }
                    return true
                },
                storeSnapshot: { bytes in
                    self.lock.withLock { self.snapshot = bytes }
                    return true
                })
        }

        /// What the next process is started with (and from then on owns).
        func handedBack() -> RestoredState {
            lock.withLock {
                let connections = Dictionary(uniqueKeysWithValues: descriptors.compactMap { name, fd in
                    RestoredState.peer(fromName: name).map { ($0, fd) }
                })
                descriptors = [:]
                return RestoredState(snapshot: snapshot, connections: connections)
            }
        }
    }

    /// Waits on this (own) thread for async work on the global executor.
    // @unchecked: `result` is written once before `done` is signalled and read after.
    final class Outcome<T>: @unchecked Sendable {
        var result: Result<T, Error>?
    }

    static func blocking<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Outcome<T>()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do { outcome.result = .success(try await operation()) } catch { outcome.result = .failure(error) }
            done.signal()
        }
        done.wait()
        return try outcome.result!.get()
    }

    @Test func theRestartClosesThePhonesStreamWithItsReasonAndANewStreamPlays() async throws {
        try await onOwnThread {
            var daemon = try InProcessDaemon()
            let path = daemon.path
            let first = try daemon.start()

            let hmi = RecordingPeer(try RawSocketClient.unix(path))
            defer { hmi.close() }
            try hmi.client.handshake(role: .hmi, name: "hmi")
            let phone = AudioStreamSocketTests.AudioPhone(try RawSocketClient.unix(path))
            defer { phone.client.close() }
            try phone.client.handshake(role: .phone, name: "phone")
            let app = HUAppInfo.with { $0.appID = Self.music; $0.displayName = "Music"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
            #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] })).code == .ok)
            #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = Self.music })).code == .ok)
            let scene = try phone.waitFor { envelope -> UInt32? in
                if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
                return nil
            }
            let playing = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 1 }
            #expect(try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = Self.music; $0.sceneID = scene; $0.updateNowPlaying = playing })).code == .ok)
            // The HMI hears the car's output (carried across the restart).
            #expect(try hmi.request(.watchAudio(HUWatchAudio())).code == .ok)
            let opened = try phone.open(Self.music, .main, Self.pcmStereo)
            #expect(opened.code == .ok, "\(opened.message)")
            let stream = opened.audioStream.streamID
            let silence = [UInt8](repeating: 0, count: 4 * AudioStreamSocketTests.packetFrames)
            for packet in 0..<3 {
                try phone.sendMedia(stream, timestamp: UInt64(packet) * 20_000, silence, frames: AudioStreamSocketTests.packetFrames)
            }

            // The restart: everything handed over, the first process's loop stopped.
            let store = StandInFDStore()
            let report = try Self.blocking { await first.handOver(store: store.store) }
            #expect(report.snapshotStored && report.handedOver == 2 && report.closed == 0, "\(report)")
            // The app goes on streaming during the pause: this frame waits in the socket for the next process.
            try phone.sendMedia(stream, timestamp: 3 * 20_000, silence, frames: AudioStreamSocketTests.packetFrames)

            let restarted = RawSocketClient.now()
            daemon.configuration.restored = store.handedBack()
            let second = try daemon.start()
            defer { try? Self.blocking { await second.shutdown() } }

            // The phone hears that its stream ended, and why, as soon as it is back.
            let closed = try phone.waitFor { envelope -> HUAudioStreamClosed? in
                if case .audioStreamClosed(let closed) = envelope.body { return closed }
                return nil
            }
            #expect(closed.streamID == stream && closed.appID == Self.music && closed.type == .main, "\(closed)")
            #expect(closed.reason == .restarted, "\(closed)")
            // Its frame sent during the pause was dropped without a word (no NOT_CONNECTED), the connection serves on.
            #expect(try phone.client.pingRoundTrip())
            let refusals = phone.log.compactMap { envelope -> HUResult? in
                if envelope.requestID == 0, case .result(let result) = envelope.body { return result }
                return nil
            }
            #expect(refusals.isEmpty, "\(refusals)")

            // A new stream: a new id, its full credit, and the credit comes back as it plays.
            let again = try phone.open(Self.music, .main, Self.pcmStereo)
            #expect(again.code == .ok, "\(again.message)")
            let next = again.audioStream.streamID
            #expect(next != stream && again.audioStream.initialCredit == again.audioStream.window)
            for packet in 0..<10 {
                while phone.credit[next, default: 0] < AudioStreamSocketTests.packetFrames { try phone.pump(timeout: 30) }
                try phone.sendMedia(next, timestamp: UInt64(packet) * 20_000, silence, frames: AudioStreamSocketTests.packetFrames)
            }
            let deadline = RawSocketClient.now() + 30
            while phone.credit[next, default: 0] < Int(again.audioStream.window), RawSocketClient.now() < deadline {
                try phone.pump(timeout: 0.1)
            }
            #expect(phone.credit[next, default: 0] == Int(again.audioStream.window), "the new stream played and its credit came back")

            // The HMI is answered on the same connection and still hears the
            // output: MEDIA on channel 1 that plays after the restart (its u64 BE
            // play time, CLOCK_MONOTONIC microseconds, is the same clock as ours).
            #expect(try hmi.request(.getStatus(HUGetStatus())).code == .ok)
            var heard = false
            let listening = RawSocketClient.now() + 30
            while !heard, RawSocketClient.now() < listening {
                guard let frame = try hmi.client.readFrame(timeout: max(0, listening - RawSocketClient.now())) else { break }
                guard frame.kind == FrameKind.media.rawValue, frame.channel == 1, frame.payload.count >= 8 else { continue }
                let playsAt = frame.payload[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                heard = Double(playsAt) / 1e6 >= restarted
            }
            #expect(heard, "the HMI hears the car's output after the restart")
        }
    }
}

/// The daemon's server in this process on a scratch Unix socket, started as
/// often as a test restarts it: each `start()` is the next process, taking
/// over what `configuration.restored` hands it (section 22 without systemd).
struct InProcessDaemon {
    let directory: String
    let path: String
    var configuration: ServerConfiguration
    let logger: Logger

    init() throws {
        directory = try TestDaemon.makeScratchDirectory()
        path = directory + "/hu.sock"
        configuration = ServerConfiguration(listeners: [.unix(path: path)])
        configuration.audio = AudioConfiguration(output: .none)
        var logger = Logger(label: "headunitd.restart-test")
        logger.logLevel = .warning
        self.logger = logger
    }

    func start() throws -> HeadUnitServer {
        let server = HeadUnitServer(configuration: configuration, logger: logger)
        _ = try AudioRestartHandoverTests.blocking { try await server.start() }
        return server
    }
}
