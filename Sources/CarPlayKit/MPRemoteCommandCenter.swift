import HeadUnitClient
import HeadUnitWire

/// What a command handler answers (`MPRemoteCommandHandlerStatus`); the car's HMI gets it.
public enum MPRemoteCommandHandlerStatus: Int, Sendable {
    case success = 0
    case noSuchContent = 100
    case noActionableNowPlayingItem = 110
    case deviceNotFound = 120
    case commandFailed = 200

    var wire: HURemoteCommandStatus {
        switch self {
        case .success: return .success
        case .noSuchContent: return .noSuchContent
        case .noActionableNowPlayingItem: return .noActionableNowPlayingItem
        case .deviceNotFound: return .deviceNotFound
        case .commandFailed: return .commandFailed
        }
    }
}

/// `MPShuffleType`.
public enum MPShuffleType: Int, Sendable {
    case off, items, collections

    init(_ wire: HUShuffleMode) {
        switch wire {
        case .items: self = .items
        case .collections: self = .collections
        case .off, .unspecified, .UNRECOGNIZED: self = .off
        }
    }

    var wire: HUShuffleMode {
        switch self {
        case .off: return .off
        case .items: return .items
        case .collections: return .collections
        }
    }
}

/// `MPRepeatType`.
public enum MPRepeatType: Int, Sendable {
    case off, one, all

    init(_ wire: HURepeatMode) {
        switch wire {
        case .one: self = .one
        case .all: self = .all
        case .off, .unspecified, .UNRECOGNIZED: self = .off
        }
    }

    var wire: HURepeatMode {
        switch self {
        case .off: return .off
        case .one: return .one
        case .all: return .all
        }
    }
}

/// A command the car sends (`MPRemoteCommand`). It is offered to the car
/// while it has a target (``addTarget(handler:)``), enabled or not.
@MainActor
public class MPRemoteCommand {
    /// Whether the car offers it (a disabled command is drawn greyed and refused).
    public var isEnabled = true { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }
    private var targets: [(id: ObjectIdentifier, handler: @MainActor (MPRemoteCommandEvent) -> MPRemoteCommandHandlerStatus)] = []
    let command: HURemoteCommand

    init(_ command: HURemoteCommand) { self.command = command }

    /// Adds a handler; the object returned removes it (``removeTarget(_:)``).
    @discardableResult
    public func addTarget(handler: @escaping @MainActor (MPRemoteCommandEvent) -> MPRemoteCommandHandlerStatus) -> Any {
        let token = TargetToken()
        targets.append((ObjectIdentifier(token), handler))
        MPRemoteCommandCenter.shared().setNeedsUpdate()
        return token
    }

    /// Removes a handler (`nil`: every handler). Without handlers the car no longer offers the command.
    public func removeTarget(_ target: Any?) {
        if let token = target as? TargetToken {
            targets.removeAll { $0.id == ObjectIdentifier(token) }
        } else if target == nil {
            targets.removeAll()
        }
        MPRemoteCommandCenter.shared().setNeedsUpdate()
    }

    var hasTargets: Bool { !targets.isEmpty }

    /// What the car is told; nil when not offered.
    var wire: HURemoteCommandState? {
        guard hasTargets else { return nil }
        var state = HURemoteCommandState()
        state.command = command
        state.enabled = isEnabled
        describe(&state)
        return state
    }

    func describe(_ state: inout HURemoteCommandState) {}

    func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPRemoteCommandEvent(command: self, timestamp: timestamp)
    }

    /// Runs every handler; the first status other than success is the answer.
    func run(_ event: MPRemoteCommandEvent) -> MPRemoteCommandHandlerStatus {
        var status = MPRemoteCommandHandlerStatus.success
        for target in targets {
            let answer = target.handler(event)
            if status == .success { status = answer }
        }
        return status
    }

    private final class TargetToken: Sendable {}
}

/// Skip forward or backward by an interval (`MPSkipIntervalCommand`).
@MainActor
public final class MPSkipIntervalCommand: MPRemoteCommand {
    /// The intervals offered, in seconds (1 to 4, each up to an hour; the first is the car buttons').
    public var preferredIntervals: [NSNumber] = [15] { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }

    override func describe(_ state: inout HURemoteCommandState) {
        state.preferredIntervals = preferredIntervals.map(\.doubleValue)
    }

    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPSkipIntervalCommandEvent(command: self, timestamp: timestamp, interval: call.intervalSeconds)
    }
}

/// Seek to a position (`MPChangePlaybackPositionCommand`).
@MainActor
public final class MPChangePlaybackPositionCommand: MPRemoteCommand {
    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPChangePlaybackPositionCommandEvent(command: self, timestamp: timestamp, positionTime: call.positionSeconds)
    }
}

/// Change the playback rate (`MPChangePlaybackRateCommand`). Offered only
/// with at least one supported rate.
@MainActor
public final class MPChangePlaybackRateCommand: MPRemoteCommand {
    /// The rates offered (1 to 8, each above 0 and at most 4).
    public var supportedPlaybackRates: [NSNumber] = [] { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }

    override var wire: HURemoteCommandState? { supportedPlaybackRates.isEmpty ? nil : super.wire }

    override func describe(_ state: inout HURemoteCommandState) {
        state.supportedRates = supportedPlaybackRates.map(\.floatValue)
    }

    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPChangePlaybackRateCommandEvent(command: self, timestamp: timestamp, playbackRate: call.playbackRate)
    }
}

/// Like, dislike, bookmark (`MPFeedbackCommand`).
@MainActor
public final class MPFeedbackCommand: MPRemoteCommand {
    /// Shown as active (the track is liked).
    public var isActive = false { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }
    /// The title the car may show.
    public var localizedTitle = "" { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }

    override func describe(_ state: inout HURemoteCommandState) {
        state.active = isActive
        state.title = localizedTitle
    }

    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPFeedbackCommandEvent(command: self, timestamp: timestamp, isNegative: call.negative)
    }
}

/// Change the shuffle mode (`MPChangeShuffleModeCommand`).
@MainActor
public final class MPChangeShuffleModeCommand: MPRemoteCommand {
    /// The mode in force.
    public var currentShuffleType = MPShuffleType.off { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }

    override func describe(_ state: inout HURemoteCommandState) { state.currentShuffleMode = currentShuffleType.wire }

    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPChangeShuffleModeCommandEvent(command: self, timestamp: timestamp, shuffleType: MPShuffleType(call.shuffleMode))
    }
}

/// Change the repeat mode (`MPChangeRepeatModeCommand`).
@MainActor
public final class MPChangeRepeatModeCommand: MPRemoteCommand {
    /// The mode in force.
    public var currentRepeatType = MPRepeatType.off { didSet { MPRemoteCommandCenter.shared().setNeedsUpdate() } }

    override func describe(_ state: inout HURemoteCommandState) { state.currentRepeatMode = currentRepeatType.wire }

    override func event(_ call: HURemoteCommandCall, timestamp: Double) -> MPRemoteCommandEvent {
        MPChangeRepeatModeCommandEvent(command: self, timestamp: timestamp, repeatType: MPRepeatType(call.repeatMode))
    }
}

/// What a handler gets (`MPRemoteCommandEvent`).
@MainActor
public class MPRemoteCommandEvent {
    /// The command that was sent.
    public let command: MPRemoteCommand
    /// When it arrived (seconds of the system's uptime clock).
    public let timestamp: Double
    init(command: MPRemoteCommand, timestamp: Double) {
        self.command = command
        self.timestamp = timestamp
    }
}

/// `MPSkipIntervalCommandEvent`.
@MainActor
public final class MPSkipIntervalCommandEvent: MPRemoteCommandEvent {
    /// Seconds to skip: one of the command's preferred intervals.
    public let interval: Double
    init(command: MPRemoteCommand, timestamp: Double, interval: Double) {
        self.interval = interval
        super.init(command: command, timestamp: timestamp)
    }
}

/// `MPChangePlaybackPositionCommandEvent`.
@MainActor
public final class MPChangePlaybackPositionCommandEvent: MPRemoteCommandEvent {
    /// Where to seek, in seconds from the start.
    public let positionTime: Double
    init(command: MPRemoteCommand, timestamp: Double, positionTime: Double) {
        self.positionTime = positionTime
        super.init(command: command, timestamp: timestamp)
    }
}

/// `MPChangePlaybackRateCommandEvent`.
@MainActor
public final class MPChangePlaybackRateCommandEvent: MPRemoteCommandEvent {
    /// One of the command's supported rates.
    public let playbackRate: Float
    init(command: MPRemoteCommand, timestamp: Double, playbackRate: Float) {
        self.playbackRate = playbackRate
        super.init(command: command, timestamp: timestamp)
    }
}

/// `MPFeedbackCommandEvent`.
@MainActor
public final class MPFeedbackCommandEvent: MPRemoteCommandEvent {
    /// Undo (unlike, remove the bookmark).
    public let isNegative: Bool
    init(command: MPRemoteCommand, timestamp: Double, isNegative: Bool) {
        self.isNegative = isNegative
        super.init(command: command, timestamp: timestamp)
    }
}

/// `MPChangeShuffleModeCommandEvent`.
@MainActor
public final class MPChangeShuffleModeCommandEvent: MPRemoteCommandEvent {
    public let shuffleType: MPShuffleType
    init(command: MPRemoteCommand, timestamp: Double, shuffleType: MPShuffleType) {
        self.shuffleType = shuffleType
        super.init(command: command, timestamp: timestamp)
    }
}

/// `MPChangeRepeatModeCommandEvent`.
@MainActor
public final class MPChangeRepeatModeCommandEvent: MPRemoteCommandEvent {
    public let repeatType: MPRepeatType
    init(command: MPRemoteCommand, timestamp: Double, repeatType: MPRepeatType) {
        self.repeatType = repeatType
        super.init(command: command, timestamp: timestamp)
    }
}

/// The commands the car's transport controls and steering-wheel buttons
/// send (`MPRemoteCommandCenter`, PROTOCOL.md section 23). Add a target to
/// offer a command; the car draws the enabled ones on its Now Playing screen
/// and routes its media buttons to the app that plays. Handlers run on the
/// main actor and answer a status the car's HMI gets.
///
///     MPRemoteCommandCenter.shared().pauseCommand.addTarget { _ in player.pause(); return .success }
@MainActor
public final class MPRemoteCommandCenter {
    private static let instance = MPRemoteCommandCenter()
    /// The one command center.
    public static func shared() -> MPRemoteCommandCenter { instance }

    public let playCommand = MPRemoteCommand(.play)
    public let pauseCommand = MPRemoteCommand(.pause)
    public let togglePlayPauseCommand = MPRemoteCommand(.togglePlayPause)
    public let stopCommand = MPRemoteCommand(.stop)
    public let nextTrackCommand = MPRemoteCommand(.nextTrack)
    public let previousTrackCommand = MPRemoteCommand(.previousTrack)
    public let skipForwardCommand = MPSkipIntervalCommand(.skipForward)
    public let skipBackwardCommand = MPSkipIntervalCommand(.skipBackward)
    public let changePlaybackPositionCommand = MPChangePlaybackPositionCommand(.changePlaybackPosition)
    public let changePlaybackRateCommand = MPChangePlaybackRateCommand(.changePlaybackRate)
    public let likeCommand = MPFeedbackCommand(.like)
    public let dislikeCommand = MPFeedbackCommand(.dislike)
    public let bookmarkCommand = MPFeedbackCommand(.bookmark)
    public let changeShuffleModeCommand = MPChangeShuffleModeCommand(.changeShuffleMode)
    public let changeRepeatModeCommand = MPChangeRepeatModeCommand(.changeRepeatMode)

    /// The audio apps it declares its commands to.
    private var applications: [Weak<CPApplication>] = []

    private init() {}

    var all: [MPRemoteCommand] {
        [playCommand, pauseCommand, togglePlayPauseCommand, stopCommand, nextTrackCommand, previousTrackCommand,
         skipForwardCommand, skipBackwardCommand, changePlaybackPositionCommand, changePlaybackRateCommand,
         likeCommand, dislikeCommand, bookmarkCommand, changeShuffleModeCommand, changeRepeatModeCommand]
    }

    /// The set the car is told, in command order.
    var declared: [HURemoteCommandState] { all.compactMap(\.wire) }

    /// An audio app was accepted by the car: it declares the commands from now on.
    func attach(_ application: CPApplication) {
        applications = applications.filter { $0.object != nil && $0.object !== application } + [Weak(application)]
        application.declareRemoteCommands()
    }

    func detach(_ application: CPApplication) {
        applications = applications.filter { $0.object != nil && $0.object !== application }
    }

    /// A command, target or property changed: each app re-declares its set.
    func setNeedsUpdate() {
        for application in applications.compactMap(\.object) { application.declareRemoteCommands() }
    }

    /// The car sent a command: the handlers' status, or `commandFailed` for one no longer offered.
    func handle(_ event: HURemoteCommandEvent) -> MPRemoteCommandHandlerStatus {
        guard let command = all.first(where: { $0.command == event.call.command }), command.hasTargets, command.isEnabled else {
            return .commandFailed
        }
        return command.run(command.event(event.call, timestamp: ProcessInfo.processInfo.systemUptime))
    }
}
