import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// The README's demo, played through the library against a real daemon.
@Suite(.serialized)
struct ScenarioQuickstartTests {
    func play(_ file: String, phoneOverTCP: Bool) async throws -> ScenarioPlayer.Report {
        let daemon = try await TestDaemon.start()
        defer { daemon.stop() }
        var options = ScenarioPlayer.Options(endpoint: phoneOverTCP ? daemon.tcpEndpoint : daemon.unixEndpoint)
        // The HMI role is Unix-socket only, whatever the phone uses.
        options.hmiEndpoint = daemon.unixEndpoint
        var lines: [String] = []
        options.log = { lines.append($0) }
        let report = try await ScenarioPlayer(options: options).play(try ScenarioPlayer.load(path: scenarioPath(file)))
        if !report.succeeded {
            Issue.record("\(file):\n\(lines.joined(separator: "\n"))\n--- daemon log:\n\(daemon.log.suffix(4000))")
        }
        return report
    }

    @Test func quickstartOverUnixSocket() async throws {
        let report = try await play("quickstart.json", phoneOverTCP: false)
        #expect(report.succeeded)
        #expect(report.failures.isEmpty)
        #expect(report.passed == report.steps)
    }

    @Test func quickstartOverTCP() async throws {
        let report = try await play("quickstart.json", phoneOverTCP: true)
        #expect(report.succeeded)
        #expect(report.passed == report.steps)
    }
}

/// `headunitctl play --pace` and a step's `pause_ms`: the player holds after steps so a person can watch.
@Suite(.serialized)
struct ScenarioPaceTests {
    func play(_ steps: [HUScenarioStep], pace: TimeAmount) async throws -> (ScenarioPlayer.Report, Duration) {
        let daemon = try await TestDaemon.start()
        defer { daemon.stop() }
        var options = ScenarioPlayer.Options(endpoint: daemon.unixEndpoint)
        options.pace = pace
        options.stopOnFailure = false
        options.log = { _ in }
        let scenario = HUScenario.with { $0.name = "pace"; $0.steps = steps }
        let clock = ContinuousClock()
        let start = clock.now
        let report = try await ScenarioPlayer(options: options).play(scenario)
        return (report, clock.now - start)
    }

    @Test("--pace holds at least that long after every step; pause_ms holds one step longer")
    func paced() async throws {
        let note = HUScenarioStep.with { $0.note = "look"; $0.waitMs = 0 }
        let held = HUScenarioStep.with { $0.waitMs = 0; $0.pauseMs = 400 }
        let (report, elapsed) = try await play([note, note, held], pace: .milliseconds(150))
        #expect(report.succeeded)
        #expect(report.steps == 4)  // the announcement and three steps
        #expect(elapsed >= .milliseconds(150 + 150 + 400))
    }

    @Test("a pause_ms over 60000 fails its step, without waiting")
    func tooLong() async throws {
        let (report, elapsed) = try await play([HUScenarioStep.with { $0.waitMs = 0; $0.pauseMs = 60_001 }], pace: .zero)
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.contains("pause_ms 60001 is over 60000") == true)
        #expect(elapsed < .seconds(60))
    }
}
