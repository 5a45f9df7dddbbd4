import HeadUnitClient
import HeadUnitWire

/// How an app's audio meets the car's (`AVAudioSession`, PROTOCOL.md
/// sections 19.8 and 24). Declare the category, mode and options, activate
/// the session, then play through a ``CPAudioPlayer``:
///
///     let session = app.audioSession          // or AVAudioSession.sharedInstance()
///     try session.setCategory(.playback, mode: .voicePrompt,
///                             options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])
///     try session.setActive(true)             // the car starts the prompt: music ducks, spoken audio pauses
///     let player = CPAudioPlayer(format: .pcm(sampleRate: 22_050, channels: 1), session: session)
///     try await player.play()
///     try await player.write(samples)         // paced by the car's credit
///     try await player.finish()
///     try session.setActive(false, options: .notifyOthersOnDeactivation)  // the prompt ends
///
/// What the car does with each mode (it, not the app, applies 19.8's rules):
/// - `.default` / `.spokenAudio` with `.playback`: main audio. The app owns
///   the car's main audio while its now-playing plays (`MPNowPlayingInfoCenter`
///   with a playback rate above 0); `.spokenAudio` marks it spoken (the now-playing's
///   `spoken_audio`), so prompts pause it instead of ducking it.
/// - `.voicePrompt`: a navigation prompt. Activating the session is the
///   navigation request `start_prompt`, deactivating it `end_prompt`; the
///   player's stream is the alternate audio, mixed on top while the car
///   ducks music by 12 dB and pauses spoken audio.
@MainActor
public final class AVAudioSession {
    /// The audio session category. The car plays what the phone sends: only `.playback` exists.
    public struct Category: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Audio that is central to the app: music, spoken audio, prompts.
        public static let playback = Category(rawValue: "AVAudioSessionCategoryPlayback")
    }

    /// The audio session mode.
    public struct Mode: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Music and other main audio.
        public static let `default` = Mode(rawValue: "AVAudioSessionModeDefault")
        /// Podcasts and audiobooks: the car pauses them (not ducks) during a prompt.
        public static let spokenAudio = Mode(rawValue: "AVAudioSessionModeSpokenAudio")
        /// Navigation prompts (`start_prompt` / `end_prompt`).
        public static let voicePrompt = Mode(rawValue: "AVAudioSessionModeVoicePrompt")
    }

    /// The category's options (Apple's bit values).
    public struct CategoryOptions: OptionSet, Sendable {
        public var rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let mixWithOthers = CategoryOptions(rawValue: 0x1)
        public static let duckOthers = CategoryOptions(rawValue: 0x2)
        public static let interruptSpokenAudioAndMixWithOthers = CategoryOptions(rawValue: 0x11)
    }

    /// Options of ``setActive(_:options:)``.
    public struct SetActiveOptions: OptionSet, Sendable {
        public var rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Others may resume: the car always restores ducked or paused audio when a prompt ends.
        public static let notifyOthersOnDeactivation = SetActiveOptions(rawValue: 1)
    }

    /// The longest prompt the car holds (PROTOCOL.md 19.8, `navigation.prompt.durationMs`):
    /// an active voicePrompt session is a prompt of this length that ``setActive(_:options:)`` ends earlier.
    public static let maximumPromptDuration: UInt32 = 10_000

    private static var sessions: [ObjectIdentifier: AVAudioSession] = [:]
    private static var last: AVAudioSession?
    private static let unbound = AVAudioSession(application: nil)

    /// The session of the app that last asked for its ``CPApplication/audioSession``
    /// (in a one-app process, that app's); unbound before: activating it throws.
    public static func sharedInstance() -> AVAudioSession {
        last ?? unbound
    }

    static func session(for application: CPApplication) -> AVAudioSession {
        // An app gone may leave its address to a new one: drop the sessions of apps gone first.
        sessions = sessions.filter { $0.value.application != nil }
        let key = ObjectIdentifier(application)
        let session = sessions[key].flatMap { $0.application === application ? $0 : nil } ?? AVAudioSession(application: application)
        sessions[key] = session
        last = session
        return session
    }

    weak var application: CPApplication?
    public private(set) var category: Category = .playback
    public private(set) var mode: Mode = .default
    public private(set) var categoryOptions: CategoryOptions = []
    public private(set) var isActive = false
    /// The last `start_prompt` sent (a voicePrompt session's activation): players wait for it.
    var activation: Task<Void, Error>?
    /// The session set the now-playing's spoken flag (and clears it when the mode changes).
    private var markedSpoken = false

    private init(application: CPApplication?) {
        self.application = application
    }

    /// Sets the category, mode and options. Throws `invalidArgument` for a
    /// voicePrompt session whose app is no navigation app (only navigation
    /// apps start prompts, 19.8), and while the session is active with
    /// another mode (deactivate it first).
    public func setCategory(_ category: Category, mode: Mode = .default, options: CategoryOptions = []) throws {
        if mode == .voicePrompt, let application, !application.isNavigationApp {
            throw CPError.usage(.invalidArgument, "\(application.bundleIdentifier) is no navigation app: only they speak voice prompts")
        }
        if isActive, mode != self.mode {
            throw CPError.usage(.invalidArgument, "deactivate the \(self.mode.rawValue) session before switching to \(mode.rawValue)")
        }
        self.category = category
        self.mode = mode
        self.categoryOptions = options
        if mode == .spokenAudio {
            markSpoken()
        } else if markedSpoken {
            markedSpoken = false
            CPNowPlayingTemplate.shared.nowPlayingInfo.isSpokenAudio = false
        }
    }

    /// Activates or deactivates the session. For a voicePrompt session this
    /// is the prompt: `start_prompt{duration_ms: 10000}` and `end_prompt`,
    /// sent in order with the app's other requests (the car ends a prompt
    /// held longer). A failure of the car's (another prompt style, the app
    /// not connected) is thrown by the next ``CPAudioPlayer/play()``.
    public func setActive(_ active: Bool, options: SetActiveOptions = []) throws {
        guard let application else {
            throw CPError.usage(.notConnected, "this audio session belongs to no app: use CPApplication.audioSession")
        }
        let wasActive = isActive
        isActive = active
        guard mode == .voicePrompt, wasActive != active else {
            if active, mode == .spokenAudio { markSpoken() }
            return
        }
        guard let phone = application.phone else {
            isActive = wasActive
            throw CPError.usage(.notConnected, "\(application.bundleIdentifier) is not connected to the car")
        }
        var request = HUNavigationRequest()
        request.appID = application.bundleIdentifier
        if active {
            var prompt = HUAudioPrompt()
            prompt.durationMs = Self.maximumPromptDuration
            request.op = .startPrompt(prompt)
        } else {
            request.op = .endPrompt(HUEndPrompt())
        }
        let message = request
        let task = application.queue.schedule { () async throws -> Void in
            _ = try await phone.connection.request(.navigationRequest(message))
        }
        if active { activation = task }
    }

    /// The car knows spoken audio from the app's now-playing (`spoken_audio`, 19.8).
    private func markSpoken() {
        guard let application, application.entitlements.contains(.audio) else { return }
        if !CPNowPlayingTemplate.shared.nowPlayingInfo.isSpokenAudio {
            CPNowPlayingTemplate.shared.nowPlayingInfo.isSpokenAudio = true
            markedSpoken = true
        }
    }

    /// The stream type the session's mode plays as.
    var streamType: HUAudioStreamType { mode == .voicePrompt ? .alternate : .main }
}

extension CPApplication {
    /// This app's audio session (several CarPlayKit apps may share a process
    /// here, where iOS has one app per process); it also becomes
    /// `AVAudioSession.sharedInstance()`.
    public var audioSession: AVAudioSession { AVAudioSession.session(for: self) }
}
