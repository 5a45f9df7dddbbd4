import ArgumentParser
import HeadUnitClient
import HeadUnitVideo
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Frame rate and latency of one watched screen's video, printed by `watch`.
struct VideoRate {
    var frames = 0
    var keyframes = 0
    var bytes = 0
    var latencies: [Double] = []  // ms, from the header's timestamp (same clock)
    var gaps: [Double] = []       // ms between arrivals
    var lastArrival: UInt64?
    var size = ""

    mutating func add(_ frame: VideoFrame) {
        frames += 1
        if frame.header.isKeyframe { keyframes += 1 }
        bytes += frame.accessUnit.readableBytes
        if let latency = frame.latencyMicroseconds { latencies.append(Double(latency) / 1000) }
        if let lastArrival { gaps.append(Double(frame.receivedMicroseconds - lastArrival) / 1000) }
        lastArrival = frame.receivedMicroseconds
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    /// One line for `seconds` of frames; resets the counts.
    mutating func line(_ screen: HUScreen, seconds: Double) -> String {
        let one = String.init(format1:)
        var text = "video \(screen): \(one(Double(frames) / seconds)) fps"
        if !latencies.isEmpty {
            text += ", latency p50 \(one(Self.percentile(latencies, 0.5))) ms p99 \(one(Self.percentile(latencies, 0.99))) ms (from the frames' timestamps)"
        } else if !gaps.isEmpty {
            // The app's clock is not ours: the time between frames is what can be measured.
            text += ", inter-arrival p50 \(one(Self.percentile(gaps, 0.5))) ms p99 \(one(Self.percentile(gaps, 0.99))) ms (timestamps not on this clock)"
        }
        text += ", \(keyframes) keyframe(s), \(bytes * 8 / max(1, Int(seconds * 1000))) kbit/s\(size.isEmpty ? "" : ", " + size)"
        let keep = (lastArrival, size)
        self = VideoRate()
        (lastArrival, size) = keep
        return text
    }
}

extension Watch {
    /// Prints each watched screen's frame rate and latency every `interval` seconds while frames flow.
    static func reportVideo(_ hmi: HMISession, screens: [HUScreen], interval: Double = 2) async {
        let watch: VideoWatch
        do { watch = try await hmi.watchVideo(screens) } catch {
            print("video: cannot watch \(screens): \(error)")
            return
        }
        var rates: [HUScreen: VideoRate] = [:]
        var since = VideoWatch.monotonicMicroseconds()
        for await event in watch {
            switch event {
            case .streams(let streams):
                let shown = streams.streams.map { "\($0.screen) \($0.appID) \($0.params.widthPx)x\($0.params.heightPx)" }
                print("video streams: " + (shown.isEmpty ? "none" : shown.joined(separator: "; ")))
                for stream in streams.streams { rates[stream.screen, default: VideoRate()].size = "\(stream.params.widthPx)x\(stream.params.heightPx)" }
            case .frames(let frames):
                // Frames that came while this loop printed count as received; the last is the one shown.
                for frame in frames { rates[frame.screen, default: VideoRate()].add(frame) }
            }
            let now = VideoWatch.monotonicMicroseconds()
            let seconds = Double(now - since) / 1_000_000
            if seconds >= interval {
                for screen in rates.keys.sorted(by: { $0.rawValue < $1.rawValue }) where rates[screen]!.frames > 0 {
                    print(rates[screen]!.line(screen, seconds: seconds))
                }
                since = now
            }
            flushOutput()
        }
    }
}

/// `headunitctl test-pattern`: a phone whose navigation app streams a moving
/// test pattern into every scene window, a video source for the simulator and
/// tests before a real map app draws one.
struct TestPattern: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test-pattern",
        abstract: "Play a phone with a navigation app that streams a moving H.264 test pattern to each of its scene windows.",
        discussion: "Announces the app (a map template on the main scene) and, for each scene the car connects (main, dashboard, instrument cluster), encodes colour bars with a moving bar and the frame number as 16 blocks along the top-left, at the window's size. Frames carry this machine's monotonic clock, so a viewer on the same machine measures latency. Prints 'video: streaming ...' for each scene. Runs until interrupted."
    )
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Frames per second (1 to 30).") var fps = 30
    @Option(help: "The app id.") var appID = "com.example.pattern"

    func validate() throws {
        guard (1...30).contains(fps) else { throw ValidationError("--fps is 1 to 30") }
    }

    func run() async throws {
        let phone: PhoneSession
        do { phone = try await PhoneSession.connect(to: connection.endpoint, deviceName: "Test pattern phone") } catch {
            throw fail("cannot connect as a phone: \(error)")
        }
        let app = HUAppInfo.with { $0.appID = appID; $0.displayName = "Pattern"; $0.entitlements = ["com.apple.developer.carplay-maps"] }
        do { _ = try await phone.announce([app]) } catch { throw fail("announce: \(error)") }
        print("connected: \(appID) announced; launch it from the car")
        flushOutput()
        let keyframes = KeyframeAsks()
        await withTaskGroup(of: Void.self) { group in
            for await event in phone.events {
                switch event {
                case .sceneConnected(let controller):
                    let scene = controller.scene
                    if scene.kind == .main {
                        let map = HUTemplate.with {
                            $0.id = "map"
                            $0.map = HUMapTemplate.with { $0.mapButtons = [HUMapButton.with { $0.id = "recenter"; $0.image = HUImage.with { $0.asset = "recenter"; $0.widthPx = 88; $0.heightPx = 88 } }] }
                        }
                        group.addTask { _ = try? await controller.setRootTemplate(map) }
                    }
                    let fps = self.fps
                    group.addTask { await Self.stream(phone, scene, fps: fps, keyframes: keyframes) }
                case .sceneDisconnected(let gone):
                    await keyframes.end(gone.sceneID)
                case .other(let envelope):
                    if case .requestKeyframe(let ask) = envelope.body { await keyframes.ask(ask.channel) }
                default:
                    break
                }
            }
            group.cancelAll()
        }
        print("connection closed")
    }

    /// Encodes and sends one scene's window until the scene ends.
    static func stream(_ phone: PhoneSession, _ scene: HUSceneConnected, fps: Int, keyframes: KeyframeAsks) async {
        let params = scene.video
        let width = Int(params.widthPx), height = Int(params.heightPx)
        guard width > 0, height > 0, params.channel != 0 else { return }
        let encoder: H264Encoder
        do {
            encoder = try H264Encoder(width: width, height: height, fps: Double(fps), bitrate: width * height * 2, keyframeInterval: fps * 2)
        } catch {
            print("video: \(scene.kind) cannot encode: \(error)")
            return
        }
        await keyframes.start(params.channel)
        print("video: streaming \(scene.kind) \(width)x\(height) at \(fps) fps on channel \(params.channel)")
        flushOutput()
        let base = Pattern.bars(width: width, height: height)
        let period = UInt64(1_000_000 / fps)
        var next = VideoWatch.monotonicMicroseconds()
        var number: UInt32 = 0
        var skipped = false
        while !Task.isCancelled, await keyframes.isLive(params.channel) {
            if await keyframes.take(params.channel) || skipped { encoder.requestKeyframe() }
            let drawn = VideoWatch.monotonicMicroseconds()
            let picture = Pattern.frame(base, number: number + 1)
            if let (accessUnit, isKeyframe) = try? encoder.encode(picture, timestampMilliseconds: Int64(drawn / 1000)) {
                number += 1
                let header = VideoFrameHeader(timestampMicroseconds: drawn, frameNumber: number, isKeyframe: isKeyframe)
                // Busy (the last frame still waits for the socket): skipped, and the next one is a keyframe.
                skipped = !(await phone.sendVideoFrame(channel: params.channel, header, accessUnit: ByteBuffer(bytes: accessUnit)))
            }
            next += period
            let now = VideoWatch.monotonicMicroseconds()
            if next > now { try? await Task.sleep(nanoseconds: (next - now) * 1000) } else { next = now }
        }
    }
}

/// Keyframe requests from the car, per channel, and which channels still stream.
actor KeyframeAsks {
    private var asked: Set<UInt32> = []
    private var live: Set<UInt32> = []
    func start(_ channel: UInt32) { live.insert(channel) }
    func end(_ channel: UInt32) { live.remove(channel) }
    func isLive(_ channel: UInt32) -> Bool { live.contains(channel) }
    func ask(_ channel: UInt32) { asked.insert(channel) }
    func take(_ channel: UInt32) -> Bool { asked.remove(channel) != nil }
}

/// The test picture: colour bars, a white bar sweeping across, and the frame
/// number in 16 black-or-white blocks along the top-left (as the codec test).
enum Pattern {
    static func bars(width: Int, height: Int) -> I420Picture {
        var picture = I420Picture(width: width, height: height)
        // Eight bars: luma steps, chroma pairs walking round the colour wheel.
        let colours: [(UInt8, UInt8, UInt8)] = [(180, 128, 128), (168, 44, 136), (145, 147, 44), (133, 63, 52),
                                                (63, 193, 204), (51, 109, 212), (28, 212, 120), (41, 128, 128)]
        for row in 0..<height {
            for column in 0..<width { picture.y[row * width + column] = colours[column * 8 / width].0 }
        }
        let half = width / 2
        for row in 0..<(height / 2) {
            for column in 0..<half {
                let (_, u, v) = colours[column * 8 / half]
                picture.u[row * half + column] = u
                picture.v[row * half + column] = v
            }
        }
        return picture
    }

    static let block = 16

    static func frame(_ base: I420Picture, number: UInt32) -> I420Picture {
        var picture = base
        let width = picture.width, height = picture.height
        // The sweeping bar: a quarter of the width every second at 30 fps.
        let barWidth = max(8, width / 40)
        let x = Int(number) * width / 120 % max(1, width - barWidth)
        let white = [UInt8](repeating: 235, count: barWidth)
        for row in stride(from: height / 4, to: height * 3 / 4, by: 1) {
            picture.y.replaceSubrange(row * width + x..<row * width + x + barWidth, with: white)
        }
        for bit in 0..<16 {
            let value: UInt8 = (number >> UInt32(bit)) & 1 == 1 ? 235 : 16
            let run = [UInt8](repeating: value, count: block)
            for row in 0..<block where (bit + 1) * block <= width {
                picture.y.replaceSubrange(row * width + bit * block..<row * width + (bit + 1) * block, with: run)
            }
        }
        return picture
    }
}
