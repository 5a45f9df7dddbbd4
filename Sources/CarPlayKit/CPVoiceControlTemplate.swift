import HeadUnitWire

/// One state of a voice-control template: titles and an image (`CPVoiceControlState`).
@MainActor
public final class CPVoiceControlState {
    /// The state's id; activate it by this id.
    public let identifier: String
    /// Titles, the car shows the longest that fits.
    public let titleVariants: [String]
    /// The image.
    public let image: CPImage?
    /// Whether the image animation repeats.
    public let repeats: Bool

    /// A state.
    public init(identifier: String, titleVariants: [String], image: CPImage?, repeats: Bool) {
        self.identifier = identifier
        self.titleVariants = titleVariants
        self.image = image
        self.repeats = repeats
    }

    var wire: HUVoiceControlState {
        var state = HUVoiceControlState()
        state.id = identifier
        state.titleVariants = titleVariants.longestFirst
        if let image { state.image = image.wire }
        state.repeats = repeats
        return state
    }
}

/// A modal voice-control screen, for navigation apps (`CPVoiceControlTemplate`); only presented.
@MainActor
public final class CPVoiceControlTemplate: CPTemplate {
    /// The states.
    public let voiceControlStates: [CPVoiceControlState]
    /// The state shown.
    public private(set) var activeStateIdentifier: String?

    /// A voice-control template showing its first state.
    public init(voiceControlStates: [CPVoiceControlState], identifier: String? = nil) {
        self.voiceControlStates = voiceControlStates
        super.init(identifier: identifier, prefix: "voice")
        activeStateIdentifier = voiceControlStates.first?.identifier
    }

    /// Shows the state with this id.
    public func activateVoiceControlState(withIdentifier identifier: String) {
        activeStateIdentifier = identifier
        setNeedsUpdate()
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var voice = HUVoiceControlTemplate()
        voice.states = voiceControlStates.map(\.wire)
        voice.activeStateID = activeStateIdentifier ?? ""
        return .voiceControl(voice)
    }
}
