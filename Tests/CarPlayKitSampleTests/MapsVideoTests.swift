import Foundation
import HeadUnitClient
import HeadUnitVideo
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 28, the phone side: the MapsApp example (its real binary, drawing
/// with cairo through CarPlayKit's `CPWindow`) against the real daemon; an
/// HMI watches the main screen's video and decodes it with OpenH264. The
/// picture is a map (the route's blue is there, the picture is not flat), a
/// pan and a zoom from the car change the next frames, and a keyframe the
/// viewer asks for comes as an IDR.
@Suite("The MapsApp's map streamed to the car", .serialized)
struct MapsVideoTests {
    static let appID = "com.example.maps"

    /// The MapsApp process; its stdout lines collected for the tests to wait on.
    final class MapsAppProcess: @unchecked Sendable {
        let process = Process()
        private let lock = NSLock()
        private var lines: [String] = []
        private var partial = ""
        private let pipe = Pipe()

        init(socket: String) throws {
            let folder = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
                .deletingLastPathComponent()
            // `swift test` builds every product next to the test bundle.
            let binary = ProcessInfo.processInfo.environment["MAPSAPP_BINARY"] ?? folder.appendingPathComponent("MapsApp").path
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [socket]
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            pipe.fileHandleForReading.readabilityHandler = { [unowned self] handle in
                let data = handle.availableData
                guard !data.isEmpty else { return }
                lock.withLock {
                    partial += String(decoding: data, as: UTF8.self)
                    while let newline = partial.firstIndex(of: "\n") {
                        lines.append(String(partial[..<newline]))
                        partial = String(partial[partial.index(after: newline)...])
                    }
                }
            }
            try process.run()
        }

        var output: [String] { lock.withLock { lines } }

        /// Waits until a line starting with `prefix` was printed (nil after 60 s).
        func line(startingWith prefix: String) async -> String? {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                if let line = output.first(where: { $0.hasPrefix(prefix) }) { return line }
                try? await Task.sleep(nanoseconds: 20_000_000)
            }
            return nil
        }

        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            pipe.fileHandleForReading.readabilityHandler = nil
        }
    }

    /// An HMI peer watching one screen's video as a real viewer does: a
    /// thread of its own reads every frame as it comes and answers the
    /// daemon's PINGs, so the viewer is neither silent (cut off after
    /// `heartbeat_timeout_ms`, PROTOCOL.md section 6) nor a slow consumer
    /// (section 10.5) while the test is busy elsewhere or waits for a turn
    /// on a loaded machine. The test decodes the kept video frames, in
    /// order, when it asks (blocking: used on its own thread).
    final class Viewer: @unchecked Sendable {
        // @unchecked: the socket is read only by the reading thread and written
        // under `sendLock`; what that thread keeps is guarded by `condition`; the
        // decoder and the fields below it are used by one test thread at a time.
        private let client: RawSocketClient
        private let sendLock = NSLock()
        private let condition = NSCondition()
        /// Video frames read and not yet taken by the test, and their bytes.
        private var kept: [[UInt8]] = []
        private var keptBytes = 0
        /// Why the reading ended (nil while it goes on).
        private var ended: String?
        private var streamChannel: UInt32 = 0
        private var refused: [HUResult] = []
        private var goodbye: HUGoodbye?
        private let finished = DispatchSemaphore(value: 0)
        /// What the test may leave unread: far more than it ever does (a few MB).
        static let keptLimit = 64 << 20

        let decoder: H264Decoder
        var lastNumber: UInt32 = 0
        var sizes: [Int] = []
        /// The NAL unit types of the last keyframe's access unit.
        var keyframeNALTypes: Set<UInt8> = []

        init(_ daemon: TestDaemon, screen: HUScreen) throws {
            client = try daemon.connectUnix()
            try client.handshake(role: .hmi)
            decoder = try H264Decoder()
            try client.send(.watchVideo(HUWatchVideo.with { $0.screen = screen }), requestID: 1)
            Thread.detachNewThread { [self] in read() }
        }

        /// The video channel, from the VideoStreams the daemon sent.
        var channel: UInt32 { condition.withLock { streamChannel } }
        /// The requests the daemon refused (none expected).
        var refusals: [HUResult] { condition.withLock { refused } }

        func send(_ body: HUEnvelope.OneOf_Body, requestID: UInt32) throws {
            try sendLock.withLock { try client.send(body, requestID: requestID) }
        }

        /// Ends the connection and waits for the reading thread to stop.
        func close() {
            shutdown(client.fd, Int32(SHUT_RDWR))
            _ = finished.wait(timeout: .now() + 30)
            client.close()
        }

        /// The reading thread: every frame as it comes, until the connection ends.
        private func read() {
            var reason = "the daemon closed the connection"
            reading: do {
                while let frame = try client.readFrame(timeout: 3_600) {
                    switch FrameKind(rawValue: frame.kind) {
                    case .ping?:
                        try sendLock.withLock { try client.sendFrame(.pong, payload: frame.payload) }
                    case .video?:
                        let full = condition.withLock {
                            kept.append(frame.payload)
                            keptBytes += frame.payload.count
                            condition.broadcast()
                            return keptBytes > Self.keptLimit
                        }
                        if full {
                            reason = "over \(Self.keptLimit) bytes of video left unread by the test"
                            break reading
                        }
                    case .message?:
                        let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                        condition.withLock {
                            switch envelope.body {
                            case .videoStreams(let streams): if let stream = streams.streams.first { streamChannel = stream.params.channel }
                            case .result(let result) where result.code != .ok: refused.append(result)
                            case .goodbye(let farewell): goodbye = farewell
                            default: break
                            }
                        }
                    default:
                        break
                    }
                }
            } catch {
                reason = "\(error)"
            }
            condition.withLock {
                ended = goodbye.map { "Goodbye{\($0.code), \"\($0.reason)\"}" } ?? reason
                condition.broadcast()
            }
            finished.signal()
        }

        /// The next video frame the reading thread kept; nil at the deadline.
        /// Throws, saying why, once the connection ended and nothing is left.
        private func nextVideoFrame(until deadline: Date) throws -> [UInt8]? {
            condition.lock()
            defer { condition.unlock() }
            while true {
                if !kept.isEmpty, Date() < deadline {
                    keptBytes -= kept[0].count
                    return kept.removeFirst()
                }
                if kept.isEmpty, let ended { throw RawClientError.closed("a video frame (\(ended))") }
                if Date() >= deadline || !condition.wait(until: deadline) { return nil }
            }
        }

        /// Decodes the kept frames until one gives a picture; the frame's header with it (nil: none within the timeout).
        func nextPicture(timeout: Double = 30) throws -> (VideoFrameHeader, I420Picture)? {
            let deadline = Date().addingTimeInterval(timeout)
            while let payload = try nextVideoFrame(until: deadline) {
                guard case .success(let header) = VideoFrameHeader.parse(ByteBuffer(bytes: payload)) else { continue }
                lastNumber = header.frameNumber
                sizes.append(payload.count - VideoFrameHeader.size)
                let accessUnit = Array(payload[VideoFrameHeader.size...])
                if header.isKeyframe { keyframeNALTypes = MapsVideoTests.nalTypes(accessUnit) }
                if let decoded = try decoder.decode(accessUnit) { return (header, decoded) }
            }
            return nil
        }

        /// The first picture whose difference from `previous` is at least `fraction` (nil: none within the timeout).
        func changedPicture(from previous: I420Picture, fraction: Double = 0.05, timeout: Double = 30) throws -> I420Picture? {
            let deadline = Date().addingTimeInterval(timeout)
            while let (_, picture) = try nextPicture(timeout: max(0, deadline.timeIntervalSinceNow)) {
                if MapsVideoTests.difference(previous, picture) >= fraction { return picture }
            }
            return nil
        }
    }

    /// Chroma samples in the route's blue (U high, V low; day and night styles alike).
    static func routeSamples(_ picture: I420Picture) -> Int {
        zip(picture.u, picture.v).reduce(0) { $0 + ($1.0 > 170 && $1.1 < 100 ? 1 : 0) }
    }

    /// Luma levels (in steps of 16) that cover at least 1% of the picture: a flat picture has one or two.
    static func lumaLevels(_ picture: I420Picture) -> Int {
        var histogram = [Int](repeating: 0, count: 16)
        for value in picture.y { histogram[Int(value) / 16] += 1 }
        return histogram.filter { $0 * 100 >= picture.y.count }.count
    }

    /// The fraction of luma samples that changed by more than 24 levels.
    static func difference(_ a: I420Picture, _ b: I420Picture) -> Double {
        guard a.y.count == b.y.count else { return 1 }
        let changed = zip(a.y, b.y).reduce(0) { $0 + (abs(Int($1.0) - Int($1.1)) > 24 ? 1 : 0) }
        return Double(changed) / Double(a.y.count)
    }

    /// The access unit holds an IDR slice (NAL type 5) and a sequence parameter set (7).
    static func nalTypes(_ payload: [UInt8]) -> Set<UInt8> {
        var types: Set<UInt8> = []
        var index = 0
        while index + 3 < payload.count {
            if payload[index] == 0, payload[index + 1] == 0, payload[index + 2] == 1 {
                types.insert(payload[index + 3] & 0x1F)
                index += 3
            } else {
                index += 1
            }
        }
        return types
    }

    @Test func theMapsAppsMapReachesTheCarFollowsPanAndZoomAndAnswersKeyframeRequests() async throws {
        let daemon = try await onOwnThread(gated: false) { try TestDaemon.launch(tcp: false) }
        defer { _ = try? daemon.terminate() }
        let app = try MapsAppProcess(socket: daemon.unixSocketPath)
        defer { app.stop() }
        #expect(await app.line(startingWith: "connected") != nil, "the MapsApp connected: \(app.output)")

        let hmi = try await HMISession.connect(to: .unix(path: daemon.unixSocketPath))
        defer { Task { await hmi.close() } }
        try await hmi.launch(Self.appID)
        let map = try #require(await hmi.waitForScreen { screen in
            if case .map? = screen.top.kind, screen.top.map.mapButtons.contains(where: { $0.id == "zoom-in" }) { return true }
            return false
        })
        let streaming = await app.line(startingWith: "video: streaming main")
        #expect(streaming?.hasPrefix("video: streaming main 1600x960") == true, "\(app.output)")

        // A viewer joins: it gets the map from a keyframe the car asked for.
        let viewer = try await onOwnThread { try Viewer(daemon, screen: .main) }
        let first = try #require(try await onOwnThread { try viewer.nextPicture() }, "a picture reaches the viewer")
        #expect(first.0.isKeyframe, "a new viewer starts from a keyframe")
        #expect(first.1.width == 1600 && first.1.height == 960)
        let route = Self.routeSamples(first.1)
        #expect(route > 500, "the route's blue is on the map (\(route) chroma samples)")
        #expect(Self.lumaLevels(first.1) >= 3, "the picture is a map, not a flat colour")

        // A pan from the car: the app moves its map, CarPlayKit draws and sends it again.
        try await hmi.pressButton("pan", on: map.top.id)
        // Refused until the app has entered panning mode.
        let panned = await Self.retried {
            _ = try await hmi.connection.request(.navigationInput(HUNavigationInput.with { $0.appID = Self.appID; $0.kind = .pan(.left) }))
        }
        #expect(panned, "the car's pan reached the app")
        let afterPan = try #require(try await onOwnThread { try viewer.changedPicture(from: first.1) }, "the pan changes the map")
        #expect(Self.routeSamples(afterPan) > 0)

        // A zoom button (the app's own map button): the next frames show the map closer.
        try await hmi.pressButton("zoom-in", on: map.top.id)
        let zoomed = try #require(try await onOwnThread { try viewer.changedPicture(from: afterPan) }, "the zoom changes the map")
        _ = zoomed

        // The viewer asks for a keyframe (its decoder lost sync): the phone's next frame is an IDR.
        let before = viewer.lastNumber
        try await onOwnThread(gated: false) {
            try viewer.send(.requestKeyframe(HURequestKeyframe.with { $0.channel = viewer.channel; $0.reason = .viewerAsked }), requestID: 2)
        }
        var keyframe: (VideoFrameHeader, I420Picture)?
        // 20 waits of up to 2 s each (40 s in all, turns for a thread not counted).
        for attempt in 0..<20 where keyframe == nil {
            // The car paces keyframe requests (one per 250 ms); a paced one leaves with the
            // next frame, so a static map gets a nudge (a zoom) when nothing comes.
            if attempt > 0 { try await hmi.pressButton(attempt % 2 == 0 ? "zoom-in" : "zoom-out", on: map.top.id) }
            keyframe = try await onOwnThread { () throws -> (VideoFrameHeader, I420Picture)? in
                while let next = try viewer.nextPicture(timeout: 2) {
                    if next.0.isKeyframe && next.0.frameNumber > before { return next }
                }
                return nil
            }
        }
        let idr = try #require(keyframe, "a keyframe answers the viewer's request")
        #expect(idr.1.width == 1600)
        #expect(viewer.keyframeNALTypes.isSuperset(of: [5, 7, 8]), "an IDR with its SPS and PPS: \(viewer.keyframeNALTypes)")

        // The dashboard and the cluster windows stream too, each at its own size.
        try await hmi.launch(Self.appID, kind: .dashboard)
        try await hmi.launch(Self.appID, kind: .instrumentCluster)
        #expect(await app.line(startingWith: "video: streaming dashboard 1040x960") != nil, "\(app.output)")
        #expect(await app.line(startingWith: "video: streaming cluster 960x480") != nil, "\(app.output)")
        // Guidance from the dashboard's shortcut: the car drives, every window animates.
        // Refused until the shortcut buttons have reached the car.
        let started = await Self.retried {
            _ = try await hmi.connection.request(.navigationInput(HUNavigationInput.with { $0.appID = Self.appID; $0.kind = .dashboardButton("go-home") }))
        }
        #expect(started, "the dashboard's shortcut started guidance")
        #expect(await app.line(startingWith: "video: main 30 frames sent") != nil, "the main window animates: \(app.output)")
        #expect(viewer.refusals.isEmpty, "the viewer's requests were taken: \(viewer.refusals)")
        print("maps video: main frames \(viewer.sizes.count), sizes \(viewer.sizes.prefix(8)) bytes; route samples \(route)")
        print(app.output.filter { $0.hasPrefix("video:") }.joined(separator: "\n"))
        try await onOwnThread(gated: false) { viewer.close() }
    }

    /// Repeats `attempt` until it succeeds (a request the car refuses until the
    /// app is ready for it), for up to `timeout` seconds; false if it never did.
    static func retried(timeout: Double = 30, _ attempt: () async throws -> Void) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do {
                try await attempt()
                return true
            } catch {
                if Date() >= deadline { return false }
                try? await Task.sleep(nanoseconds: 20_000_000)
            }
        }
    }
}
