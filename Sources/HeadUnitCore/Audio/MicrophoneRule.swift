import HeadUnitWire

/// Who the car's microphone streams to, and why (PROTOCOL.md 24.6). The
/// metadata stream publishes it (`AudioSection.microphone_app_id`, 19.5).
public struct MicrophoneUse: Sendable, Equatable {
    public var appID: String
    public var purpose: HUMicrophonePurpose

    public init(appID: String, purpose: HUMicrophonePurpose) {
        self.appID = appID
        self.purpose = purpose
    }
}

/// The one rule for the car's microphone (PROTOCOL.md 24.6). The Car reads
/// the facts off its screens, calls and streams (`Car.microphoneWanted`);
/// `AudioStreams` starts and stops the stream as the rule says.
public enum MicrophoneRule {
    /// Who should hear the cabin now, in order:
    /// 1. the phone's assistant while it listens (section 27; a call ends its
    ///    session, so the two never meet);
    /// 2. the app whose voice-control template is **shown**: presented on top
    ///    of its main scene while that scene is on the main screen. A scene
    ///    the driver does not see never gets the microphone, whatever it holds;
    /// 3. else the app whose call holds the line (section 26.1), once it has a VOICE stream;
    /// 4. else, during the car's own call, the app with the oldest VOICE stream.
    ///
    /// `voiceStreamApps`: the apps of the open VOICE streams in stream order;
    /// asked only during a call (this runs after every input).
    public static func wanted(
        assistantListening: Bool, voiceControlShown: String?, lineHolder: String?, vehicleCallActive: Bool,
        voiceStreamApps: () -> [String]
    ) -> MicrophoneUse? {
        if assistantListening { return MicrophoneUse(appID: AssistantSession.audioOwner, purpose: .assistant) }
        if let appID = voiceControlShown { return MicrophoneUse(appID: appID, purpose: .voiceControl) }
        guard lineHolder != nil || vehicleCallActive else { return nil }
        let voices = voiceStreamApps()
        if let holder = lineHolder, voices.contains(holder) { return MicrophoneUse(appID: holder, purpose: .call) }
        if vehicleCallActive, let first = voices.first { return MicrophoneUse(appID: first, purpose: .call) }
        return nil
    }

    /// Why a microphone stream that `wanted` no longer names ends
    /// (`AudioStreamClosed{MICROPHONE, reason}`): its app or the phone is
    /// gone (`APP_CLOSED`; an app whose scenes end is stopped so at once,
    /// `AudioStreams.appEnded`); its call ended or stopped holding the line
    /// (`CALL_ENDED`); its voice-control template is still presented but not
    /// on screen (`VOICE_CONTROL_HIDDEN`: it starts again when shown), or was
    /// dismissed (`VOICE_CONTROL_DISMISSED`); the assistant stopped listening
    /// or its session ended (`ASSISTANT_NOT_LISTENING`).
    public static func stopReason(_ use: MicrophoneUse, appAlive: Bool, voiceControlPresented: Bool) -> HUAudioStreamCloseReason {
        guard appAlive else { return .appClosed }
        switch use.purpose {
        case .call: return .callEnded
        case .assistant: return .assistantNotListening
        case .voiceControl, .unspecified, .UNRECOGNIZED:
            return voiceControlPresented ? .voiceControlHidden : .voiceControlDismissed
        }
    }
}
