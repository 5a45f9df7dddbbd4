import COpus
import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 27 over real sockets: the phone's apps stream audio into the car's
/// mixer and the car's output (a WAV sink) is checked from its samples; the
/// microphone follows the voice-control template; every audio error code is
/// provoked (PROTOCOL.md section 24).
private let audio = "com.apple.developer.carplay-audio"
private let maps = "com.apple.developer.carplay-maps"
private let music = "com.example.music"
private let podcast = "com.example.podcast"
private let navigation = "com.example.maps"
private let pcmStereo = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
private let opusMono = HUAudioFormat.with { $0.codec = .opus; $0.sampleRate = 48_000; $0.channels = 1 }

private func bytes(_ samples: [Int16]) -> [UInt8] {
    samples.flatMap { withUnsafeBytes(of: $0.littleEndian) { Array($0) } }
}

@Suite("Audio streams and the microphone over real sockets", .serialized)
struct AudioStreamSocketTests {
    static let rate = 48_000
    static let packetFrames = 960  // 20 ms

    // MARK: - The phone side

    /// A phone that reads every frame: envelopes are logged, AudioCredit adds
    /// up per stream, MEDIA frames (the microphone) are kept.
    final class AudioPhone {
        let client: RawSocketClient
        var log: [HUEnvelope] = []
        var media: [(channel: UInt32, payload: [UInt8])] = []
        var credit: [UInt32: Int] = [:]
        var nextRequest: UInt32 = 100

        init(_ client: RawSocketClient) { self.client = client }

        /// Reads what arrives within `timeout`; false when nothing did.
        @discardableResult
        func pump(timeout: Double) throws -> Bool {
            let frame: RawFrame?
            do {
                frame = try client.readFrame(timeout: max(0, timeout))
            } catch RawClientError.timedOut {
                return false
            }
            guard let frame else { throw RawClientError.closed("audio phone") }
            switch FrameKind(rawValue: frame.kind) {
            case .media:
                media.append((frame.channel, frame.payload))
            case .message:
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                if case .audioCredit(let grant) = envelope.body {
                    credit[grant.streamID, default: 0] += Int(grant.frames)
                } else {
                    log.append(envelope)
                }
            default:
                break
            }
            return true
        }

        func request(_ body: HUEnvelope.OneOf_Body, timeout: Double = 30) throws -> HUResult {
            nextRequest += 1
            let id = nextRequest
            try client.send(body, requestID: id)
            return try waitFor(timeout: timeout) { envelope in
                if envelope.requestID == id, case .result(let result) = envelope.body { return result }
                return nil
            }
        }

        /// The first logged envelope `match` accepts (it alone is taken from the log).
        func waitFor<T>(timeout: Double = 30, _ match: (HUEnvelope) -> T?) throws -> T {
            let deadline = RawSocketClient.now() + timeout
            var index = 0
            while true {
                while index < log.count {
                    if let found = match(log[index]) {
                        log.remove(at: index)
                        return found
                    }
                    index += 1
                }
                if RawSocketClient.now() > deadline { throw RawClientError.timedOut("an envelope") }
                try pump(timeout: deadline - RawSocketClient.now())
            }
        }

        func open(_ appID: String, _ type: HUAudioStreamType, _ format: HUAudioFormat) throws -> HUResult {
            let result = try request(.openAudioStream(HUOpenAudioStream.with { $0.appID = appID; $0.type = type; $0.format = format }))
            if result.code == .ok { credit[result.audioStream.streamID] = Int(result.audioStream.initialCredit) }
            return result
        }

        func sendMedia(_ stream: UInt32, timestamp: UInt64, _ bytes: [UInt8], frames: Int) throws {
            var payload = withUnsafeBytes(of: timestamp.bigEndian) { Array($0) }
            payload += bytes
            try client.sendFrame(.media, channel: stream, payload: payload)
            credit[stream, default: 0] -= frames
        }
    }


    /// A tone as 20 ms packets of interleaved stereo s16le.
    struct Tone {
        let hertz: Double
        let amplitude: Double
        var position = 0

        mutating func next(_ frames: Int, channels: Int) -> [Int16] {
            var samples: [Int16] = []
            samples.reserveCapacity(frames * channels)
            for index in 0..<frames {
                let value = Int16(amplitude * 32767 * sin(2 * Double.pi * hertz * Double(position + index) / Double(AudioStreamSocketTests.rate)))
                for _ in 0..<channels { samples.append(value) }
            }
            position += frames
            return samples
        }
    }


    /// libopus's encoder: the app side of an Opus stream.
    final class OpusEncoder {
        let encoder: OpaquePointer

        init(channels: Int) throws {
            var error: Int32 = 0
            guard let made = opus_encoder_create(48_000, Int32(channels), OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
                throw RawClientError.unexpected("opus_encoder_create: \(error)")
            }
            encoder = made
        }

        deinit { opus_encoder_destroy(encoder) }

        func encode(_ pcm: [Int16], frames: Int) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 4000)
            let count = pcm.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { opus_encode(encoder, input.baseAddress!, Int32(frames), $0.baseAddress!, 4000) }
            }
            return Array(out[0..<Int(max(0, count))])
        }
    }

    // MARK: - The car side: the WAV sink

    struct Output {
        /// CLOCK_MONOTONIC seconds of sample 0.
        var started: Double
        /// The left channel, -1...1.
        var left: [Float]

        func time(_ sample: Int) -> Double { started + Double(sample) / Double(AudioStreamSocketTests.rate) }
        func sample(at time: Double) -> Int { max(0, min(left.count, Int((time - started) * Double(AudioStreamSocketTests.rate)))) }

        /// The amplitude of `hertz` over [from, from + count) (Goertzel with a Hann window).
        func level(_ hertz: Double, from: Int, count: Int) -> Double {
            guard from >= 0, from + count <= left.count, count > 1 else { return 0 }
            let coefficient = 2 * cos(2 * Double.pi * hertz / Double(AudioStreamSocketTests.rate))
            var (s1, s2) = (0.0, 0.0)
            var windowSum = 0.0
            for index in 0..<count {
                let window = 0.5 - 0.5 * cos(2 * Double.pi * Double(index) / Double(count - 1))
                windowSum += window
                let s0 = Double(left[from + index]) * window + coefficient * s1 - s2
                (s2, s1) = (s1, s0)
            }
            let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
            return 2 * sqrt(max(0, power)) / windowSum
        }

        /// The median level over [start, end) in 50 ms windows.
        func medianLevel(_ hertz: Double, from start: Double, to end: Double) -> Double {
            let window = 2400
            var levels: [Double] = []
            var at = sample(at: start)
            while at + window <= sample(at: end) {
                levels.append(level(hertz, from: at, count: window))
                at += window
            }
            guard !levels.isEmpty else { return 0 }
            return levels.sorted()[levels.count / 2]
        }

        /// The first time after `after` when `hertz` reaches `threshold` (10 ms windows, 2.5 ms hop).
        func onset(_ hertz: Double, after: Double, threshold: Double) -> Double? {
            var at = sample(at: after)
            while at + 480 <= left.count {
                if level(hertz, from: at, count: 480) >= threshold { return time(at + 240) }
                at += 120
            }
            return nil
        }

        /// When `hertz` last sounds above `threshold`: the end of the last such 10 ms window.
        func end(_ hertz: Double, threshold: Double) -> Double? {
            var at = (left.count / 480 - 1) * 480
            while at >= 0 {
                if level(hertz, from: at, count: 480) >= threshold { return time(at + 480) }
                at -= 480
            }
            return nil
        }

        /// How long `hertz` sounds above `threshold` in all (10 ms windows).
        func duration(_ hertz: Double, threshold: Double) -> Double {
            var at = 0
            var windows = 0
            while at + 480 <= left.count {
                if level(hertz, from: at, count: 480) >= threshold { windows += 1 }
                at += 480
            }
            return Double(windows) * 0.01
        }
    }

    /// Waits until the mixer finished the file (it goes idle 1 s after the
    /// last stream and patches the WAV's sizes), then reads it.
    static func readOutput(_ path: String, timeout: Double = 20) throws -> Output {
        let deadline = RawSocketClient.now() + timeout
        while true {
            if let data = FileManager.default.contents(atPath: path), data.count >= 60 {
                let bytes = [UInt8](data)
                func u32(_ at: Int) -> UInt32 { UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24 }
                if u32(4) != 0xFFFF_FFFF {
                    #expect(Array(bytes[0..<4]) == Array("RIFF".utf8) && Array(bytes[36..<40]) == Array("hust".utf8))
                    var startedNanoseconds: UInt64 = 0
                    for index in 0..<8 { startedNanoseconds |= UInt64(bytes[44 + index]) << (8 * index) }
                    let dataBytes = Int(u32(56))
                    var left: [Float] = []
                    left.reserveCapacity(dataBytes / 4)
                    var at = 60
                    while at + 4 <= min(bytes.count, 60 + dataBytes) {
                        left.append(Float(Int16(bitPattern: UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8)) / 32768)
                        at += 4
                    }
                    return Output(started: Double(startedNanoseconds) / 1e9, left: left)
                }
            }
            guard RawSocketClient.now() < deadline else { throw RawClientError.timedOut("the mixer to finish \(path)") }
            usleep(50_000)  // polling a file for a condition
        }
    }

    // MARK: - The rig

    struct Rig {
        let daemon: TestDaemon
        let hmi: RecordingPeer
        let phone: AudioPhone
        let outputPath: String
        var scenes: [String: UInt32] = [:]

        /// `output` nil: a WAV in a scratch directory (`outputPath`).
        init(limits: [String: UInt64] = [:], output: String? = nil, microphone: String = "tone:1000", environment: [String: String] = [:]) throws {
            let directory = try TestDaemon.makeScratchDirectory()
            outputPath = directory + "/out.wav"
            daemon = try TestDaemon.launch(
                limits: limits, configJSON: "\"audio\": {\"output\": \"\(output ?? "wav:" + outputPath)\", \"microphone\": \"\(microphone)\"}",
                environment: environment)
            hmi = RecordingPeer(try daemon.connectUnix())
            try hmi.client.handshake(role: .hmi, name: "hmi")
            phone = AudioPhone(try daemon.connectUnix())
            try phone.client.handshake(role: .phone, name: "phone")
            let apps = [
                HUAppInfo.with { $0.appID = music; $0.displayName = "Music"; $0.entitlements = [audio] },
                HUAppInfo.with { $0.appID = podcast; $0.displayName = "Podcasts"; $0.entitlements = [audio] },
                HUAppInfo.with { $0.appID = navigation; $0.displayName = "Maps"; $0.entitlements = [maps] },
            ]
            let decisions = try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = apps }))
            #expect(decisions.appDecisions.decisions.allSatisfy { $0.accepted })
        }

        mutating func launch(_ appID: String) throws -> UInt32 {
            #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = appID })).code == .ok)
            let scene = try phone.waitFor { envelope -> UInt32? in
                if case .sceneConnected(let connected) = envelope.body, connected.appID == appID { return connected.sceneID }
                return nil
            }
            scenes[appID] = scene
            return scene
        }

        /// The app's now-playing plays: it takes the main audio (section 19.8).
        mutating func play(_ appID: String, spoken: Bool = false) throws {
            let scene = try scenes[appID] ?? launch(appID)
            let content = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 1; $0.spokenAudio = spoken }
            let result = try phone.request(.templateRequest(HUTemplateRequest.with { $0.appID = appID; $0.sceneID = scene; $0.updateNowPlaying = content }))
            #expect(result.code == .ok, "\(result.message)")
        }

        func stop() {
            if let dump = getenv("AUDIO_TEST_LOG"), String(cString: dump) == "1" { print(daemon.log.suffix(6000)) }
            hmi.close()
            phone.client.close()
            _ = try? daemon.terminate()
        }
    }

    /// One session of the app side: main audio (440 Hz PCM) paced in real time,
    /// and a navigation prompt (880 Hz Opus) started at 1 s for 1 s.
    struct Timeline {
        var musicStart = 0.0
        var firstMusicWrite = 0.0
        var promptRequested = 0.0
        var firstPromptWrite = 0.0
        var promptEnded = 0.0
        var lastMusicWrite = 0.0
        var promptClosed: HUAudioStreamClosed?
    }

    static func play(_ rig: inout Rig, mainApp: String, musicPackets: Int = 150, promptAt: Int = 50, promptPackets: Int = 50) throws -> Timeline {
        var timeline = Timeline()
        let main = try rig.phone.open(mainApp, .main, pcmStereo)
        #expect(main.code == .ok, "\(main.message)")
        #expect(main.audioStream.window == 5760 && main.audioStream.jitterMs == 40 && main.audioStream.initialCredit == 5760)
        let mainID = main.audioStream.streamID
        let _ = try rig.launch(navigation)
        var music = Tone(hertz: 440, amplitude: 0.4)
        var prompt = Tone(hertz: 880, amplitude: 0.4)
        let encoder = try OpusEncoder(channels: 1)
        var promptID: UInt32 = 0
        var musicSent = 0
        var promptSent = 0
        var tick = 0
        let start = RawSocketClient.now()
        timeline.musicStart = start
        while musicSent < musicPackets || (promptID != 0 && promptSent < promptPackets) {
            // Real-time pacing: one 20 ms tick of the app's audio clock; events are read meanwhile.
            let due = start + Double(tick) * 0.02
            while RawSocketClient.now() < due { try rig.phone.pump(timeout: due - RawSocketClient.now()) }
            if tick == promptAt {
                timeline.promptRequested = RawSocketClient.now()
                let started = try rig.phone.request(.navigationRequest(HUNavigationRequest.with {
                    $0.appID = navigation
                    $0.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })
                }))
                #expect(started.code == .ok, "\(started.message)")
                let alternate = try rig.phone.open(navigation, .alternate, opusMono)
                #expect(alternate.code == .ok, "\(alternate.message)")
                promptID = alternate.audioStream.streamID
            }
            if promptID != 0, promptSent < promptPackets, rig.phone.credit[promptID, default: 0] >= packetFrames {
                let packet = encoder.encode(prompt.next(packetFrames, channels: 1), frames: packetFrames)
                if promptSent == 0 { timeline.firstPromptWrite = RawSocketClient.now() }
                try rig.phone.sendMedia(promptID, timestamp: UInt64(promptSent) * 20_000, packet, frames: packetFrames)
                promptSent += 1
                if promptSent == promptPackets {
                    timeline.promptEnded = RawSocketClient.now()
                    #expect(try rig.phone.request(.navigationRequest(HUNavigationRequest.with {
                        $0.appID = navigation
                        $0.op = .endPrompt(HUEndPrompt())
                    })).code == .ok)
                    timeline.promptClosed = try rig.phone.waitFor { envelope -> HUAudioStreamClosed? in
                        if case .audioStreamClosed(let closed) = envelope.body { return closed }
                        return nil
                    }
                }
            }
            // The app keeps its clock; while the car takes nothing (paused) it waits, then catches up within credit.
            while musicSent < min(musicPackets, tick + 1), rig.phone.credit[mainID, default: 0] >= packetFrames {
                if musicSent == 0 { timeline.firstMusicWrite = RawSocketClient.now() }
                try rig.phone.sendMedia(mainID, timestamp: UInt64(musicSent) * 20_000, bytes(music.next(packetFrames, channels: 2)), frames: packetFrames)
                musicSent += 1
                timeline.lastMusicWrite = RawSocketClient.now()
            }
            tick += 1
            #expect(tick < 2000, "the car stopped taking audio")
            if tick >= 2000 { break }
        }
        // The app's last frames play out, then it closes its stream.
        let playedOut = RawSocketClient.now() + 0.3
        while RawSocketClient.now() < playedOut { try rig.phone.pump(timeout: playedOut - RawSocketClient.now()) }
        #expect(try rig.phone.request(.closeAudioStream(HUCloseAudioStream.with { $0.streamID = mainID })).code == .ok)
        return timeline
    }

    static func decibels(_ ratio: Double) -> Double { 20 * log10(max(ratio, 1e-9)) }

    // MARK: - Done means

    /// Issue 27: a 440 Hz song and an 880 Hz navigation prompt into the WAV
    /// sink; from the samples, the song is ducked by 12 dB during the prompt
    /// and restored after, and both start within 150 ms of the app's write.
    @Test func aPromptDucksTheSongByTwelveDecibelsAndTheSongComesBack() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(music)
            let timeline = try Self.play(&rig, mainApp: music)
            #expect(timeline.promptClosed?.reason == .focusLost && timeline.promptClosed?.type == .alternate)
            let output = try Self.readOutput(rig.outputPath)

            let musicOnset = try #require(output.onset(440, after: timeline.musicStart - 0.5, threshold: 0.2))
            let promptOnset = try #require(output.onset(880, after: timeline.promptRequested, threshold: 0.2))
            let musicLatency = musicOnset - timeline.firstMusicWrite
            let promptLatency = promptOnset - timeline.firstPromptWrite
            let before = output.medianLevel(440, from: musicOnset + 0.2, to: timeline.promptRequested - 0.05)
            let during = output.medianLevel(440, from: promptOnset + 0.1, to: timeline.promptEnded - 0.05)
            let after = output.medianLevel(440, from: timeline.promptEnded + 0.25, to: timeline.lastMusicWrite - 0.05)
            let promptLevel = output.medianLevel(880, from: promptOnset + 0.1, to: timeline.promptEnded - 0.05)
            let duck = Self.decibels(during / before)
            let restored = Self.decibels(after / before)
            print("audio: music latency \(Int(musicLatency * 1000)) ms, prompt latency \(Int(promptLatency * 1000)) ms, "
                + "music \(before) -> \(during) (\(duck) dB) -> \(after) (\(restored) dB), prompt \(promptLevel)")
            #expect(before > 0.35 && before < 0.45, "the song plays at its level: \(before)")
            #expect(abs(duck - -12) <= 1, "ducked by 12 dB during the prompt: \(duck) dB")
            #expect(abs(restored) <= 0.5, "restored after the prompt: \(restored) dB")
            #expect(promptLevel > 0.25, "the prompt is heard on top: \(promptLevel)")
            #expect(musicLatency > 0 && musicLatency <= 0.150, "song latency \(musicLatency) s")
            #expect(promptLatency > 0 && promptLatency <= 0.150, "prompt latency \(promptLatency) s")
        }
    }

    /// Issue 27: spoken audio is paused, not ducked, during a prompt: nothing
    /// of it plays meanwhile, and none of it is lost (the car stopped taking it).
    @Test func aPromptPausesSpokenAudioAndLosesNoneOfIt() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(podcast, spoken: true)
            let timeline = try Self.play(&rig, mainApp: podcast, musicPackets: 100)
            let output = try Self.readOutput(rig.outputPath)
            let promptOnset = try #require(output.onset(880, after: timeline.promptRequested, threshold: 0.2))
            let before = output.medianLevel(440, from: timeline.firstMusicWrite + 0.3, to: timeline.promptRequested - 0.05)
            let during = output.medianLevel(440, from: promptOnset + 0.1, to: timeline.promptEnded - 0.05)
            let spoken = output.duration(440, threshold: 0.2)
            print("audio: spoken \(before) -> \(during) during the prompt; \(spoken) s of it played (2.0 s sent)")
            #expect(before > 0.35, "the podcast plays at its level: \(before)")
            #expect(during < 0.004, "paused (silent), not ducked, during the prompt: \(during)")
            #expect(abs(spoken - 2.0) <= 0.08, "all 2 s of the podcast played, around the prompt: \(spoken) s")
        }
    }

    /// Issue 27: the microphone reaches the navigation app while its
    /// voice-control template is shown, and stops when it is dismissed.
    @Test func theMicrophoneFollowsTheVoiceControlTemplate() async throws {
        try await onOwnThread {
            var rig = try Rig(microphone: "tone:1000")
            defer { rig.stop() }
            try Self.microphoneFollowsTheVoiceControlTemplate(&rig)
        }
    }

    /// Issue 27: the car's speakers and microphone on a board, through ALSA.
    /// alsa-lib's `file` plugin stands in for a sound card: what the car
    /// plays is written to a file, what it hears is read from one (a 1 kHz
    /// tone), each paced by its null device as a card's clock would.
    @Test func theCarPlaysAndHearsThroughALSADevices() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            var tone: [UInt8] = []
            for index in 0..<(16_000 * 4) {
                let sample = Int16(sin(2 * Double.pi * 1000 * Double(index) / 16_000) * 0.4 * 32767)
                tone.append(UInt8(truncatingIfNeeded: sample))
                tone.append(UInt8(truncatingIfNeeded: sample >> 8))
            }
            try Data(tone).write(to: URL(fileURLWithPath: directory + "/mic.raw"))
            let played = directory + "/speakers.raw"
            let configuration = """
                </usr/share/alsa/alsa.conf>
                pcm.car_speakers { type file slave.pcm null file "\(played)" format raw }
                pcm.car_microphone { type file slave.pcm null file "/dev/null" infile "\(directory)/mic.raw" format raw }

                """
            try configuration.write(toFile: directory + "/asound.conf", atomically: true, encoding: .utf8)
            var rig = try Rig(output: "alsa:car_speakers", microphone: "alsa:car_microphone",
                              environment: ["ALSA_CONFIG_PATH": directory + "/asound.conf"])
            defer { rig.stop() }
            try rig.play(music)
            _ = try Self.play(&rig, mainApp: music, musicPackets: 50, promptAt: 1_000)

            // The song (1 s of 440 Hz) reached the device, whole.
            let deadline = RawSocketClient.now() + 20
            var output = Output(started: 0, left: [])
            repeat {
                let quiet = RawSocketClient.now() + 0.2
                while RawSocketClient.now() < quiet { try rig.phone.pump(timeout: quiet - RawSocketClient.now()) }
                let bytes = [UInt8](FileManager.default.contents(atPath: played) ?? Data())
                output.left = stride(from: 0, to: bytes.count - 3, by: 4).map {
                    Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768
                }
            } while output.duration(440, threshold: 0.2) < 0.95 && RawSocketClient.now() < deadline
            let song = output.duration(440, threshold: 0.2)
            #expect(abs(song - 1.0) <= 0.08, "the ALSA device played the 1 s song: \(song) s (log: \(rig.daemon.log.suffix(800)))")

            try Self.microphoneFollowsTheVoiceControlTemplate(&rig)
        }
    }

    /// Presents a voice-control template, reads a second of the microphone
    /// (a 1 kHz tone at the car), dismisses it and checks nothing more comes.
    static func microphoneFollowsTheVoiceControlTemplate(_ rig: inout Rig) throws {
        let scene = try rig.scenes[navigation] ?? rig.launch(navigation)
        let voice = HUTemplate.with {
            $0.id = "voice"
            $0.voiceControl = HUVoiceControlTemplate.with {
                $0.states = [HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening"] }]
                $0.activeStateID = "listening"
            }
        }
        func template(_ op: HUTemplateRequest.OneOf_Op) -> HUEnvelope.OneOf_Body {
            .templateRequest(HUTemplateRequest.with { $0.appID = navigation; $0.sceneID = scene; $0.op = op })
        }
        #expect(rig.phone.media.isEmpty)
        #expect(try rig.phone.request(template(.setRoot(NavWire.mapRoot()))).code == .ok)
        let presented = try rig.phone.request(template(.present(voice)))
        #expect(presented.code == .ok, "\(presented.message)")
        let started = try rig.phone.waitFor { envelope -> HUMicrophoneStarted? in
            if case .microphoneStarted(let started) = envelope.body { return started }
            return nil
        }
        #expect(started.appID == navigation && started.purpose == .voiceControl)
        #expect(started.stream.format == HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 16_000; $0.channels = 1 })
        let stream = started.stream.streamID
        // Read 1 s of it, granting back what was read.
        var samples: [Int16] = []
        var timestamps: [UInt64] = []
        let deadline = RawSocketClient.now() + 20
        while samples.count < 16_000, RawSocketClient.now() < deadline {
            try rig.phone.pump(timeout: 1)
            for (channel, payload) in rig.phone.media {
                #expect(channel == stream)
                timestamps.append(payload[0..<8].reduce(0) { $0 << 8 | UInt64($1) })
                let pcm = Array(payload[8...])
                for index in stride(from: 0, to: pcm.count, by: 2) {
                    samples.append(Int16(bitPattern: UInt16(pcm[index]) | UInt16(pcm[index + 1]) << 8))
                }
                try rig.phone.client.send(.audioCredit(HUAudioCredit.with { $0.streamID = stream; $0.frames = UInt32(pcm.count / 2) }))
            }
            rig.phone.media.removeAll()
        }
        #expect(samples.count >= 16_000, "a second of microphone audio arrived")
        #expect(timestamps == timestamps.sorted() && Set(timestamps).count == timestamps.count, "timestamps grow")
        // The car's microphone (a 1 kHz tone here) is what arrives.
        let output = Output(started: 0, left: samples.map { Float($0) / 32768 })
        let tone = output.level(1000 * 3, from: 0, count: min(samples.count, 4800))  // 16 kHz read as 48 kHz: 1 kHz sits at "3 kHz"
        #expect(tone > 0.25, "the microphone's 1 kHz tone arrives: \(tone)")

        #expect(try rig.phone.request(template(.dismiss(HUPopTemplate()))).code == .ok)
        let closed = try rig.phone.waitFor { envelope -> HUAudioStreamClosed? in
            if case .audioStreamClosed(let closed) = envelope.body { return closed }
            return nil
        }
        #expect(closed.streamID == stream && closed.type == .microphone && closed.reason == .voiceControlDismissed)
        rig.phone.media.removeAll()
        // Nothing more comes: read for a while (the microphone ticks every 20 ms).
        let quiet = RawSocketClient.now() + 0.4
        while RawSocketClient.now() < quiet { try rig.phone.pump(timeout: quiet - RawSocketClient.now()) }
        #expect(rig.phone.media.isEmpty, "no microphone audio after the template was dismissed")
    }

    // MARK: - Every error over a real socket

    @Test func openAudioStreamErrorsInOrder() async throws {
        try await onOwnThread {
            var rig = try Rig(limits: ["maxAudioStreams": 1])
            defer { rig.stop() }
            // INVALID_ARGUMENT: the phone never opens the microphone.
            #expect(try rig.phone.open(music, .microphone, pcmStereo).code == .invalidArgument)
            // UNSUPPORTED_AUDIO_FORMAT (176): Opus at 44.1 kHz, three channels, no codec.
            #expect(try rig.phone.open(music, .main, HUAudioFormat.with { $0.codec = .opus; $0.sampleRate = 44_100; $0.channels = 2 }).code == .unsupportedAudioFormat)
            #expect(try rig.phone.open(music, .main, HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 3 }).code == .unsupportedAudioFormat)
            #expect(try rig.phone.open(music, .main, HUAudioFormat.with { $0.sampleRate = 48_000; $0.channels = 2 }).code == .unsupportedAudioFormat)
            // NO_AUDIO_FOCUS (175): not playing, no prompt, no call.
            #expect(try rig.phone.open(music, .main, pcmStereo).code == .noAudioFocus)
            #expect(try rig.phone.open(navigation, .alternate, opusMono).code == .noAudioFocus)
            #expect(try rig.phone.open(music, .voice, pcmStereo).code == .noAudioFocus)
            // UNKNOWN_APP before everything else.
            #expect(try rig.phone.open("com.example.nobody", .main, pcmStereo).code == .unknownApp)
            try rig.play(music)
            let first = try rig.phone.open(music, .main, pcmStereo)
            #expect(first.code == .ok)
            // TOO_MANY_SESSIONS past max_audio_streams (1 here); the same type replaces instead.
            let _ = try rig.launch(navigation)
            #expect(try rig.phone.request(.navigationRequest(HUNavigationRequest.with {
                $0.appID = navigation; $0.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })
            })).code == .ok)
            let over = try rig.phone.open(navigation, .alternate, opusMono)
            #expect(over.code == .tooManySessions && over.limit == "audio.streams" && over.limitValue == 1)
            let replacing = try rig.phone.open(music, .main, pcmStereo)
            #expect(replacing.code == .ok && replacing.audioStream.streamID != first.audioStream.streamID)
            #expect(rig.phone.log.contains { envelope in
                if case .audioStreamClosed(let closed) = envelope.body { return closed.streamID == first.audioStream.streamID && closed.reason == .replaced }
                return false
            })
        }
    }

    /// An app's last packet, shorter than the jitter buffer, plays with
    /// nothing more coming: the car grants its credit back. (A stream that
    /// started only with a jitter buffer in hand held such a tail for ever,
    /// and an SDK app waiting for it to play waited for ever too.)
    @Test func aTailShorterThanTheJitterBufferPlays() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(music)
            let opened = try rig.phone.open(music, .main, pcmStereo)
            #expect(opened.code == .ok, "\(opened.message)")
            let stream = opened.audioStream.streamID
            var tone = Tone(hertz: 440, amplitude: 0.4)
            try rig.phone.sendMedia(stream, timestamp: 0, bytes(tone.next(Self.packetFrames, channels: 2)), frames: Self.packetFrames)
            let deadline = RawSocketClient.now() + 10
            while rig.phone.credit[stream, default: 0] < 5760, RawSocketClient.now() < deadline { try rig.phone.pump(timeout: 0.1) }
            #expect(rig.phone.credit[stream, default: 0] == 5760, "the packet played and its credit came back")
        }
    }

    @Test func mediaFrameErrors() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(music)
            let opened = try rig.phone.open(music, .main, pcmStereo)
            let stream = opened.audioStream.streamID
            func refusal() throws -> HUResult {
                try rig.phone.waitFor { envelope -> HUResult? in
                    if envelope.requestID == 0, case .result(let result) = envelope.body { return result }
                    return nil
                }
            }
            // BAD_MEDIA_FRAME (177): no timestamp; half a stereo frame; an impossible Opus packet elsewhere.
            try rig.phone.client.sendFrame(.media, channel: stream, payload: [1, 2, 3])
            #expect(try refusal().code == .badMediaFrame)
            try rig.phone.client.sendFrame(.media, channel: stream, payload: [UInt8](repeating: 0, count: 8) + [1, 2, 3])
            #expect(try refusal().code == .badMediaFrame)
            // A timestamp going back.
            try rig.phone.sendMedia(stream, timestamp: 100_000, bytes([Int16](repeating: 0, count: 192)), frames: 96)
            try rig.phone.client.sendFrame(.media, channel: stream, payload: withUnsafeBytes(of: UInt64(50_000).bigEndian) { Array($0) } + [UInt8](repeating: 0, count: 8))
            #expect(try refusal().code == .badMediaFrame)
            // NOT_CONNECTED: no stream there.
            try rig.phone.client.sendFrame(.media, channel: 999, payload: [UInt8](repeating: 0, count: 12))
            #expect(try refusal().code == .notConnected)
            // NOT_FOR_ROLE: an HMI sends MEDIA.
            try rig.hmi.client.sendFrame(.media, channel: stream, payload: [UInt8](repeating: 0, count: 12))
            let hmiRefusal = try rig.hmi.waitFor { envelope -> HUResult? in
                if case .result(let result) = envelope.body, envelope.requestID == 0 { return result }
                return nil
            }
            #expect(hmiRefusal.code == .notForRole)
            // FLOW_CONTROL: more than the credit (120 ms) in one frame closes the stream.
            let late = withUnsafeBytes(of: UInt64(300_000).bigEndian) { Array($0) }
            try rig.phone.client.sendFrame(.media, channel: stream, payload: late + [UInt8](repeating: 0, count: 4 * 5761))
            let closed = try rig.phone.waitFor { envelope -> HUAudioStreamClosed? in
                if case .audioStreamClosed(let closed) = envelope.body { return closed }
                return nil
            }
            #expect(closed.streamID == stream && closed.reason == .flowControl)
            #expect(try refusal().code == .flowControl)
            // In flight after the close: dropped without a word; the connection serves on.
            try rig.phone.sendMedia(stream, timestamp: 200_000, bytes([Int16](repeating: 0, count: 192)), frames: 96)
            #expect(try rig.phone.client.pingRoundTrip())
            #expect(!rig.phone.log.contains { envelope in
                if case .result(let result) = envelope.body { return envelope.requestID == 0 && result.code != .ok }
                return false
            })
            // CloseAudioStream on a stream that is not open: UNKNOWN_SESSION.
            #expect(try rig.phone.request(.closeAudioStream(HUCloseAudioStream.with { $0.streamID = 4242 })).code == .unknownSession)
        }
    }

    /// The focus moves away (the HMI selects the radio): the main stream ends with FOCUS_LOST.
    @Test func theCarsOwnSourceTakesTheMainAudioFromTheStream() async throws {
        try await onOwnThread {
            var rig = try Rig()
            defer { rig.stop() }
            try rig.play(music)
            let opened = try rig.phone.open(music, .main, pcmStereo)
            #expect(opened.code == .ok)
            #expect(try rig.hmi.request(.setVehicleState(HUSetVehicleState.with { $0.state.carAudioSource = "FM 101.1" })).code == .ok)
            let closed = try rig.phone.waitFor { envelope -> HUAudioStreamClosed? in
                if case .audioStreamClosed(let closed) = envelope.body { return closed }
                return nil
            }
            #expect(closed.streamID == opened.audioStream.streamID && closed.reason == .focusLost && closed.appID == music)
        }
    }
}
