import COpus
import HeadUnitClient
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27's measurements of the audio path (BENCHMARKS.md, "Audio streams
/// through the mixer"), all taken from the car's output samples: the daemon
/// writes a WAV whose `hust` chunk says when sample 0 played (CLOCK_MONOTONIC,
/// the clock this process stamps its writes with).
///
/// 1. latency: 100 ms beeps (440 Hz) every 500 ms, written in real time;
///    each beep's onset in the output minus its write: a distribution.
/// 2. ducking: a song (440 Hz) and a navigation prompt (880 Hz) every 2 s;
///    how deep the song goes and how fast it goes down and comes back.
/// 3. a burst of delay: the app stops writing for 300 ms, then writes what it
///    owes at once; the gap in the output, and that it is silence.
/// 4. a lost link: the phone's socket closes mid-song; how long the song
///    goes on and that what follows is silence, not noise.
/// 5. cost: the daemon's CPU per second of audio and the bytes on the wire
///    per stream, PCM and Opus (a release daemon gives the meaningful CPU).
struct AudioBench {
    static let rate = 48_000
    static let unit = 960  // 20 ms
    let binary: String
    let seconds: Double

    func run() async throws {
        let daemon = try SpawnedDaemon.start(
            binary: binary, arguments: [],
            extraConfig: "\"audio\": {\"output\": \"wav:{dir}/out.wav\"}")
        defer { daemon.stop() }
        let output = daemon.directory + "/out.wav"
        print("spawned \(binary) as pid \(daemon.pid) (log: \(daemon.logPath))")
        let endpoint = HeadUnitEndpoint.unix(path: daemon.socketPath)
        try await waitForDaemon(endpoint)

        let hmi = try await HMISession.connect(to: endpoint, name: "bench-hmi")
        var car = try await Car.connect(endpoint, hmi: hmi)
        print("machine: \(loadAverage())")

        // 1. Latency, write to output.
        let beeps = try await car.beeps(seconds: seconds)
        let latency = try await Self.beepLatencies(try readWAV(output), writes: beeps)
        print(row("write to output, \(latency.count) beeps of \(beeps.count)", Self.distribution(latency)))
        // The same with each write late by 0-30 ms (a link's jitter, inside the car's 40 ms buffer):
        // measured from when the app meant to write, the output keeps its time.
        let jittered = try await car.beeps(seconds: seconds, jitter: 0.03)
        let jitteredLatency = try await Self.beepLatencies(try readWAV(output), writes: jittered)
        print(row("  writes 0-30 ms late, from the app's clock", Self.distribution(jitteredLatency)))

        // 2. Ducking.
        let prompts = try await car.songWithPrompts(prompts: 5)
        let song = try readWAV(output)
        var depths: [Double] = [], attacks: [Double] = [], releases: [Double] = []
        for prompt in prompts {
            let before = song.level(440, from: prompt.start - 0.45, to: prompt.start - 0.05)
            let during = song.level(440, from: prompt.start + 0.3, to: prompt.end - 0.1)
            depths.append(20 * log10(max(during, 1e-9) / max(before, 1e-9)))
            let ducked = before * pow(10, -9.0 / 20)  // 3 dB short of the stated 12
            if let down = song.firstTime(from: prompt.start - 0.1, to: prompt.end, where: { $0 <= ducked }) { attacks.append(down - prompt.start) }
            let restored = before * pow(10, -3.0 / 20)
            if let up = song.firstTime(from: prompt.end, to: prompt.end + 1, where: { $0 >= restored }) { releases.append(up - prompt.end) }
        }
        print(row("song during a prompt (dB), \(depths.count) prompts", depths.map { format2($0) }.joined(separator: " ")))
        print(row("start_prompt sent to song down 9 dB", Self.distribution(attacks)))
        print(row("end_prompt sent to song within 3 dB", Self.distribution(releases)))

        // 3. A burst of delay.
        let burst = try await car.delayBurst(delay: 0.3)
        let delayed = try readWAV(output)
        let gap = delayed.silence(440, from: burst.stopped, to: burst.resumed + 1)
        let played = delayed.duration(440)
        print(row("300 ms without writes: gap in the output", "\(format1(gap.seconds * 1000)) ms, peak \(format2(gap.peak)) in it (full scale 1)"))
        print(row("  song played in all", "\(format2(played)) s of 3.00 s written"))

        // 4. A lost link.
        let lost = try await car.lostLink()
        let cut = try readWAV(output)
        let tail = cut.silence(440, from: lost - 0.2, to: lost + 1.5)
        print(row("socket closed mid-song: song goes on for", "\(format1((tail.startedAt - lost) * 1000)) ms, then peak \(format2(tail.peak)) until the output stops"))
        car = try await Car.connect(endpoint, hmi: hmi)

        // 5. Cost per stream.
        for codec in [HUAudioCodec.pcmS16Le, .opus] {
            let cost = try await car.cost(codec: codec, seconds: 10, daemonPID: daemon.pid)
            print(row("\(codec == .opus ? "Opus 48 kHz stereo" : "PCM 48 kHz stereo"): daemon CPU", "\(format2(cost.cpuPercent))% of a core (\(format2(cost.cpuPercent * 10)) ms per s of audio)"))
            print(row("  bytes on the wire", "\(format1(cost.bytesPerSecond / 1000)) kB/s (frames, timestamps, payload)"))
        }
        print("machine after: \(loadAverage())")
        await car.phone.connection.close()
        await hmi.close()
    }

    func waitForDaemon(_ endpoint: HeadUnitEndpoint) async throws {
        for _ in 0..<300 {
            if let probe = try? await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "bench-probe")) {
                await probe.close()
                return
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw Failure("the daemon did not answer on \(endpoint)")
    }

    static func distribution(_ values: [Double]) -> String {
        guard !values.isEmpty else { return "none measured" }
        let sorted = values.sorted()
        func at(_ q: Double) -> String { format1(sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * q))] * 1000) }
        return "p50 \(at(0.5)) / p90 \(at(0.9)) / p99 \(at(0.99)) / max \(at(1)) ms"
    }

    static func beepLatencies(_ wav: Output, writes: [Double]) async throws -> [Double] {
        writes.compactMap { write in
            wav.firstTime(from: write - 0.05, to: write + 0.4, where: { $0 >= 0.2 }, step: 48).map { $0 - write }
        }
    }

    // MARK: - The phone's side

    static func tone(_ hertz: Double, amplitude: Double, from frame: Int, count: Int, channels: Int) -> [Int16] {
        var samples: [Int16] = []
        samples.reserveCapacity(count * channels)
        for index in 0..<count {
            let value = Int16(sin(2 * Double.pi * hertz * Double(frame + index) / Double(rate)) * amplitude * 32767)
            for _ in 0..<channels { samples.append(value) }
        }
        return samples
    }

    static func now() -> Double { Double(NIODeadline.now().uptimeNanoseconds) / 1e9 }

    static func sleep(until time: Double) async throws {
        let wait = time - now()
        if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
    }

    /// A music app (main audio) and a navigation app (prompts) on one phone.
    struct Car {
        static let music = "com.example.bench.music"
        static let maps = "com.example.bench.maps"
        let phone: PhoneSession
        let mapsScene: UInt32

        static func connect(_ endpoint: HeadUnitEndpoint, hmi: HMISession) async throws -> Car {
            let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench-phone")
            _ = try await phone.announce([
                HUAppInfo.with { $0.appID = music; $0.displayName = "Music"; $0.entitlements = ["com.apple.developer.carplay-audio"] },
                HUAppInfo.with { $0.appID = maps; $0.displayName = "Maps"; $0.entitlements = ["com.apple.developer.carplay-maps"] },
            ])
            try await hmi.launch(music)
            let musicScene = try await phone.waitForScene(appID: music)
            // Playing now-playing: the app owns the car's main audio (PROTOCOL.md 19.8).
            var nowPlaying = HUNowPlayingTemplate()
            nowPlaying.title = "Bench"
            nowPlaying.playbackRate = 1
            let result = try await phone.connection.request(.templateRequest(HUTemplateRequest.with {
                $0.appID = music
                $0.sceneID = musicScene.sceneID
                $0.updateNowPlaying = nowPlaying
            }))
            guard result.code == .ok else { throw Failure("now playing: \(result.message)") }
            try await hmi.launch(maps)
            let mapsScene = try await phone.waitForScene(appID: maps)
            return Car(phone: phone, mapsScene: mapsScene.sceneID)
        }

        /// Writes 20 ms units in real time (the app's clock), `content(unit)` each.
        func song(_ stream: AudioStream, units: Int, start: Double, content: (Int) -> [Int16]) async throws {
            for index in 0..<units {
                try await AudioBench.sleep(until: start + Double(index) * 0.02)
                try await stream.write(samples: content(index), timestamp: UInt64(index) * 20_000)
            }
        }

        func openMain(_ codec: HUAudioCodec = .pcmS16Le) async throws -> AudioStream {
            let format: HUAudioFormat = codec == .opus ? .opus(sampleRate: 48_000, channels: 2) : .pcm(sampleRate: 48_000, channels: 2)
            return try await phone.openAudioStream(appID: Self.music, type: .main, format: format)
        }

        /// Waits for the mixer to go idle and finish the WAV (1 s after the last stream).
        func settle() async throws { try await Task.sleep(nanoseconds: 1_600_000_000) }

        /// `jitter`: each write is late by up to this much; the times returned are when it was due.
        func beeps(seconds: Double, jitter: Double = 0) async throws -> [Double] {
            let stream = try await openMain()
            var writes: [Double] = []
            let start = AudioBench.now() + 0.1
            let units = Int(seconds / 0.02)
            for index in 0..<units {
                let due = start + Double(index) * 0.02
                try await AudioBench.sleep(until: due + (jitter > 0 ? Double.random(in: 0...jitter) : 0))
                let beep = index % 25 < 5 && index >= 25
                if beep && index % 25 == 0 { writes.append(jitter > 0 ? due : AudioBench.now()) }
                let samples = beep ? AudioBench.tone(440, amplitude: 0.4, from: (index % 25) * unit, count: unit, channels: 2)
                    : [Int16](repeating: 0, count: unit * 2)
                try await stream.write(samples: samples, timestamp: UInt64(index) * 20_000)
            }
            try await stream.close()
            try await settle()
            return writes
        }

        func songWithPrompts(prompts: Int) async throws -> [(start: Double, end: Double)] {
            let stream = try await openMain()
            let start = AudioBench.now() + 0.1
            let units = 50 * (2 * prompts + 1)
            var marks: [(start: Double, end: Double)] = []
            let writer = Task {
                try await song(stream, units: units, start: start) { AudioBench.tone(440, amplitude: 0.4, from: $0 * unit, count: unit, channels: 2) }
            }
            for index in 0..<prompts {
                try await AudioBench.sleep(until: start + 1 + Double(index) * 2)
                var begin = HUNavigationRequest()
                begin.appID = Self.maps
                begin.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })
                let sent = AudioBench.now()
                _ = try await phone.connection.request(.navigationRequest(begin))
                let prompt = try await phone.openAudioStream(appID: Self.maps, type: .alternate, format: .pcm(sampleRate: 48_000, channels: 1))
                try await song(prompt, units: 40, start: sent) { AudioBench.tone(880, amplitude: 0.4, from: $0 * unit, count: unit, channels: 1) }
                await prompt.waitUntilPlayed()
                var end = HUNavigationRequest()
                end.appID = Self.maps
                end.op = .endPrompt(HUEndPrompt())
                let ended = AudioBench.now()
                _ = try await phone.connection.request(.navigationRequest(end))
                try? await prompt.close()
                marks.append((sent, ended))
            }
            try await writer.value
            try await stream.close()
            try await settle()
            return marks
        }

        func delayBurst(delay: Double) async throws -> (stopped: Double, resumed: Double) {
            let stream = try await openMain()
            let start = AudioBench.now() + 0.1
            var stopped = 0.0, resumed = 0.0
            for index in 0..<150 {
                if index == 75 {
                    stopped = AudioBench.now()
                    try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
                    resumed = AudioBench.now()
                }
                // After the pause the owed units go at once (their times have passed), then real time again.
                try await AudioBench.sleep(until: start + Double(index) * 0.02)
                try await stream.write(samples: AudioBench.tone(440, amplitude: 0.4, from: index * unit, count: unit, channels: 2), timestamp: UInt64(index) * 20_000)
            }
            try await stream.close()
            try await settle()
            return (stopped, resumed)
        }

        /// The song plays 2 s, then the phone's socket closes without a word.
        func lostLink() async throws -> Double {
            let stream = try await openMain()
            try await song(stream, units: 100, start: AudioBench.now() + 0.1) { AudioBench.tone(440, amplitude: 0.4, from: $0 * unit, count: unit, channels: 2) }
            let closed = AudioBench.now()
            await phone.connection.close()
            try await settle()
            return closed
        }

        func cost(codec: HUAudioCodec, seconds: Double, daemonPID: pid_t) async throws -> (cpuPercent: Double, bytesPerSecond: Double) {
            let stream = try await openMain(codec)
            let encoder = codec == .opus ? try OpusEncoder() : nil
            let units = Int(seconds / 0.02)
            var bytes = 0
            let cpuBefore = threadNanoseconds(pid: daemonPID)
            let start = AudioBench.now() + 0.1
            for index in 0..<units {
                try await AudioBench.sleep(until: start + Double(index) * 0.02)
                let samples = AudioBench.tone(440, amplitude: 0.4, from: index * unit, count: unit, channels: 2)
                var unitBuffer = ByteBuffer()
                if let encoder {
                    unitBuffer.writeBytes(encoder.encode(samples))
                } else {
                    for sample in samples { unitBuffer.writeInteger(sample, endianness: .little) }
                }
                bytes += FrameHeader.size + 8 + unitBuffer.readableBytes
                try await stream.write(unitBuffer, timestamp: UInt64(index) * 20_000)
            }
            await stream.waitUntilPlayed()
            let elapsed = AudioBench.now() - start
            let cpu = Double(threadNanoseconds(pid: daemonPID) - cpuBefore) / 1000
            try await stream.close()
            try await settle()
            return (cpu / 1e6 / elapsed * 100, Double(bytes) / elapsed)
        }
    }

    final class OpusEncoder {
        let encoder: OpaquePointer
        init() throws {
            var error: Int32 = 0
            guard let made = opus_encoder_create(48_000, 2, OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
                throw Failure("opus_encoder_create: \(error)")
            }
            encoder = made
        }
        deinit { opus_encoder_destroy(encoder) }
        func encode(_ pcm: [Int16]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 4000)
            let count = pcm.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { opus_encode(encoder, input.baseAddress!, Int32(AudioBench.unit), $0.baseAddress!, 4000) }
            }
            return Array(out[0..<Int(max(0, count))])
        }
    }

    // MARK: - The car's output

    struct Output {
        /// CLOCK_MONOTONIC seconds of sample 0.
        var started: Double
        /// The left channel, -1...1.
        var left: [Float]

        func index(_ time: Double) -> Int { max(0, min(left.count, Int((time - started) * Double(AudioBench.rate)))) }

        /// The amplitude of `hertz` in 10 ms from `at` (Goertzel, Hann window).
        func amplitude(_ hertz: Double, at: Int, count: Int = 480) -> Double {
            guard at >= 0, at + count <= left.count else { return 0 }
            let coefficient = 2 * cos(2 * Double.pi * hertz / Double(AudioBench.rate))
            var s1 = 0.0, s2 = 0.0
            for index in 0..<count {
                let window = 0.5 - 0.5 * cos(2 * Double.pi * Double(index) / Double(count - 1))
                let s0 = Double(left[at + index]) * window + coefficient * s1 - s2
                s2 = s1
                s1 = s0
            }
            let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
            return 2 * power.squareRoot() / (Double(count) * 0.5)
        }

        /// The median amplitude of `hertz` over 10 ms windows between two times.
        func level(_ hertz: Double, from: Double, to: Double) -> Double {
            var values: [Double] = []
            var at = index(from)
            while at + 480 <= index(to) {
                values.append(amplitude(hertz, at: at))
                at += 240
            }
            return values.isEmpty ? 0 : values.sorted()[values.count / 2]
        }

        /// How long `hertz` sounds in all (10 ms windows).
        func duration(_ hertz: Double) -> Double {
            var windows = 0
            var at = 0
            while at + 480 <= left.count {
                if amplitude(hertz, at: at) >= 0.2 { windows += 1 }
                at += 480
            }
            return Double(windows) * 0.01
        }

        /// The first time in the range whose 10 ms window's 440 Hz amplitude matches (the window's middle).
        func firstTime(from: Double, to: Double, where matches: (Double) -> Bool, hertz: Double = 440, step: Int = 120) -> Double? {
            var at = index(from)
            while at + 480 <= index(to) {
                if matches(amplitude(hertz, at: at)) { return started + Double(at + 240) / Double(AudioBench.rate) }
                at += step
            }
            return nil
        }

        /// In the range: when `hertz` first fell silent, how long it stayed so, and the
        /// largest sample meanwhile (silence, not noise).
        func silence(_ hertz: Double, from: Double, to: Double) -> (startedAt: Double, seconds: Double, peak: Double) {
            var at = index(from)
            var first: Int?
            var quiet = 0
            var peak: Float = 0
            while at + 480 <= index(to) {
                let silent = amplitude(hertz, at: at) < 0.02
                if silent {
                    if first == nil { first = at + 240 }
                    quiet += 240
                    // The window's middle: its edges may hold the tone that ends or starts.
                    for sample in left[(at + 180)..<(at + 300)] { peak = max(peak, abs(sample)) }
                } else if first != nil, quiet > 0 {
                    break
                }
                at += 240
            }
            let start = first.map { started + Double($0) / Double(AudioBench.rate) } ?? to
            return (start, Double(quiet) / Double(AudioBench.rate), Double(peak))
        }
    }

    /// The WAV the mixer finished (its sizes patched), left channel.
    func readWAV(_ path: String) throws -> Output {
        for _ in 0..<400 {
            if let file = fopen(path, "rb") {
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = fread(&chunk, 1, chunk.count, file)
                    if count <= 0 { break }
                    bytes.append(contentsOf: chunk[0..<count])
                }
                fclose(file)
                func u32(_ at: Int) -> UInt32 { UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24 }
                if bytes.count >= 60, u32(4) != 0xFFFF_FFFF {
                    var started: UInt64 = 0
                    for index in 0..<8 { started |= UInt64(bytes[44 + index]) << (8 * index) }
                    let end = min(bytes.count, 60 + Int(u32(56)))
                    let left = stride(from: 60, to: end - 3, by: 4).map { Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768 }
                    return Output(started: Double(started) / 1e9, left: left)
                }
            }
            usleep(50_000)
        }
        throw Failure("the mixer did not finish \(path)")
    }
}

/// Time on a CPU of all a process's threads, nanoseconds (/proc/PID/task/*/schedstat,
/// exact where /proc/PID/stat counts 10 ms ticks).
func threadNanoseconds(pid: pid_t) -> UInt64 {
    guard let directory = opendir("/proc/\(pid)/task") else { return 0 }
    defer { closedir(directory) }
    var total: UInt64 = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard name.first?.isNumber == true, let file = fopen("/proc/\(pid)/task/\(name)/schedstat", "r") else { continue }
        var line = [CChar](repeating: 0, count: 128)
        if fgets(&line, Int32(line.count), file) != nil, let first = String(cString: line).split(separator: " ").first, let value = UInt64(first) {
            total += value
        }
        fclose(file)
    }
    return total
}

func format2(_ value: Double) -> String {
    let hundredths = Int((abs(value) * 100).rounded())
    return (value < 0 ? "-" : "") + "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
}

func loadAverage() -> String {
    guard let file = fopen("/proc/loadavg", "r") else { return "load unknown" }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 128)
    guard fgets(&line, Int32(line.count), file) != nil else { return "load unknown" }
    return "load average " + String(cString: line).split(separator: " ").prefix(3).joined(separator: " ")
}
