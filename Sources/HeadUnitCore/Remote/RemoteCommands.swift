import HeadUnitWire

/// The car's transport controls and hardware buttons reaching an audio app's
/// handlers (PROTOCOL.md section 23), as `MPRemoteCommandCenter` does on a
/// phone: each app declares the commands it supports and enables; a touch on
/// Now Playing or a car button becomes a `RemoteCommandEvent` to the app; the
/// app's status answers the HMI that asked. Pure: the car routes, times and
/// answers from what this value returns.
public struct RemoteCommands: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        /// Commands one app may have waiting for its answer (LIMIT_EXCEEDED `remoteCommands.pending`).
        public var maxPending: Int
        /// How long the car waits for the app's answer (COMMAND_TIMED_OUT).
        public var timeoutMilliseconds: UInt64

        /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6).
        public static let maxPendingRange = 1...64
        public static let timeoutRange: ClosedRange<UInt64> = 100...60_000

        public init(maxPending: Int = 8, timeoutMilliseconds: UInt64 = 3_000) {
            self.maxPending = maxPending
            self.timeoutMilliseconds = timeoutMilliseconds
        }
    }

    /// Skip intervals an app may offer, and their range in seconds.
    public static let maxPreferredIntervals = 4
    public static let maxIntervalSeconds = 3_600.0
    /// Playback rates an app may support, and the fastest.
    public static let maxSupportedRates = 8
    public static let maxPlaybackRate: Float = 4
    /// Timed-out commands remembered, so a late answer is told COMPLETION_TIMEOUT.
    static let timedOutMemory = 64

    /// A command sent to an app, waiting for its status.
    public struct Pending: Sendable, Equatable {
        public var appID: String
        /// The HMI that asked and its request id; nil once that HMI left.
        public var asker: (peer: PeerID, requestID: UInt32)?
        public var call: HURemoteCommandCall

        public static func == (lhs: Pending, rhs: Pending) -> Bool {
            lhs.appID == rhs.appID && lhs.asker?.peer == rhs.asker?.peer && lhs.asker?.requestID == rhs.asker?.requestID
                && lhs.call == rhs.call
        }
    }

    public var limits: Limits
    /// Each app's declared commands, in command order (an app absent: none declared).
    public private(set) var declared: [String: [HURemoteCommandState]] = [:]
    public private(set) var pending: [UInt64: Pending] = [:]
    var timedOut: [(id: UInt64, appID: String)] = []
    var nextCommandID: UInt64 = 1

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    public static func == (lhs: RemoteCommands, rhs: RemoteCommands) -> Bool {
        lhs.limits == rhs.limits && lhs.declared == rhs.declared && lhs.pending == rhs.pending
            && lhs.timedOut.map(\.id) == rhs.timedOut.map(\.id) && lhs.nextCommandID == rhs.nextCommandID
    }

    // MARK: - the app declares

    /// Replaces the app's command set after checking it (23.2's order:
    /// each command known and listed once, intervals and rates where they
    /// belong, within their counts and ranges).
    public mutating func declare(appID: String, _ commands: [HURemoteCommandState]) -> RuleViolation? {
        var seen = Set<Int>()
        for state in commands {
            let name = Self.name(state.command)
            if state.command == .unspecified {
                return RuleViolation(.invalidArgument, "a remote command must name its command (REMOTE_COMMAND_UNSPECIFIED)")
            }
            guard seen.insert(state.command.rawValue).inserted else {
                return RuleViolation(.invalidArgument, "\(name) is listed twice")
            }
            if let violation = Self.checkIntervals(state) ?? Self.checkRates(state) { return violation }
            if !state.preferredIntervals.isEmpty, !Self.takesInterval(state.command) {
                return RuleViolation(.invalidArgument, "\(name) takes no preferred_intervals (only skip forward and backward do)")
            }
            if !state.supportedRates.isEmpty, state.command != .changePlaybackRate {
                return RuleViolation(.invalidArgument, "\(name) takes no supported_rates (only change playback rate does)")
            }
        }
        let sorted = commands.sorted { $0.command.rawValue < $1.command.rawValue }
        if sorted.isEmpty { declared[appID] = nil } else { declared[appID] = sorted }
        return nil
    }

    static func takesInterval(_ command: HURemoteCommand) -> Bool {
        command == .skipForward || command == .skipBackward
    }

    static func checkIntervals(_ state: HURemoteCommandState) -> RuleViolation? {
        guard takesInterval(state.command) else { return nil }
        let name = Self.name(state.command)
        if state.preferredIntervals.isEmpty {
            return RuleViolation(.invalidArgument, "\(name) needs at least one preferred interval")
        }
        if state.preferredIntervals.count > maxPreferredIntervals {
            return .limitExceeded("remoteCommands.preferredIntervals", count: state.preferredIntervals.count, maximum: maxPreferredIntervals)
        }
        for interval in state.preferredIntervals where !(interval > 0 && interval <= maxIntervalSeconds) {
            return RuleViolation(.invalidArgument, "\(name): interval \(interval) s is not within (0, \(Int(maxIntervalSeconds))]")
        }
        return nil
    }

    static func checkRates(_ state: HURemoteCommandState) -> RuleViolation? {
        guard state.command == .changePlaybackRate else { return nil }
        if state.supportedRates.isEmpty {
            return RuleViolation(.invalidArgument, "change playback rate needs at least one supported rate")
        }
        if state.supportedRates.count > maxSupportedRates {
            return .limitExceeded("remoteCommands.supportedRates", count: state.supportedRates.count, maximum: maxSupportedRates)
        }
        for rate in state.supportedRates where !(rate > 0 && rate <= maxPlaybackRate) {
            return RuleViolation(.invalidArgument, "change playback rate: rate \(rate) is not within (0, \(maxPlaybackRate)]")
        }
        return nil
    }

    /// What the HMI draws the app's transport controls from.
    public func set(of appID: String) -> HURemoteCommandSet? {
        guard let commands = declared[appID] else { return nil }
        var set = HURemoteCommandSet()
        set.appID = appID
        set.commands = commands
        return set
    }

    // MARK: - the HMI asks

    /// A touch: the command as the app will get it (a skip's interval filled
    /// in), or why not (23.3: COMMAND_NOT_SUPPORTED, COMMAND_DISABLED, then
    /// the argument's INVALID_ARGUMENT). `duration`: the now-playing item's
    /// length in seconds, nil when it has none (live, unknown).
    public func resolve(_ call: HURemoteCommandCall, appID: String, duration: Double?) -> Result<HURemoteCommandCall, RuleViolation> {
        let name = Self.name(call.command)
        guard let state = declared[appID]?.first(where: { $0.command == call.command }) else {
            return .failure(RuleViolation(.commandNotSupported, "'\(appID)' has no handler for \(name)"))
        }
        guard state.enabled else {
            return .failure(RuleViolation(.commandDisabled, "'\(appID)' has disabled \(name)"))
        }
        var call = call
        switch call.command {
        case .skipForward, .skipBackward:
            if call.intervalSeconds == 0 {
                call.intervalSeconds = state.preferredIntervals.first ?? 0
            } else if !state.preferredIntervals.contains(call.intervalSeconds) {
                return .failure(RuleViolation(.invalidArgument, "\(name): \(call.intervalSeconds) s is not one of the app's intervals \(state.preferredIntervals)"))
            }
        case .changePlaybackPosition:
            let position = call.positionSeconds
            guard position >= 0, position.isFinite, duration.map({ position <= $0 }) ?? true else {
                return .failure(RuleViolation(.invalidArgument, "change playback position: \(position) s is not within the item (0 to \(duration.map { "\($0)" } ?? "any") s)"))
            }
        case .changePlaybackRate:
            guard state.supportedRates.contains(call.playbackRate) else {
                return .failure(RuleViolation(.invalidArgument, "change playback rate: \(call.playbackRate) is not one of the app's rates \(state.supportedRates)"))
            }
        case .changeShuffleMode:
            if call.shuffleMode == .unspecified {
                return .failure(RuleViolation(.invalidArgument, "change shuffle mode needs a shuffle_mode"))
            }
        case .changeRepeatMode:
            if call.repeatMode == .unspecified {
                return .failure(RuleViolation(.invalidArgument, "change repeat mode needs a repeat_mode"))
            }
        case .play, .pause, .togglePlayPause, .stop, .nextTrack, .previousTrack, .like, .dislike, .bookmark:
            break
        case .unspecified, .UNRECOGNIZED:
            return .failure(RuleViolation(.invalidArgument, "a remote command must name its command"))
        }
        return .success(call)
    }

    /// A car button as the command the app enables (23.4): the first of the
    /// button's candidates the app declared enabled. None declared:
    /// COMMAND_NOT_SUPPORTED; declared but all disabled: COMMAND_DISABLED.
    /// `playing`: the app's now-playing rate is above 0.
    public func map(_ button: HUCarButton, appID: String, playing: Bool) -> Result<HURemoteCommandCall, RuleViolation> {
        let candidates: [HURemoteCommand]
        switch button {
        case .playPause: candidates = playing ? [.togglePlayPause, .pause, .stop] : [.togglePlayPause, .play]
        case .play: candidates = [.play]
        case .pause: candidates = [.pause]
        case .stop: candidates = [.stop, .pause]
        case .next: candidates = [.nextTrack, .skipForward]
        case .previous: candidates = [.previousTrack, .skipBackward]
        case .voice, .unspecified, .UNRECOGNIZED:  // the voice button is the assistant's (Car.voiceButtonPressed)
            return .failure(RuleViolation(.invalidArgument, "a car button must name its button (CAR_BUTTON_UNSPECIFIED)"))
        }
        let states = declared[appID] ?? []
        let listed = candidates.compactMap { command in states.first { $0.command == command } }
        guard let state = listed.first(where: \.enabled) else {
            let names = candidates.map(Self.name).joined(separator: " or ")
            if listed.isEmpty {
                return .failure(RuleViolation(.commandNotSupported, "'\(appID)' has no handler for \(names)"))
            }
            return .failure(RuleViolation(.commandDisabled, "'\(appID)' has disabled \(names)"))
        }
        var call = HURemoteCommandCall()
        call.command = state.command
        if Self.takesInterval(state.command) { call.intervalSeconds = state.preferredIntervals.first ?? 0 }
        return .success(call)
    }

    /// Sends a resolved command: the event for the app, or LIMIT_EXCEEDED
    /// when the app already has `maxPending` commands unanswered.
    public mutating func start(
        _ call: HURemoteCommandCall, appID: String, button: HUCarButton, asker: PeerID, requestID: UInt32
    ) -> Result<HURemoteCommandEvent, RuleViolation> {
        let waiting = pending.values.reduce(0) { $0 + ($1.appID == appID ? 1 : 0) }
        guard waiting < limits.maxPending else {
            return .failure(.limitExceeded("remoteCommands.pending", count: waiting + 1, maximum: limits.maxPending))
        }
        let id = nextCommandID
        nextCommandID &+= 1
        pending[id] = Pending(appID: appID, asker: (asker, requestID), call: call)
        var event = HURemoteCommandEvent()
        event.appID = appID
        event.commandID = id
        event.call = call
        event.button = button
        return .success(event)
    }

    // MARK: - the app answers

    /// The app's status for a command: the command it answers (whose asker
    /// gets the outcome), or UNKNOWN_EVENT / COMPLETION_TIMEOUT.
    public mutating func answered(_ answer: HURemoteCommandAnswer) -> Result<(id: UInt64, pending: Pending), RuleViolation> {
        if answer.status == .unspecified {
            return .failure(RuleViolation(.invalidArgument, "a remote command answer needs a status (REMOTE_COMMAND_STATUS_UNSPECIFIED)"))
        }
        guard let found = pending[answer.commandID], found.appID == answer.appID else {
            if timedOut.contains(where: { $0.id == answer.commandID && $0.appID == answer.appID }) {
                return .failure(RuleViolation(.completionTimeout, "command \(answer.commandID) timed out before its answer; the car told the HMI"))
            }
            return .failure(RuleViolation(.unknownEvent, "'\(answer.appID)' has no command \(answer.commandID) waiting for an answer"))
        }
        pending[answer.commandID] = nil
        return .success((answer.commandID, found))
    }

    /// The app did not answer in time: the command whose asker is told.
    public mutating func timerFired(commandID: UInt64) -> Pending? {
        guard let found = pending.removeValue(forKey: commandID) else { return nil }
        timedOut.append((commandID, found.appID))
        if timedOut.count > Self.timedOutMemory { timedOut.removeFirst() }
        return found
    }

    /// The app's commands waiting for an answer end (its phone went away, or
    /// the app did): they are returned so their askers are told.
    public mutating func endPending(of appID: String) -> [(id: UInt64, pending: Pending)] {
        let ended = pending.filter { $0.value.appID == appID }.sorted { $0.key < $1.key }
        for (id, _) in ended { pending[id] = nil }
        return ended.map { ($0.key, $0.value) }
    }

    /// The app is gone: its declared commands too.
    public mutating func appGone(_ appID: String) -> [(id: UInt64, pending: Pending)] {
        declared[appID] = nil
        return endPending(of: appID)
    }

    /// An HMI left: its commands still reach the app, no one is answered.
    public mutating func askerLeft(_ peer: PeerID) {
        for (id, entry) in pending where entry.asker?.peer == peer {
            pending[id]!.asker = nil
        }
    }

    /// "skip forward" for messages.
    public static func name(_ command: HURemoteCommand) -> String {
        switch command {
        case .unspecified: return "no command"
        case .play: return "play"
        case .pause: return "pause"
        case .togglePlayPause: return "toggle play/pause"
        case .stop: return "stop"
        case .nextTrack: return "next track"
        case .previousTrack: return "previous track"
        case .skipForward: return "skip forward"
        case .skipBackward: return "skip backward"
        case .changePlaybackPosition: return "change playback position"
        case .changePlaybackRate: return "change playback rate"
        case .like: return "like"
        case .dislike: return "dislike"
        case .bookmark: return "bookmark"
        case .changeShuffleMode: return "change shuffle mode"
        case .changeRepeatMode: return "change repeat mode"
        case .UNRECOGNIZED(let raw): return "command \(raw)"
        }
    }
}
