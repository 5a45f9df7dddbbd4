import COpus
import HeadUnitCore
import HeadUnitWire
import NIOCore

/// The car's mixer (PROTOCOL.md section 24.5): one jitter buffer per stream,
/// decoded to 48 kHz stereo, summed with the gains the audio focus asks for.
/// Used by `AudioEngine` on its own thread only; no locks, no clock: the
/// engine says how many frames to mix.
final class AudioMixer {
    static let outputRate = 48_000
    /// A prompt ducks music by 12 dB: 10^(-12/20).
    static let duckDecibels: Float = -12
    static let duckGain: Float = 0.251_188_64
    /// Gain changes ramp over 10 ms, so ducking never clicks.
    static let rampFrames = 480

    /// One stream's packets to 48 kHz stereo: Opus through libopus, PCM at
    /// other rates through a linear resampler carrying its phase across packets.
    final class PacketDecoder {
        let format: HUAudioFormat
        private var opus: OpaquePointer?
        // Linear resampler state (PCM at rates other than 48 kHz).
        private var phase: Double = 1
        private var previous: (Float, Float) = (0, 0)
        private(set) var decodeErrors = 0

        init(format: HUAudioFormat) {
            self.format = format
            if format.codec == .opus {
                var error: Int32 = 0
                opus = opus_decoder_create(Int32(AudioMixer.outputRate), Int32(format.channels), &error)
                if error != OPUS_OK { opus = nil }
            }
        }

        deinit {
            if let opus { opus_decoder_destroy(opus) }
        }

        /// One packet of `frames` (at the stream's rate), 48 kHz stereo interleaved.
        func decode(_ payload: ByteBuffer, frames: UInt32) -> [Float] {
            let channels = Int(format.channels)
            switch format.codec {
            case .opus:
                let expected = Int(UInt64(frames) * UInt64(AudioMixer.outputRate) / UInt64(max(format.sampleRate, 1)))
                var pcm = [Float](repeating: 0, count: 5760 * channels)
                let decoded: Int32 = payload.withUnsafeReadableBytes { raw in
                    guard let opus, let base = raw.bindMemory(to: UInt8.self).baseAddress else { return -1 }
                    return pcm.withUnsafeMutableBufferPointer { opus_decode_float(opus, base, Int32(raw.count), $0.baseAddress!, 5760, 0) }
                }
                // A packet libopus refuses plays as silence of its length: never noise.
                let count = decoded > 0 ? Int(decoded) : expected
                if decoded <= 0 { decodeErrors += 1; pcm = [Float](repeating: 0, count: count * channels) }
                return Self.toStereo(pcm, frames: count, channels: channels)
            case .pcmS16Le:
                let count = payload.readableBytes / (2 * channels)
                var input = [Float](repeating: 0, count: count * 2)
                payload.withUnsafeReadableBytes { raw in
                    for frame in 0..<count {
                        for channel in 0..<2 {
                            let source = frame * channels + min(channel, channels - 1)
                            let sample = Int16(littleEndian: raw.loadUnaligned(fromByteOffset: source * 2, as: Int16.self))
                            input[frame * 2 + channel] = Float(sample) / 32768
                        }
                    }
                }
                return format.sampleRate == AudioMixer.outputRate ? input : resample(input, frames: count)
            case .unspecified, .UNRECOGNIZED:
                return []
            }
        }

        static func toStereo(_ pcm: [Float], frames: Int, channels: Int) -> [Float] {
            if channels == 2 { return Array(pcm[0..<(frames * 2)]) }
            var out = [Float](repeating: 0, count: frames * 2)
            for frame in 0..<frames { (out[frame * 2], out[frame * 2 + 1]) = (pcm[frame], pcm[frame]) }
            return out
        }

        /// Linear interpolation to 48 kHz, carrying the phase across packets.
        func resample(_ input: [Float], frames: Int) -> [Float] {
            let step = Double(format.sampleRate) / Double(AudioMixer.outputRate)
            var out: [Float] = []
            out.reserveCapacity(Int(Double(frames) / step) + 2)
            func sample(_ index: Int) -> (Float, Float) {
                index == 0 ? previous : (input[(index - 1) * 2], input[(index - 1) * 2 + 1])
            }
            while Int(phase) + 1 <= frames {
                let index = Int(phase)
                let fraction = Float(phase - Double(index))
                let (a, b) = (sample(index), sample(index + 1))
                out.append(a.0 + (b.0 - a.0) * fraction)
                out.append(a.1 + (b.1 - a.1) * fraction)
                phase += step
            }
            phase -= Double(frames)
            if frames > 0 { previous = (input[(frames - 1) * 2], input[(frames - 1) * 2 + 1]) }
            return out
        }
    }

    /// A stream's jitter buffer and playback state; its packets decoded by its `PacketDecoder`.
    final class Stream {
        let id: UInt32
        let type: HUAudioStreamType
        let decoder: PacketDecoder
        /// Decoded packets, 48 kHz stereo interleaved, with the credit each returns once played.
        var chunks: [(samples: [Float], credit: UInt32)] = []
        var head = 0
        var offset = 0
        var buffered = 0
        /// The last packet's length at 48 kHz: the start waits for a jitter buffer beyond it.
        var lastUnitFrames = 0
        /// Output frames rendered while this stream held audio and waited to start.
        var waitedFrames = 0
        var playing = false
        var draining = false
        var gain: Float = 1

        init(id: UInt32, type: HUAudioStreamType, format: HUAudioFormat) {
            self.id = id
            self.type = type
            self.decoder = PacketDecoder(format: format)
        }

        /// Decodes one packet into the jitter buffer.
        func append(_ payload: ByteBuffer, frames: UInt32) {
            let stereo = decoder.decode(payload, frames: frames)
            chunks.append((stereo, frames))
            buffered += stereo.count / 2
            lastUnitFrames = stereo.count / 2
        }

        /// Adds up to `count` frames into `out` at `gain` ramping towards `target`;
        /// returns the frames taken and appends the credit of packets finished.
        func pull(into out: inout [Float], count: Int, target: Float, played: inout [(stream: UInt32, frames: UInt32)]) -> Int {
            var taken = 0
            let rampStep = 1 / Float(AudioMixer.rampFrames)
            while taken < count, head < chunks.count {
                let chunk = chunks[head].samples
                let available = chunk.count / 2 - offset
                let n = min(available, count - taken)
                for i in 0..<n {
                    if gain < target { gain = min(target, gain + rampStep) } else if gain > target { gain = max(target, gain - rampStep) }
                    out[(taken + i) * 2] += chunk[(offset + i) * 2] * gain
                    out[(taken + i) * 2 + 1] += chunk[(offset + i) * 2 + 1] * gain
                }
                taken += n
                offset += n
                if offset == chunk.count / 2 {
                    played.append((id, chunks[head].credit))
                    head += 1
                    offset = 0
                }
            }
            if head > 32 {  // drop consumed chunks now and then, not on every packet
                chunks.removeFirst(head)
                head = 0
            }
            buffered -= taken
            return taken
        }
    }

    var streams: [UInt32: Stream] = [:]
    var mix = AudioStreams.Mix()
    /// Whether the last prompt paused main audio (spoken audio) rather than
    /// ducking it: then main stays paused while the prompt's tail still
    /// sounds after its focus ended, as it was during the prompt (24.3).
    private var promptPausesMain = false
    let jitterFrames: Int
    /// The most of a stream the car holds (its credit window) at 48 kHz: a start never waits for more.
    let windowFrames: Int
    private(set) var underruns: UInt64 = 0

    init(jitterMilliseconds: UInt32, windowMilliseconds: UInt32) {
        jitterFrames = Int(jitterMilliseconds) * Self.outputRate / 1000
        windowFrames = Int(windowMilliseconds) * Self.outputRate / 1000
    }

    /// A stream starts (and restarts after running dry) with a jitter buffer
    /// beyond the packet that arrived last, so the next packet may be up to
    /// `audio_jitter_ms` late without a gap (PROTOCOL.md 24.1); or once what
    /// it holds has waited that long: an app's last packets (less than a
    /// jitter buffer, nothing more coming) play instead of waiting for ever.
    func startsPlaying(_ stream: Stream) -> Bool {
        guard stream.buffered > 0 else { return false }
        let enough = min(jitterFrames + stream.lastUnitFrames, windowFrames)
        return stream.buffered >= enough || stream.waitedFrames >= enough || stream.draining
    }

    var isIdle: Bool { streams.isEmpty }

    func apply(_ command: AudioStreams.EngineCommand) {
        switch command {
        case .open(let id, let type, let format):
            streams[id] = Stream(id: id, type: type, format: format)
        case .frame(let id, _, let frames, let payload):
            streams[id]?.append(payload, frames: frames)
        case .close(let id, let drain):
            if drain, let stream = streams[id], stream.buffered > 0 {
                stream.draining = true
            } else {
                streams[id] = nil
            }
        case .mix(let mix):
            self.mix = mix
            if mix.pauseMain { promptPausesMain = true } else if mix.duckMain { promptPausesMain = false }
        case .microphone, .tap:
            break  // the engine captures, and taps its output
        }
    }

    /// Mixes `count` frames (48 kHz stereo interleaved) and reports the credit played.
    func render(_ count: Int, played: inout [(stream: UInt32, frames: UInt32)]) -> [Float] {
        var out = [Float](repeating: 0, count: count * 2)
        // A prompt still sounding (its tail after the focus ended) keeps music
        // ducked, and spoken audio paused: it resumes where it stopped once
        // the prompt is over, nothing of it played under the prompt.
        let promptSounding = streams.values.contains { $0.type == .alternate && $0.buffered > 0 }
        let pauseMain = mix.pauseMain || (promptSounding && promptPausesMain)
        for id in streams.keys.sorted() {
            let stream = streams[id]!
            if stream.type == .main && pauseMain { continue }  // paused: not consumed, no credit back
            if !stream.playing {
                guard startsPlaying(stream) else {
                    if stream.buffered > 0 { stream.waitedFrames += count }
                    continue
                }
                stream.playing = true
                stream.waitedFrames = 0
            }
            let target: Float = stream.type == .main && (mix.duckMain || promptSounding) ? Self.duckGain : 1
            let taken = stream.pull(into: &out, count: count, target: target, played: &played)
            if taken < count {
                if stream.draining {
                    streams[id] = nil
                } else {
                    // Ran dry: silence, and wait for a jitter buffer's worth again.
                    underruns += 1
                    stream.playing = false
                }
            }
        }
        return out
    }

    /// Clipped to signed 16-bit little-endian.
    static func pcm16(_ samples: [Float]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: samples.count * 2)
        for (index, sample) in samples.enumerated() {
            let value = Int16(max(-32768, min(32767, (sample * 32768).rounded())))
            bytes[index * 2] = UInt8(truncatingIfNeeded: value)
            bytes[index * 2 + 1] = UInt8(truncatingIfNeeded: value >> 8)
        }
        return bytes
    }
}
