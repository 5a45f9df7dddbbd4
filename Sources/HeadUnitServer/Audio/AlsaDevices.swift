import CALSA
import HeadUnitCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// ALSA's name for an error code (a negative errno).
private func alsaError(_ code: Int) -> String { String(cString: snd_strerror(Int32(clamping: code))) }

/// Opens `device` non-blocking as s16le interleaved at `rate` and `channels`,
/// resampling in alsa-lib's plug layer when the hardware needs it.
private func openPCM(_ device: String, _ stream: snd_pcm_stream_t, channels: UInt32, rate: UInt32, latencyMicroseconds: UInt32) -> Result<OpaquePointer, AudioProblem> {
    var handle: OpaquePointer?
    var code = snd_pcm_open(&handle, device, stream, SND_PCM_NONBLOCK)
    guard code >= 0, let handle else { return .failure(AudioProblem("ALSA device \"\(device)\": \(alsaError(Int(code)))")) }
    code = snd_pcm_set_params(handle, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, channels, rate, 1, latencyMicroseconds)
    guard code >= 0 else {
        snd_pcm_close(handle)
        return .failure(AudioProblem("ALSA device \"\(device)\" refuses \(rate) Hz x\(channels) s16le: \(alsaError(Int(code)))"))
    }
    return .success(handle)
}

/// The car's speakers through ALSA ("alsa:DEVICE", PROTOCOL.md section 24.5):
/// a board's sound card, or PipeWire or PulseAudio through their ALSA
/// plugins. 48 kHz stereo s16le as the mixer renders it, opened non-blocking
/// so a stuck device never stalls the engine's thread. The engine renders by
/// its own clock and the device plays by its own; when they drift apart a
/// full device buffer drops what does not fit (a short skip, counted) and an
/// underrun is recovered and the write retried (a short gap).
final class AlsaSink: AudioSink {
    /// The device's buffer: what is queued ahead of the speakers.
    static let latencyMicroseconds: UInt32 = 60_000
    let device: String
    private var pcm: OpaquePointer?
    private(set) var failed: String?
    private(set) var droppedFrames = 0
    private(set) var recoveries = 0

    init(device: String) { self.device = device }

    func start(startedNanoseconds: UInt64) {
        finish()
        failed = nil
        switch openPCM(device, SND_PCM_STREAM_PLAYBACK, channels: 2, rate: UInt32(AudioMixer.outputRate), latencyMicroseconds: Self.latencyMicroseconds) {
        case .success(let handle): pcm = handle
        case .failure(let problem): failed = problem.message
        }
    }

    func write(_ bytes: [UInt8]) {
        guard let pcm else { return }
        let frames = bytes.count / 4
        var done = 0
        var recovered = false
        while done < frames {
            let written = bytes.withUnsafeBytes { raw in
                snd_pcm_writei(pcm, raw.baseAddress! + done * 4, snd_pcm_uframes_t(frames - done))
            }
            if written >= 0 {
                done += written
                continue
            }
            if written == -Int(EAGAIN) {  // the device's buffer is full: its clock is behind ours
                droppedFrames += frames - done
                return
            }
            // An underrun (-EPIPE) or a suspend (-ESTRPIPE): prepare again, once per write.
            if !recovered, snd_pcm_recover(pcm, Int32(clamping: written), 1) >= 0 {
                recovered = true
                recoveries += 1
                continue
            }
            failed = "ALSA device \"\(device)\": \(alsaError(written))"
            finish()
            return
        }
    }

    func finish() {
        guard let pcm else { return }
        // The mixer goes idle after a second of silence: nothing audible is dropped.
        snd_pcm_drop(pcm)
        snd_pcm_close(pcm)
        self.pcm = nil
    }
}

/// The car's microphone through ALSA ("alsa:DEVICE" in
/// DaemonConfig.audio.microphone): 16 kHz mono s16le, opened when a
/// microphone stream starts and closed when it ends. The engine takes a
/// chunk every 20 ms by its own clock; what the device has not captured yet
/// is silence, and more than 100 ms waiting is skipped, so the app hears the
/// car with a bounded delay whatever the two clocks do.
final class AlsaCapture {
    static let latencyMicroseconds: UInt32 = 40_000
    static let maxQueuedFrames = MicrophoneSource.rate / 10
    let device: String
    private var pcm: OpaquePointer?
    private(set) var failed: String?

    init(device: String) { self.device = device }

    func begin() {
        end()
        failed = nil
        switch openPCM(device, SND_PCM_STREAM_CAPTURE, channels: 1, rate: UInt32(MicrophoneSource.rate), latencyMicroseconds: Self.latencyMicroseconds) {
        case .success(let handle):
            pcm = handle
            snd_pcm_start(handle)
        case .failure(let problem):
            failed = problem.message
        }
    }

    func end() {
        guard let pcm else { return }
        snd_pcm_drop(pcm)
        snd_pcm_close(pcm)
        self.pcm = nil
    }

    /// `frames` samples: what the device captured, silence ahead of it when it has less.
    func read(_ frames: Int) -> [Int16] {
        var samples = [Int16](repeating: 0, count: frames)
        guard let pcm else { return samples }
        let available = snd_pcm_avail_update(pcm)
        if available < 0 {
            // An overrun: start again and hand out silence this once.
            if snd_pcm_recover(pcm, Int32(clamping: available), 1) < 0 { failed = "ALSA device \"\(device)\": \(alsaError(available))"; end() }
            else { snd_pcm_start(pcm) }
            return samples
        }
        if available > Self.maxQueuedFrames + frames {
            snd_pcm_forward(pcm, snd_pcm_uframes_t(available - frames))
        }
        let count = min(frames, max(0, available))
        guard count > 0 else { return samples }
        let read = samples.withUnsafeMutableBufferPointer { buffer in
            snd_pcm_readi(pcm, buffer.baseAddress! + (frames - count), snd_pcm_uframes_t(count))
        }
        if read < 0 { _ = snd_pcm_recover(pcm, Int32(clamping: read), 1) }
        return samples
    }
}
