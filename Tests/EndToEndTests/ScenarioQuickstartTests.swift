import HeadUnitClient
import HeadUnitWire
import Testing

/// The README's demo, played through the library against a real daemon.
@Suite(.serialized, .enabled(if: ClientTestDaemon.isAvailable, "headunitd is not built"))
struct ScenarioQuickstartTests {
    func play(_ file: String, phoneOverTCP: Bool) async throws -> ScenarioPlayer.Report {
        let daemon = try await ClientTestDaemon.start()
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
