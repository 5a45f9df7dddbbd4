import HeadUnitWire

/// Who owns the car's main audio, and what a navigation prompt does to it
/// (PROTOCOL.md section 19.8): activating the app's audio stops the car's own
/// source; a navigation voice prompt mixes with the main audio and ducks it,
/// or pauses it when it is spoken; the prompt style tells navigation apps
/// whether to speak at all while a call or a voice session is active.
public struct AudioFocus: Sendable, Equatable {
    public enum Main: Sendable, Equatable {
        case none
        case car(source: String)
        case phone(appID: String)
    }

    public private(set) var main: Main = .none
    /// The main audio is spoken (a podcast): prompts pause it.
    public private(set) var mainSpoken = false
    public private(set) var prompt: (appID: String, serial: UInt64)?
    var promptSerial: UInt64 = 0
    /// A call of the car's own (the HMI's `VehicleState.call_active`).
    public private(set) var vehicleCallActive = false
    /// Apps with a call in progress, ringing included (PROTOCOL.md section 26).
    public private(set) var appCalls: [String] = []
    /// A call of the car's or of an app: the main audio pauses, prompts are short tones.
    public var callActive: Bool { vehicleCallActive || !appCalls.isEmpty }
    public private(set) var voiceSessionActive = false
    /// The app whose voice-control audio session is active.
    public private(set) var voiceAppID = ""
    /// The phone's assistant has a session open (section 27): it interrupts
    /// the main audio as a call does, prompts are silent, and it may stream voice.
    public private(set) var assistantActive = false

    /// Prompts are held a few seconds at most (`start_prompt`'s `duration_ms`, PROTOCOL.md section 16.13).
    public static let maximumPromptMilliseconds: UInt32 = 10_000

    public init() {}

    /// As a daemon restart hands it over (CarSnapshot); a prompt in progress
    /// is not carried (it would have ended within seconds).
    init(restoringMain main: Main, spoken: Bool, callActive: Bool, voiceSessionActive: Bool, voiceAppID: String) {
        self.main = main
        self.mainSpoken = spoken
        self.vehicleCallActive = callActive
        self.voiceSessionActive = voiceSessionActive
        self.voiceAppID = voiceAppID
    }

    public static func == (lhs: AudioFocus, rhs: AudioFocus) -> Bool {
        lhs.main == rhs.main && lhs.mainSpoken == rhs.mainSpoken && lhs.prompt?.appID == rhs.prompt?.appID
            && lhs.prompt?.serial == rhs.prompt?.serial && lhs.vehicleCallActive == rhs.vehicleCallActive && lhs.appCalls == rhs.appCalls
            && lhs.voiceSessionActive == rhs.voiceSessionActive && lhs.voiceAppID == rhs.voiceAppID
            && lhs.assistantActive == rhs.assistantActive
    }

    /// None while any voice session is active, a short tone during a call, else normal.
    public var promptStyle: HUPromptStyle {
        if voiceSessionActive || !voiceAppID.isEmpty || assistantActive { return .none }
        if callActive { return .short }
        return .normal
    }

    /// The HMI's view of the car: its own source, a call, a voice session.
    /// Selecting the car's source takes the main audio from the phone.
    public mutating func vehicleChanged(carSource: String, callActive: Bool, voiceSessionActive: Bool) {
        self.vehicleCallActive = callActive
        self.voiceSessionActive = voiceSessionActive
        if !carSource.isEmpty {
            if main != .car(source: carSource) { (main, mainSpoken) = (.car(source: carSource), false) }
        } else if case .car = main {
            main = .none
        }
    }

    /// The app's now-playing content: playing takes the main audio (the car's source stops).
    public mutating func nowPlaying(appID: String, playing: Bool, spoken: Bool) {
        if playing {
            main = .phone(appID: appID)
            mainSpoken = spoken
        } else if main == .phone(appID: appID) {
            mainSpoken = spoken
        }
    }

    /// The apps with calls in progress (`CallSession.appsInCalls`).
    public mutating func callsChanged(appsInCalls: [String]) {
        appCalls = appsInCalls
    }

    /// May this app stream voice: during the car's call, its own call or its
    /// voice session; the phone's assistant (`AssistantSession.audioOwner`) during its session.
    public func mayStreamVoice(_ appID: String) -> Bool {
        if appID == AssistantSession.audioOwner { return assistantActive }
        return vehicleCallActive || appCalls.contains(appID) || voiceAppID == appID
    }

    /// The main audio does not play: a call takes the output, and so does the
    /// phone's assistant (it interrupts music as Siri does; the music comes back after).
    public var mainInterrupted: Bool { callActive || assistantActive }

    /// The phone's assistant opened or ended its session: a prompt playing ends.
    public mutating func assistantChanged(active: Bool) {
        assistantActive = active
        if active { endPrompt() }
    }

    public mutating func startPrompt(appID: String, durationMilliseconds: UInt32) -> Result<UInt64, RuleViolation> {
        guard durationMilliseconds >= 1, durationMilliseconds <= Self.maximumPromptMilliseconds else {
            return .failure(RuleViolation(
                .invalidArgument, "a prompt lasts 1 to \(Self.maximumPromptMilliseconds) ms, not \(durationMilliseconds)",
                limit: "navigation.prompt.durationMs", limitValue: Self.maximumPromptMilliseconds))
        }
        if promptStyle == .none {
            return .failure(RuleViolation(.invalidPosition, "prompt style is none: a voice session is active"))
        }
        promptSerial += 1
        prompt = (appID, promptSerial)
        return .success(promptSerial)
    }

    /// Ends the app's prompt (or the prompt with `serial`); false when it was not playing.
    @discardableResult
    public mutating func endPrompt(appID: String? = nil, serial: UInt64? = nil) -> Bool {
        guard let current = prompt else { return false }
        if let appID, current.appID != appID { return false }
        if let serial, current.serial != serial { return false }
        prompt = nil
        return true
    }

    public mutating func setVoiceSession(appID: String, active: Bool) {
        if active {
            voiceAppID = appID
            endPrompt()
        } else if voiceAppID == appID {
            voiceAppID = ""
        }
    }

    /// Everything of an app ends (its scenes went away).
    public mutating func appGone(_ appID: String) {
        if main == .phone(appID: appID) { (main, mainSpoken) = (.none, false) }
        endPrompt(appID: appID)
        if voiceAppID == appID { voiceAppID = "" }
    }

    public var section: HUAudioSection {
        var section = HUAudioSection()
        switch main {
        case .none: section.mainOwner = .none
        case .car(let source): (section.mainOwner, section.carSource) = (.car, source)
        case .phone(let appID): (section.mainOwner, section.appID) = (.phone, appID)
        }
        section.mainSpoken = mainSpoken
        if let prompt, main != .none {
            section.promptAppID = prompt.appID
            section.mainPaused = mainSpoken
            section.mainDucked = !mainSpoken
        } else if let prompt {
            section.promptAppID = prompt.appID
        }
        // A call or the assistant takes the output: the main audio, the car's own source too, waits.
        if mainInterrupted, main != .none { (section.mainPaused, section.mainDucked) = (true, false) }
        section.promptStyle = promptStyle
        section.callActive = callActive
        section.voiceSessionActive = voiceSessionActive || assistantActive
        section.voiceAppID = voiceAppID
        return section
    }
}
