import HeadUnitCore
import NIOCore

/// The car's output while someone hears it (PROTOCOL.md section 24.7): the
/// mixed PCM cut into 20 ms MEDIA payloads, each stamped with when its first
/// sample plays. Used by `AudioEngine` on its own thread only.
struct OutputTap {
    /// Someone hears the output: the engine stays active and cuts it into chunks.
    private(set) var isOn = false
    /// Output not yet a whole chunk.
    private var pending: [UInt8] = []
    /// The output frame (since the output started) where `pending` begins.
    private var start = 0

    /// Turned on or off with the output at frame `written`: what was pending is dropped.
    mutating func turn(on: Bool, atFrame written: Int) {
        isOn = on
        pending.removeAll(keepingCapacity: true)
        start = written
    }

    /// Cuts `pcm` (48 kHz stereo s16le; frame 0 plays at `started`) into payloads appended to `output`.
    mutating func append(_ pcm: [UInt8], started: UInt64, into output: inout [ByteBuffer]) {
        pending.append(contentsOf: pcm)
        let chunkBytes = AudioTap.chunkFrames * 4
        while pending.count >= chunkBytes {
            let playsAt = (started + UInt64(start) * 1_000_000_000 / UInt64(AudioMixer.outputRate)) / 1000
            var payload = ByteBufferAllocator().buffer(capacity: 8 + chunkBytes)
            payload.writeInteger(playsAt, endianness: .big)
            payload.writeBytes(pending[0..<chunkBytes])
            output.append(payload)
            pending.removeFirst(chunkBytes)
            start += AudioTap.chunkFrames
        }
    }
}
