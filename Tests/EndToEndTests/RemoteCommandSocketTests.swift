import Foundation
import HeadUnitWire
import TestSupport
import Testing

/// Remote commands over real sockets (PROTOCOL.md section 23): the HMI's
/// touch or car button reaches the app as a RemoteCommandEvent, the app's
/// status comes back as the HMI's answer, and every refusal has its code.
@Suite("Remote commands over real sockets", .serialized)
struct RemoteCommandSocketTests {
    static let music = "com.example.music"

    /// A daemon, an HMI, and a phone whose audio app plays (it owns the main audio) with `commands` declared.
    struct Rig {
        let daemon: TestDaemon
        let hmi: RecordingPeer
        let phone: RecordingPeer
        var nextID: UInt32 = 5_000

        static func start(commands: [HURemoteCommandState], limits: [String: UInt64] = [:], playing: Bool = true) throws -> Rig {
            let daemon = try TestDaemon.launch(limits: limits)
            let hmi = RecordingPeer(try daemon.connectUnix())
            try hmi.client.handshake(role: .hmi, name: "hmi")
            let phone = RecordingPeer(try daemon.connectUnix())
            try phone.client.handshake(role: .phone, name: "phone")
            let app = HUAppInfo.with { $0.appID = music; $0.displayName = "Music"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
            _ = try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] }))
            #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = music })).code == .ok)
            let scene = try phone.waitFor { envelope -> UInt32? in
                if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
                return nil
            }
            if playing {
                let nowPlaying = try phone.request(.templateRequest(HUTemplateRequest.with {
                    $0.appID = music; $0.sceneID = scene
                    $0.updateNowPlaying = HUNowPlayingTemplate.with { $0.title = "Blue in Green"; $0.durationSeconds = 337; $0.playbackRate = 1 }
                }))
                #expect(nowPlaying.code == .ok, "\(nowPlaying.message)")
            }
            let declared = try phone.request(.remoteCommands(HURemoteCommands.with { $0.appID = music; $0.commands = commands }))
            #expect(declared.code == .ok, "\(declared.message)")
            return Rig(daemon: daemon, hmi: hmi, phone: phone)
        }

        /// The HMI asks without waiting; the id to find its answer by.
        mutating func ask(_ body: HUEnvelope.OneOf_Body) throws -> UInt32 {
            nextID += 1
            try hmi.client.send(body, requestID: nextID)
            return nextID
        }

        func answer(_ id: UInt32, timeout: Double = 30) throws -> HUResult {
            try hmi.waitFor(timeout: timeout) { envelope -> HUResult? in
                if envelope.requestID == id, case .result(let result) = envelope.body { return result }
                return nil
            }
        }

        func event() throws -> HURemoteCommandEvent {
            try phone.waitFor { envelope -> HURemoteCommandEvent? in
                if case .remoteCommandEvent(let event) = envelope.body { return event }
                return nil
            }
        }

        func reply(_ event: HURemoteCommandEvent, _ status: HURemoteCommandStatus) throws -> HUResult {
            try phone.request(.remoteCommandAnswer(HURemoteCommandAnswer.with {
                $0.appID = event.appID; $0.commandID = event.commandID; $0.status = status
            }))
        }

        func stop() {
            hmi.close()
            phone.close()
            _ = try? daemon.terminate()
        }
    }

    static func state(_ command: HURemoteCommand, enabled: Bool = true, intervals: [Double] = []) -> HURemoteCommandState {
        HURemoteCommandState.with { $0.command = command; $0.enabled = enabled; $0.preferredIntervals = intervals }
    }

    static func touch(_ command: HURemoteCommand, interval: Double = 0) -> HUEnvelope.OneOf_Body {
        .sendRemoteCommand(HUSendRemoteCommand.with { $0.appID = music; $0.call = HURemoteCommandCall.with { $0.command = command; $0.intervalSeconds = interval } })
    }

    @Test func pauseNextAndSkipFromTheHMIReachTheAppsHandlersWithTheirArguments() async throws {
        try await onOwnThread {
            var rig = try Rig.start(commands: [Self.state(.pause), Self.state(.nextTrack), Self.state(.skipForward, intervals: [15, 30])])
            defer { rig.stop() }

            let pause = try rig.ask(Self.touch(.pause))
            let pauseEvent = try rig.event()
            #expect(pauseEvent.appID == Self.music && pauseEvent.call.command == .pause && pauseEvent.commandID != 0)
            #expect(try rig.reply(pauseEvent, .success).code == .ok)
            let pauseAnswer = try rig.answer(pause)
            #expect(pauseAnswer.code == .ok && pauseAnswer.remoteCommand.status == .success && pauseAnswer.remoteCommand.call.command == .pause)

            // A car button: NEXT to the app that owns the main audio, as its next-track command.
            let next = try rig.ask(.carButton(HUCarButtonPressed.with { $0.button = .next }))
            let nextEvent = try rig.event()
            #expect(nextEvent.call.command == .nextTrack && nextEvent.button == .next)
            #expect(try rig.reply(nextEvent, .noActionableNowPlayingItem).code == .ok)
            #expect(try rig.answer(next).remoteCommand.status == .noActionableNowPlayingItem)

            let skip = try rig.ask(Self.touch(.skipForward, interval: 30))
            let skipEvent = try rig.event()
            #expect(skipEvent.call.command == .skipForward && skipEvent.call.intervalSeconds == 30)
            #expect(try rig.reply(skipEvent, .success).code == .ok)
            #expect(try rig.answer(skip).remoteCommand.call.intervalSeconds == 30)
        }
    }

    @Test func everyRefusalOfARemoteCommandHasItsCode() async throws {
        try await onOwnThread {
            var rig = try Rig.start(
                commands: [Self.state(.pause), Self.state(.play, enabled: false), Self.state(.skipForward, intervals: [15])],
                limits: ["remoteCommandTimeoutMs": 300, "maxPendingRemoteCommands": 1])
            defer { rig.stop() }
            // COMMAND_DISABLED and COMMAND_NOT_SUPPORTED, and an interval the app does not offer.
            #expect(try rig.answer(try rig.ask(Self.touch(.play))).code == .commandDisabled)
            #expect(try rig.answer(try rig.ask(Self.touch(.like))).code == .commandNotSupported)
            #expect(try rig.answer(try rig.ask(Self.touch(.skipForward, interval: 20))).code == .invalidArgument)

            // COMMAND_TIMED_OUT: the app never answers; its late answer is told COMPLETION_TIMEOUT.
            let pause = try rig.ask(Self.touch(.pause))
            let event = try rig.event()
            // LIMIT_EXCEEDED while one waits (max_pending_remote_commands 1).
            let second = try rig.answer(try rig.ask(Self.touch(.pause)))
            #expect(second.code == .limitExceeded && second.limit == "remoteCommands.pending")
            #expect(try rig.answer(pause).code == .commandTimedOut)
            #expect(try rig.reply(event, .success).code == .completionTimeout)

            // NO_AUDIO_APP: the car's own source takes the main audio.
            let carSource = try rig.hmi.request(.setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.carAudioSource = "FM 101.1" } }))
            #expect(carSource.code == .ok)
            #expect(try rig.answer(try rig.ask(.carButton(HUCarButtonPressed.with { $0.button = .playPause }))).code == .noAudioApp)

            // Only an HMI asks, only a phone declares.
            #expect(try rig.phone.request(Self.touch(.pause)).code == .notForRole)
            #expect(try rig.hmi.request(.remoteCommands(HURemoteCommands.with { $0.appID = Self.music })).code == .notForRole)
        }
    }
}
