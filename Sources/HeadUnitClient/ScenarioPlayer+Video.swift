import HeadUnitWire
import NIOCore

/// What the player's HMI watch has received: the last VideoStreams and the
/// frames not used up by an expect_video step yet.
actor ScenarioVideoLog {
    private(set) var streams: HUVideoStreams?
    private(set) var frames: [VideoFrame] = []
    /// The most frames kept: more than a scenario sends between two expect_video steps.
    static let maximumFrames = 1000

    func record(_ event: VideoEvent) {
        switch event {
        case .streams(let streams): self.streams = streams
        case .frames(let run):
            frames += run
            if frames.count > Self.maximumFrames { frames.removeFirst(frames.count - Self.maximumFrames) }
        }
    }

    func takeFrames() -> [VideoFrame] {
        defer { frames = [] }
        return frames
    }
}

/// The HMI's video watch for the video steps, read by one task into a log.
final class ScenarioVideo: Sendable {
    let watch: VideoWatch
    let log = ScenarioVideoLog()
    private let reader: Task<Void, Never>

    init(watch: VideoWatch) {
        self.watch = watch
        let log = self.log
        reader = Task {
            for await event in watch { await log.record(event) }
        }
    }

    /// The stream of `appID` on `screen` in the last VideoStreams.
    func stream(of appID: String, on screen: HUScreen) async -> HUVideoStream? {
        await log.streams?.streams.first { $0.screen == screen && $0.appID == appID }
    }

    func stop() async {
        await watch.stop()
        reader.cancel()
    }
}

// Scenario steps for base-view video (PROTOCOL.md section 25): the HMI
// watches a screen, the phone sends frames, the HMI receives them from a
// keyframe on and asks for a keyframe.
extension ScenarioPlayer {
    static func screen(_ screen: HUScreen) -> HUScreen {
        screen == .unspecified ? .main : screen
    }

    /// Waits until `condition` holds, polling; false after `wait`.
    private func poll(_ wait: TimeAmount, _ condition: () async -> Bool) async -> Bool {
        let deadline = NIODeadline.now() + wait
        while true {
            if await condition() { return true }
            if NIODeadline.now() >= deadline { return false }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    func watchVideo(_ step: HUScenarioWatchVideo) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        let screen = Self.screen(step.screen)
        do {
            let watch = try await hmi.watchVideo([screen])
            if step.expect != .ok { return .failed("expected \(ErrorCodeNames.name(step.expect)), the watch started") }
            if video == nil || video?.watch !== watch { video = ScenarioVideo(watch: watch) }
        } catch let error as HeadUnitError where error.origin == .result {
            return error.code == step.expect && step.expect != .ok ? .expectedError(step.expect) : .failed("\(error)")
        } catch {
            return failure(error)
        }
        guard let video else { return .failed("no watch") }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        // VideoStreams follows the Result: wait for the one that shows the expected stream.
        let matched = await poll(wait) {
            guard let streams = await video.log.streams else { return false }
            let shown = streams.streams.filter { $0.screen == screen }
            return step.appID.isEmpty ? shown.isEmpty : shown.contains { $0.appID == step.appID }
        }
        let shown = await video.log.streams?.streams.filter { $0.screen == screen }.map { "\($0.appID) channel \($0.params.channel)" } ?? []
        if matched { return .ok(shown.isEmpty ? "no stream" : shown.joined(separator: ", ")) }
        return .failed("VideoStreams shows [\(shown.joined(separator: ", "))] on \(screen)")
    }

    func sendVideo(_ step: HUScenarioSendVideo) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        guard (1...300).contains(step.frames) else { return .failed("frames \(step.frames) is not 1 to 300") }
        guard step.frameBytes <= 65536 else { return .failed("frame_bytes \(step.frameBytes) is over 65536") }
        guard let scene = await phone.interfaceController(for: step.appID) else {
            return .failed("\(step.appID) has no main scene (launch it first)")
        }
        let channel = scene.scene.video.channel
        let size = step.frameBytes == 0 ? 64 : Int(step.frameBytes)
        let deadline = NIODeadline.now() + timeout
        let first = (videoFrameNumbers[channel] ?? 0) + 1
        for number in first..<(first + step.frames) {
            let key = number == first
            var accessUnit = ByteBuffer()
            accessUnit.writeBytes([0, 0, 0, 1, key ? 0x65 : 0x41])  // Annex B start code, IDR or non-IDR slice
            accessUnit.writeBytes((0..<size).map { UInt8(truncatingIfNeeded: Int(number) &* 31 &+ $0) })
            let header = VideoFrameHeader(timestampMicroseconds: VideoWatch.monotonicMicroseconds(), frameNumber: number, isKeyframe: key)
            // The SDK skips a frame while the previous one has not left for the
            // socket: send this one again once it has, so the chain stays whole.
            while await !phone.sendVideoFrame(channel: channel, header, accessUnit: accessUnit) {
                if NIODeadline.now() >= deadline { return .failed("frame \(number) not sent within \(timeout.nanoseconds / 1_000_000) ms") }
                try? await Task.sleep(nanoseconds: 2_000_000)
            }
            videoFrameNumbers[channel] = number
        }
        return .ok("frames \(first) to \(first + step.frames - 1) on channel \(channel)")
    }

    func expectVideo(_ step: HUScenarioExpectVideo) async -> Outcome {
        guard let video else { return .failed("no video watch (watch_video first)") }
        let screen = Self.screen(step.screen)
        guard let stream = await video.stream(of: step.appID, on: screen) else {
            return .failed("VideoStreams shows no stream of \(step.appID) on \(screen)")
        }
        let channel = stream.params.channel
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        _ = await poll(wait) { await video.log.frames.count >= Int(step.frames) }
        let frames = await video.log.takeFrames()
        let numbers = frames.map { "\($0.header.frameNumber)\($0.header.isKeyframe ? "K" : "")" }.joined(separator: " ")
        guard frames.count == Int(step.frames) else {
            return .failed("\(frames.count) frames arrived, expected \(step.frames): [\(numbers)]")
        }
        guard let first = frames.first else { return .ok("no frames") }
        if let other = frames.first(where: { $0.channel != channel }) {
            return .failed("a frame on channel \(other.channel), expected \(channel) only")
        }
        if !first.header.isKeyframe { return .failed("the first frame is not a keyframe: [\(numbers)]") }
        for (index, frame) in frames.enumerated() where frame.header.frameNumber != first.header.frameNumber + UInt32(index) {
            return .failed("frame numbers are not consecutive: [\(numbers)]")
        }
        return .ok("frames \(first.header.frameNumber) to \(frames.last!.header.frameNumber) on channel \(channel)")
    }

    func requestKeyframe(_ step: HUScenarioRequestKeyframe) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let phone else { return .failed("phone disconnected") }
        guard let video else { return .failed("no video watch (watch_video first)") }
        let screen = Self.screen(step.screen)
        guard let stream = await video.stream(of: step.appID, on: screen) else {
            return .failed("VideoStreams shows no stream of \(step.appID) on \(screen)")
        }
        let channel = stream.params.channel
        do {
            let request = HURequestKeyframe.with { $0.channel = channel; $0.reason = .viewerAsked }
            let result = try await hmi.connection.resultOf(.requestKeyframe(request))
            if result.code != .ok || step.expect != .ok { return check(result, expect: step.expect) }
        } catch {
            return failure(error)
        }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        let asked = await phone.nextEvent(timeout: wait) { event in
            guard case .other(let envelope) = event, case .requestKeyframe(let request) = envelope.body else { return false }
            return request.channel == channel && request.reason == .viewerAsked
        }
        return asked == nil ? .failed("the phone got no RequestKeyframe{VIEWER_ASKED} on channel \(channel)") : .ok("channel \(channel)")
    }
}
