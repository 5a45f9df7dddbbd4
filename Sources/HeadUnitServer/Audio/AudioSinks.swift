#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import HeadUnitCore
import NIOConcurrencyHelpers
import NIOCore

/// Where the car's mixed output goes (PROTOCOL.md section 24.5; DaemonConfig.audio.output).
public enum AudioOutputSpec: Sendable, Equatable {
    /// A WAV file, 48 kHz stereo s16le, rewritten at each activation.
    case wav(path: String)
    /// The same samples without a header.
    case raw(path: String)
    /// An ALSA PCM device: a board's sound card, or PipeWire through its ALSA plugin.
    case alsa(device: String)
    /// Mixed and discarded (a bench, or a car with no speakers).
    case none

    /// "wav:PATH", "raw:PATH", "alsa:DEVICE" or "none".
    public static func parse(_ text: String) -> AudioOutputSpec? {
        if text == "none" { return AudioOutputSpec.none }
        if text.hasPrefix("alsa:"), text.count > 5 { return .alsa(device: String(text.dropFirst(5))) }
        if text.hasPrefix("wav:"), text.count > 4 { return .wav(path: String(text.dropFirst(4))) }
        if text.hasPrefix("raw:"), text.count > 4 { return .raw(path: String(text.dropFirst(4))) }
        return nil
    }
}

/// What the mixer writes to, on the output's own thread (`AudioOutputWriter`).
protocol AudioSink: AnyObject {
    /// Output sample 0 plays at `startedNanoseconds` (CLOCK_MONOTONIC).
    func start(startedNanoseconds: UInt64)
    func write(_ bytes: [UInt8])
    func finish()
    /// Why the output is unusable, if it is (the engine logs it; samples go nowhere meanwhile).
    var failed: String? { get }
}

final class DiscardSink: AudioSink {
    var failed: String? { nil }
    func start(startedNanoseconds: UInt64) {}
    func write(_ bytes: [UInt8]) {}
    func finish() {}
}

/// A WAV (or raw) file. The WAV carries a "hust" chunk with the output's
/// start time (u64 LE, CLOCK_MONOTONIC ns) so a test can measure latency from
/// the samples; its sizes are 0xFFFFFFFF while it is written and patched at
/// `finish` (the mixer goes idle 1 s after its last stream). A file reaching
/// `maxDataBytes` starts over: the disk is never filled.
final class FileSink: AudioSink {
    static let headerBytes = 60
    let path: String
    let wav: Bool
    let maxDataBytes: Int
    private var fd: Int32 = -1
    private var dataBytes = 0
    private var started: UInt64 = 0
    private(set) var failed: String?

    init(path: String, wav: Bool, maxDataBytes: Int = 10 * 60 * 48_000 * 4) {
        self.path = path
        self.wav = wav
        self.maxDataBytes = maxDataBytes
    }

    func start(startedNanoseconds: UInt64) {
        finish()
        failed = nil
        started = startedNanoseconds
        dataBytes = 0
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            failed = "\(path): \(String(cString: strerror(errno)))"
            return
        }
        if wav { writeAll(Self.header(dataBytes: 0xFFFF_FFFF, startedNanoseconds: startedNanoseconds)) }
    }

    func write(_ bytes: [UInt8]) {
        guard fd >= 0 else { return }
        if dataBytes + bytes.count > maxDataBytes {
            start(startedNanoseconds: started + UInt64(dataBytes / 4) * 1_000_000_000 / 48_000)
        }
        writeAll(bytes)
        dataBytes += bytes.count
    }

    func finish() {
        guard fd >= 0 else { return }
        if wav {
            let header = Self.header(dataBytes: UInt32(clamping: dataBytes), startedNanoseconds: started)
            _ = header.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        }
        close(fd)
        fd = -1
    }

    private func writeAll(_ bytes: [UInt8]) {
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if count < 0 {
                if errno == EINTR { continue }
                // Nothing more goes there until the next activation opens it again.
                failed = "\(path): \(String(cString: strerror(errno)))"
                Glibc.close(fd)
                fd = -1
                return
            }
            done += count
        }
    }

    static func header(dataBytes: UInt32, startedNanoseconds: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        func text(_ string: String) { bytes.append(contentsOf: Array(string.utf8)) }
        func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func u16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        text("RIFF")
        u32(dataBytes == 0xFFFF_FFFF ? 0xFFFF_FFFF : dataBytes + 52)
        text("WAVE")
        text("fmt ")
        u32(16)
        u16(1)  // PCM
        u16(2)
        u32(48_000)
        u32(48_000 * 4)
        u16(4)
        u16(16)
        text("hust")
        u32(8)
        withUnsafeBytes(of: startedNanoseconds.littleEndian) { bytes.append(contentsOf: $0) }
        text("data")
        u32(dataBytes)
        return bytes
    }
}

/// The car's microphone (DaemonConfig.audio.microphone): a tone, a looped
/// WAV file, or silence, as 16 kHz mono s16le. A board would read ALSA here.
struct MicrophoneSource {
    enum Kind {
        case tone(hertz: Double)
        case samples([Int16])
        case silence
        case alsa(AlsaCapture)
    }

    static let rate = 16_000
    let kind: Kind
    private var position = 0

    init(kind: Kind) { self.kind = kind }

    /// "tone:HZ", "wav:PATH", "alsa:DEVICE" or "silence" (empty: silence); nil with a reason when unusable.
    static func parse(_ text: String) -> Result<MicrophoneSource, AudioProblem> {
        if text.isEmpty || text == "silence" { return .success(MicrophoneSource(kind: .silence)) }
        if text.hasPrefix("alsa:"), text.count > 5 { return .success(MicrophoneSource(kind: .alsa(AlsaCapture(device: String(text.dropFirst(5)))))) }
        if text.hasPrefix("tone:"), let hertz = Double(text.dropFirst(5)), hertz > 0, hertz < 8000 {
            return .success(MicrophoneSource(kind: .tone(hertz: hertz)))
        }
        if text.hasPrefix("wav:") {
            return loadWAV(String(text.dropFirst(4))).map { MicrophoneSource(kind: .samples($0)) }
        }
        return .failure(AudioProblem("microphone must be \"tone:HZ\" (0 < HZ < 8000), \"wav:PATH\", \"alsa:DEVICE\" or \"silence\", not \"\(text)\""))
    }

    /// A microphone stream starts: a device opens (nil, or why it cannot).
    func begin() -> String? {
        guard case .alsa(let capture) = kind else { return nil }
        capture.begin()
        return capture.failed
    }

    /// The microphone stream ended: a device closes.
    func end() {
        if case .alsa(let capture) = kind { capture.end() }
    }

    mutating func next(_ frames: Int) -> [Int16] {
        defer { position += frames }
        switch kind {
        case .alsa(let capture):
            return capture.read(frames)
        case .silence:
            return [Int16](repeating: 0, count: frames)
        case .tone(let hertz):
            return (0..<frames).map { index in
                let t = Double(position + index) / Double(Self.rate)
                return Int16(sin(2 * Double.pi * hertz * t) * 0.3 * 32767)
            }
        case .samples(let samples):
            guard !samples.isEmpty else { return [Int16](repeating: 0, count: frames) }
            return (0..<frames).map { samples[(position + $0) % samples.count] }
        }
    }

    /// A 16-bit PCM WAV (at most 16 MiB), first channel, resampled to 16 kHz.
    static func loadWAV(_ path: String) -> Result<[Int16], AudioProblem> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(AudioProblem("\(path): \(String(cString: strerror(errno)))")) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 { if errno == EINTR { continue }; return .failure(AudioProblem("\(path): \(String(cString: strerror(errno)))")) }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > 16 << 20 { return .failure(AudioProblem("\(path): larger than 16 MiB")) }
        }
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8) else {
            return .failure(AudioProblem("\(path): not a WAV file"))
        }
        var at = 12
        var channels = 0, rate = 0, bits = 0
        while at + 8 <= bytes.count {
            let size = u32(at + 4)
            let body = at + 8
            if bytes[at..<(at + 4)].elementsEqual("fmt ".utf8), body + 16 <= bytes.count {
                (channels, rate, bits) = (u16(body + 2), u32(body + 4), u16(body + 14))
            } else if bytes[at..<(at + 4)].elementsEqual("data".utf8) {
                guard bits == 16, channels >= 1, rate > 0 else { return .failure(AudioProblem("\(path): only 16-bit PCM WAV is supported")) }
                let end = min(bytes.count, body + size)
                let frames = (end - body) / (2 * channels)
                var samples: [Int16] = []
                let step = Double(rate) / Double(Self.rate)
                var t = 0.0
                while Int(t) < frames {
                    let offset = body + Int(t) * 2 * channels
                    samples.append(Int16(bitPattern: UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8))
                    t += step
                }
                return .success(samples)
            }
            at = body + size + (size & 1)
        }
        return .failure(AudioProblem("\(path): no data chunk"))
    }
}

/// The output's own thread (PROTOCOL.md section 24.5): every call into the
/// sink (open, write, finish) happens there, so a target that blocks (a FIFO
/// nobody reads, a hung file system, NFS gone away) holds that thread only.
/// The mixer hands its PCM over through a bounded queue and drops what does
/// not fit (`write` returns false), keeping its clock; `close` waits a
/// bounded time for the thread and then abandons it.
// @unchecked: the queue and its state are guarded by `lock`; `sink` is touched only by the writer thread.
final class AudioOutputWriter: @unchecked Sendable {
    /// What waits for the sink at most: 500 ms of output (a slow disk's hiccup
    /// passes unheard; a blocked target costs at most this much memory).
    static let maxQueuedBytes = AudioMixer.outputRate / 2 * 4
    /// How long `close` waits for a write in progress before abandoning it.
    static let closeTimeoutSeconds = 1.0

    enum Job {
        case start(UInt64)
        case write([UInt8])
        case finish
    }

    private let lock = ConditionLock(value: 0)  // 1: a job waits, or the writer is asked to end
    private var jobs: [Job] = []
    private var queuedBytes = 0
    /// When the sink operation in progress began (nil: none in progress).
    private var busySince: UInt64?
    private var failure: String?
    private var closing = false
    private var running = false
    private let endedLock = ConditionLock(value: 0)  // 1: the writer thread ended
    private let sink: AudioSink

    init(sink: AudioSink) { self.sink = sink }

    private static func now() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

    /// A new activation: sample 0 plays at `startedNanoseconds`. PCM still
    /// queued for the previous one is dropped (it could not be written in time).
    /// Returns the frames so dropped.
    func start(startedNanoseconds: UInt64) -> Int {
        lock.lock()
        let dropped = queuedBytes / 4
        jobs = [.start(startedNanoseconds)]
        queuedBytes = 0
        launchIfNeeded()
        lock.unlock(withValue: 1)
        return dropped
    }

    /// False when the queue is full: the sink is behind (or blocked) and these samples are dropped.
    func write(_ pcm: [UInt8]) -> Bool {
        lock.lock()
        guard queuedBytes + pcm.count <= Self.maxQueuedBytes else {
            lock.unlock(withValue: jobs.isEmpty && !closing ? 0 : 1)
            return false
        }
        jobs.append(.write(pcm))
        queuedBytes += pcm.count
        lock.unlock(withValue: 1)
        return true
    }

    /// The activation ends once what is queued is written (a WAV's sizes are patched).
    func finish() {
        lock.lock()
        if case .finish? = jobs.last {} else { jobs.append(.finish) }
        lock.unlock(withValue: 1)
    }

    /// Why the sink is unusable, as it last said; and for how long the
    /// operation in progress has taken (nil: none in progress).
    func health(now: UInt64) -> (failed: String?, busyNanoseconds: UInt64?) {
        lock.lock()
        defer { lock.unlock() }
        return (failure, busySince.map { now > $0 ? now - $0 : 0 })
    }

    /// Ends the writer thread once its jobs are done, waiting at most
    /// `timeout` seconds; false when it did not end in time (an operation is
    /// blocked): it is abandoned, and the process may exit regardless.
    @discardableResult
    func close(timeout: Double = closeTimeoutSeconds) -> Bool {
        lock.lock()
        closing = true
        let wasRunning = running
        lock.unlock(withValue: 1)
        guard wasRunning else { return true }
        guard endedLock.lock(whenValue: 1, timeoutSeconds: timeout) else { return false }
        endedLock.unlock()
        return true
    }

    /// Called with `lock` held.
    private func launchIfNeeded() {
        guard !running, !closing else { return }
        running = true
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, nil, { context in
            Unmanaged<AudioOutputWriter>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        if created == 0 {
            pthread_detach(thread)  // never joined: `close` waits on `endedLock`, with a bound
        } else {
            Unmanaged<AudioOutputWriter>.fromOpaque(context).release()
            running = false
            failure = "cannot start the audio output's thread: \(String(cString: strerror(created)))"
        }
    }

    private func run() {
        // A FIFO whose reader went away answers EPIPE (the sink fails, the mix
        // goes nowhere until audio starts again) instead of killing the daemon.
        var pipe = sigset_t()
        sigemptyset(&pipe)
        sigaddset(&pipe, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipe, nil)
        while true {
            lock.lock(whenValue: 1)
            if jobs.isEmpty {
                let end = closing
                lock.unlock(withValue: end ? 1 : 0)
                guard end else { continue }
                // Asked to end, with nothing left to write.
                endedLock.lock()
                endedLock.unlock(withValue: 1)
                return
            }
            let job = jobs.removeFirst()
            if case .write(let pcm) = job { queuedBytes -= pcm.count }
            busySince = Self.now()
            lock.unlock(withValue: jobs.isEmpty && !closing ? 0 : 1)
            switch job {
            case .start(let started): sink.start(startedNanoseconds: started)
            case .write(let pcm): sink.write(pcm)
            case .finish: sink.finish()
            }
            let failed = sink.failed
            lock.lock()
            busySince = nil
            failure = failed
            lock.unlock(withValue: jobs.isEmpty && !closing ? 0 : 1)
        }
    }
}
