import HeadUnitWire

/// PROTOCOL.md §23: an audio app's declared commands, the HMI's touches and
/// car buttons reaching it, its statuses coming back, and the refusals.
enum RemoteCommandChecks {
    static let appID = "com.example.conformance.remote"
    /// `remote_command_timeout_ms` (§23.6): not in Welcome, so the documented default.
    static let commandTimeoutMs = 3000
    /// `max_pending_remote_commands` (§23.6): 1 to 64, not in Welcome, so the check finds it.
    static let maxPendingRange = 1...64

    static func state(_ command: HURemoteCommand, enabled: Bool = true, intervals: [Double] = []) -> HURemoteCommandState {
        var state = HURemoteCommandState()
        state.command = command
        state.enabled = enabled
        state.preferredIntervals = intervals
        return state
    }

    static func declare(_ app: LaunchedApp, _ commands: [HURemoteCommandState], appID: String? = nil) throws -> HUResult {
        var declared = HURemoteCommands()
        declared.appID = appID ?? app.appID
        declared.commands = commands
        return try app.phone.request(.remoteCommands(declared), "RemoteCommands")
    }

    static func touch(_ command: HURemoteCommand, appID: String, interval: Double = 0) -> HUEnvelope.OneOf_Body {
        var send = HUSendRemoteCommand()
        send.appID = appID
        send.call.command = command
        send.call.intervalSeconds = interval
        return .sendRemoteCommand(send)
    }

    static func button(_ button: HUCarButton) -> HUEnvelope.OneOf_Body {
        var pressed = HUCarButtonPressed()
        pressed.button = button
        return .carButton(pressed)
    }

    /// The HMI asks without waiting (the answer comes when the app answers, §23.3).
    static func ask(_ app: LaunchedApp, _ body: HUEnvelope.OneOf_Body) throws -> UInt32 {
        let id = app.hmi.newRequestID()
        try app.hmi.send(body, requestID: id)
        return id
    }

    static func commandEvent(_ app: LaunchedApp, _ what: String) throws -> HURemoteCommandEvent {
        try app.phone.take(what) { envelope -> HURemoteCommandEvent? in
            if case .remoteCommandEvent(let event) = envelope.body { return event }
            return nil
        }
    }

    static func answer(_ app: LaunchedApp, _ commandID: UInt64, _ status: HURemoteCommandStatus) throws -> HUResult {
        var answer = HURemoteCommandAnswer()
        answer.appID = app.appID
        answer.commandID = commandID
        answer.status = status
        return try app.phone.request(.remoteCommandAnswer(answer), "RemoteCommandAnswer \(status)")
    }

    /// An audio app whose now-playing plays, so it owns the main audio (§19.8), with `commands` declared.
    static func playingApp(_ ctx: CheckContext, _ commands: [HURemoteCommandState]) throws -> LaunchedApp {
        let app = try ctx.launchedApp([Entitlement.audio], appID: appID)
        var playing = HUNowPlayingTemplate()
        playing.title = "Conformance Song"
        playing.durationSeconds = 300
        playing.playbackRate = 1
        try app.ok(.updateNowPlaying(playing), "updateNowPlaying (playing)")
        try requireCode(try declare(app, commands), .ok, "RemoteCommands")
        return app
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "remote.declare-refusals", .p("23.2"),
            "RemoteCommands is answered OK for a valid set and refused in the order of §23.2: an unknown app UNKNOWN_APP, REMOTE_COMMAND_UNSPECIFIED and a command listed twice INVALID_ARGUMENT, a skip without intervals INVALID_ARGUMENT, 5 intervals (one out of range) LIMIT_EXCEEDED remoteCommands.preferredIntervals, a NaN or 0 interval INVALID_ARGUMENT, intervals on a command that is no skip INVALID_ARGUMENT; from an HMI NOT_FOR_ROLE",
            needsCarRole: true
        ) { ctx in
            let app = try playingApp(ctx, [state(.play), state(.pause, enabled: false), state(.skipForward, intervals: [15, 30])])
            try requireCode(try declare(app, [state(.pause)], appID: "com.example.conformance.never-announced"), .unknownApp, "RemoteCommands for an app the phone did not announce")
            try requireCode(try declare(app, [state(.unspecified)]), .invalidArgument, "REMOTE_COMMAND_UNSPECIFIED")
            try requireCode(try declare(app, [state(.play), state(.pause), state(.play, enabled: false)]), .invalidArgument, "a command listed twice")
            try requireCode(try declare(app, [state(.skipBackward)]), .invalidArgument, "a skip without intervals")
            let tooMany = try declare(app, [state(.skipForward, intervals: [5, 10, 15, 30, 7200])])
            try requireCode(tooMany, .limitExceeded, "5 intervals, one out of range (the count is checked first)")
            try require(tooMany.limit == "remoteCommands.preferredIntervals", "limit \"remoteCommands.preferredIntervals\"", got: "limit \"\(tooMany.limit)\"")
            try requireCode(try declare(app, [state(.skipForward, intervals: [.nan])]), .invalidArgument, "a NaN interval")
            try requireCode(try declare(app, [state(.skipForward, intervals: [0])]), .invalidArgument, "an interval of 0 (range (0, 3600])")
            try requireCode(try declare(app, [state(.pause, intervals: [15])]), .invalidArgument, "intervals on PAUSE")
            var fromHMI = HURemoteCommands()
            fromHMI.appID = app.appID
            try requireCode(try app.hmi.request(.remoteCommands(fromHMI), "RemoteCommands from the HMI"), .notForRole, "RemoteCommands from an HMI")
            // The refusals left the declared set alone: an empty set is still accepted.
            try requireCode(try declare(app, []), .ok, "RemoteCommands with no command (none)")
        },
        ConformanceCheck(
            "remote.command-statuses", .p("23.3"),
            "an HMI's SendRemoteCommand reaches the app as RemoteCommandEvent{app_id, command_id, call} (a skip's interval 0 filled in with the first), and the app's RemoteCommandAnswer with each status (SUCCESS, NO_SUCH_CONTENT, NO_ACTIONABLE_NOW_PLAYING_ITEM, DEVICE_NOT_FOUND, COMMAND_FAILED) is answered OK and reaches the HMI as Result{OK, remote_command{app_id, call, status}}; a car button NEXT reaches it as NEXT_TRACK with the button",
            needsCarRole: true
        ) { ctx in
            let app = try playingApp(ctx, [state(.pause), state(.play), state(.nextTrack), state(.skipForward, intervals: [15, 30])])
            let statuses: [(HURemoteCommand, HURemoteCommandStatus)] = [
                (.pause, .success), (.play, .noSuchContent), (.nextTrack, .noActionableNowPlayingItem),
                (.skipForward, .deviceNotFound), (.pause, .commandFailed),
            ]
            for (command, status) in statuses {
                let id = try ask(app, touch(command, appID: app.appID))
                let event = try commandEvent(app, "RemoteCommandEvent for \(command)")
                try require(event.appID == app.appID && event.call.command == command && event.commandID != 0 && event.button == .unspecified,
                            "RemoteCommandEvent{\(app.appID), a command id, \(command), no button}", got: "\(event)")
                if command == .skipForward {
                    try require(event.call.intervalSeconds == 15, "the skip's interval 0 filled in with the app's first (15 s)", got: "\(event.call.intervalSeconds)")
                }
                try requireCode(try answer(app, event.commandID, status), .ok, "RemoteCommandAnswer \(status)")
                let outcome = try app.hmi.result(for: id, "SendRemoteCommand \(command)")
                try requireCode(outcome, .ok, "SendRemoteCommand \(command) answered \(status)")
                try require(outcome.remoteCommand.appID == app.appID && outcome.remoteCommand.call.command == command && outcome.remoteCommand.status == status,
                            "Result{remote_command{\(app.appID), \(command), \(status)}}", got: "\(outcome.remoteCommand)")
            }
            let id = try ask(app, button(.next))
            let event = try commandEvent(app, "RemoteCommandEvent for the car button NEXT")
            try require(event.call.command == .nextTrack && event.button == .next, "RemoteCommandEvent{NEXT_TRACK, button NEXT}", got: "\(event)")
            try requireCode(try answer(app, event.commandID, .success), .ok, "RemoteCommandAnswer SUCCESS")
            let outcome = try app.hmi.result(for: id, "CarButtonPressed NEXT")
            try requireCode(outcome, .ok, "CarButtonPressed NEXT")
            try require(outcome.remoteCommand.status == .success, "remote_command.status SUCCESS", got: "\(outcome.remoteCommand)")
        },
        ConformanceCheck(
            "remote.refusals", .p("23.3"),
            "refusals with their codes: REMOTE_COMMAND_UNSPECIFIED INVALID_ARGUMENT, an app never announced UNKNOWN_APP, a command the app did not declare COMMAND_NOT_SUPPORTED, one declared disabled COMMAND_DISABLED, an interval the app does not offer INVALID_ARGUMENT, from a phone NOT_FOR_ROLE; the app's answer with status UNSPECIFIED INVALID_ARGUMENT and to a command never sent UNKNOWN_EVENT (§23.5)",
            needsCarRole: true
        ) { ctx in
            let app = try playingApp(ctx, [state(.pause), state(.play, enabled: false), state(.skipForward, intervals: [15])])
            try requireCode(try app.hmi.request(touch(.unspecified, appID: app.appID), "SendRemoteCommand UNSPECIFIED"), .invalidArgument, "REMOTE_COMMAND_UNSPECIFIED")
            try requireCode(try app.hmi.request(touch(.pause, appID: "com.example.conformance.never-announced"), "SendRemoteCommand to an unknown app"), .unknownApp, "a command to an app never announced")
            try requireCode(try app.hmi.request(touch(.like, appID: app.appID), "SendRemoteCommand LIKE"), .commandNotSupported, "a command the app did not declare")
            try requireCode(try app.hmi.request(touch(.play, appID: app.appID), "SendRemoteCommand PLAY"), .commandDisabled, "a command declared disabled")
            try requireCode(try app.hmi.request(touch(.skipForward, appID: app.appID, interval: 20), "SendRemoteCommand SKIP_FORWARD 20 s"), .invalidArgument, "an interval the app does not offer")
            try requireCode(try app.phone.request(touch(.pause, appID: app.appID), "SendRemoteCommand from the phone"), .notForRole, "SendRemoteCommand from a phone")
            try requireCode(try answer(app, 987_654_321, .success), .unknownEvent, "an answer to a command never sent")
            let id = try ask(app, touch(.pause, appID: app.appID))
            let event = try commandEvent(app, "RemoteCommandEvent for PAUSE")
            try requireCode(try answer(app, event.commandID, .unspecified), .invalidArgument, "status UNSPECIFIED")
            try requireCode(try answer(app, event.commandID, .success), .ok, "RemoteCommandAnswer SUCCESS after the refused one")
            try requireCode(try app.hmi.result(for: id, "SendRemoteCommand PAUSE"), .ok, "SendRemoteCommand PAUSE")
        },
        ConformanceCheck(
            "remote.timeout", .p("23.3"),
            "a command the app never answers is answered COMMAND_TIMED_OUT after remote_command_timeout_ms (3000 by default); the app's late answer is refused COMPLETION_TIMEOUT (§23.5)",
            needsCarRole: true
        ) { ctx in
            let app = try playingApp(ctx, [state(.pause)])
            let id = try ask(app, touch(.pause, appID: app.appID))
            let event = try commandEvent(app, "RemoteCommandEvent for PAUSE")
            let outcome = try app.hmi.result(for: id, "SendRemoteCommand PAUSE left unanswered", timeoutMs: commandTimeoutMs + 2 * ctx.timeoutMs)
            try requireCode(outcome, .commandTimedOut, "a command the app never answered")
            try requireCode(try answer(app, event.commandID, .success), .completionTimeout, "the app's answer after the time-out")
        },
        ConformanceCheck(
            "remote.pending-cap", .p("23.3"),
            "with max_pending_remote_commands (1 to 64; 8 by default) commands of an app unanswered, one more is refused LIMIT_EXCEEDED remoteCommands.pending with limit_value the cap; once the app answers, each waiting request is answered with its status",
            needsCarRole: true
        ) { ctx in
            let app = try playingApp(ctx, [state(.pause)])
            // The cap is not in Welcome: commands are sent until one is refused, each
            // followed by a GetStatus, answered at once and after the command's refusal if
            // it was refused (a refusal is not deferred, §4), else after its event went out.
            var ids: [UInt32] = []
            var events: [HURemoteCommandEvent] = []
            var refused: HUResult?
            while refused == nil {
                guard ids.count <= maxPendingRange.upperBound else {
                    throw CheckFailure(expected: "LIMIT_EXCEEDED by \(ids.count) commands unanswered (max_pending_remote_commands is at most \(maxPendingRange.upperBound))", got: "every one accepted")
                }
                let id = try ask(app, touch(.pause, appID: app.appID))
                try requireCode(try app.hmi.request(.getStatus(HUGetStatus()), "GetStatus after command \(ids.count + 1)"), .ok, "the HMI's GetStatus")
                if app.hmi.backlog.contains(where: { if case .result = $0.body { return $0.requestID == id } else { return false } }) {
                    refused = try app.hmi.result(for: id, "SendRemoteCommand \(ids.count + 1)")
                } else {
                    events.append(try commandEvent(app, "RemoteCommandEvent \(ids.count + 1)"))
                    ids.append(id)
                }
            }
            let over = refused!
            try requireCode(over, .limitExceeded, "a command past \(ids.count) unanswered")
            try require(over.limit == "remoteCommands.pending" && Int(over.limitValue) == ids.count && maxPendingRange.contains(ids.count),
                        "limit remoteCommands.pending=\(ids.count) (1 to 64)", got: describe(over))
            for event in events {
                try requireCode(try answer(app, event.commandID, .success), .ok, "RemoteCommandAnswer SUCCESS")
            }
            for id in ids {
                let outcome = try app.hmi.result(for: id, "a waiting SendRemoteCommand")
                try requireCode(outcome, .ok, "a waiting command once answered")
                try require(outcome.remoteCommand.status == .success, "remote_command.status SUCCESS", got: "\(outcome.remoteCommand)")
            }
        },
    ]
}
