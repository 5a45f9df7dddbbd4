import HeadUnitWire

/// What requests add up to (PROTOCOL.md section 10.4). Each request is
/// bounded on its own (section 10.3), but a list plus an alert, 64 icons, or
/// six metadata sections of 0.9 MB each are valid one by one and together
/// make a frame no peer may be sent. The car measures the state a request
/// leaves, as it would be sent, and refuses the request when a frame of it
/// would be over `max_payload_bytes` or the phone would hold more templates
/// than `max_phone_template_bytes`: so what the HMI is shown and what the car
/// routes input to never diverge, and a restart can always hand it over.
///
/// The sizes are the encoded sizes of the frames as they go out (`wireSize`),
/// measured in one place (`ComposedLimits.*Bytes`): whatever changes in what
/// is sent (images sent once by hash, say) changes what is counted.
public struct ComposedLimits: Sendable, Equatable {
    /// `max_payload_bytes`: every home screen, screen and metadata snapshot must fit one frame.
    public var maxFrameBytes: Int
    /// `max_phone_template_bytes`: the templates (stacks, modals, search
    /// results, now playing) of all the phone's apps together, encoded.
    public var maxPhoneTemplateBytes: Int

    public static let defaultPhoneTemplateBytes = 16 << 20
    /// The range the daemon accepts at start (PROTOCOL.md section 20.6); it also bounds the restart snapshot.
    public static let maxPhoneTemplateBytesRange = 65_536...256 << 20

    public init(maxFrameBytes: Int = 1 << 20, maxPhoneTemplateBytes: Int = ComposedLimits.defaultPhoneTemplateBytes) {
        self.maxFrameBytes = maxFrameBytes
        self.maxPhoneTemplateBytes = maxPhoneTemplateBytes
    }

    // MARK: - measuring what would be sent

    /// A `ScreenUpdate{full}` of this screen, as any HMI may be sent it (on
    /// joining, on catching up, on a structural change). The largest
    /// sequence number is counted so the measure holds at any sequence.
    public static func screenBytes(_ screen: consuming HURenderedScreen) -> Int {
        var update = HUScreenUpdate()
        update.screen = screen.screen
        update.sequence = .max
        update.full = screen
        var envelope = HUEnvelope()
        envelope.screenUpdate = update
        return envelope.wireSize
    }

    public static func homeScreenBytes(_ home: consuming HUHomeScreen) -> Int {
        var envelope = HUEnvelope()
        envelope.homeScreen = home
        return envelope.wireSize
    }

    /// A `MetadataUpdate{full}`: every section, so every partial update fits too.
    public static func metadataBytes(_ state: HUMetadataState) -> Int {
        var update = HUMetadataUpdate()
        update.version = .max
        update.full = true
        update.state = state
        var envelope = HUEnvelope()
        envelope.metadataUpdate = update
        return envelope.wireSize
    }

    // MARK: - the refusals

    /// MESSAGE_TOO_LARGE naming the frame the request would have made unsendable.
    func frameViolation(_ what: String, limit: String, bytes: Int) -> RuleViolation {
        RuleViolation(
            .messageTooLarge,
            "\(what) would be \(bytes) bytes, over max_payload_bytes (\(maxFrameBytes)); nothing was changed",
            limit: limit, limitValue: UInt32(clamping: maxFrameBytes))
    }

    func templateBytesViolation(_ bytes: Int) -> RuleViolation {
        RuleViolation(
            .messageTooLarge,
            "the phone's apps and templates would take \(bytes) bytes, over max_phone_template_bytes (\(maxPhoneTemplateBytes)); nothing was changed",
            limit: "max_phone_template_bytes", limitValue: UInt32(clamping: maxPhoneTemplateBytes))
    }
}

/// What a request may have changed, so only that is measured after it.
struct ComposedScope: OptionSet {
    let rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The home screen (apps announced).
    static let home = ComposedScope(rawValue: 1 << 0)
    /// Every scene of one app (its templates changed) and the phone's template bytes.
    static let appScenes = ComposedScope(rawValue: 1 << 1)
    /// The metadata stream.
    static let metadata = ComposedScope(rawValue: 1 << 2)
    /// The screens as shown now (the HMI chose what they show).
    static let shownScreens = ComposedScope(rawValue: 1 << 3)

    /// What a request body may change beyond itself; empty: nothing to measure.
    init(_ body: HUEnvelope.OneOf_Body?) {
        switch body {
        case .announceApps: self = [.home]
        // The metadata stream shows templates only through the now-playing
        // content (Car.adoptNowPlaying): other templates leave it as it was.
        case .templateRequest(let request):
            self = Self.changesNowPlaying(request) ? [.appScenes, .metadata] : [.appScenes]
        case .completeEvent: self = [.appScenes, .metadata]
        // The HMI's now-playing screen draws the app's commands.
        case .remoteCommands: self = [.appScenes]
        // The HMI's home screen lists the calls (section 26.7).
        case .callReport, .callRequest: self = [.home]
        // ... and the assistant's exchange (section 27).
        case .assistantInput, .assistantUpdate, .postNotification, .notificationInput: self = [.home]
        case .navigationRequest, .navigationInput, .clusterInput: self = [.metadata]
        case .launchApp, .hmiInput, .setVehicleState, .closeApp: self = [.shownScreens, .metadata]
        default: self = []
        }
    }

    /// Whether a template request may set an app's now-playing content.
    static func changesNowPlaying(_ request: HUTemplateRequest) -> Bool {
        switch request.op {
        case .setRoot(let template), .push(let template), .update(let template), .present(let template):
            if case .nowPlaying = template.kind { return true }
            return false
        case .updateNowPlaying: return true
        case .pop, .popToRoot, .popTo, .dismiss, .updateItem, .showNowPlaying, nil: return false
        }
    }
}
