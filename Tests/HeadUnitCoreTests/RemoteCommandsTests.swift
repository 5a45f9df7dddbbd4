import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Remote commands (PROTOCOL.md section 23), through the Car as the server drives it.
@Suite struct RemoteCommandsTests {
    static let music = "com.example.music"
    static let podcasts = "com.example.podcasts"

    static func state(_ command: HURemoteCommand, enabled: Bool = true, intervals: [Double] = [], rates: [Float] = []) -> HURemoteCommandState {
        HURemoteCommandState.with {
            $0.command = command
            $0.enabled = enabled
            $0.preferredIntervals = intervals
            $0.supportedRates = rates
        }
    }

    static func call(_ command: HURemoteCommand, interval: Double = 0, position: Double = 0, rate: Float = 0) -> HURemoteCommandCall {
        HURemoteCommandCall.with {
            $0.command = command
            $0.intervalSeconds = interval
            $0.positionSeconds = position
            $0.playbackRate = rate
        }
    }

    /// A phone with an audio app playing (it owns the main audio) and a navigation app.
    static func playing(_ apps: [String] = [music], commands: [HURemoteCommandState]) -> CarHarness {
        var h = CarHarness()
        h.join(h.phone, .phone)
        h.join(h.hmi, .hmi)
        _ = h.announce(apps.map { ($0, [EntitlementKey.audio]) } + [("com.example.maps", [EntitlementKey.maps])])
        for app in apps {
            let scene = h.launch(app)
            #expect(h.template(app, scene, .updateNowPlaying(HUNowPlayingTemplate.with {
                $0.title = "Song"; $0.durationSeconds = 200; $0.playbackRate = 1
            })).code == .ok)
            #expect(h.request(h.phone, .remoteCommands(HURemoteCommands.with { $0.appID = app; $0.commands = commands })).code == .ok)
        }
        _ = h.drain(h.phone)
        _ = h.drain(h.hmi)
        return h
    }

    /// The HMI asks; the request is answered only when the app answers. Returns the event the app got.
    static func ask(_ h: inout CarHarness, _ body: HUEnvelope.OneOf_Body) -> (requestID: UInt32, event: HURemoteCommandEvent?, answer: HUResult?) {
        let result = h.request(h.hmi, body)
        let requestID = h.nextRequest - 1
        let event = h.drain(h.phone).compactMap { envelope -> HURemoteCommandEvent? in
            if case .remoteCommandEvent(let event) = envelope.body { return event }
            return nil
        }.first
        return (requestID, event, result.code == .UNRECOGNIZED(-1) ? nil : result)
    }

    static func answerOf(_ h: inout CarHarness, _ requestID: UInt32) -> HUResult? {
        h.drain(h.hmi).first { $0.requestID == requestID }?.result
    }

    @Test func pauseNextAndSkipReachTheAppsHandlersWithTheirArguments() {
        var h = Self.playing(commands: [Self.state(.pause), Self.state(.nextTrack), Self.state(.skipForward, intervals: [15, 30])])

        let pause = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.appID = Self.music; $0.call = Self.call(.pause) }))
        #expect(pause.answer == nil, "the HMI waits for the app's answer")
        let event = try! #require(pause.event)
        #expect(event.appID == Self.music && event.call.command == .pause && event.button == .unspecified)
        #expect(h.timers.contains(.remoteCommand(commandID: event.commandID)))
        #expect(h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with {
            $0.appID = Self.music; $0.commandID = event.commandID; $0.status = .success
        })).code == .ok)
        let answer = try! #require(Self.answerOf(&h, pause.requestID))
        #expect(answer.code == .ok && answer.remoteCommand.status == .success && answer.remoteCommand.call.command == .pause)
        #expect(!h.timers.contains(.remoteCommand(commandID: event.commandID)))

        // Next, to the main audio's owner (no app named); the app's status travels back as it is.
        let next = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.nextTrack) }))
        #expect(next.event?.call.command == .nextTrack)
        _ = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with {
            $0.appID = Self.music; $0.commandID = next.event!.commandID; $0.status = .noSuchContent
        }))
        #expect(Self.answerOf(&h, next.requestID)?.remoteCommand.status == .noSuchContent)

        // Skip: one of the app's intervals, 0 meaning the first; another interval is refused.
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.skipForward, interval: 30) })).event?.call.intervalSeconds == 30)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.skipForward) })).event?.call.intervalSeconds == 15)
        let odd = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.skipForward, interval: 20) }))
        #expect(odd.event == nil && odd.answer?.code == .invalidArgument)
    }

    @Test func aDisabledOrUnsupportedCommandIsRefusedWithItsCode() {
        var h = Self.playing(commands: [Self.state(.play), Self.state(.pause, enabled: false)])
        let disabled = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.pause) }))
        #expect(disabled.event == nil && disabled.answer?.code == .commandDisabled)
        let unsupported = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.like) }))
        #expect(unsupported.event == nil && unsupported.answer?.code == .commandNotSupported)
        let none = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.unspecified) }))
        #expect(none.answer?.code == .invalidArgument)
        let unknown = Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.appID = "com.nobody"; $0.call = Self.call(.play) }))
        #expect(unknown.answer?.code == .unknownApp)
    }

    @Test func argumentsOutOfRangeAreInvalid() {
        var h = Self.playing(commands: [Self.state(.changePlaybackPosition), Self.state(.changePlaybackRate, rates: [1, 1.5]),
                                        Self.state(.changeShuffleMode)])
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changePlaybackPosition, position: 250) })).answer?.code == .invalidArgument)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changePlaybackPosition, position: -1) })).answer?.code == .invalidArgument)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changePlaybackPosition, position: 120) })).event?.call.positionSeconds == 120)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changePlaybackRate, rate: 2) })).answer?.code == .invalidArgument)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changePlaybackRate, rate: 1.5) })).event?.call.playbackRate == 1.5)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.changeShuffleMode) })).answer?.code == .invalidArgument)
    }

    @Test func aCarButtonGoesToTheAppThatOwnsTheMainAudioAsTheCommandItEnables() {
        // Music has next track; podcasts only skips (then NEXT skips by its first interval).
        var h = Self.playing([Self.music, Self.podcasts], commands: [Self.state(.togglePlayPause), Self.state(.skipForward, intervals: [30, 60])])
        #expect(h.car.audio.main == .phone(appID: Self.podcasts))
        let next = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .next }))
        #expect(next.event?.appID == Self.podcasts)
        #expect(next.event?.call.command == .skipForward && next.event?.call.intervalSeconds == 30 && next.event?.button == .next)
        let toggle = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .playPause }))
        #expect(toggle.event?.call.command == .togglePlayPause)
        let previous = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .previous }))
        #expect(previous.answer?.code == .commandNotSupported)

        // The car's own source takes the main audio: no app to route to.
        #expect(h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.carAudioSource = "FM 101.1" } })).code == .ok)
        #expect(Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .next })).answer?.code == .noAudioApp)
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.call = Self.call(.skipForward) })).answer?.code == .noAudioApp)
        // Named, the app still gets it.
        #expect(Self.ask(&h, .sendRemoteCommand(HUSendRemoteCommand.with { $0.appID = Self.music; $0.call = Self.call(.skipForward) })).event?.appID == Self.music)
    }

    @Test func playPauseChoosesPauseWhilePlayingAndPlayWhilePaused() {
        var h = Self.playing(commands: [Self.state(.play), Self.state(.pause)])
        #expect(Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .playPause })).event?.call.command == .pause)
        let scene = h.car.templates.apps[Self.music]!.scenes[.main]!.id
        _ = h.template(Self.music, scene, .updateNowPlaying(HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 0 }))
        _ = h.drain(h.phone)
        #expect(Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .playPause })).event?.call.command == .play)
    }

    @Test func anAppThatDoesNotAnswerTimesOutAndItsLateAnswerIsTold() {
        var h = Self.playing(commands: [Self.state(.pause)])
        let pause = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        let id = pause.event!.commandID
        h.apply(h.car.timerFired(.remoteCommand(commandID: id), nowMilliseconds: h.now))
        #expect(Self.answerOf(&h, pause.requestID)?.code == .commandTimedOut)
        let late = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with { $0.appID = Self.music; $0.commandID = id; $0.status = .success }))
        #expect(late.code == .completionTimeout)
        let unknown = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with { $0.appID = Self.music; $0.commandID = 999; $0.status = .success }))
        #expect(unknown.code == .unknownEvent)
        let noStatus = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with { $0.appID = Self.music; $0.commandID = 999 }))
        #expect(noStatus.code == .invalidArgument)
    }

    @Test func commandsWaitingPerAppAreCapped() {
        var h = Self.playing(commands: [Self.state(.pause)])
        for _ in 0..<h.car.remote.limits.maxPending {
            #expect(Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause })).event != nil)
        }
        let over = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        #expect(over.event == nil && over.answer?.code == .limitExceeded && over.answer?.limit == "remoteCommands.pending")
    }

    @Test func theDeclaredSetIsCheckedAndBounded() {
        var h = Self.playing(commands: [])
        func declare(_ commands: [HURemoteCommandState], app appID: String = Self.music) -> HUResult {
            h.request(h.phone, .remoteCommands(HURemoteCommands.with { $0.appID = appID; $0.commands = commands }))
        }
        #expect(declare([Self.state(.play)], app: "com.example.maps").code == .notAllowedForCategory)
        #expect(declare([Self.state(.play)], app: "com.nobody").code == .unknownApp)
        #expect(declare([Self.state(.play), Self.state(.play)]).code == .invalidArgument)
        #expect(declare([Self.state(.unspecified)]).code == .invalidArgument)
        #expect(declare([Self.state(.skipForward)]).code == .invalidArgument)
        #expect(declare([Self.state(.skipForward, intervals: [5, 10, 15, 30, 60])]).limit == "remoteCommands.preferredIntervals")
        #expect(declare([Self.state(.skipForward, intervals: [0])]).code == .invalidArgument)
        #expect(declare([Self.state(.skipForward, intervals: [.nan])]).code == .invalidArgument)
        #expect(declare([Self.state(.play, intervals: [15])]).code == .invalidArgument)
        #expect(declare([Self.state(.changePlaybackRate, rates: Array(repeating: 1, count: 9))]).limit == "remoteCommands.supportedRates")
        #expect(declare([Self.state(.changePlaybackRate, rates: [5])]).code == .invalidArgument)
        #expect(h.car.remote.declared[Self.music] == nil, "nothing refused was kept")
        #expect(declare([Self.state(.play), Self.state(.skipBackward, intervals: [15])]).code == .ok)
        #expect(h.car.remote.declared[Self.music]?.count == 2)
    }

    @Test func theNowPlayingScreenCarriesTheAppsCommandsForTheHMI() {
        var h = Self.playing(commands: [Self.state(.pause), Self.state(.nextTrack, enabled: false)])
        let scene = h.car.templates.apps[Self.music]!.scenes[.main]!.id
        #expect(h.template(Self.music, scene, .setRoot(listTemplate("library", items: 2))).code == .ok)
        #expect(h.template(Self.music, scene, .showNowPlaying(HUShowNowPlaying())).code == .ok)
        let shown = h.car.render(.main)
        #expect(shown.remoteCommands.appID == Self.music)
        #expect(shown.remoteCommands.commands.map(\.command) == [.pause, .nextTrack])
        #expect(shown.remoteCommands.commands.map(\.enabled) == [true, false])
        _ = h.drain(h.hmi)
        // A change reaches the HMI as a screen update.
        _ = h.request(h.phone, .remoteCommands(HURemoteCommands.with { $0.appID = Self.music; $0.commands = [Self.state(.play)] }))
        let updates = h.drain(h.hmi).compactMap { envelope -> HUScreenUpdate? in
            if case .screenUpdate(let update) = envelope.body { return update }
            return nil
        }
        #expect(updates.contains { $0.full.remoteCommands.commands.map(\.command) == [.play] })
    }

    @Test func anAppThatGoesAwayAnswersItsWaitingCommandsNotConnected() {
        var h = Self.playing(commands: [Self.state(.pause)])
        let pause = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = Self.music })).code == .ok)
        #expect(Self.answerOf(&h, pause.requestID)?.code == .notConnected)
        #expect(h.car.remote.declared[Self.music] == nil)
        #expect(!h.timers.contains(.remoteCommand(commandID: pause.event!.commandID)))
    }

    @Test func anHMIThatLeftIsNotAnsweredButTheAppIs() {
        var h = Self.playing(commands: [Self.state(.pause)])
        let pause = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        h.apply(h.car.peerLeft(h.hmi))
        let late = h.request(h.phone, .remoteCommandAnswer(HURemoteCommandAnswer.with {
            $0.appID = Self.music; $0.commandID = pause.event!.commandID; $0.status = .success
        }))
        #expect(late.code == .ok)
    }

    @Test func theDeclaredCommandsSurviveARestartHandover() throws {
        let h = Self.playing(commands: [Self.state(.pause), Self.state(.skipForward, intervals: [15])])
        let snapshot = h.car.snapshot()
        let restored = try Car.restoring(snapshot, configuration: h.car.configuration).car
        #expect(restored.remote.declared == h.car.remote.declared)
    }
    /// Issue 47 item 5: a command waiting for the app's answer is not carried
    /// across a restart; its HMI is answered before the handover rather than never.
    @Test func aCommandWaitingAtARestartIsAnsweredBeforeTheHandover() throws {
        var h = Self.playing(commands: [Self.state(.pause)])
        let pause = Self.ask(&h, .carButton(HUCarButtonPressed.with { $0.button = .pause }))
        #expect(pause.answer == nil, "waiting for the app")
        h.apply(h.car.prepareForHandover())
        let answer = Self.answerOf(&h, pause.requestID)
        #expect(answer?.code == .notConnected && answer?.message.contains("restart") == true, "\(String(describing: answer))")
        #expect(h.car.remote.pending.isEmpty)
        #expect(!h.timers.contains(.remoteCommand(commandID: pause.event!.commandID)))
        let restored = try Car.restoring(h.car.snapshot(), configuration: h.car.configuration).car
        #expect(restored.remote.declared == h.car.remote.declared)
    }
}
