import Logging
import NIOCore

/// The microphone stream the car sends (PROTOCOL.md section 24.6): the
/// source (a device, a tone, a file or silence) read in 20 ms chunks by the
/// engine's clock, each stamped with when its first sample was captured.
/// Used by `AudioEngine` on its own thread only.
struct MicrophoneCapture {
    static let chunkFrames = 320  // 20 ms at 16 kHz

    private var source: MicrophoneSource
    /// The stream the chunks go to (nil: the microphone is off).
    private(set) var stream: UInt32?
    /// When the stream started (CLOCK_MONOTONIC ns) and the frames taken since.
    private var start: UInt64 = 0
    private var frames = 0

    init(source: MicrophoneSource) { self.source = source }

    /// The microphone goes to `stream` (nil: off) from `now`: a device opens or closes.
    mutating func capture(to stream: UInt32?, now: UInt64, logger: Logger) {
        if stream == nil {
            source.end()
        } else if let failed = source.begin() {
            logger.error("microphone unusable: sending silence", metadata: ["reason": "\(failed)"])
        }
        self.stream = stream
        start = now
        frames = 0
    }

    /// The chunks due by `now`, as (stream, capture time in microseconds, 16 kHz mono s16le).
    mutating func chunks(now: UInt64, into captured: inout [(stream: UInt32, timestamp: UInt64, pcm: ByteBuffer)]) {
        guard let stream else { return }
        let due = Int((now - start) * UInt64(MicrophoneSource.rate) / 1_000_000_000)
        while due - frames >= Self.chunkFrames {
            let samples = source.next(Self.chunkFrames)
            var pcm = ByteBufferAllocator().buffer(capacity: samples.count * 2)
            for sample in samples { pcm.writeInteger(sample, endianness: .little) }
            let timestamp = (start + UInt64(frames) * 1_000_000_000 / UInt64(MicrophoneSource.rate)) / 1000
            captured.append((stream, timestamp, pcm))
            frames += Self.chunkFrames
        }
    }

    /// The engine stops: a device closes.
    func end() { source.end() }
}
