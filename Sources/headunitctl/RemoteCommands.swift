import ArgumentParser
import HeadUnitClient
import HeadUnitWire

// Remote commands from the command line (PROTOCOL.md section 23): what the
// Now Playing screen's transport controls and the steering wheel's media
// keys send.

/// `headunitctl command pause`, `headunitctl command skip-forward --interval 30`.
struct Command: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a remote command to an audio app, as a touch on the Now Playing screen's controls.",
        discussion: """
            Commands: \(Self.names.keys.sorted().joined(separator: ", ")).
            Prints the app's status (success, noSuchContent, ...) or the car's refusal.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The command, e.g. pause, next-track, skip-forward.")
    var command: String
    @Option(help: "The app; default: the one that owns the main audio.")
    var app: String = ""
    @Option(help: "skip-forward/skip-backward: seconds, one of the app's intervals (default: its first).")
    var interval: Double = 0
    @Option(help: "change-playback-position: seconds from the start.")
    var position: Double = 0
    @Option(help: "change-playback-rate: one of the app's rates.")
    var rate: Float = 0
    @Option(help: "change-shuffle-mode: off, items or collections; change-repeat-mode: off, one or all.")
    var mode: String = ""
    @Flag(help: "like/dislike/bookmark: undo.")
    var negative = false

    static let names: [String: HURemoteCommand] = [
        "play": .play, "pause": .pause, "toggle-play-pause": .togglePlayPause, "stop": .stop,
        "next-track": .nextTrack, "previous-track": .previousTrack, "skip-forward": .skipForward,
        "skip-backward": .skipBackward, "change-playback-position": .changePlaybackPosition,
        "change-playback-rate": .changePlaybackRate, "like": .like, "dislike": .dislike, "bookmark": .bookmark,
        "change-shuffle-mode": .changeShuffleMode, "change-repeat-mode": .changeRepeatMode,
    ]

    func run() async throws {
        guard let remote = Self.names[command] else {
            throw fail("unknown command '\(command)'; one of: \(Self.names.keys.sorted().joined(separator: ", "))")
        }
        var call = HURemoteCommandCall()
        call.command = remote
        call.intervalSeconds = interval
        call.positionSeconds = position
        call.playbackRate = rate
        call.negative = negative
        switch mode {
        case "": break
        case "off": (call.shuffleMode, call.repeatMode) = (.off, .off)
        case "items": call.shuffleMode = .items
        case "collections": call.shuffleMode = .collections
        case "one": call.repeatMode = .one
        case "all": call.repeatMode = .all
        default: throw fail("unknown mode '\(mode)'")
        }
        try await runHMI(connection, "command \(command)") { hmi in
            let outcome = try await hmi.sendRemoteCommand(call, to: app)
            print("\(outcome.appID): \(outcome.status)")
        }
    }
}

/// `headunitctl button next`: a steering-wheel or media key.
struct Button: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Press a car button (steering wheel, media key): the car routes it to the app that owns the main audio.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "play-pause, play, pause, stop, next or previous.")
    var button: String

    static let names: [String: HUCarButton] = [
        "play-pause": .playPause, "play": .play, "pause": .pause, "stop": .stop, "next": .next, "previous": .previous,
    ]

    func run() async throws {
        guard let pressed = Self.names[button] else {
            throw fail("unknown button '\(button)'; one of: \(Self.names.keys.sorted().joined(separator: ", "))")
        }
        try await runHMI(connection, "button \(button)") { hmi in
            let outcome = try await hmi.pressCarButton(pressed)
            print("\(outcome.appID): \(outcome.call.command) -> \(outcome.status)")
        }
    }
}
