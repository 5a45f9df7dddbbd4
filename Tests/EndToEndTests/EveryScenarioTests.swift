import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// Every file in scenarios/, played by `headunitctl play` (phone, HMI and,
/// when a step needs one, a cluster or an accessory) against a fresh daemon:
/// no scenario can exist without being played in CI. Suites such as
/// NavigationScenarioTests play some files again through the library, with
/// checks of their own.
@Suite("Every scenario file over a real socket", .serialized)
struct EveryScenarioTests {
    /// The .json files in scenarios/, sorted; read when the tests are listed.
    static func files() -> [String] {
        let folder = URL(fileURLWithPath: scenarioPath(""))
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }

    @Test("the folder is found and holds the scenarios the docs name")
    func folderIsListed() {
        let files = Self.files()
        for known in ["quickstart.json", "audio.json", "navigation-walkthrough.json", "automaker.json"] {
            #expect(files.contains(known), "scenarios/ lists \(files)")
        }
    }

    /// `headunitctl play FILE` itself, as a person runs it: exit 0 and
    /// "scenario PASSED" with every step passed and none skipped.
    @Test(arguments: EveryScenarioTests.files())
    func scenario(_ file: String) async throws {
        // TCP phones pair (pairing.json pairs one on --pair-tcp).
        let daemon = try await TestDaemon.start(pairing: true)
        defer { daemon.stop() }
        let ctl = URL(fileURLWithPath: try TestDaemon.binaryPath()).deletingLastPathComponent().appendingPathComponent("headunitctl").path
        let port = try #require(daemon.tcpPort)
        let (status, output) = try await onOwnThread { () throws -> (Int32, String) in
            let play = Process()
            play.executableURL = URL(fileURLWithPath: ctl)
            play.arguments = ["play", "--unix-socket", daemon.unixSocketPath, "--pair-tcp", "127.0.0.1:\(port)", scenarioPath(file)]
            let out = Pipe()
            play.standardOutput = out
            play.standardError = out
            try play.run()
            // A hung player is killed, so the test fails instead of hanging CI.
            let watchdog = DispatchWorkItem { if play.isRunning { kill(play.processIdentifier, SIGKILL) } }
            DispatchQueue.global().asyncAfter(deadline: .now() + 300, execute: watchdog)
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            play.waitUntilExit()
            watchdog.cancel()
            return (play.terminationStatus, text)
        }
        let verdict = output.split(separator: "\n").last { $0.hasPrefix("scenario PASSED") || $0.hasPrefix("scenario FAILED") } ?? ""
        #expect(status == 0, "\(file):\n\(output)\n--- daemon log:\n\(daemon.log.suffix(4000))")
        #expect(verdict.hasPrefix("scenario PASSED") && verdict.hasSuffix(" 0 skipped, 0 failed"), "\(file): \(verdict)\n\(output)")
        #expect(!output.contains("FAILED:") && !output.contains("skipped ("), "\(file):\n\(output)")
    }
}

/// The remote-command, call and audio steps fail when the car does not do what
/// they describe, so a scenario that passes proves its exchanges.
@Suite(.serialized)
struct ScenarioStepMismatchTests {
    static let radio = HUAppInfo.with {
        $0.appID = "com.example.radio"
        $0.displayName = "Radio"
        $0.entitlements = ["com.apple.developer.carplay-audio"]
    }

    func play(_ steps: [HUScenarioStep]) async throws -> ScenarioPlayer.Report {
        try await play(HUScenario.with { $0.name = "mismatch"; $0.apps = [Self.radio]; $0.steps = steps })
    }

    /// Plays `scenario` against a fresh daemon (one that requires pairing on
    /// TCP when `pairing`, the player pairing there), every step to the end.
    func play(_ scenario: HUScenario, pairing: Bool = false) async throws -> ScenarioPlayer.Report {
        let daemon = try await TestDaemon.start(pairing: pairing)
        defer { daemon.stop() }
        var options = ScenarioPlayer.Options(endpoint: daemon.unixEndpoint)
        options.hmiEndpoint = daemon.unixEndpoint
        if pairing { options.pairingEndpoint = daemon.tcpEndpoint }
        options.stopOnFailure = false
        options.log = { _ in }
        return try await ScenarioPlayer(options: options).play(scenario)
    }

    /// An audio app playing, with pause and next-track declared.
    static var playing: [HUScenarioStep] {
        [
            .with { $0.launch = .with { $0.appID = radio.appID } },
            .with { $0.request = .with { $0.appID = radio.appID; $0.setRoot = .with { $0.id = "root"; $0.list = .with { $0.sections = [.with { $0.id = "s"; $0.items = [.with { $0.id = "i"; $0.general = .with { $0.text = "Item" } }] }] } } } },
            .with { $0.request = .with { $0.appID = radio.appID; $0.updateNowPlaying = .with { $0.title = "Song"; $0.durationSeconds = 200; $0.playbackRate = 1 } } },
            .with { $0.remoteCommands = .with { $0.appID = radio.appID; $0.commands = [.with { $0.command = .pause; $0.enabled = true }, .with { $0.command = .nextTrack; $0.enabled = true }] } },
        ]
    }

    @Test("a remote command or button expecting another command, code or app fails its step")
    func remoteCommandMismatch() async throws {
        let report = try await play(Self.playing + [
            .with { $0.remoteCommand = .with { $0.button = .next; $0.expectCommand = .previousTrack } },
            .with { $0.remoteCommand = .with { $0.call = .with { $0.command = .pause }; $0.expect = .commandDisabled } },
            .with { $0.remoteCommand = .with { $0.call = .with { $0.command = .like } } },
            .with { $0.remoteCommand = .with { $0.call = .with { $0.command = .pause } } },
        ])
        #expect(report.steps == 9)
        #expect(report.failures.count == 3, "\(report.failures)")
        #expect(report.failures.first?.contains("expected previousTrack") == true, "\(report.failures)")
        #expect(report.passed == 6)  // the announcement, the set-up and the last pause
    }

    @Test("a call input or call expectation the car does not match fails its step")
    func callMismatch() async throws {
        let uuid = "6f1c3c2e-1a2b-4c3d-8e4f-000000000001"
        let voip = HUAppInfo.with { $0.appID = "com.example.voip"; $0.entitlements = ["com.apple.developer.carplay-communication"] }
        let scenario = HUScenario.with {
            $0.apps = [voip]
            $0.timeoutMs = 1000
            $0.steps = [
                .with { $0.reportCall = .with { $0.appID = voip.appID; $0.callUuid = uuid; $0.kind = .newIncoming; $0.description_p = .with { $0.remoteHandle = .with { $0.value = "+1 555 0100" } } } },
                .with { $0.expectCall = .with { $0.callUuid = uuid; $0.phase = .active } },
                .with { $0.callInput = .with { $0.appID = voip.appID; $0.action = .with { $0.kind = .answer; $0.callUuid = uuid }; $0.expect = .unknownCall } },
                .with { $0.expectCall = .with { $0.callUuid = uuid; $0.gone = true } },
            ]
        }
        let report = try await play(scenario)
        #expect(report.failures.count == 3, "\(report.failures)")
        #expect(report.passed == 2)  // the announcement and the report
    }

    @Test("audio steps on a stream the car closed, or with another close reason, fail")
    func audioMismatch() async throws {
        let report = try await play(Self.playing + [
            .with { $0.openAudioStream = .with { $0.appID = Self.radio.appID; $0.type = .main } },
            .with { $0.openAudioStream = .with { $0.appID = Self.radio.appID; $0.type = .alternate } },
            .with { $0.setVehicleState = .with { $0.state = .with { $0.carAudioSource = "FM 101.1" } } },
            .with { $0.expectAudioStreamClosed = .with { $0.appID = Self.radio.appID; $0.type = .main; $0.reason = .replaced } },
            .with { $0.sendAudio = .with { $0.appID = Self.radio.appID; $0.type = .main; $0.durationMs = 100 } },
        ])
        // The ALTERNATE open (no prompt), the wrong reason, and the send on a closed (forgotten) stream.
        #expect(report.failures.count == 3, "\(report.failures)")
        #expect(report.failures.contains { $0.contains("closed with focusLost") }, "\(report.failures)")
    }

    @Test("video steps fail when the stream, the frame count or the keyframe answer is not as described")
    func videoMismatch() async throws {
        let maps = HUAppInfo.with { $0.appID = "com.example.maps"; $0.entitlements = ["com.apple.developer.carplay-maps"] }
        let scenario = HUScenario.with {
            $0.apps = [maps]
            $0.timeoutMs = 1000
            $0.steps = [
                .with { $0.launch = .with { $0.appID = maps.appID } },
                .with { $0.request = .with { $0.appID = maps.appID; $0.setRoot = .with { $0.id = "root"; $0.map = HUMapTemplate() } } },
                .with { $0.watchVideo = .with { $0.screen = .main } },  // expects no stream: the map is shown
                .with { $0.watchVideo = .with { $0.screen = .main; $0.appID = maps.appID } },
                .with { $0.sendVideo = .with { $0.appID = maps.appID; $0.frames = 3 } },
                .with { $0.expectVideo = .with { $0.appID = maps.appID; $0.frames = 4 } },  // three came
                .with { $0.requestKeyframe = .with { $0.appID = maps.appID; $0.expect = .unknownVideoStream } },  // it is OK
                .with { $0.sendVideo = .with { $0.appID = maps.appID; $0.frames = 2 } },
                .with { $0.expectVideo = .with { $0.appID = maps.appID; $0.frames = 2 } },
            ]
        }
        let report = try await play(scenario)
        #expect(report.failures.count == 3, "\(report.failures)")
        #expect(report.failures.contains { $0.contains("3 frames arrived, expected 4") }, "\(report.failures)")
        #expect(report.passed == 7, "\(report.failures)")
    }

    @Test("banner steps fail when the cluster shows no such banner or the car refuses the tap")
    func bannerMismatch() async throws {
        let maps = HUAppInfo.with { $0.appID = "com.example.maps"; $0.entitlements = ["com.apple.developer.carplay-maps"] }
        let scenario = HUScenario.with {
            $0.apps = [maps]
            $0.timeoutMs = 1000
            $0.steps = [
                .with { $0.launch = .with { $0.appID = maps.appID } },
                .with { $0.expectMetadata = .with { $0.bannerAppID = maps.appID } },  // the map is in front: no banner
                .with { $0.selectBanner = .with { $0.appID = maps.appID } },  // NOTHING_PRESENTED, not OK
                .with { $0.expectMetadata = .with { $0.bannerAppID = "" } },
            ]
        }
        let report = try await play(scenario)
        #expect(report.failures.count == 2, "\(report.failures)")
        #expect(report.failures.last?.contains("NOTHING_PRESENTED") == true, "\(report.failures)")
        #expect(report.passed == 3, "\(report.failures)")
    }

    @Test("a pair step fails when the phone pairs where a refusal was expected, or is refused where it should pair")
    func pairingMismatch() async throws {
        let scenario = HUScenario.with {
            $0.apps = [Self.radio]
            $0.steps = [
                .with { $0.pair = .with { $0.expect = .badPairingCode } },  // the right code: it pairs
                .with { $0.pair = .with { $0.wrongCode = true } },  // BAD_PAIRING_CODE, not OK
            ]
        }
        let report = try await play(scenario, pairing: true)
        #expect(report.failures.count == 2, "\(report.failures)")
        #expect(report.failures.first?.contains("the phone paired") == true, "\(report.failures)")
        // The SDK finds a wrong code first: the car's SPAKE2 confirmation does not verify (BAD_PAIRING_CODE).
        #expect(report.failures.last?.contains("confirmation does not verify") == true, "\(report.failures)")
    }
}
