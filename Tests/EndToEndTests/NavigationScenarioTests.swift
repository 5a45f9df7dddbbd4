import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// The navigation scenario files, played through the SDK's player (phone,
/// HMI and a cluster subscribed to the metadata stream) against the real daemon.
@Suite(.serialized)
struct NavigationScenarioTests {
    func play(_ file: String) async throws {
        let daemon = try await TestDaemon.start()
        defer { daemon.stop() }
        var options = ScenarioPlayer.Options(endpoint: daemon.unixEndpoint)
        var lines: [String] = []
        options.log = { lines.append($0) }
        let scenario = try ScenarioPlayer.load(path: scenarioPath(file))
        let report = try await ScenarioPlayer(options: options).play(scenario)
        #expect(report.succeeded, "\(file):\n\(lines.joined(separator: "\n"))\n--- daemon log:\n\(daemon.log.suffix(4000))")
        #expect(report.passed == report.steps)
        #expect(report.skipped == 0)
        // Every metadata expectation ran against a real cluster connection.
        #expect(scenario.steps.contains { if case .expectMetadata = $0.action { return true } else { return false } })
    }

    @Test func walkthroughFromSearchToArrival() async throws {
        try await play("navigation-walkthrough.json")
    }

    @Test func cancelledByTheCarsNativeNavigation() async throws {
        try await play("navigation-native-cancel.json")
    }

    @Test func phoneLostMidRoute() async throws {
        try await play("navigation-phone-lost.json")
    }
}
