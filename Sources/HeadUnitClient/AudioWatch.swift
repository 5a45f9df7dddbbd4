#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HeadUnitWire
import NIOCore

/// 20 ms of the car's mixed output (PROTOCOL.md section 24.7).
public struct AudioOutputChunk: Sendable {
    /// When the first sample plays, on the car's CLOCK_MONOTONIC in microseconds.
    public var timestampMicroseconds: UInt64
    /// 960 frames of interleaved s16le stereo at 48 kHz: a slice of the received payload, not a copy.
    public var pcm: ByteBuffer
    /// When the chunk arrived, on CLOCK_MONOTONIC in microseconds.
    public var receivedMicroseconds: UInt64

    public var frames: Int { pcm.readableBytes / 4 }
}

/// The HMI (or cluster) side of `WatchAudio`: the car's output as an async
/// sequence of 20 ms chunks.
///
/// Bounded, latest wins: at most `capacity` unread chunks are kept; a chunk
/// arriving when they are full pushes out the oldest (counted in `counts`),
/// so a slow consumer hears newer audio with a gap, never an ever-growing
/// delay. One consumer at a time; cancelling its task ends the sequence
/// (`stop()` also stops the car sending).
public final class AudioWatch: AsyncSequence, Sendable {
    public typealias Element = AudioOutputChunk
    public let connection: HeadUnitConnection
    /// The channel and format the car announced (`Result.audio_stream`).
    public let info: HUAudioStreamInfo
    public let capacity: Int

    /// On the connection's loop only (the box traps elsewhere); public methods hop there.
    private struct LoopState {
        var chunks: [AudioOutputChunk] = []
        var waiter: CheckedContinuation<AudioOutputChunk?, Never>?
        var finished = false
        var deliveredCount = 0
        var droppedCount = 0
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    private var chunks: [AudioOutputChunk] {
        get { loopState.value.chunks }
        _modify { yield &loopState.value.chunks }
    }
    private var waiter: CheckedContinuation<AudioOutputChunk?, Never>? {
        get { loopState.value.waiter }
        _modify { yield &loopState.value.waiter }
    }
    private var finished: Bool {
        get { loopState.value.finished }
        _modify { yield &loopState.value.finished }
    }
    private var deliveredCount: Int {
        get { loopState.value.deliveredCount }
        _modify { yield &loopState.value.deliveredCount }
    }
    private var droppedCount: Int {
        get { loopState.value.droppedCount }
        _modify { yield &loopState.value.droppedCount }
    }

    init(connection: HeadUnitConnection, info: HUAudioStreamInfo, capacity: Int) {
        self.connection = connection
        self.info = info
        self.capacity = Swift.max(1, capacity)
        loopState = .makeBoxSendingValue(LoopState(), eventLoop: connection.eventLoop)
    }

    /// Asks the car for its output (throws its refusal, e.g. `TOO_MANY_VIEWERS`).
    /// A second call on a connection ends the first watch and starts a new one.
    static func start(on connection: HeadUnitConnection, capacity: Int) async throws -> AudioWatch {
        let answer = try await connection.request(.watchAudio(HUWatchAudio()))
        return await connection.onLoopAsync { () -> AudioWatch in
            connection.audioWatch?.finish()
            let watch = AudioWatch(connection: connection, info: answer.audioStream, capacity: capacity)
            connection.audioWatch = watch
            return watch
        }
    }

    /// Stops hearing the output and ends the sequence.
    public func stop() async {
        _ = try? await connection.resultOf(.watchAudio(HUWatchAudio.with { $0.stop = true }))
        connection.onLoop {
            self.finish()
            if self.connection.audioWatch === self { self.connection.audioWatch = nil }
        }
    }

    /// Chunks handed out, and chunks pushed out unread (the consumer was behind).
    public func counts() async -> (delivered: Int, dropped: Int) {
        await connection.onLoopAsync { (self.deliveredCount, self.droppedCount) }
    }

    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    // MARK: inbound (event loop)

    func received(channel: UInt32, _ payload: ByteBuffer) {
        guard !finished, channel == info.streamID, payload.readableBytes > 8 else { return }
        var pcm = payload
        guard let timestamp = pcm.readInteger(endianness: .big, as: UInt64.self) else { return }
        if chunks.count >= capacity {
            chunks.removeFirst()
            droppedCount += 1
        }
        chunks.append(AudioOutputChunk(timestampMicroseconds: timestamp, pcm: pcm, receivedMicroseconds: Self.monotonicMicroseconds()))
        wake()
    }

    func connectionClosed() {
        finish()
    }

    private func finish() {
        finished = true
        chunks.removeAll()
        wake()
    }

    private func wake() {
        guard let waiter else { return }
        if !chunks.isEmpty {
            self.waiter = nil
            deliveredCount += 1
            waiter.resume(returning: chunks.removeFirst())
        } else if finished {
            self.waiter = nil
            waiter.resume(returning: nil)
        }
    }

    fileprivate func next() async -> AudioOutputChunk? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<AudioOutputChunk?, Never>) in
                connection.onLoop {
                    if !self.chunks.isEmpty {
                        self.deliveredCount += 1
                        return continuation.resume(returning: self.chunks.removeFirst())
                    }
                    if self.finished { return continuation.resume(returning: nil) }
                    precondition(self.waiter == nil, "AudioWatch has one consumer at a time")
                    self.waiter = continuation
                }
            }
        } onCancel: {
            // On the loop, so it runs before or after the waiter is installed, never between.
            connection.onLoop { self.finish() }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let watch: AudioWatch
        public mutating func next() async -> AudioOutputChunk? { await watch.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(watch: self) }
}

extension HMISession {
    /// Hears the car's mixed output (PROTOCOL.md section 24.7): 20 ms chunks of
    /// 48 kHz stereo PCM; at most `capacity` unread ones are kept (latest wins).
    public func watchAudio(capacity: Int = 10) async throws -> AudioWatch {
        try await AudioWatch.start(on: connection, capacity: capacity)
    }
}

extension ClusterSession {
    /// Hears the car's mixed output (PROTOCOL.md section 24.7).
    public func watchAudio(capacity: Int = 10) async throws -> AudioWatch {
        try await AudioWatch.start(on: connection, capacity: capacity)
    }
}
