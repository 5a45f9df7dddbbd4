import Foundation
import HeadUnitWire

/// Launches the real headunitd binary for black-box tests: a private temp
/// directory, a Unix socket in it, an ephemeral TCP port (the daemon prints
/// `listening tcp 127.0.0.1:PORT` and `ready` on stdout), limits given as a
/// JSON config file, stderr captured at debug level for diagnostics.
///
///     let daemon = try TestDaemon.launch(limits: ["handshakeTimeoutMs": 300])
///     let client = try daemon.connectUnix()
///     ...
///     let status = try daemon.terminate()   // SIGTERM, waits, returns exit status
///
/// The binary is `$HEADUNITD_BINARY`, else `headunitd` next to the test
/// bundle (`swift test` builds every product into the same folder), else it is
/// built once with `swift build --product headunitd` into that scratch folder.
// @unchecked: Process is not Sendable; a test drives its TestDaemon from one task at a time.
public final class TestDaemon: @unchecked Sendable {
    public let process: Process
    public let directory: String
    public let unixSocketPath: String
    /// nil when launched with `tcp: false`.
    public let tcpPort: Int?
    public let logPath: String

    /// - Parameters:
    ///   - limits: `DaemonLimits` JSON fields (Protocol/config.proto), e.g. ["heartbeatTimeoutMs": 600].
    ///   - configJSON: extra top-level config fields as raw JSON members, e.g. `"daemonName": "x"`.
    ///   - arguments: extra command-line arguments.
    ///   - pairing: TCP phones must pair and authenticate (the daemon's default,
    ///     PROTOCOL.md section 20). Off, the daemon runs with `allowUnpairedTcp`,
    ///     as the tests that are not about pairing expect.
    ///   - stateDirectory: where paired devices are kept (default: `state` in the temp directory).
    public static func launch(
        limits: [String: UInt64] = [:],
        configJSON: String? = nil,
        arguments: [String] = [],
        tcp: Bool = true,
        pairing: Bool = false,
        stateDirectory: String? = nil,
        unixSocketPath: String? = nil,
        environment extraEnvironment: [String: String] = [:],
        timeout: Double = 20
    ) throws -> TestDaemon {
        let binary = try binaryPath()
        let directory = try makeTempDirectory()
        let socketPath = unixSocketPath ?? directory + "/hu.sock"
        let logPath = directory + "/headunitd.log"

        var members: [String] = []
        // The daemon's own timeouts are deliberate in tests: on a busy machine a
        // client may wait seconds for a turn to send its Hello, or a phone to
        // announce its apps (issue 24). Tests of these timeouts set their own.
        var limits = limits
        if limits["handshakeTimeoutMs"] == nil { limits["handshakeTimeoutMs"] = 30_000 }
        // The same for a TCP phone's time to authenticate (3 s by default, from
        // connecting): as long as Hello and Authenticate had before it existed.
        if limits["authTimeoutMs"] == nil { limits["authTimeoutMs"] = 2 * (limits["handshakeTimeoutMs"] ?? 30_000) }
        if limits["announceTimeoutMs"] == nil { limits["announceTimeoutMs"] = 60_000 }
        if !limits.isEmpty {
            members.append("\"limits\": {" + limits.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}")
        }
        if let configJSON { members.append(configJSON) }
        if !pairing { members.append("\"allowUnpairedTcp\": true") }
        members.append("\"stateDirectory\": \"\(stateDirectory ?? directory + "/state")\"")
        let configPath = directory + "/config.json"
        try ("{" + members.joined(separator: ", ") + "}").write(toFile: configPath, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--unix-socket", socketPath, "--config", configPath, "--log-level", "debug"]
            + (tcp ? ["--tcp", "127.0.0.1:0"] : ["--no-tcp"]) + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = directory
        // A config given in `arguments` without a state directory must not put keys in /var/lib.
        environment["STATE_DIRECTORY"] = directory + "/state"
        // Not under systemd here, whatever the test runner inherited.
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment[key] = nil
        }
        environment.merge(extraEnvironment) { $1 }
        process.environment = environment
        let stdout = Pipe()
        process.standardOutput = stdout
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try process.run()

        // Read stdout until "ready"; a watchdog kills a daemon that never gets there.
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        var text = ""
        var tcpPort: Int?
        reading: while true {
            let data = stdout.fileHandleForReading.availableData
            if data.isEmpty {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                throw LaunchError(message: "headunitd exited before it was ready; stdout: \(text)\nlog:\n\(log)")
            }
            text += String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n") {
                if line.hasPrefix("listening tcp "), let colon = line.lastIndex(of: ":") {
                    tcpPort = Int(line[line.index(after: colon)...])
                }
                if line == "ready" { break reading }
            }
        }
        return TestDaemon(process: process, directory: directory, unixSocketPath: socketPath, tcpPort: tcpPort, logPath: logPath)
    }

    private init(process: Process, directory: String, unixSocketPath: String, tcpPort: Int?, logPath: String) {
        self.process = process
        self.directory = directory
        self.unixSocketPath = unixSocketPath
        self.tcpPort = tcpPort
        self.logPath = logPath
    }

    deinit {
        if process.isRunning {
            process.interrupt()
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var isRunning: Bool { process.isRunning }

    /// What the daemon logged so far (debug level).
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    public func connectUnix() throws -> RawSocketClient {
        try RawSocketClient.unix(unixSocketPath)
    }

    /// A TLS connection (the TCP listener speaks nothing else), `from` a given local address.
    public func connectTCP(from source: String? = nil) throws -> RawSocketClient {
        guard let tcpPort else { throw LaunchError(message: "launched without TCP") }
        return try RawSocketClient.tcp(port: tcpPort, from: source)
    }

    /// Sends `signal` (SIGTERM by default) and waits for the exit; returns the exit status.
    @discardableResult
    public func terminate(signal: Int32 = SIGTERM, timeout: Double = 10) throws -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw LaunchError(message: "headunitd did not exit within \(timeout) s of signal \(signal)")
            }
            usleep(10_000)
        }
        return process.terminationStatus
    }

    public struct LaunchError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }

        public init(message: String) { self.message = message }
    }

    // MARK: - Locating the binary

    private static let located: Result<String, LaunchError> = locateOrBuild()

    public static func binaryPath() throws -> String { try located.get() }

    private static func locateOrBuild() -> Result<String, LaunchError> {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["HEADUNITD_BINARY"], !path.isEmpty { return .success(path) }
        // The test bundle lives in <scratch>/<triple>/debug; so does every product.
        let bundleFolder = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent()
        let candidate = bundleFolder.appendingPathComponent("headunitd").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return .success(candidate) }

        // Not built (e.g. `swift build --target EndToEndTests`): build it into the same scratch folder.
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scratch = bundleFolder.deletingLastPathComponent().deletingLastPathComponent()
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        build.arguments = ["swift", "build", "--package-path", packageRoot.path, "--scratch-path", scratch.path, "--product", "headunitd"]
        do {
            try build.run()
            build.waitUntilExit()
        } catch {
            return .failure(LaunchError(message: "cannot run swift build: \(error)"))
        }
        guard build.terminationStatus == 0, FileManager.default.isExecutableFile(atPath: candidate) else {
            return .failure(LaunchError(message: "headunitd not found at \(candidate) and `swift build --product headunitd` failed; set HEADUNITD_BINARY"))
        }
        return .success(candidate)
    }

    /// Runs the binary to completion (for --print-default-config, refusals...).
    public static func run(_ arguments: [String], timeout: Double = 20) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try binaryPath())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment[key] = nil
        }
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        // Read both pipes to the end before waiting, so a chatty child cannot block on a full pipe.
        let errData = ReadOnce()
        let errReader = Thread { errData.store(err.fileHandleForReading.readDataToEndOfFile()) }
        errReader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errReader.isFinished { usleep(1_000) }
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData.value, as: UTF8.self))
    }

    /// A fresh private directory for files a test needs (removed by the caller or left in /tmp).
    public static func makeScratchDirectory() throws -> String { try makeTempDirectory() }

    /// Short paths: a Unix socket path must fit in 108 bytes.
    private static func makeTempDirectory() throws -> String {
        var template = Array("/tmp/hu-e2e-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LaunchError(message: "mkdtemp failed")
        }
        return String(cString: made)
    }
}

/// Bytes read on one thread and taken on another.
final class ReadOnce: @unchecked Sendable {
    // @unchecked: `data` is only touched under `lock`.
    private let lock = NSLock()
    private var data = Data()

    func store(_ bytes: Data) { lock.withLock { data = bytes } }
    var value: Data { lock.withLock { data } }
}

