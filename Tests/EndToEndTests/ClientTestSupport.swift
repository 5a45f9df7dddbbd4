import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import NIOPosix

/// Starts the built headunitd as a separate process on a temporary Unix socket
/// and a free TCP port; the scenario tests drive it through HeadUnitClient.
/// (A minimal launcher; the server's own test support may replace it.)
final class ClientTestDaemon {
    let process: Process
    let directory: URL
    let socketPath: String
    let tcpPort: Int

    var unixEndpoint: HeadUnitEndpoint { .unix(path: socketPath) }
    var tcpEndpoint: HeadUnitEndpoint { .tcp(host: "127.0.0.1", port: tcpPort) }

    /// The headunitd next to the test bundle (same build folder), or $HEADUNITD_BINARY.
    static var binaryPath: String? {
        if let path = ProcessInfo.processInfo.environment["HEADUNITD_BINARY"] { return path }
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = folder.appendingPathComponent("headunitd").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        return nil
    }

    static var isAvailable: Bool { binaryPath != nil }

    /// `pairing`: TCP phones must pair and authenticate (PROTOCOL.md section
    /// 20), paired devices kept in the temp directory; else plain TCP.
    static func start(pairing: Bool = false) async throws -> ClientTestDaemon {
        guard let binary = binaryPath else { throw HeadUnitError(code: .notConnected, message: "headunitd not built", origin: .usage) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("headunitd-client-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socketPath = directory.appendingPathComponent("headunitd.sock").path
        let port = try freeTCPPort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        // Long handshake and announce timeouts, for the reason TestDaemon.launch gives.
        let config = directory.appendingPathComponent("config.json").path
        // TCP phones without pairing: these tests are about the SDK, not authentication.
        let tcp = pairing ? #""stateDirectory": "\#(directory.appendingPathComponent("state").path)""# : #""allowUnpairedTcp": true"#
        try #"{"limits": {"handshakeTimeoutMs": 30000, "announceTimeoutMs": 60000}, \#(tcp)}"#.write(toFile: config, atomically: true, encoding: .utf8)
        process.arguments = ["--unix-socket", socketPath, "--tcp", "127.0.0.1:\(port)", "--config", config]
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = directory.path
        process.environment = environment
        let log = directory.appendingPathComponent("headunitd.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        try process.run()
        let daemon = ClientTestDaemon(process: process, directory: directory, socketPath: socketPath, tcpPort: port)
        try await daemon.waitUntilListening()
        return daemon
    }

    private init(process: Process, directory: URL, socketPath: String, tcpPort: Int) {
        self.process = process
        self.directory = directory
        self.socketPath = socketPath
        self.tcpPort = tcpPort
    }

    func waitUntilListening() async throws {
        // Up to a minute: a safety net for a loaded machine, not a speed check.
        for attempt in 0..<1200 {
            do {
                let probe = try await HeadUnitConnection.connect(to: unixEndpoint, configuration: .init(role: .phone, name: "probe"))
                await probe.close()
                return
            } catch {
                if attempt == 1199 || !process.isRunning { throw error }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("headunitd.log"), encoding: .utf8)) ?? ""
    }

    /// A port nobody listens on right now (bound and released).
    static func freeTCPPort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 0
        try channel.close().wait()
        return port
    }
}

/// The repository's scenarios/ folder.
func scenarioPath(_ name: String) -> String {
    URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scenarios").appendingPathComponent(name).path
}
