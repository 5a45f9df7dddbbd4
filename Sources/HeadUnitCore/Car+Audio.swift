import HeadUnitWire
import NIOCore

// Audio streams and the microphone: the Car checks who is asking and what
// focus they hold, `AudioStreams` keeps the streams (PROTOCOL.md section 24).
extension Car {
    /// An audio-stream message; true when `body` was one.
    mutating func receiveAudioMessage(_ body: HUEnvelope.OneOf_Body, requestID: UInt32, from peer: PeerID) -> Bool {
        var outputs: [AudioStreams.Output] = []
        switch body {
        case .openAudioStream(let open):
            let outcome = openAudioStream(open, from: peer, outputs: &outputs)
            // A stream it replaces: its AudioStreamClosed first, then the Result (as 18.6).
            performAudio(outputs, from: peer)
            answer(peer, requestID, outcome)
        case .closeAudioStream(let close):
            let outcome: Result<HUResult, RuleViolation>
            if phonePeer != peer {
                outcome = .failure(RuleViolation(.noPhone, "announce apps before using audio streams"))
            } else {
                outcome = Self.outcome(audioStreams.closeByApp(close.streamID, outputs: &outputs))
            }
            performAudio(outputs, from: peer)
            answer(peer, requestID, outcome)
        case .audioCredit(let credit):
            // One-way: answered only when refused, and then it counts as a protocol error (as 18.5).
            let violation = phonePeer == peer
                ? audioStreams.credit(credit) : RuleViolation(.noPhone, "announce apps before using audio streams")
            if let violation { effects.append(.refuseRequest(peer, violation.result, requestID: requestID)) }
        case .watchAudio(let watch):
            // The role (HMI, cluster) was checked by the connection; then the cap (section 24.7).
            switch audioTap.watch(peer, stop: watch.stop) {
            case .failure(let violation):
                answer(peer, requestID, .failure(violation))
            case .success(let command):
                if let command { effects.append(.audio(command)) }
                var result = HUResult()
                result.audioStream = AudioTap.info
                answer(peer, requestID, .success(result))
            }
        default:
            return false
        }
        return true
    }

    /// OpenAudioStream's checks, in order: NO_PHONE, UNKNOWN_APP,
    /// ENTITLEMENT_REFUSED, INVALID_ARGUMENT (type), UNSUPPORTED_AUDIO_FORMAT,
    /// NO_AUDIO_FOCUS, TOO_MANY_SESSIONS (section 24.2).
    mutating func openAudioStream(_ open: HUOpenAudioStream, from peer: PeerID, outputs: inout [AudioStreams.Output]) -> Result<HUResult, RuleViolation> {
        if open.appID == AssistantSession.audioOwner {
            // The phone's assistant (section 27): its VOICE during its session.
            guard let phonePeer, phonePeer == peer else {
                return .failure(RuleViolation(.noPhone, "announce apps before using audio streams"))
            }
            guard assistant.available else {
                return .failure(RuleViolation(.noAssistant, "app_id empty is the phone's assistant, and this phone did not say it has one"))
            }
        } else {
            let app: AppState
            switch announcedApp(open.appID, from: peer) {
            case .success(let found): app = found
            case .failure(let violation): return .failure(violation)
            }
            guard app.category != nil else {
                return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
            }
        }
        switch open.type {
        case .main, .alternate, .voice: break
        case .microphone, .output, .unspecified, .UNRECOGNIZED:
            return .failure(RuleViolation(.invalidArgument, "type must be MAIN, ALTERNATE or VOICE (the car opens the microphone and the output tap)"))
        }
        if let problem = AudioStreams.formatProblem(open.format) {
            return .failure(RuleViolation(.unsupportedAudioFormat, problem))
        }
        if let problem = AudioStreams.focusProblem(open.type, appID: open.appID, focus: audio) {
            return .failure(RuleViolation(.noAudioFocus, problem))
        }
        return audioStreams.open(appID: open.appID, type: open.type, format: open.format, outputs: &outputs).map { info in
            var result = HUResult()
            result.audioStream = info
            return result
        }
    }

    /// A MEDIA frame (section 24.4): to the mixer, or refused.
    public mutating func receiveMedia(channel: UInt32, _ payload: ByteBuffer, from peer: PeerID) -> [CarEffect] {
        var outputs: [AudioStreams.Output] = []
        if peer == phonePeer {
            audioStreams.media(stream: channel, payload, outputs: &outputs)
        } else {
            outputs.append(.refuse(.notConnected, "MEDIA on channel \(channel): this phone carries no apps"))
        }
        performAudio(outputs, from: peer)
        return takeEffects()
    }

    /// The mixer played these sample frames (stream, frames): credit goes back.
    public mutating func audioPlayed(_ played: [(stream: UInt32, frames: UInt32)]) -> [CarEffect] {
        var outputs: [AudioStreams.Output] = []
        for entry in played {
            audioStreams.played(stream: entry.stream, frames: entry.frames, outputs: &outputs)
        }
        performAudio(outputs, from: nil)
        return takeEffects()
    }

    /// The car's microphone captured a chunk (PCM s16le, 16 kHz mono) for `stream`.
    public mutating func microphoneCaptured(stream: UInt32, timestamp: UInt64, pcm: ByteBuffer) -> [CarEffect] {
        var outputs: [AudioStreams.Output] = []
        audioStreams.captured(stream: stream, timestamp: timestamp, pcm: pcm, allocator: ByteBufferAllocator(), outputs: &outputs)
        performAudio(outputs, from: nil)
        return takeEffects()
    }

    /// After every input: streams follow the focus, the mixer learns the
    /// focus, the microphone follows `MicrophoneRule`.
    mutating func settleAudio() {
        settleCalls()
        settleAssistant()
        var outputs: [AudioStreams.Output] = []
        let wanted = microphoneWanted()
        if audioStreams.isIdle, wanted == nil {
            // After most messages: nothing open, nothing wanted, only the mix can change.
            audioStreams.settleMix(focus: audio, outputs: &outputs)
        } else {
            let connected = phonePeer != nil
            let apps = templates.apps
            let assistantAvailable = assistant.available
            // The assistant's audio lives while its phone has one (section 27).
            let alive = { (appID: String) in
                connected && (apps[appID] != nil || (appID == AssistantSession.audioOwner && assistantAvailable))
            }
            audioStreams.settle(
                focus: audio, appAlive: alive, microphoneWanted: wanted,
                microphoneStopReason: { use in
                    MicrophoneRule.stopReason(
                        use, appAlive: alive(use.appID),
                        voiceControlPresented: apps[use.appID]?.scenes[.main]?.presentedHeld?.kind == .voiceControl)
                },
                phoneReachable: connected || phoneLink.isReconnecting, outputs: &outputs)
        }
        if !outputs.isEmpty { performAudio(outputs, from: nil) }
    }

    /// Who should hear the cabin now (`MicrophoneRule.wanted`, section 24.6).
    func microphoneWanted() -> MicrophoneUse? {
        guard phonePeer != nil else { return nil }
        return MicrophoneRule.wanted(
            assistantListening: assistant.listening, voiceControlShown: voiceControlShown(), lineHolder: calls.lineHolder, vehicleCallActive: audio.vehicleCallActive,
            voiceStreamApps: { audioStreams.streams.values.filter { $0.type == .voice }.sorted { $0.id < $1.id }.map(\.appID) })
    }

    /// The app whose voice-control template the driver sees: presented on top
    /// of its main scene while that scene is the main screen's. Only the
    /// screen's owner is looked at, so a hidden scene holding the template
    /// (launched once, then another app or the home screen shown) is not.
    func voiceControlShown() -> String? {
        // The kind as held: reading `presented.kind` copies the template's content.
        guard let owner = templates.screenOwners[.main], owner.kind == .main,
            templates.apps[owner.appID]?.scenes[.main]?.presentedHeld?.kind == .voiceControl
        else { return nil }
        return owner.appID
    }

    /// The app's scenes ended: its streams and microphone end with APP_CLOSED
    /// (24.3), before the focus its end takes away could close them otherwise.
    mutating func endAudio(of appID: String, tellPhone: Bool) {
        var outputs: [AudioStreams.Output] = []
        audioStreams.appEnded(appID, tell: tellPhone, outputs: &outputs)  // sendToPhone: to the phone or its backlog
        if !outputs.isEmpty { performAudio(outputs, from: nil) }
    }

    mutating func performAudio(_ outputs: [AudioStreams.Output], from peer: PeerID?) {
        for output in outputs {
            switch output {
            case .send(let body): sendToPhone(body)
            case .engine(let command): effects.append(.audio(command))
            case .refuse(let code, let message):
                if let peer { effects.append(.refuseData(peer, code, message)) }
            case .media(let stream, let payload):
                if let phonePeer { effects.append(.sendMedia(phonePeer, channel: stream, payload)) }
            }
        }
    }
}
