import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The car's audio configuration (DaemonConfig.audio, PROTOCOL.md section 24.5).
public struct AudioConfiguration: Sendable {
    public var output: AudioOutputSpec
    /// "tone:HZ", "wav:PATH", "alsa:DEVICE" or "silence".
    public var microphone: String

    public init(output: AudioOutputSpec = .none, microphone: String = "silence") {
        self.output = output
        self.microphone = microphone
    }
}

/// What the engine hands back to the serving loop once per tick.
struct AudioReport: Sendable {
    var played: [(stream: UInt32, frames: UInt32)] = []
    var captured: [(stream: UInt32, timestamp: UInt64, pcm: ByteBuffer)] = []
    /// The output's 20 ms chunks while tapped (section 24.7): each a MEDIA
    /// payload ready to send, u64 BE play time in microseconds, then PCM.
    var output: [ByteBuffer] = []
    /// The output's health when it changed (GetStatus shows it, section 24.5).
    var outputStatus: HUAudioOutputStatus?
    var isEmpty: Bool { played.isEmpty && captured.isEmpty && output.isEmpty && outputStatus == nil }
}

/// Decoding, mixing and the microphone, on a thread of their own so the
/// serving loop only checks and forwards (PROTOCOL.md section 24.5). The loop
/// hands commands over through a bounded queue (`AudioCommandQueue`).
/// The engine ticks every 5 ms while a stream, the microphone or the tap is
/// active and sleeps otherwise; output sample n plays at `started + n / 48 kHz`.
/// The output itself is written on a third thread (`AudioOutputWriter`):
/// an output that blocks costs its audio, never the mixer's clock or a stop.
/// Each concern is a part of its own: the mixer, the output's health
/// (`AudioOutputMonitor`), the microphone (`MicrophoneCapture`) and the tap
/// (`OutputTap`).
// @unchecked: `commands` and `output` are Sendable (lock-guarded); `mixer`, `monitor`, `microphone` and `tap` are touched only by the engine's thread (`run`).
final class AudioEngine: @unchecked Sendable {
    static var capacity: Int { AudioCommandQueue.capacity }
    static let tickNanoseconds: UInt64 = 5_000_000
    static let idleAfterNanoseconds: UInt64 = 1_000_000_000

    private let commands = AudioCommandQueue()
    private let pool = NIOThreadPool(numberOfThreads: 1)
    private let report: @Sendable (AudioReport) -> Void
    private let logger: Logger
    /// The sink, behind its own thread: the mixer never waits for the output.
    private let output: AudioOutputWriter
    private var monitor: AudioOutputMonitor
    private let mixer: AudioMixer
    private var microphone: MicrophoneCapture
    private var tap = OutputTap()

    init(configuration: AudioConfiguration, jitterMilliseconds: UInt32, windowMilliseconds: UInt32, logger: Logger, report: @escaping @Sendable (AudioReport) -> Void) {
        self.report = report
        self.logger = logger
        self.mixer = AudioMixer(jitterMilliseconds: jitterMilliseconds, windowMilliseconds: windowMilliseconds)
        self.monitor = AudioOutputMonitor(name: "\(configuration.output)", logger: logger)
        let sink: AudioSink
        switch configuration.output {
        case .wav(let path): sink = FileSink(path: path, wav: true)
        case .raw(let path): sink = FileSink(path: path, wav: false)
        case .alsa(let device): sink = AlsaSink(device: device)
        case .none: sink = DiscardSink()
        }
        output = AudioOutputWriter(sink: sink)
        switch MicrophoneSource.parse(configuration.microphone) {
        case .success(let source): microphone = MicrophoneCapture(source: source)
        case .failure(let reason):
            logger.error("microphone source unusable, using silence", metadata: ["reason": "\(reason.message)"])
            microphone = MicrophoneCapture(source: MicrophoneSource(kind: .silence))
        }
    }

    /// Started on the first command (from the loop), so a server that never
    /// streams audio has no audio thread.
    private func startIfNeeded() {
        guard commands.startOnce() else { return }
        pool.start()
        pool.submit { [self] _ in run() }
    }

    /// When the server stops (or hands over): the mixer's thread ends at
    /// once (it never waits for the output); the output's thread gets
    /// `AudioOutputWriter.closeTimeoutSeconds` to finish its file, and a
    /// write still blocked then is abandoned (logged), so a stop never hangs.
    func stop() {
        guard commands.stop() else { return }
        try? pool.syncShutdownGracefully()
        if !output.close() {
            logger.error(
                "audio output blocked: abandoned at the stop",
                metadata: ["waited_ms": "\(Int(AudioOutputWriter.closeTimeoutSeconds * 1000))"])
        }
    }

    /// From the serving loop. False (and logged by the caller) only if the
    /// queue is full, which credit makes impossible for honest and hostile
    /// phones alike.
    func submit(_ command: AudioStreams.EngineCommand) -> Bool {
        startIfNeeded()
        return commands.submit(command)
    }

    private static func activates(_ command: AudioStreams.EngineCommand) -> Bool {
        switch command {
        case .open: return true
        case .microphone(let stream): return stream != nil
        case .tap(let on): return on
        case .frame, .close, .mix: return false
        }
    }

    private static func now() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

    private func run() {
        var active = false
        var started: UInt64 = 0
        var written = 0
        var idleSince: UInt64?
        while true {
            // Asleep until the loop has something, unless active.
            let (commands, stop) = self.commands.take(wait: !active)
            if stop {
                if active { output.finish() }
                microphone.end()
                return
            }
            // Only a stream, the microphone or a watcher wakes the output (a focus change alone does not).
            if !active, commands.contains(where: Self.activates) {
                active = true
                started = Self.now()
                written = 0
                idleSince = nil
                monitor.countDropped(output.start(startedNanoseconds: started))
            }
            for command in commands {
                if case .microphone(let stream) = command {
                    microphone.capture(to: stream, now: Self.now(), logger: logger)
                }
                if case .tap(let on) = command {
                    tap.turn(on: on, atFrame: written)
                }
                mixer.apply(command)
            }
            guard active else { continue }

            var report = AudioReport()
            let now = Self.now()
            let due = Int((now - started) * UInt64(AudioMixer.outputRate) / 1_000_000_000)
            while written < due {
                let count = min(due - written, 960)
                let pcm = AudioMixer.pcm16(mixer.render(count, played: &report.played))
                // The mix goes on by the clock whatever the output does: what it cannot take is dropped.
                if !output.write(pcm) { monitor.countDropped(count) }
                if tap.isOn { tap.append(pcm, started: started, into: &report.output) }
                written += count
            }
            report.outputStatus = monitor.check(output.health(now: now), now: now)
            microphone.chunks(now: now, into: &report.captured)
            if !report.isEmpty { self.report(report) }

            if mixer.isIdle && microphone.stream == nil && !tap.isOn {
                let since = idleSince ?? now
                idleSince = since
                if now - since >= Self.idleAfterNanoseconds {
                    output.finish()
                    active = false
                    continue
                }
            } else {
                idleSince = nil
            }
            var pause = timespec(tv_sec: 0, tv_nsec: Int(Self.tickNanoseconds))
            nanosleep(&pause, nil)
        }
    }
}
