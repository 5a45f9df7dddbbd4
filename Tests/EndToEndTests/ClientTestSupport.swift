import Foundation
import HeadUnitClient
import TestSupport

/// The SDK's side of a TestDaemon (TestSupport's one launcher): its
/// endpoints as HeadUnitClient names them, and a start for async tests.
extension TestDaemon {
    var unixEndpoint: HeadUnitEndpoint { .unix(path: unixSocketPath) }
    /// Launched with TCP (the default); port 0 when launched without.
    var tcpEndpoint: HeadUnitEndpoint { .tcp(host: "127.0.0.1", port: tcpPort ?? 0) }

    /// `launch` from an async test: the blocking start on a thread of its own,
    /// so it never holds one of the cooperative pool's threads.
    /// `pairing`: TCP phones must pair and authenticate (PROTOCOL.md section 20).
    static func start(pairing: Bool = false) async throws -> TestDaemon {
        try await onOwnThread(gated: false) { try TestDaemon.launch(pairing: pairing) }
    }

    /// SIGTERM and wait; the temporary directory goes with the TestDaemon.
    func stop() { _ = try? terminate() }
}

/// The repository's scenarios/ folder.
func scenarioPath(_ name: String) -> String {
    URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scenarios").appendingPathComponent(name).path
}
