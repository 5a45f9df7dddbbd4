import HeadUnitCore
import HeadUnitWire
import Logging
import NIOConcurrencyHelpers
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
/// hands commands over through a bounded queue (`submit`); credit bounds
/// what can be in it (each stream's window), the capacity is a backstop.
/// The engine ticks every 5 ms while a stream or the microphone is active
/// and sleeps otherwise; output sample n plays at `started + n / 48 kHz`.
/// The output itself is written on a third thread (`AudioOutputWriter`):
/// an output that blocks costs its audio, never the mixer's clock or a stop.
// @unchecked: `queue` and `stopping` are guarded by `lock`; everything else
// is touched only by the engine's own thread (`run`).
final class AudioEngine: @unchecked Sendable {
    static let capacity = 2048
    static let tickNanoseconds: UInt64 = 5_000_000
    static let idleAfterNanoseconds: UInt64 = 1_000_000_000
    static let microphoneChunkFrames = 320  // 20 ms at 16 kHz

    private let lock = ConditionLock(value: 0)  // 1: commands (or a stop) waiting
    private var queue: [AudioStreams.EngineCommand] = []
    private var stopping = false
    private(set) var refused = 0

    private let pool = NIOThreadPool(numberOfThreads: 1)
    private let report: @Sendable (AudioReport) -> Void
    private let logger: Logger
    /// The sink, behind its own thread: the mixer never waits for the output.
    private let output: AudioOutputWriter
    private let outputName: String
    /// Output frames dropped because the output could not take them, and
    /// how many of them are not logged yet (logged at most once a second).
    private(set) var droppedFrames = 0
    private var unloggedDrops = 0
    private var lastDropLog: UInt64 = 0
    /// The output is blocked (an operation in progress for longer than `blockedAfterNanoseconds`), as last logged.
    private var outputBlocked = false
    /// The health last reported to the loop, and what to report next (blocked
    /// and failures at once, a changed drop count at most once a second).
    private var reportedStatus = HUAudioOutputStatus()
    private var lastStatusReport: UInt64 = 0
    private var statusToReport: HUAudioOutputStatus?
    static let blockedAfterNanoseconds: UInt64 = 1_000_000_000
    private let mixer: AudioMixer
    private var microphone: MicrophoneSource
    private var microphoneStream: UInt32?
    private var microphoneStart: UInt64 = 0
    private var microphoneFrames = 0
    /// Someone hears the output: the engine stays active and cuts it into chunks.
    private var tapped = false
    private var tapPending: [UInt8] = []
    /// The output frame (since `started`) where `tapPending` begins.
    private var tapStart = 0

    init(configuration: AudioConfiguration, jitterMilliseconds: UInt32, windowMilliseconds: UInt32, logger: Logger, report: @escaping @Sendable (AudioReport) -> Void) {
        self.report = report
        self.logger = logger
        self.mixer = AudioMixer(jitterMilliseconds: jitterMilliseconds, windowMilliseconds: windowMilliseconds)
        self.outputName = "\(configuration.output)"
        let sink: AudioSink
        switch configuration.output {
        case .wav(let path): sink = FileSink(path: path, wav: true)
        case .raw(let path): sink = FileSink(path: path, wav: false)
        case .alsa(let device): sink = AlsaSink(device: device)
        case .none: sink = DiscardSink()
        }
        output = AudioOutputWriter(sink: sink)
        switch MicrophoneSource.parse(configuration.microphone) {
        case .success(let source): microphone = source
        case .failure(let reason):
            logger.error("microphone source unusable, using silence", metadata: ["reason": "\(reason.message)"])
            microphone = MicrophoneSource(kind: .silence)
        }
    }

    private var started = false

    /// Started on the first command (from the loop), so a server that never
    /// streams audio has no audio thread.
    private func startIfNeeded() {
        guard !started else { return }
        started = true
        pool.start()
        pool.submit { [self] _ in run() }
    }

    /// When the server stops (or hands over): the mixer's thread ends at
    /// once (it never waits for the output); the output's thread gets
    /// `AudioOutputWriter.closeTimeoutSeconds` to finish its file, and a
    /// write still blocked then is abandoned (logged), so a stop never hangs.
    func stop() {
        guard started else { return }
        lock.lock()
        stopping = true
        lock.unlock(withValue: 1)
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
        lock.lock()
        guard queue.count < Self.capacity else {
            refused += 1
            lock.unlock(withValue: 1)
            return false
        }
        queue.append(command)
        lock.unlock(withValue: 1)
        return true
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

    private func countDropped(_ frames: Int) {
        droppedFrames += frames
        unloggedDrops += frames
    }

    /// Logs what the output did since the last look: a failure (once per
    /// change), a blocked operation (once when it starts, once when it
    /// ends), and dropped audio (at most once a second, with the count).
    private var loggedFailure: String?
    private func checkOutput(now: UInt64) {
        let health = output.health(now: now)
        if health.failed != loggedFailure {
            if let failed = health.failed {
                logger.error("audio output unusable: mixing into nothing until the output starts again", metadata: ["reason": "\(failed)"])
            }
            loggedFailure = health.failed
        }
        let blocked = (health.busyNanoseconds ?? 0) >= Self.blockedAfterNanoseconds
        if blocked != outputBlocked {
            outputBlocked = blocked
            if blocked {
                logger.error("audio output blocked: it takes nothing, the mix is dropped until it does", metadata: ["output": "\(outputName)"])
            } else {
                logger.notice("audio output no longer blocked", metadata: ["output": "\(outputName)", "dropped_frames": "\(droppedFrames)"])
            }
        }
        var status = HUAudioOutputStatus()
        status.blocked = blocked
        status.failure = health.failed ?? ""
        status.droppedFrames = UInt64(droppedFrames)
        if status != reportedStatus {
            let urgent = status.blocked != reportedStatus.blocked || status.failure != reportedStatus.failure
            if urgent || now - lastStatusReport >= 1_000_000_000 {
                statusToReport = status
                reportedStatus = status
                lastStatusReport = now
            }
        }
        if unloggedDrops > 0, now - lastDropLog >= 1_000_000_000 {
            logger.warning(
                "audio output cannot keep up: mix dropped",
                metadata: ["frames": "\(unloggedDrops)", "total_frames": "\(droppedFrames)", "output": "\(outputName)"])
            unloggedDrops = 0
            lastDropLog = now
        }
    }

    /// Cuts the output into 20 ms MEDIA payloads stamped with when their first sample plays.
    private func tap(_ pcm: [UInt8], started: UInt64, into output: inout [ByteBuffer]) {
        tapPending.append(contentsOf: pcm)
        let chunkBytes = AudioTap.chunkFrames * 4
        while tapPending.count >= chunkBytes {
            let playsAt = (started + UInt64(tapStart) * 1_000_000_000 / UInt64(AudioMixer.outputRate)) / 1000
            var payload = ByteBufferAllocator().buffer(capacity: 8 + chunkBytes)
            payload.writeInteger(playsAt, endianness: .big)
            payload.writeBytes(tapPending[0..<chunkBytes])
            output.append(payload)
            tapPending.removeFirst(chunkBytes)
            tapStart += AudioTap.chunkFrames
        }
    }

    private func run() {
        var active = false
        var started: UInt64 = 0
        var written = 0
        var idleSince: UInt64?
        while true {
            let commands: [AudioStreams.EngineCommand]
            if active {
                lock.lock()
            } else {
                lock.lock(whenValue: 1)  // asleep until the loop has something
            }
            commands = queue
            queue.removeAll(keepingCapacity: true)
            let stop = stopping
            lock.unlock(withValue: 0)
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
                countDropped(output.start(startedNanoseconds: started))
            }
            for command in commands {
                if case .microphone(let stream) = command {
                    if stream == nil {
                        microphone.end()
                    } else if let failed = microphone.begin() {
                        logger.error("microphone unusable: sending silence", metadata: ["reason": "\(failed)"])
                    }
                    microphoneStream = stream
                    microphoneStart = Self.now()
                    microphoneFrames = 0
                }
                if case .tap(let on) = command {
                    tapped = on
                    tapPending.removeAll(keepingCapacity: true)
                    tapStart = written
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
                if !output.write(pcm) { countDropped(count) }
                if tapped { tap(pcm, started: started, into: &report.output) }
                written += count
            }
            checkOutput(now: now)
            report.outputStatus = statusToReport
            statusToReport = nil
            if let stream = microphoneStream {
                let micDue = Int((now - microphoneStart) * UInt64(MicrophoneSource.rate) / 1_000_000_000)
                while micDue - microphoneFrames >= Self.microphoneChunkFrames {
                    let samples = microphone.next(Self.microphoneChunkFrames)
                    var pcm = ByteBufferAllocator().buffer(capacity: samples.count * 2)
                    for sample in samples { pcm.writeInteger(sample, endianness: .little) }
                    let timestamp = (microphoneStart + UInt64(microphoneFrames) * 1_000_000_000 / UInt64(MicrophoneSource.rate)) / 1000
                    report.captured.append((stream, timestamp, pcm))
                    microphoneFrames += Self.microphoneChunkFrames
                }
            }
            if !report.isEmpty { self.report(report) }

            if mixer.isIdle && microphoneStream == nil && !tapped {
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
