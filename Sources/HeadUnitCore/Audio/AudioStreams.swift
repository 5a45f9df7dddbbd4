import HeadUnitWire
import NIOCore

/// The audio streams between the phone's apps and the car's mixer, and the
/// car's microphone (PROTOCOL.md section 24). Decides who may open a stream
/// (the stream's type must match the app's `AudioFocus`), checks each MEDIA
/// frame and keeps credit in sample frames, so the daemon never holds more
/// than a window of audio per stream. The samples themselves never enter
/// this value: accepted frames go out as `Output.engine` commands to the
/// mixer, which runs off the serving loop.
public struct AudioStreams: Sendable {
    public struct Limits: Sendable, Equatable {
        /// A stream plays once this much is buffered (the jitter buffer).
        public var jitterMilliseconds: UInt32 = 40
        /// A stream's credit window, in time: what the car holds of it at most.
        /// 120 ms holds the longest Opus packet.
        public var windowMilliseconds: UInt32 = 120
        /// Streams open at once, microphone included (`audio.streams`).
        public var maxStreams: Int = 8
        /// HMI and cluster peers hearing the car's output at once (`audio.output_watchers`, 24.7).
        public var maxOutputWatchers: Int = 8

        /// The ranges the daemon accepts at start (PROTOCOL.md sections 20.6, 24.1):
        /// the window holds the longest Opus packet (120 ms); the jitter buffer
        /// fills before the window does.
        public static let windowRange: ClosedRange<UInt32> = 120...2_000
        public static func jitterRange(windowMilliseconds: UInt32) -> ClosedRange<UInt32> { 10...max(11, windowMilliseconds) - 1 }
        public static let maxStreamsRange = 1...64

        public init() {}
    }

    /// What the mixer applies, derived from `AudioFocus` after every input.
    public struct Mix: Sendable, Equatable {
        /// A prompt plays over music: main audio at `AudioMixer.duckGain`.
        public var duckMain = false
        /// Spoken audio during a prompt, or any main audio during a call: not consumed.
        public var pauseMain = false
        public var call = false

        public init(duckMain: Bool = false, pauseMain: Bool = false, call: Bool = false) {
            self.duckMain = duckMain
            self.pauseMain = pauseMain
            self.call = call
        }
    }

    /// What the mixer is told (it runs off the loop; these cross a bounded handoff).
    public enum EngineCommand: Sendable, Equatable {
        case open(stream: UInt32, type: HUAudioStreamType, format: HUAudioFormat)
        /// One MEDIA frame's codec bytes (timestamp stripped); `frames` is its
        /// length in sample frames, handed back as credit once played.
        case frame(stream: UInt32, timestamp: UInt64, frames: UInt32, payload: ByteBuffer)
        /// `drain`: play what is buffered first (a prompt's tail), else drop it.
        case close(stream: UInt32, drain: Bool)
        case mix(Mix)
        /// Capture the microphone for this stream (nil: stop).
        case microphone(stream: UInt32?)
        /// Someone hears the output (`WatchAudio`): render even with no stream, and report each 20 ms.
        case tap(Bool)
    }

    public enum Output: Sendable, Equatable {
        case send(HUEnvelope.OneOf_Body)
        case engine(EngineCommand)
        /// A MEDIA frame refused: a non-fatal protocol error of the phone.
        case refuse(HUErrorCode, String)
        /// Microphone samples for the phone, on this stream's channel.
        case media(stream: UInt32, ByteBuffer)
    }

    struct Stream: Sendable, Equatable {
        var id: UInt32
        var appID: String
        var type: HUAudioStreamType
        var format: HUAudioFormat
        /// Sample frames the sender may still send.
        var credit: UInt32
        var window: UInt32
        /// Played, not granted back yet (granted in quarter windows).
        var ungranted: UInt32 = 0
        var lastTimestamp: UInt64?
    }

    public static let microphoneFormat = HUAudioFormat.with {
        $0.codec = .pcmS16Le
        $0.sampleRate = 16_000
        $0.channels = 1
    }

    public var limits: Limits
    var streams: [UInt32: Stream] = [:]
    /// Streams closed lately (bounded): their MEDIA in flight is dropped without a word.
    var recentlyClosed: [UInt32] = []
    static let recentMemory = 64
    var nextID: UInt32 = 1
    /// After a restore: the streams the previous process had open, to be
    /// closed towards the phone (RESTARTED) once its connection is back (section 22).
    var closedByRestart: [HUAudioStreamClosed] = []
    var microphone: (appID: String, stream: UInt32, purpose: HUMicrophonePurpose)?
    /// Who the microphone streams to now (the metadata stream publishes it).
    public var microphoneUse: MicrophoneUse? { microphone.map { MicrophoneUse(appID: $0.appID, purpose: $0.purpose) } }
    public private(set) var mix = Mix()
    /// Microphone chunks dropped because the phone granted no room (a live source does not wait).
    public private(set) var microphoneDropped: UInt64 = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    public var openCount: Int { streams.count }

    public func window(for format: HUAudioFormat) -> UInt32 {
        UInt32(UInt64(format.sampleRate) * UInt64(limits.windowMilliseconds) / 1000)
    }

    // MARK: - Formats and frames

    public static let opusRates: Set<UInt32> = [8000, 12000, 16000, 24000, 48000]
    public static let pcmRates: Set<UInt32> = [8000, 12000, 16000, 22050, 24000, 32000, 44100, 48000]

    static func formatProblem(_ format: HUAudioFormat) -> String? {
        switch format.codec {
        case .pcmS16Le:
            guard pcmRates.contains(format.sampleRate) else {
                return "PCM sample rate \(format.sampleRate) is not one of \(pcmRates.sorted())"
            }
        case .opus:
            guard opusRates.contains(format.sampleRate) else {
                return "Opus sample rate \(format.sampleRate) is not one of \(opusRates.sorted())"
            }
        case .unspecified, .UNRECOGNIZED:
            return "codec must be AUDIO_CODEC_PCM_S16LE or AUDIO_CODEC_OPUS"
        }
        guard format.channels == 1 || format.channels == 2 else {
            return "channels must be 1 or 2, not \(format.channels)"
        }
        return nil
    }

    /// A MEDIA payload's length in sample frames, or why it is not one unit
    /// of the format: PCM is whole frames; Opus is one packet whose TOC
    /// (RFC 6716 section 3.1) says how long it is.
    static func frames(of bytes: ByteBufferView, format: HUAudioFormat) -> Result<UInt32, AudioProblem> {
        guard !bytes.isEmpty else { return .failure(AudioProblem("no audio after the 8-byte timestamp")) }
        switch format.codec {
        case .pcmS16Le:
            let frameBytes = 2 * Int(format.channels)
            guard bytes.count % frameBytes == 0 else {
                return .failure(AudioProblem("\(bytes.count) bytes of PCM is not a whole number of \(frameBytes)-byte frames"))
            }
            return .success(UInt32(bytes.count / frameBytes))
        case .opus:
            guard let samples48k = OpusPacket.samplesAt48k(bytes) else {
                return .failure(AudioProblem("not a well-formed Opus packet (RFC 6716 section 3.1)"))
            }
            return .success(UInt32(UInt64(samples48k) * UInt64(format.sampleRate) / 48_000))
        case .unspecified, .UNRECOGNIZED:
            return .failure(AudioProblem("stream has no codec"))
        }
    }

    // MARK: - Opening and closing

    /// Opens a stream the caller checked the focus for. Replaces the app's
    /// stream of the same type (REPLACED first); TOO_MANY_SESSIONS past the cap.
    mutating func open(appID: String, type: HUAudioStreamType, format: HUAudioFormat, outputs: inout [Output]) -> Result<HUAudioStreamInfo, RuleViolation> {
        let replaced = streams.values.first { $0.appID == appID && $0.type == type }
        if streams.count - (replaced == nil ? 0 : 1) + (microphone == nil ? 0 : 1) >= limits.maxStreams {
            return .failure(RuleViolation(
                .tooManySessions, "the car mixes at most \(limits.maxStreams) audio streams at once",
                limit: "audio.streams", limitValue: UInt32(limits.maxStreams)))
        }
        if let replaced { close(replaced.id, reason: .replaced, detail: "the app opened another \(Self.name(type)) stream", tell: true, drain: false, outputs: &outputs) }
        let id = allocateID()
        let window = window(for: format)
        streams[id] = Stream(id: id, appID: appID, type: type, format: format, credit: window, window: window)
        outputs.append(.engine(.open(stream: id, type: type, format: format)))
        return .success(HUAudioStreamInfo.with {
            $0.streamID = id
            $0.type = type
            $0.format = format
            $0.initialCredit = window
            $0.window = window
            $0.jitterMs = limits.jitterMilliseconds
        })
    }

    mutating func allocateID() -> UInt32 {
        while streams[nextID] != nil || microphone?.stream == nextID || nextID == 0 || recentlyClosed.contains(nextID) {
            nextID &+= 1
        }
        defer { nextID &+= 1 }
        return nextID
    }

    /// `CloseAudioStream`: the app's own playback stream.
    mutating func closeByApp(_ id: UInt32, outputs: inout [Output]) -> RuleViolation? {
        guard streams[id] != nil else {
            if recentlyClosed.contains(id) { return nil }  // both ends closed at once
            return RuleViolation(.unknownSession, "no audio stream \(id) is open")
        }
        // The app ends its own stream after its last frame: play it out.
        close(id, reason: .unspecified, detail: "", tell: false, drain: true, outputs: &outputs)
        return nil
    }

    mutating func close(_ id: UInt32, reason: HUAudioStreamCloseReason, detail: String, tell: Bool, drain: Bool, outputs: inout [Output]) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        remember(id)
        outputs.append(.engine(.close(stream: id, drain: drain)))
        if tell {
            outputs.append(.send(.audioStreamClosed(HUAudioStreamClosed.with {
                $0.appID = stream.appID
                $0.streamID = id
                $0.type = stream.type
                $0.reason = reason
                $0.detail = detail
            })))
        }
    }

    mutating func remember(_ id: UInt32) {
        recentlyClosed.append(id)
        if recentlyClosed.count > Self.recentMemory { recentlyClosed.removeFirst() }
    }

    /// An app's scenes ended (`AppClosed`, the HMI's `CloseApp`): its streams
    /// and its microphone end with APP_CLOSED, whatever focus they held
    /// (24.3: the scenes' end comes before the focus it takes away).
    mutating func appEnded(_ appID: String, tell: Bool, outputs: inout [Output]) {
        for id in streams.keys.sorted() where streams[id]!.appID == appID {
            close(id, reason: .appClosed, detail: "the app's scenes ended", tell: tell, drain: false, outputs: &outputs)
        }
        if microphone?.appID == appID { stopMicrophone(reason: .appClosed, tell: tell, outputs: &outputs) }
    }

    /// Closes every stream whose app no longer holds the focus its type needs
    /// (or is gone), then brings the mixer's focus and the microphone up to
    /// date: `microphoneWanted` as `MicrophoneRule.wanted` says, and when the
    /// microphone open now must stop, why (`MicrophoneRule.stopReason`).
    mutating func settle(
        focus: AudioFocus, appAlive: (String) -> Bool, microphoneWanted: MicrophoneUse?,
        microphoneStopReason: (MicrophoneUse) -> HUAudioStreamCloseReason, phoneReachable: Bool, outputs: inout [Output]
    ) {
        for id in streams.keys.sorted() {
            let stream = streams[id]!
            if !appAlive(stream.appID) {
                close(id, reason: .appClosed, detail: "the app's scenes ended", tell: phoneReachable, drain: false, outputs: &outputs)
            } else if let lost = Self.focusProblem(stream.type, appID: stream.appID, focus: focus) {
                // A prompt that ended plays its buffered tail; other audio stops at once.
                close(id, reason: .focusLost, detail: lost, tell: phoneReachable, drain: stream.type == .alternate, outputs: &outputs)
            }
        }
        settleMix(focus: focus, outputs: &outputs)
        settleMicrophone(wanted: microphoneWanted, stopReason: microphoneStopReason, phoneReachable: phoneReachable, outputs: &outputs)
    }

    /// No stream and no microphone open: `settle` then has no stream to
    /// close and, with no microphone wanted, only the mix to bring up to date.
    var isIdle: Bool { streams.isEmpty && microphone == nil }

    /// The mixer's focus, from the car's.
    mutating func settleMix(focus: AudioFocus, outputs: inout [Output]) {
        let promptPlaying = focus.prompt != nil
        let next = Mix(
            duckMain: promptPlaying && !focus.mainSpoken,
            pauseMain: (promptPlaying && focus.mainSpoken) || focus.mainInterrupted,
            call: focus.callActive)
        if next != mix {
            mix = next
            outputs.append(.engine(.mix(next)))
        }
    }

    mutating func settleMicrophone(wanted: MicrophoneUse?, stopReason: (MicrophoneUse) -> HUAudioStreamCloseReason, phoneReachable: Bool, outputs: inout [Output]) {
        if let current = microphoneUse, current != wanted {
            stopMicrophone(reason: stopReason(current), tell: phoneReachable, outputs: &outputs)
        }
        guard microphone == nil, let wanted, phoneReachable else { return }
        let id = allocateID()
        let window = window(for: Self.microphoneFormat)
        microphone = (wanted.appID, id, wanted.purpose)
        microphoneCredit = window
        outputs.append(.send(.microphoneStarted(HUMicrophoneStarted.with {
            $0.appID = wanted.appID
            $0.purpose = wanted.purpose
            $0.stream = HUAudioStreamInfo.with {
                $0.streamID = id
                $0.type = .microphone
                $0.format = Self.microphoneFormat
                $0.initialCredit = window
                $0.window = window
                $0.jitterMs = limits.jitterMilliseconds
            }
        })))
        outputs.append(.engine(.microphone(stream: id)))
    }

    /// What the daemon may still send on the microphone stream.
    var microphoneCredit: UInt32 = 0

    /// The capture stops at once; the app hears why (no MEDIA follows on the stream).
    mutating func stopMicrophone(reason: HUAudioStreamCloseReason, tell: Bool, outputs: inout [Output]) {
        guard let current = microphone else { return }
        microphone = nil
        remember(current.stream)
        outputs.append(.engine(.microphone(stream: nil)))
        guard tell else { return }
        outputs.append(.send(.audioStreamClosed(HUAudioStreamClosed.with {
            $0.appID = current.appID
            $0.streamID = current.stream
            $0.type = .microphone
            $0.reason = reason
        })))
    }

    /// Why an app may not (or no longer) stream audio of this type, or nil.
    static func focusProblem(_ type: HUAudioStreamType, appID: String, focus: AudioFocus) -> String? {
        switch type {
        case .main:
            guard focus.main == .phone(appID: appID) else {
                return "a main stream needs the main audio: the app's now-playing must be playing (section 19.8)"
            }
        case .alternate:
            guard focus.prompt?.appID == appID else {
                return "an alternate stream plays a navigation prompt: start_prompt first (section 19.8)"
            }
        case .voice:
            guard focus.mayStreamVoice(appID) else {
                return appID == AssistantSession.audioOwner
                    ? "the phone's assistant (app_id empty) streams voice only while its session is open (section 27)"
                    : "a voice stream needs the car's call, a call of the app's own (section 26) or the app's voice session"
            }
        case .microphone, .output, .unspecified, .UNRECOGNIZED:
            return "the phone opens main, alternate or voice streams"
        }
        return nil
    }

    static func name(_ type: HUAudioStreamType) -> String {
        switch type {
        case .main: return "main"
        case .alternate: return "alternate"
        case .voice: return "voice"
        case .microphone: return "microphone"
        case .output: return "output"
        case .unspecified, .UNRECOGNIZED: return "unspecified"
        }
    }

    // MARK: - Frames and credit

    /// A MEDIA frame from the phone: checked, debited, passed to the mixer.
    mutating func media(stream id: UInt32, _ payload: ByteBuffer, outputs: inout [Output]) {
        guard var stream = streams[id] else {
            if recentlyClosed.contains(id) { return }  // in flight when it closed
            if microphone?.stream == id {
                outputs.append(.refuse(.notConnected, "stream \(id) is the car's microphone: the phone only reads it"))
            } else {
                outputs.append(.refuse(.notConnected, "MEDIA on channel \(id): no audio stream of yours is open there"))
            }
            return
        }
        var bytes = payload
        guard let timestamp = bytes.readInteger(endianness: .big, as: UInt64.self) else {
            outputs.append(.refuse(.badMediaFrame, "a MEDIA payload starts with an 8-byte timestamp; got \(payload.readableBytes) bytes"))
            return
        }
        let frames: UInt32
        switch Self.frames(of: bytes.readableBytesView, format: stream.format) {
        case .failure(let problem):
            outputs.append(.refuse(.badMediaFrame, "stream \(id): \(problem.message)"))
            return
        case .success(let count): frames = count
        }
        if let last = stream.lastTimestamp, timestamp < last {
            outputs.append(.refuse(.badMediaFrame, "stream \(id): timestamp \(timestamp) us is before the previous frame's \(last) us"))
            return
        }
        guard frames <= stream.credit else {
            close(id, reason: .flowControl, detail: "\(frames) frames sent with \(stream.credit) of credit", tell: true, drain: false, outputs: &outputs)
            outputs.append(.refuse(.flowControl, "stream \(id): MEDIA of \(frames) sample frames beyond the credit of \(stream.credit); the stream is closed"))
            return
        }
        stream.credit -= frames
        stream.lastTimestamp = timestamp
        streams[id] = stream
        outputs.append(.engine(.frame(stream: id, timestamp: timestamp, frames: frames, payload: bytes)))
    }

    /// The mixer played `frames` of a stream: credit goes back to the app in
    /// quarter windows (each grant is a message), or at once when nothing of
    /// the stream is left in the car (an app sending 120 ms packets must not
    /// wait for a quarter window that never comes).
    mutating func played(stream id: UInt32, frames: UInt32, outputs: inout [Output]) {
        guard var stream = streams[id] else { return }
        stream.ungranted += frames
        if stream.ungranted >= stream.window / 4 || stream.credit + stream.ungranted >= stream.window {
            let grant = min(stream.ungranted, stream.window - stream.credit)
            stream.credit += grant
            stream.ungranted = 0
            if grant > 0 {
                outputs.append(.send(.audioCredit(HUAudioCredit.with { $0.streamID = id; $0.frames = grant })))
            }
        }
        streams[id] = stream
    }

    /// `AudioCredit` from the phone, for the microphone stream.
    mutating func credit(_ credit: HUAudioCredit) -> RuleViolation? {
        guard let microphone, microphone.stream == credit.streamID else {
            if recentlyClosed.contains(credit.streamID) { return nil }
            if streams[credit.streamID] != nil {
                return RuleViolation(.invalidArgument, "stream \(credit.streamID) plays to the car: the car grants its credit")
            }
            return RuleViolation(.unknownSession, "no microphone stream \(credit.streamID) is open")
        }
        guard credit.frames > 0 else { return RuleViolation(.invalidArgument, "a grant of 0 frames") }
        let window = window(for: Self.microphoneFormat)
        guard UInt64(microphoneCredit) + UInt64(credit.frames) <= UInt64(window) else {
            return RuleViolation(
                .invalidArgument, "the grant would give the car \(UInt64(microphoneCredit) + UInt64(credit.frames)) frames of credit, over the window",
                limit: "audio.credit_frames", limitValue: window)
        }
        microphoneCredit += credit.frames
        return nil
    }

    /// A chunk the car's microphone captured: sent while the phone has room, else dropped.
    mutating func captured(stream id: UInt32, timestamp: UInt64, pcm: ByteBuffer, allocator: ByteBufferAllocator, outputs: inout [Output]) {
        guard let microphone, microphone.stream == id else { return }
        let frames = UInt32(pcm.readableBytes / 2)
        guard frames <= microphoneCredit else {
            microphoneDropped += 1
            return
        }
        microphoneCredit -= frames
        var payload = allocator.buffer(capacity: 8 + pcm.readableBytes)
        payload.writeInteger(timestamp, endianness: .big)
        payload.writeImmutableBuffer(pcm)
        outputs.append(.media(stream: id, payload))
    }

    /// Everything ends (the daemon stops, or the phone is gone for good).
    mutating func endAll(reason: HUAudioStreamCloseReason, tell: Bool, outputs: inout [Output]) {
        for id in streams.keys.sorted() {
            close(id, reason: reason, detail: "", tell: tell, drain: false, outputs: &outputs)
        }
        stopMicrophone(reason: reason, tell: tell, outputs: &outputs)
    }
}

/// Why audio is not acceptable, in words for the peer.
public struct AudioProblem: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

