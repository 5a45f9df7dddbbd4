#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HeadUnitWire
import NIOCore

/// One VIDEO frame of a watched screen (PROTOCOL.md section 25.3).
public struct VideoFrame: Sendable {
    /// The screen that shows the frame's stream (from the last `VideoStreams`;
    /// `.unspecified` for a channel it did not name).
    public var screen: HUScreen
    public var channel: UInt32
    public var header: VideoFrameHeader
    /// One H.264 access unit, Annex B: a slice of the received payload, not a copy.
    public var accessUnit: ByteBuffer
    /// When the frame arrived, on `VideoWatch.monotonicMicroseconds`'s clock.
    public var receivedMicroseconds: UInt64

    /// Draw-to-arrival time when the app stamps frames with this machine's
    /// monotonic clock (tests, a phone on the same host); nil when the
    /// timestamp cannot be on this clock (in the future, or over a minute old).
    public var latencyMicroseconds: UInt64? {
        guard header.timestampMicroseconds <= receivedMicroseconds else { return nil }
        let latency = receivedMicroseconds - header.timestampMicroseconds
        return latency < 60_000_000 ? latency : nil
    }
}

/// What a `VideoWatch` yields: the streams of the watched screens (the whole
/// truth each time), and frames.
public enum VideoEvent: Sendable {
    case streams(HUVideoStreams)
    /// Frames of one channel that came while the consumer was busy, oldest
    /// first, each needing the one before: decode them all, show the last.
    /// Never empty.
    case frames([VideoFrame])
}

/// The HMI (or cluster) side of base-view video: the screens this connection
/// watches, as one async sequence of stream changes and frames.
///
/// Bounded by `LatestVideoFrames`: the frames a busy consumer has not taken
/// wait as one run per channel, handed out whole (a slower consumer decodes
/// them all and shows the newest, and the app is not asked for keyframes); a
/// keyframe replaces the run; a run past its bound (a consumer that stopped)
/// is dropped with the P-frames after it, and a keyframe is asked for
/// (`RequestKeyframe{VIEWER_ASKED}`). Every frame handed out can be decoded
/// after the ones handed out before it. One consumer at a time;
/// cancelling its task ends the sequence (`stop()` also stops the car sending).
public final class VideoWatch: AsyncSequence, Sendable {
    public typealias Element = VideoEvent
    public let connection: HeadUnitConnection

    /// On the connection's loop only (the box traps elsewhere); public methods hop there.
    private struct LoopState {
        var screens: Set<HUScreen> = []
        var pendingStreams: HUVideoStreams?
        var frames = LatestVideoFrames<VideoFrame>()
        var screenOfChannel: [UInt32: HUScreen] = [:]
        var waiter: CheckedContinuation<VideoEvent?, Never>?
        /// Stopped, the connection closed, or the consumer's task cancelled: the sequence has ended.
        var finished = false
        var receivedCount = 0
        var deliveredCount = 0
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    private var screens: Set<HUScreen> {
        get { loopState.value.screens }
        _modify { yield &loopState.value.screens }
    }
    private var pendingStreams: HUVideoStreams? {
        get { loopState.value.pendingStreams }
        _modify { yield &loopState.value.pendingStreams }
    }
    private var frames: LatestVideoFrames<VideoFrame> {
        get { loopState.value.frames }
        _modify { yield &loopState.value.frames }
    }
    private var screenOfChannel: [UInt32: HUScreen] {
        get { loopState.value.screenOfChannel }
        _modify { yield &loopState.value.screenOfChannel }
    }
    private var waiter: CheckedContinuation<VideoEvent?, Never>? {
        get { loopState.value.waiter }
        _modify { yield &loopState.value.waiter }
    }
    private var finished: Bool {
        get { loopState.value.finished }
        _modify { yield &loopState.value.finished }
    }
    private var receivedCount: Int {
        get { loopState.value.receivedCount }
        _modify { yield &loopState.value.receivedCount }
    }
    private var deliveredCount: Int {
        get { loopState.value.deliveredCount }
        _modify { yield &loopState.value.deliveredCount }
    }

    init(connection: HeadUnitConnection) {
        self.connection = connection
        loopState = .makeBoxSendingValue(LoopState(), eventLoop: connection.eventLoop)
    }

    /// CLOCK_MONOTONIC in microseconds: the clock `VideoFrameHeader.timestampMicroseconds`
    /// is on when the app runs on this machine.
    public static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    /// Starts watching `screens` on `connection` (one watch per connection: a
    /// second call returns the same watch with the screens added). Throws the
    /// car's error for a screen it refuses (`NO_SUCH_SCREEN`, `TOO_MANY_VIEWERS`).
    static func start(on connection: HeadUnitConnection, screens: [HUScreen]) async throws -> VideoWatch {
        let watch = await connection.onLoopAsync { () -> VideoWatch in
            if let existing = connection.videoWatch { return existing }
            let watch = VideoWatch(connection: connection)
            connection.videoWatch = watch
            return watch
        }
        for screen in screens {
            try await connection.request(.watchVideo(HUWatchVideo.with { $0.screen = screen }))
            await connection.onLoopAsync { _ = watch.screens.insert(screen) }
        }
        return watch
    }

    /// Asks the app for a keyframe on `channel` (the consumer's decoder lost
    /// sync, or it dropped a frame); frames of the channel are held back until
    /// it comes. Asked once until it comes (the daemon keeps the request and
    /// paces it, 25.5): asking again could cross that keyframe.
    public func requestKeyframe(channel: UInt32) {
        connection.onLoop { if self.frames.lostSync(channel) { self.askForKeyframe(channel) } }
    }

    /// Stops watching every screen and ends the sequence.
    public func stop() async {
        let watched = await connection.onLoopAsync { () -> [HUScreen] in
            let watched = Array(self.screens)
            self.screens = []
            return watched
        }
        for screen in watched {
            _ = try? await connection.resultOf(.watchVideo(HUWatchVideo.with { $0.screen = screen; $0.stop = true }))
        }
        connection.onLoop {
            self.finish()
            if self.connection.videoWatch === self { self.connection.videoWatch = nil }
        }
    }

    /// Frames received, handed out and dropped so far (the rest wait for the consumer).
    public func counts() async -> (received: Int, delivered: Int, dropped: Int) {
        await connection.onLoopAsync { (self.receivedCount, self.deliveredCount, self.frames.dropped) }
    }

    // MARK: inbound (event loop)

    func received(_ streams: HUVideoStreams) {
        var screenOfChannel: [UInt32: HUScreen] = [:]
        for stream in streams.streams { screenOfChannel[stream.params.channel] = stream.screen }
        frames.keep(only: Set(screenOfChannel.keys))
        self.screenOfChannel = screenOfChannel
        pendingStreams = streams
        wake()
    }

    func received(channel: UInt32, _ payload: ByteBuffer) {
        guard !finished, case .success(let header) = VideoFrameHeader.parse(payload) else { return }
        receivedCount += 1
        var accessUnit = payload
        accessUnit.moveReaderIndex(forwardBy: VideoFrameHeader.size)
        let frame = VideoFrame(
            screen: screenOfChannel[channel] ?? .unspecified, channel: channel, header: header,
            accessUnit: accessUnit, receivedMicroseconds: Self.monotonicMicroseconds())
        switch frames.offer(frame, channel: channel, isKeyframe: header.isKeyframe, bytes: payload.readableBytes) {
        case .wake: wake()
        case .waiting, .skipped: break
        case .needKeyframe: askForKeyframe(channel)
        }
    }

    func connectionClosed() {
        finish()
    }

    private func askForKeyframe(_ channel: UInt32) {
        let connection = self.connection
        Task {
            _ = try? await connection.resultOf(.requestKeyframe(HURequestKeyframe.with { $0.channel = channel; $0.reason = .viewerAsked }))
        }
    }

    private func finish() {
        finished = true
        pendingStreams = nil
        frames.removeAll()
        wake()
    }

    /// The next event, if any (streams first: frames are read against them).
    private func take() -> VideoEvent? {
        if let streams = pendingStreams {
            pendingStreams = nil
            return .streams(streams)
        }
        guard let (_, run) = frames.take() else { return nil }
        deliveredCount += run.count
        return .frames(run)
    }

    private func wake() {
        guard let waiter else { return }
        if let event = take() {
            self.waiter = nil
            waiter.resume(returning: event)
        } else if finished {
            self.waiter = nil
            waiter.resume(returning: nil)
        }
    }

    fileprivate func next() async -> VideoEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<VideoEvent?, Never>) in
                connection.onLoop {
                    if let event = self.take() { return continuation.resume(returning: event) }
                    if self.finished { return continuation.resume(returning: nil) }
                    precondition(self.waiter == nil, "VideoWatch has one consumer at a time")
                    self.waiter = continuation
                }
            }
        } onCancel: {
            // On the loop, so it runs before or after the waiter is installed, never between.
            connection.onLoop { self.finish() }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let watch: VideoWatch
        public mutating func next() async -> VideoEvent? { await watch.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(watch: self) }
}

extension HMISession {
    /// Watches the base-view video of `screens` (PROTOCOL.md section 25.5):
    /// `VideoStreams` and frames come from the returned watch.
    public func watchVideo(_ screens: [HUScreen]) async throws -> VideoWatch {
        try await VideoWatch.start(on: connection, screens: screens)
    }
}

extension ClusterSession {
    /// Watches the base-view video of `screens` (usually `.instrumentCluster`).
    public func watchVideo(_ screens: [HUScreen] = [.instrumentCluster]) async throws -> VideoWatch {
        try await VideoWatch.start(on: connection, screens: screens)
    }
}
