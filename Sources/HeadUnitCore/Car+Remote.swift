import HeadUnitWire

// Remote commands (PROTOCOL.md section 23): the car routes, the
// `RemoteCommands` value decides. An HMI's request is answered when the app
// answers (or times out), not at once.
extension Car {
    /// `RemoteCommands` from the phone (23.2): NO_PHONE, UNKNOWN_APP,
    /// ENTITLEMENT_REFUSED, NOT_ALLOWED_FOR_CATEGORY, then the set's own checks.
    mutating func declareRemoteCommands(_ message: HURemoteCommands, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        let app: AppState
        switch announcedApp(message.appID, from: peer) {
        case .success(let found): app = found
        case .failure(let violation): return .failure(violation)
        }
        guard let category = app.category else {
            return .failure(RuleViolation(.entitlementRefused, app.refusal?.message ?? "app was refused"))
        }
        guard CategoryRules.allows(.nowPlaying, for: category) else {
            return .failure(RuleViolation(.notAllowedForCategory, "remote commands are for audio apps (they drive the now-playing screen); '\(message.appID)' is not one"))
        }
        if let violation = remote.declare(appID: message.appID, message.commands) { return .failure(violation) }
        return .ok
    }

    /// `SendRemoteCommand` from an HMI (23.3).
    mutating func sendRemoteCommand(_ send: HUSendRemoteCommand, requestID: UInt32, from peer: PeerID) {
        if send.call.command == .unspecified {
            return answer(peer, requestID, .failure(RuleViolation(.invalidArgument, "a remote command must name its command (REMOTE_COMMAND_UNSPECIFIED)")))
        }
        let appID: String
        switch remoteTarget(send.appID) {
        case .success(let found): appID = found
        case .failure(let violation): return answer(peer, requestID, .failure(violation))
        }
        let content = templates.apps[appID]!.nowPlaying
        let duration = templates.apps[appID]!.nowPlayingSet && !content.live && content.durationSeconds > 0 ? content.durationSeconds : nil
        switch remote.resolve(send.call, appID: appID, duration: duration) {
        case .success(let call): startRemoteCommand(call, appID: appID, button: .unspecified, requestID: requestID, from: peer)
        case .failure(let violation): answer(peer, requestID, .failure(violation))
        }
    }

    /// `CarButtonPressed` from an HMI (23.4): to the app that owns the main audio.
    mutating func carButtonPressed(_ press: HUCarButtonPressed, requestID: UInt32, from peer: PeerID) {
        if press.button == .unspecified {
            return answer(peer, requestID, .failure(RuleViolation(.invalidArgument, "a car button must name its button (CAR_BUTTON_UNSPECIFIED)")))
        }
        // The voice button is the phone's assistant's, never an app's command (27.2).
        if press.button == .voice { return voiceButtonPressed(requestID: requestID, from: peer) }
        let appID: String
        switch remoteTarget("") {
        case .success(let found): appID = found
        case .failure(let violation): return answer(peer, requestID, .failure(violation))
        }
        let playing = templates.apps[appID]!.nowPlaying.playbackRate > 0
        switch remote.map(press.button, appID: appID, playing: playing) {
        case .success(let call): startRemoteCommand(call, appID: appID, button: press.button, requestID: requestID, from: peer)
        case .failure(let violation): answer(peer, requestID, .failure(violation))
        }
    }

    /// The app a command goes to: the one named, or the main audio's owner
    /// (NO_AUDIO_APP when none, or the car's own source, owns it); its phone
    /// must be connected (NOT_CONNECTED while it reconnects: a pause that
    /// arrived seconds later would surprise the driver).
    func remoteTarget(_ named: String) -> Result<String, RuleViolation> {
        let appID: String
        if named.isEmpty {
            switch audio.main {
            case .phone(let owner): appID = owner
            case .car(let source):
                return .failure(RuleViolation(.noAudioApp, "the car's own source ('\(source)') owns the main audio; no app does"))
            case .none:
                return .failure(RuleViolation(.noAudioApp, "no app owns the main audio"))
            }
        } else {
            appID = named
        }
        guard templates.apps[appID] != nil else {
            return .failure(RuleViolation(.unknownApp, "no app '\(appID)' is announced"))
        }
        guard phonePeer != nil else {
            return .failure(RuleViolation(.notConnected, "the phone carrying '\(appID)' is reconnecting"))
        }
        return .success(appID)
    }

    mutating func startRemoteCommand(_ call: HURemoteCommandCall, appID: String, button: HUCarButton, requestID: UInt32, from peer: PeerID) {
        switch remote.start(call, appID: appID, button: button, asker: peer, requestID: requestID) {
        case .success(let event):
            sendToPhone(.remoteCommandEvent(event))
            effects.append(.startTimer(.remoteCommand(commandID: event.commandID), milliseconds: remote.limits.timeoutMilliseconds))
        case .failure(let violation):
            answer(peer, requestID, .failure(violation))
        }
    }

    /// `RemoteCommandAnswer` from the phone (23.5): the asking HMI gets the status.
    mutating func remoteCommandAnswered(_ answer: HURemoteCommandAnswer, from peer: PeerID) -> Result<HUResult, RuleViolation> {
        if case .failure(let violation) = announcedApp(answer.appID, from: peer) { return .failure(violation) }
        switch remote.answered(answer) {
        case .success(let (id, pending)):
            effects.append(.cancelTimer(.remoteCommand(commandID: id)))
            if let asker = pending.asker {
                var outcome = HURemoteCommandOutcome()
                outcome.appID = pending.appID
                outcome.call = pending.call
                outcome.status = answer.status
                var result = HUResult()
                result.remoteCommand = outcome
                self.answer(asker.peer, asker.requestID, .success(result))
            }
            return .ok
        case .failure(let violation):
            return .failure(violation)
        }
    }

    mutating func remoteCommandTimedOut(commandID: UInt64) {
        guard let pending = remote.timerFired(commandID: commandID), let asker = pending.asker else { return }
        let seconds = Double(remote.limits.timeoutMilliseconds) / 1000
        answer(asker.peer, asker.requestID, .failure(RuleViolation(
            .commandTimedOut, "'\(pending.appID)' did not answer \(RemoteCommands.name(pending.call.command)) within \(seconds) s (remote_command_timeout_ms)")))
    }

    /// Commands of these apps waiting for an answer end: their HMIs are told
    /// NOT_CONNECTED. `forget`: the apps are gone, their declared sets too.
    mutating func endRemoteCommands(of appIDs: [String], forget: Bool, why: String) {
        for appID in appIDs {
            let ended = forget ? remote.appGone(appID) : remote.endPending(of: appID)
            for (id, pending) in ended {
                effects.append(.cancelTimer(.remoteCommand(commandID: id)))
                if let asker = pending.asker {
                    answer(asker.peer, asker.requestID, .failure(RuleViolation(.notConnected, "'\(appID)' \(why) before it answered")))
                }
            }
        }
    }
}
