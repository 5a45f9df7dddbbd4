import HeadUnitWire
import NIOCore

/// One of an app's audio streams to the car's mixer (PROTOCOL.md section 24):
/// main audio, alternate audio (a navigation prompt) or voice. Units (whole
/// PCM frames, or one Opus packet) go out as MEDIA frames on the stream's
/// channel, each within the credit the car granted; ``write(_:timestamp:)``
/// waits for `AudioCredit` when the credit is spent, so at most one unit
/// waits here and the car holds at most its window: writing as fast as the
/// credit allows is playing in real time.
///
///     let stream = try await phone.openAudioStream(appID: "com.example.music", type: .main,
///                                                  format: .pcm(sampleRate: 48_000, channels: 2))
///     for chunk in song { try await stream.write(chunk) }   // 20 ms of s16le each
///     try await stream.close()
public final class AudioStream: Sendable {
    public let info: HUAudioStreamInfo
    public let appID: String
    public var streamID: UInt32 { info.streamID }
    public var type: HUAudioStreamType { info.type }
    public var format: HUAudioFormat { info.format }
    /// The car's window in sample frames (the most of this stream it holds).
    public var window: Int { Int(info.window) }
    let connection: HeadUnitConnection

    /// On the connection's loop only (the box traps elsewhere).
    private struct LoopState {
        weak var router: AudioRouter?
        var credit: Int
        /// Sample frames sent so far: the default timestamp of the next unit.
        var framesSent: UInt64 = 0
        var lastTimestamp: UInt64 = 0
        var waiting: (frames: Int, payload: ByteBuffer, continuation: CheckedContinuation<Void, Error>, token: UInt64)?
        var nextToken: UInt64 = 0
        var closedBy: HUAudioStreamClosed?
        var closeWaiters: [CheckedContinuation<HUAudioStreamClosed, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    var router: AudioRouter? {
        get { loopState.value.router }
        _modify { yield &loopState.value.router }
    }
    private var credit: Int {
        get { loopState.value.credit }
        _modify { yield &loopState.value.credit }
    }
    private var framesSent: UInt64 {
        get { loopState.value.framesSent }
        _modify { yield &loopState.value.framesSent }
    }
    private var lastTimestamp: UInt64 {
        get { loopState.value.lastTimestamp }
        _modify { yield &loopState.value.lastTimestamp }
    }
    private var waiting: (frames: Int, payload: ByteBuffer, continuation: CheckedContinuation<Void, Error>, token: UInt64)? {
        get { loopState.value.waiting }
        _modify { yield &loopState.value.waiting }
    }
    private var nextToken: UInt64 {
        get { loopState.value.nextToken }
        _modify { yield &loopState.value.nextToken }
    }
    private var closedBy: HUAudioStreamClosed? {
        get { loopState.value.closedBy }
        _modify { yield &loopState.value.closedBy }
    }
    private var closeWaiters: [CheckedContinuation<HUAudioStreamClosed, Never>] {
        get { loopState.value.closeWaiters }
        _modify { yield &loopState.value.closeWaiters }
    }
    private var drainWaiters: [CheckedContinuation<Void, Never>] {
        get { loopState.value.drainWaiters }
        _modify { yield &loopState.value.drainWaiters }
    }

    init(appID: String, info: HUAudioStreamInfo, connection: HeadUnitConnection) {
        self.appID = appID
        self.info = info
        self.connection = connection
        loopState = .makeBoxSendingValue(LoopState(credit: Int(info.initialCredit)), eventLoop: connection.eventLoop)
    }

    /// Sends one unit: whole interleaved s16le frames (PCM) or one Opus
    /// packet, stamped with `timestamp` (microseconds in the stream; by
    /// default where the unit starts after everything written before).
    /// Waits while the car's credit is spent. Throws `FLOW_CONTROL` for a
    /// unit longer than the window, `BAD_MEDIA_FRAME` for one that is not a
    /// unit of the format, `INVALID_POSITION` when another write of this
    /// stream is still waiting, `NOT_CONNECTED` once the stream closed
    /// (``closeReason`` says why), and `CancellationError` when the task is
    /// cancelled while it waits (the unit is not sent).
    public func write(_ unit: ByteBuffer, timestamp: UInt64? = nil) async throws {
        guard let frames = Self.frames(of: unit.readableBytesView, format: info.format) else {
            throw HeadUnitError(code: .badMediaFrame, message: "not one unit of \(info.format.codec) with \(info.format.channels) channels", origin: .usage)
        }
        guard frames <= window else {
            throw HeadUnitError(code: .flowControl, message: "a unit of \(frames) frames is longer than the car's window of \(window)", origin: .usage)
        }
        let token = NIOLoopBoundBox.makeBoxSendingValue(WriteToken(), eventLoop: connection.eventLoop)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                connection.onLoop {
                    if let closed = self.closedBy {
                        continuation.resume(throwing: Self.closedError(closed))
                        return
                    }
                    guard self.waiting == nil else {
                        continuation.resume(throwing: HeadUnitError(code: .invalidPosition, message: "another write of stream \(self.streamID) is waiting for credit", origin: .usage))
                        return
                    }
                    if token.value.cancelled {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    let stamp = timestamp ?? self.framesSent * 1_000_000 / UInt64(max(1, self.info.format.sampleRate))
                    var payload = ByteBuffer()
                    payload.reserveCapacity(8 + unit.readableBytes)
                    payload.writeInteger(max(stamp, self.lastTimestamp), endianness: .big, as: UInt64.self)
                    payload.writeImmutableBuffer(unit)
                    if self.credit >= frames {
                        self.send(frames: frames, payload)
                        continuation.resume()
                    } else {
                        self.nextToken += 1
                        token.value.value = self.nextToken
                        self.waiting = (frames, payload, continuation, self.nextToken)
                    }
                }
            }
        } onCancel: {
            // A cancelled write that waits for credit ends now, unsent.
            connection.onLoop {
                token.value.cancelled = true
                if let pending = self.waiting, pending.token == token.value.value {
                    self.waiting = nil
                    pending.continuation.resume(throwing: CancellationError())
                }
            }
        }
    }

    /// Convenience: interleaved 16-bit samples (PCM streams), sent as one unit.
    public func write(samples: [Int16], timestamp: UInt64? = nil) async throws {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(samples.count * 2)
        for sample in samples { buffer.writeInteger(sample, endianness: .little) }
        try await write(buffer, timestamp: timestamp)
    }

    /// Ends the stream (`CloseAudioStream`); a write waiting for credit fails.
    /// Closing a stream the car already closed does nothing.
    public func close() async throws {
        let alreadyClosed = await connection.onLoopAsync { self.closedBy != nil }
        if alreadyClosed { return }
        var close = HUCloseAudioStream()
        close.streamID = streamID
        let result = try await connection.resultOf(.closeAudioStream(close))
        await connection.onLoopAsync {
            var closed = HUAudioStreamClosed()
            closed.appID = self.appID
            closed.streamID = self.streamID
            closed.type = self.type
            closed.detail = "closed by the app"
            self.router?.remove(self.streamID)
            self.ended(closed)
        }
        // UNKNOWN_SESSION: the car closed it meanwhile (its AudioStreamClosed is on the way).
        if result.code != .ok && result.code != .unknownSession { throw HeadUnitError(result: result) }
    }

    /// Why the stream ended (nil while open); reason UNSPECIFIED when the app closed it.
    public var closeReason: HUAudioStreamClosed? {
        get async { await connection.onLoopAsync { self.closedBy } }
    }

    /// Waits until the stream ends (the car's `AudioStreamClosed`, ``close()``, or the connection closing).
    public func waitUntilClosed() async -> HUAudioStreamClosed {
        await withCheckedContinuation { continuation in
            connection.onLoop {
                if let closed = self.closedBy { continuation.resume(returning: closed) } else { self.closeWaiters.append(continuation) }
            }
        }
    }

    /// Waits until the car played everything written: it grants the whole
    /// window back "at once when nothing of the stream is left" (PROTOCOL.md
    /// 24.5). Returns at once when nothing is outstanding or the stream ended.
    public func waitUntilPlayed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            connection.onLoop {
                if self.closedBy != nil || (self.waiting == nil && self.credit >= self.window) {
                    continuation.resume()
                } else {
                    self.drainWaiters.append(continuation)
                }
            }
        }
    }

    // MARK: loop

    private func send(frames: Int, _ payload: ByteBuffer) {
        credit -= frames
        framesSent += UInt64(frames)
        lastTimestamp = payload.getInteger(at: payload.readerIndex, endianness: .big, as: UInt64.self) ?? lastTimestamp
        connection.sendData(channel: streamID, payload, kind: .media)
    }

    func granted(_ frames: UInt32) {
        credit += Int(frames)
        if let pending = waiting, credit >= pending.frames {
            waiting = nil
            send(frames: pending.frames, pending.payload)
            pending.continuation.resume()
        }
        if waiting == nil, credit >= window, !drainWaiters.isEmpty {
            let waiters = drainWaiters
            drainWaiters.removeAll()
            for waiter in waiters { waiter.resume() }
        }
    }

    func ended(_ closed: HUAudioStreamClosed) {
        guard closedBy == nil else { return }
        closedBy = closed
        if let pending = waiting {
            waiting = nil
            pending.continuation.resume(throwing: Self.closedError(closed))
        }
        let waiters = closeWaiters
        closeWaiters.removeAll()
        for waiter in waiters { waiter.resume(returning: closed) }
        let drains = drainWaiters
        drainWaiters.removeAll()
        for waiter in drains { waiter.resume() }
    }

    static func closedError(_ closed: HUAudioStreamClosed) -> HeadUnitError {
        HeadUnitError(code: .notConnected, message: "audio stream \(closed.streamID) closed: \(closed.reason) \(closed.detail)", origin: .connectionClosed)
    }

    /// A unit's length in sample frames at the stream's rate, as the car
    /// counts it (PROTOCOL.md 24.4): whole PCM frames, or an Opus packet's
    /// duration from its TOC byte (RFC 6716 section 3.1). Nil: not one unit.
    public static func frames(of bytes: ByteBufferView, format: HUAudioFormat) -> Int? {
        guard !bytes.isEmpty else { return nil }
        switch format.codec {
        case .pcmS16Le:
            let frameBytes = 2 * max(1, Int(format.channels))
            return bytes.count % frameBytes == 0 ? bytes.count / frameBytes : nil
        case .opus:
            guard let samples = OpusPacket.samplesAt48k(bytes) else { return nil }
            return samples * Int(format.sampleRate) / 48_000
        default:
            return nil
        }
    }
}

/// A write's place in the queue, for its cancellation (in a loop-bound box).
private struct WriteToken {
    var value: UInt64 = 0
    var cancelled = false
}

extension HUAudioFormat {
    /// Interleaved signed 16-bit little-endian PCM.
    public static func pcm(sampleRate: UInt32, channels: UInt32) -> HUAudioFormat {
        .with { $0.codec = .pcmS16Le; $0.sampleRate = sampleRate; $0.channels = channels }
    }

    /// One Opus packet per unit.
    public static func opus(sampleRate: UInt32, channels: UInt32) -> HUAudioFormat {
        .with { $0.codec = .opus; $0.sampleRate = sampleRate; $0.channels = channels }
    }
}

/// A phone's open audio streams by id: credit and closes reach them on the loop.
final class AudioRouter: Sendable {
    private let box: NIOLoopBoundBox<[UInt32: AudioStream]>
    /// The streams by id (on the loop only: the box traps elsewhere).
    private var streams: [UInt32: AudioStream] {
        get { box.value }
        _modify { yield &box.value }
    }

    init(eventLoop: EventLoop) {
        box = .makeBoxSendingValue([:], eventLoop: eventLoop)
    }

    func add(_ stream: AudioStream) {
        stream.router = self
        streams[stream.streamID] = stream
    }

    /// On the loop. True when the message was only credit for a stream (not an event).
    func handle(_ body: HUEnvelope.OneOf_Body) -> Bool {
        switch body {
        case .audioCredit(let grant):
            guard let stream = streams[grant.streamID] else { return false }
            stream.granted(grant.frames)
            return true
        case .audioStreamClosed(let closed):
            // Still delivered as an event: the app hears why.
            streams.removeValue(forKey: closed.streamID)?.ended(closed)
            return false
        default:
            return false
        }
    }

    func remove(_ streamID: UInt32) { streams.removeValue(forKey: streamID) }

    func closeAll() {
        var closed = HUAudioStreamClosed()
        closed.reason = .appClosed
        closed.detail = "the connection closed"
        for stream in streams.values {
            var message = closed
            message.streamID = stream.streamID
            message.appID = stream.appID
            message.type = stream.type
            stream.ended(message)
        }
        streams.removeAll()
    }
}
