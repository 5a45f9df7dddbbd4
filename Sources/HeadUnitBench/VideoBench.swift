import HeadUnitClient
import HeadUnitVideo
import HeadUnitWire
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Issue 28's measurements of the base-view video path through the daemon
/// (BENCHMARKS.md, "Base-view video"): a phone streams the three windows of a
/// navigation app (main 1600x960, dashboard 1040x960, cluster 960x480) with
/// frames OpenH264 encoded beforehand from a moving test pattern with a
/// block of noise (frames of the size the encoder's rate allows; the phone's
/// CPU goes to sending, not encoding), HMIs watch with the SDK's
/// `VideoWatch`. Printed:
///
/// 1. bytes per second of each window at 30 and 15 fps (this pattern);
/// 2. an HMI's control round trip (`GetStatus` on the connection that carries
///    its video) idle, then while the three windows stream: p50 / p99;
/// 3. the daemon's CPU per frame, with 1, 2 and 4 HMIs watching the three
///    windows (/proc/PID/task/*/schedstat): per frame from the phone, per
///    frame written to a viewer, and what each further HMI adds;
/// 4. a 2x slower HMI (its consumer takes 66 ms a frame) beside one that
///    keeps up: frames drawn by the app vs delivered to each, and how old a
///    delivered frame is (latest frame wins: nothing queues).
struct VideoBench {
    static let appID = "com.example.bench.video"
    let binary: String
    let seconds: Double

    /// One window: its channel, and a loop of access units to send (an IDR first).
    struct Window {
        var kind: HUSceneKind
        var channel: UInt32
        var width: Int
        var height: Int
        var units: [(bytes: ByteBuffer, key: Bool)]
        var unitsAt15: [(bytes: ByteBuffer, key: Bool)]
    }

    func run() async throws {
        let daemon = try SpawnedDaemon.start(binary: binary, arguments: [])
        defer { daemon.stop() }
        print("spawned \(binary) as pid \(daemon.pid) (log: \(daemon.logPath))")
        let endpoint = HeadUnitEndpoint.unix(path: daemon.socketPath)
        try await AudioBench(binary: binary, seconds: 0).waitForDaemon(endpoint)
        print("machine: \(loadAverage())")

        let control = try await HMISession.connect(to: endpoint, name: "bench-control")
        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench-phone")
        _ = try await phone.announce([HUAppInfo.with { $0.appID = Self.appID; $0.displayName = "Video"; $0.entitlements = ["com.apple.developer.carplay-maps"] }])
        var windows: [Window] = []
        for kind in [HUSceneKind.main, .dashboard, .instrumentCluster] {
            try await control.launch(Self.appID, kind: kind)
            guard case .sceneConnected(let controller)? = await phone.nextEvent(timeout: .seconds(5), where: {
                if case .sceneConnected(let c) = $0, c.appID == Self.appID, c.kind == kind { return true }
                return false
            }) else { throw Failure("no \(kind) scene connected") }
            let params = controller.scene.video
            if kind == .main {
                let map = HUTemplate.with { $0.id = "map"; $0.map = HUMapTemplate() }
                _ = try? await controller.setRootTemplate(map)
            }
            let width = Int(params.widthPx), height = Int(params.heightPx)
            windows.append(Window(
                kind: kind, channel: params.channel, width: width, height: height,
                units: try Self.encode(width: width, height: height, fps: 30), unitsAt15: try Self.encode(width: width, height: height, fps: 15)))
        }
        let asks = KeyframeFlags()
        let asker = Task {
            while !Task.isCancelled {
                let event = await phone.nextEvent(timeout: .milliseconds(200)) {
                    if case .other(let envelope) = $0, case .requestKeyframe = envelope.body { return true }
                    return false
                }
                if case .other(let envelope)? = event, case .requestKeyframe(let ask) = envelope.body { asks.ask(ask.channel) }
            }
        }
        defer { asker.cancel() }

        // 1. Bandwidth per window.
        for window in windows {
            func rate(_ units: [(bytes: ByteBuffer, key: Bool)], fps: Double) -> String {
                let bytes = units.reduce(0) { $0 + $1.bytes.readableBytes + 16 + 12 }
                return "\(format1(Double(bytes) / Double(units.count) * fps / 1000)) kB/s"
            }
            print(row("bytes/s \(window.kind) \(window.width)x\(window.height), an IDR every 2 s", "30 fps \(rate(window.units, fps: 30)), 15 fps \(rate(window.unitsAt15, fps: 15)) (frames, headers, access units)"))
        }

        // 2. Control round trip, idle and streaming.
        // As many round trips (~11 ms each) as fit in the stream after its first
        // half second: a p99 of 300 is the third worst, scheduling noise at these RTTs.
        let streamSeconds = max(5, seconds)
        let roundTripCount = max(300, Int((streamSeconds - 1.5) * 75))
        let viewer = try await Viewer.watch(endpoint, name: "bench-viewer-0", consumerDelay: 0)
        let idle = try await Self.roundTrips(viewer.hmi, count: roundTripCount)
        print(row("an HMI's GetStatus RTT, video watched, none flowing", AudioBench.distribution(idle) + " (\(roundTripCount) round trips)"))
        let streaming = Task { try await Self.stream(phone, windows, seconds: streamSeconds, asks: asks) }
        try await Task.sleep(nanoseconds: 500_000_000)
        let busy = try await Self.roundTrips(viewer.hmi, count: roundTripCount)
        let sent = try await streaming.value
        print(row("  the same while the three windows stream at 30 fps", AudioBench.distribution(busy) + " (p99 \(format2(Self.p99(busy) / Self.p99(idle)))x idle)"))
        print(row("  frames the phone sent / skipped (socket busy)", "\(sent.sent) / \(sent.skipped)"))
        print(row("  viewer: frames received and shown, p50 / p99 age at the consumer", viewer.report()))
        await viewer.stop()

        // 3. CPU per frame, per HMI.
        var perSecond: [(Int, Double)] = []
        for count in [1, 2, 4] {
            var viewers: [Viewer] = []
            for index in 0..<count { viewers.append(try await Viewer.watch(endpoint, name: "bench-viewer-\(index)", consumerDelay: 0)) }
            try await Task.sleep(nanoseconds: 300_000_000)
            let before = threadNanoseconds(pid: daemon.pid)
            let start = AudioBench.now()
            let result = try await Self.stream(phone, windows, seconds: seconds, asks: asks)
            let cpu = Double(threadNanoseconds(pid: daemon.pid) - before) / 1e9
            let elapsed = AudioBench.now() - start
            let forwarded = viewers.reduce(0) { $0 + $1.received() }
            perSecond.append((count, cpu / elapsed))
            print(row("daemon CPU, \(count) HMI(s) watching 3 windows", "\(format2(cpu / elapsed * 100))% of a core; \(format1(cpu / Double(result.sent) * 1e6)) us per frame from the phone (\(result.sent)), \(format1(cpu / Double(max(1, forwarded)) * 1e6)) us per frame a viewer received (\(forwarded))"))
            for viewer in viewers { await viewer.stop() }
        }
        if let one = perSecond.first, let four = perSecond.last, four.0 > one.0 {
            let framesPerSecond = 30.0 * Double(windows.count)
            let perHMI = (four.1 - one.1) / Double(four.0 - one.0)
            print(row("  each further HMI", "\(format2(perHMI * 100))% of a core, \(format1(perHMI / framesPerSecond * 1e6)) us per frame it is sent"))
        }

        // 4. A 2x slower HMI beside one that keeps up.
        let fast = try await Viewer.watch(endpoint, name: "bench-fast", consumerDelay: 0)
        let slow = try await Viewer.watch(endpoint, name: "bench-slow", consumerDelay: 2.0 / 30)
        try await Task.sleep(nanoseconds: 300_000_000)
        let result = try await Self.stream(phone, windows, seconds: seconds, asks: asks)
        let drawn = result.sent / windows.count
        print(row("2x slower HMI: frames drawn per window by the app", "\(drawn) in \(format1(seconds)) s; keyframes the car asked for, all windows: \(result.keyframesAsked)"))
        print(row("  the HMI that keeps up, per window", fast.report(windows: windows.count)))
        print(row("  the HMI taking 66 ms a frame, per window", slow.report(windows: windows.count)))
        await fast.stop()
        await slow.stop()

        print("machine after: \(loadAverage())")
        await phone.connection.close()
        await control.close()
    }

    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * 0.99))]
    }

    /// `count` GetStatus requests 10 ms apart; seconds each.
    static func roundTrips(_ hmi: HMISession, count: Int) async throws -> [Double] {
        var times: [Double] = []
        for _ in 0..<count {
            let start = AudioBench.now()
            _ = try await hmi.connection.resultOf(.getStatus(HUGetStatus()))
            times.append(AudioBench.now() - start)
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return times
    }

    /// Sends every window at 30 fps for `seconds`, stamped with the draw time
    /// on CLOCK_MONOTONIC; a keyframe request, or a frame the SDK skipped,
    /// makes the window's next frame the loop's IDR.
    static func stream(_ phone: PhoneSession, _ windows: [Window], seconds: Double, asks: KeyframeFlags) async throws -> (sent: Int, skipped: Int, keyframesAsked: Int) {
        let ticks = Int(seconds * 30)
        var position = [Int](repeating: 0, count: windows.count)
        var sent = 0, skipped = 0, keyframesAsked = 0
        let start = AudioBench.now()
        for tick in 0..<ticks {
            try await AudioBench.sleep(until: start + Double(tick) / 30)
            for (index, window) in windows.enumerated() {
                if asks.take(window.channel) {
                    position[index] = 0
                    keyframesAsked += 1
                }
                let unit = window.units[position[index] % window.units.count]
                let number = FrameCounter.next(window.channel)
                let header = VideoFrameHeader(timestampMicroseconds: VideoWatch.monotonicMicroseconds(), frameNumber: number, isKeyframe: unit.key)
                if await phone.sendVideoFrame(channel: window.channel, header, accessUnit: unit.bytes) {
                    sent += 1
                    position[index] += 1
                } else {
                    skipped += 1
                    position[index] = 0
                }
            }
        }
        return (sent, skipped, keyframesAsked)
    }

    /// Two seconds of a moving test pattern (bars, a sweeping bar, a frame
    /// counter, as `headunitctl test-pattern` draws) with a 160x160 block of
    /// fresh noise, so that each P-frame costs about what the encoder's rate
    /// allows (a map being panned), not the few hundred bytes of a still
    /// pattern: an IDR, then P-frames.
    static func encode(width: Int, height: Int, fps: Int) throws -> [(bytes: ByteBuffer, key: Bool)] {
        let encoder = try H264Encoder(width: width, height: height, fps: Double(fps), bitrate: width * height * 2, keyframeInterval: fps * 2)
        var units: [(bytes: ByteBuffer, key: Bool)] = []
        for number in 0..<(fps * 2) {
            var picture = I420Picture(width: width, height: height)
            for row in 0..<height {
                for column in 0..<width { picture.y[row * width + column] = UInt8(40 + (column * 8 / width) * 24) }
            }
            let barWidth = max(8, width / 40), x = number * (width - barWidth) / (fps * 2)
            for row in (height / 4)..<(height * 3 / 4) {
                for column in x..<(x + barWidth) { picture.y[row * width + column] = 235 }
            }
            var seed = UInt32(truncatingIfNeeded: number &* 2_654_435_761 &+ 1)
            let noiseX = (number * 37) % max(1, width - 160), noiseY = (number * 11) % max(1, height - 160)
            for row in noiseY..<(noiseY + 160) {
                for column in noiseX..<(noiseX + 160) {
                    seed = seed &* 1_664_525 &+ 1_013_904_223
                    picture.y[row * width + column] = UInt8(truncatingIfNeeded: seed >> 24)
                }
            }
            for bit in 0..<16 where (bit + 1) * 16 <= width {
                let value: UInt8 = (number >> bit) & 1 == 1 ? 235 : 16
                for row in 0..<16 {
                    for column in (bit * 16)..<((bit + 1) * 16) { picture.y[row * width + column] = value }
                }
            }
            if number == 0 { encoder.requestKeyframe() }
            if let (unit, key) = try encoder.encode(picture, timestampMilliseconds: Int64(number * 1000 / fps)) {
                units.append((ByteBuffer(bytes: unit), key))
            }
        }
        return units
    }

    /// An HMI watching the three screens through the SDK, its consumer taking
    /// `consumerDelay` seconds per frame (its decoder and display).
    final class Viewer: Sendable {
        let hmi: HMISession
        let watch: VideoWatch
        let consumer: Task<Void, Never>
        let stats: Stats

        final class Stats: Sendable {
            /// Frames received (every one decoded), runs taken (the last frame of each shown), keyframes received, the shown frames' ages.
            let counts = Mutex<(received: Int, shown: Int, keyframes: Int, ages: [Double])>((0, 0, 0, []))
        }

        init(hmi: HMISession, watch: VideoWatch, consumerDelay: Double) {
            self.hmi = hmi
            self.watch = watch
            let stats = Stats()
            self.stats = stats
            consumer = Task {
                for await event in watch {
                    // A run of frames that came while the consumer was busy: all decoded, the last shown.
                    guard case .frames(let frames) = event, let shown = frames.last else { continue }
                    // How old the shown frame is when the consumer takes it: the app's draw to now.
                    let age = Double(VideoWatch.monotonicMicroseconds() - shown.header.timestampMicroseconds) / 1e6
                    let keyframes = frames.count { $0.header.isKeyframe }
                    stats.counts.withLock { $0.received += frames.count; $0.shown += 1; $0.keyframes += keyframes; $0.ages.append(age) }
                    if consumerDelay > 0 { try? await Task.sleep(nanoseconds: UInt64(consumerDelay * 1e9)) }
                }
            }
        }

        static func watch(_ endpoint: HeadUnitEndpoint, name: String, consumerDelay: Double) async throws -> Viewer {
            let hmi = try await HMISession.connect(to: endpoint, name: name)
            let watch = try await hmi.watchVideo([.main, .dashboard, .instrumentCluster])
            return Viewer(hmi: hmi, watch: watch, consumerDelay: consumerDelay)
        }

        func received() -> Int { stats.counts.withLock { $0.received } }

        func report(windows: Int = 1) -> String {
            let (received, shown, keyframes, ages) = stats.counts.withLock { ($0.received, $0.shown, $0.keyframes, $0.ages) }
            guard !ages.isEmpty else { return "none taken" }
            let sorted = ages.sorted()
            func at(_ q: Double) -> String { format1(sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * q))] * 1000) }
            return "\(received / windows) frames received (\(keyframes / windows) keyframes), \(shown / windows) shown; age of the shown frame at the consumer p50 \(at(0.5)) / p99 \(at(0.99)) / max \(at(1)) ms"
        }

        func stop() async {
            consumer.cancel()
            await hmi.close()
        }
    }
}

/// The channels the car asked a keyframe for, taken by the sender.
final class KeyframeFlags: Sendable {
    private let asked = Mutex<Set<UInt32>>([])
    func ask(_ channel: UInt32) { _ = asked.withLock { $0.insert(channel) } }
    func take(_ channel: UInt32) -> Bool { asked.withLock { $0.remove(channel) != nil } }
}

/// Frame numbers per channel, growing over every run of the bench (the car refuses one that does not grow).
enum FrameCounter {
    private static let numbers = Mutex<[UInt32: UInt32]>([:])
    static func next(_ channel: UInt32) -> UInt32 {
        numbers.withLock { $0[channel, default: 0] += 1; return $0[channel]! }
    }
}
